"""Library errors raised as the documented Python exceptions, with the library's messages."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import weft
from conftest import random_data


def test_hierarchy():
    assert issubclass(weft.InvalidParamsError, weft.WeftError)
    assert issubclass(weft.InvalidParamsError, ValueError)
    assert issubclass(weft.DimensionMismatchError, weft.InvalidInputError)
    assert issubclass(weft.WeftIOError, OSError)
    assert issubclass(weft.UnsupportedError, RuntimeError)
    assert issubclass(weft.OutOfDeviceMemoryError, MemoryError)
    assert weft.InvalidParamsError.__module__ == "weft"


def test_unknown_parameter_names_the_known_ones():
    with pytest.raises(weft.InvalidParamsError) as e:
        weft.build(random_data(100, 4), algorithm="rnndescent", degre=8)
    assert e.value.param == "degre"
    assert "`rnndescent` has no parameter `degre`" in str(e.value)
    assert '"degree"' in str(e.value)


def test_impossible_parameter_values():
    with pytest.raises(weft.InvalidParamsError) as e:
        weft.build(random_data(100, 4), algorithm="rnndescent", degree=500)
    assert e.value.param
    with pytest.raises(weft.InvalidParamsError):
        weft.build(random_data(100, 4), algorithm="rnndescent", degree="many")
    with pytest.raises(weft.InvalidParamsError, match="threads"):
        weft.build(random_data(100, 4), threads=0)


def test_unknown_names():
    data = random_data(100, 4)
    with pytest.raises(weft.InvalidParamsError, match="unknown algorithm `hnsw`"):
        weft.build(data, algorithm="hnsw")
    with pytest.raises(ValueError, match="unknown metric `manhattan`"):
        weft.build(data, metric="manhattan")
    with pytest.raises(ValueError, match="unknown backend `tpu`"):
        weft.build(data, backend="tpu")


def test_k_belongs_to_knn_builders():
    data = random_data(100, 4)
    with pytest.raises(weft.InvalidParamsError, match="needs k"):
        weft.build(data, algorithm="nndescent")
    with pytest.raises(weft.InvalidParamsError, match="not k"):
        weft.build(data, algorithm="rnndescent", k=10)


def test_search_errors(index, queries):
    with pytest.raises(weft.DimensionMismatchError) as e:
        index.search(queries[:, :10], 5)
    assert (e.value.expected, e.value.found) == (24, 10)
    with pytest.raises(weft.InvalidParamsError):
        index.search(queries, 0)
    with pytest.raises(weft.InvalidParamsError):
        index.search(queries, len(index) + 1)
    with pytest.raises(weft.InvalidParamsError):
        index.search(queries, 10, beam_width=5)


def test_search_knobs_are_checked_on_every_back_end(index, queries):
    # The GPU searches' knobs are typed keywords: an impossible value is refused by name on
    # the CPU too (never ignored), an unknown keyword is a TypeError, a wrong type too.
    for knobs, name in [
        ({"search_width": 0}, "search_width"),
        ({"team_size": 3}, "team_size"),
        ({"rerank": 5}, "rerank"),
        ({"min_iterations": 9, "max_iterations": 4}, "min_iterations"),
        ({"tau": -1.0}, "tau"),
        ({"ggnn_best": 0}, "best"),
        ({"ggnn_max_iterations": 0}, "max_iterations"),
        ({"max_hops": 0}, "max_hops"),
        ({"max_distance_computations": 0}, "max_distance_computations"),
        ({"entry_layer_min_entries": 1}, "entry_layer.min_entries"),
        ({"entry_layer_degree": 0}, "entry_layer.degree"),
        ({"entry_layer_beam_width": 0}, "entry_layer.beam_width"),
    ]:
        for backend in ("cpu", "auto"):
            with pytest.raises(weft.InvalidParamsError, match=name):
                index.search(queries, 10, backend=backend, **knobs)
    with pytest.raises(weft.InvalidParamsError, match="mode"):
        index.search(queries, 10, mode="fast")
    with pytest.raises(weft.InvalidParamsError, match="traversal"):
        index.search(queries, 10, search_precision="f8")
    with pytest.raises(TypeError, match="beam_widht"):
        index.search(queries, 10, beam_widht=64)
    with pytest.raises(TypeError):
        index.search(queries, 10, search_width="two")


def test_non_finite_values_name_their_place():
    data = random_data(100, 4)
    data[42, 3] = np.nan
    with pytest.raises(weft.NonFiniteError) as e:
        weft.build(data)
    assert (e.value.row, e.value.col) == (42, 3)
    assert "row 42, column 3" in str(e.value)


def test_empty_data():
    with pytest.raises(weft.InvalidInputError):
        weft.build(np.zeros((0, 4), np.float32))


def test_gpu_back_ends_without_a_gpu():
    # Every GPU hidden from a fresh interpreter (CUDA_VISIBLE_DEVICES empty): a machine without a
    # usable GPU, also on the GPU machine, where this test runs as well.
    script = textwrap.dedent(
        """
        import numpy as np, weft
        assert not weft.gpu_available(), weft.gpu_info()
        data = np.random.default_rng(0).standard_normal((200, 4)).astype(np.float32)
        def refused(call):
            try:
                call()
            except weft.UnsupportedError as e:
                return str(e)
            raise AssertionError("no UnsupportedError")
        refused(lambda: weft.build(data, algorithm="grnnd"))
        refused(lambda: weft.build(data, algorithm="cagra", backend="gpu"))
        index = weft.build(data, degree=8)
        assert index.build_info["backend"] == "cpu"
        refused(lambda: index.search(data[:2], 1, backend="gpu"))
        refused(lambda: weft.ground_truth(data, data[:2], 1, backend="gpu"))
        print("ok")
        """
    )
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    run = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stdout + run.stderr


def test_a_missing_file_is_a_file_not_found_error(tmp_path):
    """Issue 34 item 7: the message read `[Errno 2] None: '...'` (strerror unset)."""
    missing = str(tmp_path / "missing.fbin")
    with pytest.raises(FileNotFoundError) as e:
        weft.read(missing)
    assert isinstance(e.value, weft.WeftIOError) and isinstance(e.value, weft.WeftError)
    assert e.value.errno == errno.ENOENT
    assert e.value.strerror == os.strerror(errno.ENOENT)
    assert e.value.filename == missing
    assert str(e.value) == f"[Errno 2] No such file or directory: {missing!r}"
    with pytest.raises(FileNotFoundError) as e:
        weft.load(tmp_path / "no-index")
    assert "None" not in str(e.value)
    assert e.value.filename.startswith(str(tmp_path / "no-index"))


def test_io_errors_without_an_errno_keep_the_library_message():
    e = weft._errors._io_error("I/O error on x: boom", None, "Other", "x")
    assert isinstance(e, weft.WeftIOError) and e.errno is None
    assert str(e) == "I/O error on x: boom" and e.filename == "x"
    e = weft._errors._io_error("I/O error on x: gone", None, "NotFound", "x")
    assert isinstance(e, FileNotFoundError) and e.errno == errno.ENOENT


def test_save_refuses_an_empty_path(index, tmp_path, monkeypatch):
    """Issue 34 item 15: save('') wrote into the current folder."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(weft.InvalidParamsError) as e:
        index.save("")
    assert e.value.param == "path" and isinstance(e.value, ValueError)
    assert "empty path" in str(e.value)
    assert os.listdir(tmp_path) == []


def test_save_refuses_a_folder_of_other_files(index, tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(weft.InvalidInputError, match="notes.txt"):
        index.save(tmp_path)
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_recall_of_empty_results_is_a_value_error():
    """Issue 34 item 15: recall on empty arrays raised ZeroDivisionError."""
    empty = np.zeros((0, 10), np.uint32)
    with pytest.raises(ValueError, match="empty"):
        weft.recall(empty, empty)
    with pytest.raises(ValueError, match="empty"):
        weft.recall(np.zeros(0, np.uint32), np.zeros(0, np.uint32))
    with pytest.raises(ValueError, match="empty"):
        weft.recall(np.zeros((3, 0), np.uint32), np.zeros((3, 5), np.uint32))
    assert weft.recall(np.array([[1, 2]]), np.array([[2, 3]])) == 0.5
