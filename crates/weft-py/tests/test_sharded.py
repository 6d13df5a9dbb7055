"""`weft.ShardedIndex`: contiguous shards with graphs of their own, every query searched in every
shard and merged exactly with global ids. Exact search through the shards equals the ground truth
of the whole set; graph search finds the neighbours; save and load keep it; bad shard counts and
devices are refused. On a GPU machine (WEFT_REQUIRE_GPU=1 there) the shards build and search on
device 0 with the result of the shards searched one after another."""

from __future__ import annotations

import os

import numpy as np
import pytest

import weft
from conftest import clustered_data


@pytest.fixture(scope="module")
def data():
    return clustered_data(3001, 16, 12, seed=4)


def test_exact_search_through_shards_is_the_ground_truth(data):
    queries = data[:40] + 0.01
    index = weft.ShardedIndex.build(data, 3, algorithm="rnndescent", backend="cpu", degree=16)
    assert len(index) == 3001
    assert index.shard_sizes == [1001, 1000, 1000]
    ids, dists = index.search(queries, 10, exact=True, backend="cpu")
    truth_ids, truth_dists = weft.ground_truth(data, queries, 10, backend="cpu")
    np.testing.assert_array_equal(ids, truth_ids)
    np.testing.assert_array_equal(dists, truth_dists)
    found, _ = index.search(queries, 10, beam_width=48, backend="cpu")
    assert weft.recall(found, truth_ids) >= 0.95
    # A filter over the global ids reaches every shard.
    allowed = np.arange(3001) % 5 == 2
    fids, _ = index.search(queries, 10, exact=True, backend="cpu", filter=allowed)
    assert (fids % 5 == 2).all()
    assert len(set((fids // 1000).clip(max=2).ravel().tolist())) == 3


def test_save_load_and_errors(data, tmp_path):
    index = weft.ShardedIndex.build(data, 2, algorithm="exact", k=4, backend="cpu")
    index.save(tmp_path / "s")
    loaded = weft.ShardedIndex.load(tmp_path / "s")
    q = data[:5]
    np.testing.assert_array_equal(
        index.search(q, 5, exact=True, backend="cpu")[0],
        loaded.search(q, 5, exact=True, backend="cpu")[0],
    )
    assert "2 shards" in repr(loaded)
    for shards in (0, 3002):
        with pytest.raises(weft.InvalidParamsError, match="shards"):
            weft.ShardedIndex.build(data, shards, algorithm="exact", k=4, backend="cpu")
    with pytest.raises(weft.InvalidParamsError, match="devices"):
        index.search(q, 5, exact=True, devices=[1, 1])
    with pytest.raises(weft.InvalidParamsError):
        index.search(q, 3002)


def test_shards_on_device_zero_where_there_is_a_gpu(data):
    if not weft.gpu_info(device=0)["available"]:
        assert os.environ.get("WEFT_REQUIRE_GPU") != "1", "WEFT_REQUIRE_GPU=1 but GPU 0 is unusable"
        pytest.skip("no usable GPU 0")
    index = weft.ShardedIndex.build(data, 3, algorithm="cagra", devices=[0])
    queries = data[:50] + 0.01
    on_zero = index.search(queries, 10, beam_width=64, backend="gpu", devices=0, mode="single-cta")
    one_by_one = index.search(queries, 10, beam_width=64, backend="gpu", mode="single-cta")
    np.testing.assert_array_equal(on_zero[0], one_by_one[0])
    truth, _ = weft.ground_truth(data, queries, 10)
    assert weft.recall(on_zero[0], truth) >= 0.95
    with pytest.raises(weft.UnsupportedError, match="device 999"):
        index.search(queries, 10, devices=[0, 999])
