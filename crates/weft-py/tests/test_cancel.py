"""Ctrl-C cancels builds and searches, and the GIL is released while they run."""

from __future__ import annotations

import os
import signal
import threading
import time

import numpy as np
import pytest

import weft
from conftest import random_data

pytestmark = pytest.mark.skipif(
    threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGINT"),
    reason="needs SIGINT delivered to the main thread",
)


@pytest.fixture
def interrupt_after():
    """Sends SIGINT to this process after a delay, with Python's own SIGINT handler installed
    for the test whatever this process inherited (a job started in the background by a
    non-interactive shell, as on some CI runners, starts with SIGINT ignored, and Python then
    leaves it ignored). A signal that arrives after the work it was meant for is absorbed at the
    end of the test instead of interrupting the next one."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    timers = []

    def start(seconds: float) -> threading.Timer:
        timer = threading.Timer(seconds, os.kill, (os.getpid(), signal.SIGINT))
        timers.append(timer)
        timer.start()
        return timer

    yield start
    try:
        for timer in timers:
            timer.join()
        time.sleep(0.01)  # the handler runs here if the signal came late
    except KeyboardInterrupt:
        pass
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.fixture(scope="module")
def big() -> np.ndarray:
    # Sized so that the uncancelled work takes 10 times the signal's delay or more on the 2-core
    # machine: a build about 7 s (200,000 x 64, 2 threads), the ground truth of 20,000 queries
    # about 2.5 s on 2 threads (the test runs it on 1).
    return random_data(200_000, 64, seed=20)


def test_ctrl_c_cancels_a_build(big, interrupt_after):
    timer = interrupt_after(0.5)
    start = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        weft.build(big, degree=32, backend="cpu")
    elapsed = time.perf_counter() - start
    timer.join()
    assert elapsed < 2.5, f"the build went on for {elapsed:.2f} s after Ctrl-C at 0.5 s"


def test_ctrl_c_cancels_an_exact_search(big, interrupt_after):
    queries = random_data(20_000, 64, seed=21)
    timer = interrupt_after(0.3)
    start = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        weft.ground_truth(big, queries, 10, threads=1, backend="cpu")
    elapsed = time.perf_counter() - start
    timer.join()
    assert elapsed < 1.5, f"the search went on for {elapsed:.2f} s after Ctrl-C at 0.3 s"


def test_ctrl_c_cancels_an_index_search(big, interrupt_after):
    index = weft.build(big[:20_000], degree=16, backend="cpu")
    # 125,000 x 20,000 x 64: about 2.7 s on one thread of the 2-core machine, 13 times the delay.
    queries = random_data(125_000, 64, seed=22)
    timer = interrupt_after(0.2)
    start = time.perf_counter()
    with pytest.raises(KeyboardInterrupt):
        index.search(queries, 10, exact=True, threads=1, backend="cpu")
    elapsed = time.perf_counter() - start
    timer.join()
    assert elapsed < 1.5, f"the search went on for {elapsed:.2f} s"
    # The index still works afterwards.
    assert index.search(big[:3], 1, exact=True)[0][:, 0].tolist() == [0, 1, 2]


def test_the_gil_is_released_during_a_build(big):
    ticks = 0
    stop = threading.Event()

    def count():
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            time.sleep(0.001)

    t = threading.Thread(target=count)
    t.start()
    try:
        weft.build(big[:30_000], degree=16, backend="cpu")
    finally:
        stop.set()
        t.join()
    # A build of about a second: a thread that needs the GIL every millisecond kept running.
    assert ticks > 100, ticks


def test_the_gil_is_released_during_a_search(big):
    index = weft.build(big[:5000], degree=16, backend="cpu")
    queries = random_data(20_000, 64, seed=23)
    ticks = 0
    stop = threading.Event()

    def count():
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            time.sleep(0.001)

    t = threading.Thread(target=count)
    t.start()
    try:
        start = time.perf_counter()
        index.search(queries, 10, exact=True, backend="cpu")
        elapsed = time.perf_counter() - start
    finally:
        stop.set()
        t.join()
    assert ticks > 0.2 * elapsed * 1000, (ticks, elapsed)


def test_searches_from_several_threads_agree(index, queries):
    from concurrent.futures import ThreadPoolExecutor

    want = index.search(queries, 10, beam_width=48, backend="cpu")
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda _: index.search(queries, 10, beam_width=48, backend="cpu"), range(8)))
    for ids, dists in got:
        np.testing.assert_array_equal(ids, want[0])
        np.testing.assert_array_equal(dists, want[1])
