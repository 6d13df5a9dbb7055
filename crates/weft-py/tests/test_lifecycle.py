"""An index's life beyond build and search: pickling, saving (atomic, concurrent), progress
reports and the metric conventions of the returned distances."""

from __future__ import annotations

import copy
import os
import pickle
import threading

import numpy as np
import pytest

import weft
from conftest import random_data


def assert_same_results(a: weft.Index, b: weft.Index, queries: np.ndarray) -> None:
    for got, want in zip(a.search(queries, 10, backend="cpu"), b.search(queries, 10, backend="cpu")):
        np.testing.assert_array_equal(got, want)


def test_pickle_round_trip_searches_identically(index, queries):
    """Issue 34 item 7: an Index could not be pickled."""
    again = pickle.loads(pickle.dumps(index))
    assert isinstance(again, weft.Index)
    assert (len(again), again.dim, again.metric, again.dtype) == (
        len(index),
        index.dim,
        index.metric,
        index.dtype,
    )
    assert again.build_info == index.build_info
    np.testing.assert_array_equal(again.graph(), index.graph())
    np.testing.assert_array_equal(again.data(), index.data())
    assert_same_results(again, index, queries)
    assert_same_results(copy.deepcopy(index), index, queries)


def test_pickle_of_a_float16_cosine_knn_index():
    data = random_data(400, 12, seed=31).astype(np.float16)
    index = weft.build(data, algorithm="nndescent", k=8, metric="cosine", backend="cpu")
    again = pickle.loads(pickle.dumps(index, protocol=pickle.HIGHEST_PROTOCOL))
    assert again.graph_kind == "knn" and again.dtype == "float16"
    np.testing.assert_array_equal(again.graph(distances=True)[1], index.graph(distances=True)[1])
    assert_same_results(again, index, data[:20])


def test_a_corrupt_pickle_state_is_refused():
    with pytest.raises(weft.UnsupportedError, match="version"):
        weft._index_from_state((999, []))
    with pytest.raises(weft.InvalidInputError, match="not a file name"):
        weft._index_from_state((1, [("../x", b"")]))


def test_concurrent_saves_into_one_folder_never_mix_files(tmp_path, queries):
    """Issue 34 item 12: two threads saving into one folder interleaved their files (an index
    that loaded the graph of one with the vectors of the other failed to load)."""
    a = weft.build(random_data(1500, 24, seed=41), degree=16, backend="cpu")
    b = weft.build(random_data(1500, 24, seed=42), degree=16, backend="cpu")
    target = tmp_path / "idx"
    errors: list[BaseException] = []

    def save_many(index: weft.Index) -> None:
        try:
            for _ in range(15):
                index.save(target)
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=save_many, args=(i,)) for i in (a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    loaded = weft.load(target)
    data = loaded.data()
    assert np.array_equal(data, a.data()) or np.array_equal(data, b.data())
    assert_same_results(loaded, a if np.array_equal(data, a.data()) else b, queries)
    assert sorted(os.listdir(tmp_path)) == ["idx"], "temporary folders were left"
    assert sorted(os.listdir(target)) == ["data.fbin", "graph.wgraph"]


def test_saving_over_an_index_replaces_it(tmp_path, index, queries):
    other = weft.build(random_data(700, 24, seed=43), degree=16, backend="cpu")
    index.save(tmp_path / "idx")
    other.save(tmp_path / "idx")
    assert_same_results(weft.load(tmp_path / "idx"), other, queries)
    index.save(tmp_path / "idx")
    assert_same_results(weft.load(tmp_path / "idx"), index, queries)


def test_progress_callback_receives_the_build_stages(capsys):
    """Issue 34 item 7: long builds reported nothing to Python."""
    data = random_data(2000, 16, seed=51)
    reports: list[tuple] = []
    index = weft.build(
        data,
        algorithm="rnndescent",
        degree=16,
        backend="cpu",
        progress=lambda stage, done, total: reports.append((stage, done, total)),
    )
    assert len(index) == 2000
    assert reports, "no progress report"
    stages = {r[0] for r in reports}
    assert "rnndescent" in stages
    last = [r for r in reports if r[0] == "rnndescent"][-1]
    assert last[2] is not None and last[1] == last[2] > 0
    for stage, done, total in reports:
        assert isinstance(stage, str) and isinstance(done, int)
        assert total is None or 0 <= done <= total
    # The same graph with or without reports.
    np.testing.assert_array_equal(
        index.graph(), weft.build(data, algorithm="rnndescent", degree=16, backend="cpu").graph()
    )

    weft.build(data[:500], algorithm="nndescent", k=8, backend="cpu", verbose=True)
    err = capsys.readouterr().err
    assert "weft: nndescent" in err and "done" in err


def test_an_exception_in_the_progress_callback_stops_the_build():
    def fail(stage, done, total):
        raise RuntimeError("stop here")

    with pytest.raises(RuntimeError, match="stop here"):
        weft.build(random_data(2000, 16, seed=52), degree=16, backend="cpu", progress=fail)
    with pytest.raises(TypeError, match="callable"):
        weft.build(random_data(100, 4), progress=3)


@pytest.mark.parametrize("metric", ["l2", "ip", "cosine"])
def test_distances_per_metric_are_the_documented_ones(metric):
    """Issue 34 item 7: what `distances` holds, per metric, as documented (smaller is nearer)."""
    data = random_data(300, 8, seed=61)
    q = random_data(4, 8, seed=62)
    index = weft.build(data, metric=metric, algorithm="exact", k=5, backend="cpu")
    ids, dist = index.search(q, 5, exact=True, backend="cpu")
    x, qq = data.astype(np.float64)[ids], q.astype(np.float64)[:, None, :]
    if metric == "l2":
        want = ((x - qq) ** 2).sum(-1)  # squared, not the Euclidean distance
    elif metric == "ip":
        want = -(x * qq).sum(-1)  # -<q, x>: FAISS would return +<q, x>
    else:
        want = 1.0 - (x * qq).sum(-1) / (np.linalg.norm(x, axis=-1) * np.linalg.norm(qq, axis=-1))
    np.testing.assert_allclose(dist, want, rtol=1e-4, atol=1e-4)
    assert (np.diff(dist, axis=1) >= 0).all()
