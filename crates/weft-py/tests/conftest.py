"""Shared data for the weft Python tests (small, seeded: the whole suite runs in about a minute
on 2 cores)."""

from __future__ import annotations

import numpy as np
import pytest

import weft


def random_data(n: int, dim: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, dim), dtype=np.float32)


def clustered_data(n: int, dim: int, clusters: int, seed: int = 0) -> np.ndarray:
    """`clusters` tight Gaussian clusters, far apart (a graph without connectivity repair falls
    apart on such data)."""
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((clusters, dim), dtype=np.float32) * 20.0
    labels = rng.integers(0, clusters, n)
    return (centers[labels] + rng.standard_normal((n, dim), dtype=np.float32)).astype(np.float32)


@pytest.fixture(scope="session")
def base() -> np.ndarray:
    return random_data(4000, 24, seed=1)


@pytest.fixture(scope="session")
def queries() -> np.ndarray:
    return random_data(200, 24, seed=2)


@pytest.fixture(scope="session")
def truth(base, queries):
    return weft.ground_truth(base, queries, 10)


@pytest.fixture(scope="session")
def index(base) -> weft.Index:
    return weft.build(base, algorithm="rnndescent", degree=24, seed=7, backend="cpu")


def exact_distances(base: np.ndarray, queries: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """Squared L2 distances of each query to the given base rows, in float64."""
    b = base.astype(np.float64)[ids]
    return ((b - queries.astype(np.float64)[:, None, :]) ** 2).sum(-1)
