"""Element types, conversions and zero-copy input."""

from __future__ import annotations

import numpy as np
import pytest

import weft
from conftest import random_data


def as_dtype(x: np.ndarray, dtype) -> np.ndarray:
    if dtype == np.uint8:
        return np.clip(x * 30 + 128, 0, 255).astype(np.uint8)
    if dtype == np.int8:
        return np.clip(x * 30, -127, 127).astype(np.int8)
    return x.astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.uint8, np.int8])
def test_every_element_type(dtype):
    data = as_dtype(random_data(2000, 16, seed=8), dtype)
    queries = as_dtype(random_data(50, 16, seed=9), dtype)
    index = weft.build(data, degree=16)
    assert index.dtype == np.dtype(dtype).name
    truth, tdist = weft.ground_truth(data, queries, 10)
    ref = ((queries.astype(np.float64)[:, None] - data.astype(np.float64)[None]) ** 2).sum(-1)
    np.testing.assert_allclose(tdist, np.sort(ref, 1)[:, :10], rtol=2e-3, atol=1e-2)
    found, dists = index.search(queries, 10, beam_width=96)
    assert weft.recall(found, truth) >= 0.9
    exact_ids, _ = index.search(queries, 10, exact=True)
    assert weft.recall(exact_ids, truth) == 1.0


def test_float64_is_converted_to_float32():
    data = random_data(1000, 8, seed=10)
    index = weft.build(data.astype(np.float64), degree=16)
    assert index.dtype == "float32"
    ids64, d64 = index.search(data[:20].astype(np.float64), 5)
    ids32, d32 = index.search(data[:20], 5)
    np.testing.assert_array_equal(ids64, ids32)
    np.testing.assert_array_equal(d64, d32)


def test_lists_are_accepted():
    data = random_data(300, 4, seed=11)
    index = weft.build(data.tolist(), degree=8)
    ids, _ = index.search(data[:3].tolist(), 1, exact=True)
    assert ids[:, 0].tolist() == [0, 1, 2]


def test_unsupported_types_raise_type_error():
    with pytest.raises(TypeError, match="int64"):
        weft.build(np.arange(100, dtype=np.int64).reshape(25, 4))
    with pytest.raises(TypeError):
        weft.build(np.array([["a", "b"]]))
    index = weft.build(as_dtype(random_data(200, 4), np.uint8), degree=8)
    with pytest.raises(TypeError, match="uint8"):
        index.search(random_data(2, 4), 1)


def test_wrong_rank_raises_value_error():
    with pytest.raises(ValueError, match="2-D"):
        weft.build(np.zeros((2, 3, 4), np.float32))


def test_c_contiguous_input_is_read_in_place():
    a = random_data(100, 8)
    assert weft._weft._input_address(a) == a.ctypes.data
    rows = a[10:20]  # a C-contiguous view: still in place
    assert weft._weft._input_address(rows) == rows.ctypes.data
    f = np.asfortranarray(a)
    assert weft._weft._input_address(f) != f.ctypes.data  # copied into C order
    h = a.astype(np.float16)
    assert weft._weft._input_address(h) == h.ctypes.data
    strided = a[:, ::2]
    assert weft._weft._input_address(strided) != strided.ctypes.data


def test_non_contiguous_input_gives_the_same_results(index, base, queries):
    # On the CPU, whose search is deterministic (the GPU's automatic multi-CTA mode for small
    # batches is not: which block reaches a vertex first depends on timing).
    cpu = {"backend": "cpu"}
    f = np.asfortranarray(queries)
    want = index.search(queries, 10, **cpu)[0]
    np.testing.assert_array_equal(index.search(f, 10, **cpu)[0], want)
    wide = np.zeros((len(queries), 48), np.float32)
    wide[:, ::2] = queries
    np.testing.assert_array_equal(index.search(wide[:, ::2], 10, **cpu)[0], want)


def test_build_copies_by_default_and_copy_false_reads_the_array():
    """Issue 34 item 6: build kept a reference to the caller's array, so changing the array
    afterwards changed search results. It copies by default now; copy=False shares."""
    data = random_data(500, 8, seed=12)
    owned = weft.build(data, degree=8)
    shared = weft.build(data, degree=8, copy=False)
    probe = data[:5].copy()
    before_ids, before_d = owned.search(probe, 3, exact=True)
    graph_before = owned.search(probe, 3)
    np.testing.assert_array_equal(before_ids[:, 0], np.arange(5))
    data[:5] += 100.0  # the documented hazard of copy=False: that index sees the change
    after_ids, after_d = owned.search(probe, 3, exact=True)
    np.testing.assert_array_equal(after_ids, before_ids)
    np.testing.assert_array_equal(after_d, before_d)
    for got, want in zip(owned.search(probe, 3), graph_before):
        np.testing.assert_array_equal(got, want)
    assert not np.array_equal(shared.search(probe, 1, exact=True)[0][:, 0], before_ids[:, 0])
    np.testing.assert_array_equal(owned.data()[:5], probe)


def test_the_index_keeps_its_array_alive():
    # copy=False: the only reference to the array is the index's.
    index = weft.build(random_data(300, 8, seed=13), degree=8, copy=False)
    import gc

    gc.collect()
    np.testing.assert_array_equal(index.search(index.data()[:4], 1, exact=True)[0][:, 0], np.arange(4))


def test_float_queries_are_converted_to_a_float16_index():
    data = random_data(1000, 8, seed=14).astype(np.float16)
    index = weft.build(data, degree=16)
    q16 = data[:20]
    ids16, d16 = index.search(q16, 5, exact=True)
    ids32, d32 = index.search(q16.astype(np.float32), 5, exact=True)
    np.testing.assert_array_equal(ids16, ids32)
    np.testing.assert_array_equal(d16, d32)
    assert (ids16[:, 0] == np.arange(20)).all()
