"""The GPU as a parameter (`device=`, and `devices=` for searches): a device that cannot be used
(no machine has a GPU 999) raises UnsupportedError naming it on every call, whatever the backend,
also among several, never the CPU instead; a device named twice is refused; on a GPU machine
(WEFT_REQUIRE_GPU=1 there) device 0 builds and searches, and the index's searches default to the
device it was built on."""

from __future__ import annotations

import os

import pytest

import weft
from conftest import random_data


def test_a_device_that_cannot_be_used_is_named():
    data = random_data(300, 8, seed=1)
    for backend in ("auto", "gpu"):
        with pytest.raises(weft.UnsupportedError, match="GPU 999"):
            weft.build(data, algorithm="rnndescent", backend=backend, device=999)
        with pytest.raises(weft.UnsupportedError, match="GPU 999"):
            weft.ground_truth(data, data[:3], 2, backend=backend, device=999)
    index = weft.build(data, algorithm="rnndescent", backend="cpu")
    for backend in ("auto", "gpu"):
        with pytest.raises(weft.UnsupportedError, match="device 999"):
            index.search(data[:3], 2, backend=backend, device=999)
        with pytest.raises(weft.UnsupportedError, match="device 999"):
            index.search(data[:3], 2, backend=backend, devices=[999])
        with pytest.raises(weft.InvalidParamsError, match="devices"):
            index.search(data[:3], 2, backend=backend, devices=[999, 999])
    with pytest.raises(TypeError, match="devices="):
        index.search(data[:3], 2, devices=[0], device=0)
    with pytest.raises(TypeError):
        index.search(data[:3], 2, devices=[0.5])
    with pytest.raises(ValueError, match="all"):
        index.search(data[:3], 2, devices="every")
    info = weft.gpu_info(device=999)
    assert info["available"] is False, info


def test_device_zero_where_there_is_a_gpu():
    if not weft.gpu_info(device=0)["available"]:
        assert os.environ.get("WEFT_REQUIRE_GPU") != "1", "WEFT_REQUIRE_GPU=1 but GPU 0 is unusable"
        pytest.skip("no usable GPU 0")
    data = random_data(2000, 16, seed=2)
    index = weft.build(data, algorithm="cagra", device=0)
    assert index.build_info["backend"] == "gpu"
    by_default = index.search(data[:20], 5, beam_width=32, backend="gpu")
    asked = index.search(data[:20], 5, beam_width=32, backend="gpu", device=0)
    assert (by_default[0] == asked[0]).all()
    for devices in (0, [0], "all"):
        listed = index.search(data[:20], 5, beam_width=32, backend="gpu", devices=devices)
        assert (listed[0] == asked[0]).all(), devices
    with pytest.raises(weft.UnsupportedError, match="device 999"):
        index.search(data[:20], 5, beam_width=32, devices=[0, 999])
    gi, _ = weft.ground_truth(data, data[:20], 5, device=0)
    assert weft.recall(asked[0], gi) >= 0.9
