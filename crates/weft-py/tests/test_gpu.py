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
