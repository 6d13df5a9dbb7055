"""Builds and searches against exact search: ids, distances and recall."""

from __future__ import annotations

import numpy as np
import pytest

import weft
from conftest import clustered_data, exact_distances, random_data


def test_ground_truth_matches_numpy(base, queries, truth):
    ids, dists = truth
    assert ids.shape == dists.shape == (len(queries), 10)
    assert ids.dtype == np.uint32 and dists.dtype == np.float32
    full = ((queries[:, None, :].astype(np.float64) - base[None, :, :]) ** 2).sum(-1)
    want = np.argsort(full, axis=1, kind="stable")[:, :10]
    # Same neighbour sets (ties aside, random data has none) and the same distances.
    np.testing.assert_allclose(dists, np.take_along_axis(full, want, 1), rtol=1e-4, atol=1e-4)
    assert all(set(a) == set(b) for a, b in zip(ids, want))


def test_exact_search_equals_ground_truth(index, queries, truth):
    # Both on the CPU: the same code, so the same ids and bits.
    ids, dists = index.search(queries, 10, exact=True, backend="cpu")
    cpu_truth = weft.ground_truth(index.data(), queries, 10, backend="cpu")
    np.testing.assert_array_equal(ids, cpu_truth[0])
    np.testing.assert_array_equal(dists, cpu_truth[1])
    # The default back end (the GPU where there is one) computes the distances in another order:
    # the same neighbours up to rounding and ties.
    np.testing.assert_allclose(truth[1], cpu_truth[1], rtol=1e-4, atol=1e-3)
    assert (truth[0] == cpu_truth[0]).mean() >= 0.99


def test_graph_search_distances_are_exact_and_sorted(index, base, queries):
    ids, dists = index.search(queries, 10, beam_width=64)
    assert ids.shape == (len(queries), 10)
    assert (ids != weft.INVALID).all()
    np.testing.assert_allclose(dists, exact_distances(base, queries, ids), rtol=1e-4, atol=1e-3)
    assert (np.diff(dists, axis=1) >= 0).all()
    assert all(len(set(row)) == 10 for row in ids)


def test_recall_grows_with_the_beam_width(index, queries, truth):
    recalls = [
        weft.recall(index.search(queries, 10, beam_width=b)[0], truth[0]) for b in (10, 32, 128)
    ]
    assert recalls == sorted(recalls)
    assert recalls[-1] >= 0.97, recalls


def test_beam_width_is_the_one_name_of_the_list_size(index, queries):
    # The default is max(k, 64): the same results as beam_width=64 for k = 10.
    default = index.search(queries, 10, backend="cpu")
    named = index.search(queries, 10, beam_width=64, backend="cpu")
    np.testing.assert_array_equal(default[0], named[0])
    # Below k it is refused by its name; the former keyword is gone.
    with pytest.raises(weft.InvalidParamsError) as e:
        index.search(queries, 10, beam_width=5, backend="cpu")
    assert e.value.param == "beam_width"
    with pytest.raises(TypeError):
        index.search(queries, 10, beam=64)


@pytest.mark.parametrize(
    "algorithm, params, min_recall",
    [
        ("rnndescent", {"degree": 24}, 0.95),
        ("cagra", {"graph_degree": 24, "intermediate_degree": 48}, 0.95),
        ("ggnn", {}, 0.9),
        ("nndescent", {"k": 24}, 0.9),
        ("exact", {"k": 16}, 0.9),
    ],
)
def test_every_cpu_algorithm_on_clustered_data(algorithm, params, min_recall):
    data = clustered_data(3000, 16, clusters=30, seed=3)
    queries = clustered_data(100, 16, clusters=30, seed=3)[:100] + 0.1
    queries = queries.astype(np.float32)
    truth, _ = weft.ground_truth(data, queries, 10)
    index = weft.build(data, algorithm=algorithm, backend="cpu", seed=1, **params)
    assert index.algorithm == algorithm and len(index) == 3000 and index.dim == 16
    found, _ = index.search(queries, 10, beam_width=96, backend="cpu")
    assert weft.recall(found, truth) >= min_recall


@pytest.mark.parametrize("metric", ["ip", "cosine"])
def test_other_metrics(metric):
    data = random_data(3000, 16, seed=4)
    queries = random_data(100, 16, seed=5)
    truth, tdist = weft.ground_truth(data, queries, 10, metric=metric)
    if metric == "ip":
        np.testing.assert_allclose(
            tdist, -np.take_along_axis(queries @ data.T, truth.astype(np.int64), 1), rtol=1e-4, atol=1e-4
        )
    index = weft.build(data, metric=metric, degree=24)
    assert index.metric == metric
    found, _ = index.search(queries, 10, beam_width=128)
    assert weft.recall(found, truth) >= 0.9


def test_same_seed_same_graph_any_thread_count(base):
    a = weft.build(base[:2000], degree=16, seed=3, threads=1)
    b = weft.build(base[:2000], degree=16, seed=3, threads=2)
    np.testing.assert_array_equal(a.graph(), b.graph())


def test_single_vector_query(index, queries):
    ids, dists = index.search(queries[3], 5, beam_width=64)
    assert ids.shape == dists.shape == (5,)
    batch_ids, batch_dists = index.search(queries[:10], 5, beam_width=64)
    np.testing.assert_array_equal(ids, batch_ids[3])
    np.testing.assert_array_equal(dists, batch_dists[3])


def test_results_do_not_depend_on_the_batch_or_threads(index, queries):
    # The CPU search: a query's answer depends on nothing else. (The GPU's automatic mode picks
    # multi-CTA for small batches, whose answers may differ slightly between runs.)
    whole = index.search(queries, 10, beam_width=48, backend="cpu")
    halves = [
        index.search(q, 10, beam_width=48, threads=1, backend="cpu") for q in (queries[:77], queries[77:])
    ]
    np.testing.assert_array_equal(whole[0], np.concatenate([h[0] for h in halves]))
    np.testing.assert_array_equal(whole[1], np.concatenate([h[1] for h in halves]))


def test_graph_and_metadata(index, base):
    g = index.graph()
    assert g.shape == (len(base), 24) and g.dtype == np.uint32
    valid = g[g != weft.INVALID]
    assert valid.max() < len(base)
    assert index.graph_kind == "fixed"
    info = index.build_info
    assert info["algorithm"] == "rnndescent" and info["params"]["degree"] == 24
    ep = index.entry_points()
    assert ep.dtype == np.uint32 and len(ep) > 0
    np.testing.assert_array_equal(index.data(), base)
    with pytest.raises(weft.UnsupportedError):
        index.graph(distances=True)


def test_knn_graph_with_distances():
    data = random_data(500, 8, seed=6)
    index = weft.build(data, algorithm="exact", k=5)
    ids, dists = index.graph(distances=True)
    assert ids.shape == dists.shape == (500, 5)
    truth, tdist = weft.ground_truth(data, data, 6)
    # The exact k-NN graph leaves each point out of its own list.
    np.testing.assert_allclose(dists, tdist[:, 1:], rtol=1e-4, atol=1e-4)


def test_algorithms_lists_defaults():
    algos = {a["name"]: a for a in weft.algorithms()}
    assert {"exact", "nndescent", "rnndescent", "cagra", "ggnn"} <= algos.keys()
    assert algos["rnndescent"]["produces"] == "search_graph"
    assert algos["nndescent"]["produces"] == "knn_graph"
    assert algos["rnndescent"]["default_params"]["degree"] > 0
    assert all(a["backend"] in ("cpu", "gpu") for a in algos.values())


def test_default_beam_width_follows_k(index, queries):
    # No beam width: the search plan's default for k (64, or k rounded up to a multiple of 32
    # above 64), the same rule as the CLI's; a k the default holds searches, and the result is
    # the one of that beam width given explicitly.
    for k in (10, 70):
        a = index.search(queries, k, backend="cpu")
        b = index.search(queries, k, backend="cpu", beam_width=64 if k <= 64 else 96)
        np.testing.assert_array_equal(a[0], b[0])


def test_search_knobs_reach_the_search(index, queries):
    # Valid knobs of every search are accepted on every back end; on the CPU they do not
    # change the beam search's result.
    plain = index.search(queries, 10, backend="cpu")
    knobs = dict(
        search_width=2, max_iterations=40, min_iterations=2, team_size=8, mode="single-cta",
        search_precision="exact", rerank=0, tau=0.3, ggnn_best=16, ggnn_visited=128,
        ggnn_max_iterations=200, ggnn_block_threads=64, ggnn_team_size=8,
        ggnn_prefetch_rows=False,
    )
    tuned = index.search(queries, 10, backend="cpu", **knobs)
    np.testing.assert_array_equal(plain[0], tuned[0])
    index.search(queries, 10, **knobs)


def test_beam_search_knobs_reach_the_cpu_search(index, queries, truth):
    # The CPU beam search's knobs: the budgets cut the search short (lower recall than a full
    # search), the entry layer can be switched off or tuned, and the defaults given explicitly
    # change nothing.
    def recall(ids):
        return weft.recall(ids, truth[0])

    plain = index.search(queries, 10, backend="cpu")
    defaults = index.search(
        queries, 10, backend="cpu", max_hops=None, max_distance_computations=None,
        entry_layer=True, entry_layer_min_entries=64, entry_layer_degree=8,
        entry_layer_beam_width=8,
    )
    np.testing.assert_array_equal(plain[0], defaults[0])
    full = recall(plain[0])
    assert recall(index.search(queries, 10, backend="cpu", max_hops=1)[0]) < full
    budget = index.search(queries, 10, backend="cpu", max_distance_computations=20)
    assert recall(budget[0]) < full
    for knobs in (
        dict(entry_layer=False),
        dict(entry_layer_min_entries=2, entry_layer_degree=4, entry_layer_beam_width=16),
    ):
        ids = index.search(queries, 10, backend="cpu", **knobs)[0]
        assert recall(ids) >= full - 0.05, knobs
