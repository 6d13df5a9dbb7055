"""A user's first GPU session, as issue 34 reported it: `gpu_info()`, exact ground truth, then a
build of every GPU algorithm on 500,000 clustered vectors, each searched at four beam widths.
The report: every first search after a build failed with `GpuError: cuMemGetInfo:
CUDA_ERROR_INVALID_CONTEXT`. GPU only: skipped, with the reason, where no CUDA GPU is usable, and
an error under WEFT_REQUIRE_GPU=1 (the device pack runs it so)."""

from __future__ import annotations

import os

import numpy as np
import pytest

import weft

GPU = weft.gpu_info()
if not GPU["available"] and os.environ.get("WEFT_REQUIRE_GPU") == "1":
    raise RuntimeError(f"WEFT_REQUIRE_GPU=1 but no usable CUDA GPU: {GPU.get('reason', '')}")
pytestmark = pytest.mark.skipif(
    not GPU["available"], reason=f"no usable CUDA GPU: {GPU.get('reason', '')}"
)


def test_the_reported_session_searches_after_every_gpu_build():
    print("weft", weft.__version__, "gpu", weft.gpu_available(), weft.gpu_info())
    rng = np.random.default_rng(0)
    centers = rng.standard_normal((100, 96), dtype=np.float32) * 4
    x = (
        centers[rng.integers(0, 100, 500_000)]
        + rng.standard_normal((500_000, 96), dtype=np.float32)
    ).astype(np.float32)
    q = (
        centers[rng.integers(0, 100, 5_000)] + rng.standard_normal((5_000, 96), dtype=np.float32)
    ).astype(np.float32)
    gt, _ = weft.ground_truth(x, q, k=10)
    for algo in ["cagra", "grnnd", "ggnn", "nndescent"]:
        idx = weft.build(
            x, metric="l2", algorithm=algo, **({"k": 32} if algo == "nndescent" else {})
        )
        assert idx.build_info["backend"] == "gpu", idx.build_info
        recalls = []
        for bw in (16, 32, 64, 128):
            found, dists = idx.search(q[:100], k=10, beam_width=bw)
            assert found.shape == (100, 10) and dists.shape == (100, 10)
            recalls.append(weft.recall(found, gt[:100]))
        print(algo, idx.build_info, recalls)
        # A wider beam never finds less (the GPU search's list only grows; 16 and 32 are one
        # list of 32 there).
        assert all(b >= a - 0.01 for a, b in zip(recalls, recalls[1:])), (algo, recalls)
        if algo != "nndescent":
            # A search graph leaves its builder connected, with entry points spread over the
            # data: at beam 128 a query reaches its own cluster and finds most of its true
            # neighbours (an H200 measured 0.97-0.98).
            assert recalls[-1] >= 0.9, (algo, recalls)
        else:
            # The 32-NN graph is no search graph (no reverse edges, not repaired): its clusters
            # are islands the spread entry points may miss, which caps its recall (an H200
            # measured 0.87-0.88 at 128 in five runs); the test asks only that it searches.
            assert recalls[-1] >= 0.5, (algo, recalls)
