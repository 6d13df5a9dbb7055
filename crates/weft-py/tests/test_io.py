"""Vector and id files, save and load."""

from __future__ import annotations

import os

import numpy as np
import pytest

import weft
from conftest import random_data

FORMATS = [
    ("fvecs", np.float32),
    ("fbin", np.float32),
    ("npy", np.float32),
    ("npy", np.float16),
    ("npy", np.uint8),
    ("npy", np.int8),
    ("bvecs", np.uint8),
    ("u8bin", np.uint8),
    ("i8bin", np.int8),
]


@pytest.mark.parametrize("fmt, dtype", FORMATS)
def test_vector_files_round_trip(tmp_path, fmt, dtype):
    x = random_data(37, 5, seed=14)
    x = (x * 40).astype(dtype) if np.dtype(dtype).kind in "ui" else x.astype(dtype)
    path = tmp_path / f"v.{fmt}"
    weft.write(path, x)
    back = weft.read(path)
    assert back.dtype == dtype and back.shape == x.shape
    np.testing.assert_array_equal(back, x)
    np.testing.assert_array_equal(weft.read(str(path), rows=(3, 9)), x[3:9])
    meta = weft.info(path)
    assert (meta["format"], meta["rows"], meta["dim"]) == (fmt, 37, 5)


def test_npy_files_are_numpys(tmp_path):
    x = random_data(10, 3)
    weft.write(tmp_path / "a.npy", x)
    np.testing.assert_array_equal(np.load(tmp_path / "a.npy"), x)
    np.save(tmp_path / "f.npy", np.asfortranarray(x))
    np.testing.assert_array_equal(weft.read(tmp_path / "f.npy"), x)


def test_explicit_format(tmp_path):
    x = random_data(4, 3)
    weft.write(tmp_path / "data.bin", x, format="fbin")
    np.testing.assert_array_equal(weft.read(tmp_path / "data.bin", format="fbin"), x)


@pytest.mark.parametrize("fmt", ["ivecs", "ibin", "npy"])
def test_id_files_round_trip(tmp_path, fmt, index, queries):
    ids, _ = index.search(queries, 10)
    path = tmp_path / f"gt.{fmt}"
    weft.write_ids(path, ids.astype(np.int64))
    back = weft.read_ids(path)
    assert back.dtype == np.uint32
    np.testing.assert_array_equal(back, ids)


def test_write_ids_refuses_out_of_range(tmp_path):
    with pytest.raises(ValueError, match="ids must lie"):
        weft.write_ids(tmp_path / "x.ivecs", np.array([[-1, 2]]))


def test_save_and_load_give_the_same_answers(tmp_path, index, queries):
    index.save(tmp_path / "idx")
    assert sorted(os.listdir(tmp_path / "idx")) == ["data.fbin", "graph.wgraph"]
    for loaded in (weft.load(tmp_path / "idx"), weft.Index.load(str(tmp_path / "idx"))):
        assert (len(loaded), loaded.dim, loaded.metric, loaded.algorithm) == (
            len(index), index.dim, index.metric, index.algorithm)
        np.testing.assert_array_equal(loaded.graph(), index.graph())
        # On the CPU, whose search is deterministic (the GPU's automatic mode is not).
        a = loaded.search(queries, 10, beam_width=40, backend="cpu")
        b = index.search(queries, 10, beam_width=40, backend="cpu")
        np.testing.assert_array_equal(a[0], b[0])
        np.testing.assert_array_equal(a[1], b[1])


def test_save_and_load_other_element_types(tmp_path):
    x = (random_data(300, 8) * 20).astype(np.int8)
    index = weft.build(x, degree=8, metric="ip")
    index.save(tmp_path / "i8")
    loaded = weft.load(tmp_path / "i8")
    assert loaded.dtype == "int8" and loaded.metric == "ip"
    np.testing.assert_array_equal(loaded.search(x[:10], 3)[0], index.search(x[:10], 3)[0])


def test_missing_file_is_an_os_error(tmp_path):
    with pytest.raises(OSError) as e:
        weft.read(tmp_path / "nope.fbin")
    assert isinstance(e.value, weft.WeftIOError)
    assert e.value.filename.endswith("nope.fbin")
    assert e.value.errno == 2
    with pytest.raises(OSError):
        weft.load(tmp_path / "no-index")


def test_malformed_files_are_format_errors(tmp_path):
    bad = tmp_path / "bad.fbin"
    bad.write_bytes(np.array([10, 4], np.uint32).tobytes() + b"\0" * 12)  # promises 160 bytes
    with pytest.raises(weft.FormatError) as e:
        weft.read(bad)
    assert "bad.fbin" in str(e.value) and isinstance(e.value, ValueError)
    with pytest.raises(weft.FormatError):
        weft.read(tmp_path / "x.unknown")
    (tmp_path / "idx").mkdir()
    weft.write(tmp_path / "idx" / "data.fbin", random_data(4, 2))
    (tmp_path / "idx" / "graph.wgraph").write_bytes(b"WEFT" + b"\1" * 60)
    with pytest.raises(weft.FormatError):
        weft.load(tmp_path / "idx")
