"""The GPU back ends (skipped, with the reason, where no CUDA GPU is usable)."""

from __future__ import annotations

import os

import numpy as np
import pytest

import weft
from conftest import clustered_data, random_data

GPU = weft.gpu_info()
if not GPU["available"] and os.environ.get("WEFT_REQUIRE_GPU") == "1":
    # As the Rust GPU tests do: a GPU run cannot pass by skipping.
    raise RuntimeError(f"WEFT_REQUIRE_GPU=1 but no usable CUDA GPU: {GPU.get('reason', '')}")
pytestmark = pytest.mark.skipif(
    not GPU["available"], reason=f"no usable CUDA GPU: {GPU.get('reason', '')}"
)


def test_gpu_ground_truth_matches_the_cpu():
    data, queries = random_data(20_000, 32, seed=30), random_data(500, 32, seed=31)
    gi, gd = weft.ground_truth(data, queries, 10, backend="gpu")
    ci, cd = weft.ground_truth(data, queries, 10, backend="cpu")
    np.testing.assert_allclose(gd, cd, rtol=1e-3, atol=1e-3)
    assert weft.recall(gi, ci) >= 0.999


@pytest.mark.parametrize("algorithm", ["cagra", "grnnd", "ggnn"])
def test_gpu_build_and_search(algorithm):
    data = clustered_data(20_000, 32, clusters=50, seed=32)
    queries = (clustered_data(500, 32, clusters=50, seed=32) + 0.05).astype(np.float32)
    truth, _ = weft.ground_truth(data, queries, 10)
    index = weft.build(data, algorithm=algorithm, backend="gpu")
    assert index.build_info["backend"] == "gpu"
    for backend in ("gpu", "cpu"):
        found, dists = index.search(queries, 10, beam_width=128, backend=backend)
        assert weft.recall(found, truth) >= 0.95, backend
        assert (np.diff(dists, axis=1) >= -1e-4).all()


def test_gpu_search_knobs_change_the_gpu_search():
    # The CAGRA knobs reach the GPU search: single-CTA with one parent per iteration at a
    # short iteration cap finds less than the default, the f16 traversal with a partial rerank
    # still returns exact distances; the GGNN knobs reach the GGNN search of a hierarchical
    # graph (an expansion cap of 1 loses recall).
    data = clustered_data(20_000, 32, clusters=50, seed=40)
    queries = (clustered_data(500, 32, clusters=50, seed=40) + 0.05).astype(np.float32)
    truth, truth_d = weft.ground_truth(data, queries, 10)
    cagra = weft.build(data, algorithm="cagra", backend="gpu")
    full = weft.recall(cagra.search(queries, 10, backend="gpu", mode="single-cta")[0], truth)
    capped = weft.recall(
        cagra.search(queries, 10, backend="gpu", mode="single-cta", max_iterations=1)[0], truth
    )
    assert full >= 0.95 and capped < full, (full, capped)
    ids, dists = cagra.search(
        queries, 10, backend="gpu", search_precision="f16", rerank=32, beam_width=64
    )
    assert weft.recall(ids, truth) >= 0.9
    exact = ((queries[:, None, :] - data[ids]) ** 2).sum(-1)
    np.testing.assert_allclose(dists, exact, rtol=1e-3, atol=1e-3)
    ggnn = weft.build(data, algorithm="ggnn", backend="gpu")
    full = weft.recall(ggnn.search(queries, 10, backend="gpu")[0], truth)
    capped = weft.recall(
        ggnn.search(queries, 10, backend="gpu", ggnn_max_iterations=1, ggnn_block_threads=64)[0],
        truth,
    )
    assert full >= 0.95 and capped < full, (full, capped)
    with pytest.raises(weft.InvalidParamsError, match="traversal"):
        ggnn.search(queries, 10, backend="gpu", search_precision="f16")
