"""How much a search from Python costs over the Rust call it wraps.

Builds one index, then times, on the same index and queries:

- batch: ``Index.search(queries, k, beam_width=...)`` on the whole batch from Python, against
  ``weft::Index::search`` on the same batch timed inside the extension (GIL released, no Python
  in the loop: ``weft._weft._rust_search_seconds``), alternating; medians of the rounds and of
  the per-round ratios (and, for reference, the library's cancellable search, which looks at its
  token every 256 queries);
- batch 1: a Python loop of single-query ``Index.search`` calls (2-D ``(1, dim)`` rows and 1-D
  vectors), against the Rust call on each of the same queries; the overhead is the difference
  of the mean times per call.

Not a test: figures depend on the machine (see docs/benchmarks.md for the recorded ones).

    python crates/weft-py/examples/overhead_benchmark.py [--n 100000 --dim 128 ...]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

import numpy as np

import weft
from weft import _weft


def clustered(n: int, dim: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((256, dim), dtype=np.float32) * 4.0
    labels = rng.integers(0, len(centers), n)
    return (centers[labels] + rng.standard_normal((n, dim), dtype=np.float32)).astype(np.float32)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--queries", type=int, default=10_000)
    ap.add_argument("--k", type=int, default=10)
    ap.add_argument("--beam-width", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--single-calls", type=int, default=5_000)
    args = ap.parse_args()

    data = clustered(args.n + args.queries, args.dim, seed=0)
    base, queries = data[: args.n], data[args.n :]
    t = time.perf_counter()
    index = weft.build(base, algorithm="rnndescent", degree=32, seed=0)
    print(f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; "
          f"weft {weft.__version__}; GPU: {weft.gpu_available()}")
    print(f"rnndescent degree 32 on {args.n} x {args.dim} float32: built in "
          f"{time.perf_counter() - t:.1f} s; k={args.k}, beam_width={args.beam_width}")
    index.search(queries[:256], args.k, beam_width=args.beam_width)  # entry layer, huge-page copies
    _weft._rust_search_seconds(index, queries[:256], args.k, args.beam_width, 1)

    py, rust, rust_cancel = [], [], []
    for _ in range(args.rounds):
        t = time.perf_counter()
        index.search(queries, args.k, beam_width=args.beam_width)
        py.append(time.perf_counter() - t)
        rust += _weft._rust_search_seconds(index, queries, args.k, args.beam_width, 1)
        rust_cancel += _weft._rust_search_seconds(index, queries, args.k, args.beam_width, 1, True)
    p, r, rc = statistics.median(py), statistics.median(rust), statistics.median(rust_cancel)
    # Each round's two calls ran back to back: their ratio is robust to load that drifts
    # between rounds on a shared machine.
    ratios = sorted(a / b for a, b in zip(py, rust))
    print(f"batch {len(queries)}: Python {p * 1e3:.1f} ms, Rust {r * 1e3:.1f} ms "
          f"(medians of {args.rounds}); Python/Rust per round: median {statistics.median(ratios):.3f} "
          f"(range {ratios[0]:.3f}-{ratios[-1]:.3f})")
    print(f"  the library's cancellable search (a cancel token: batches of 256 queries): "
          f"{rc * 1e3:.1f} ms, {statistics.median(sorted(a / b for a, b in zip(rust_cancel, rust))):.3f} "
          f"of the Rust call")

    m = min(args.single_calls, len(queries))
    rows = [queries[i : i + 1] for i in range(m)]
    vecs = [queries[i] for i in range(m)]
    results = {"rows": [], "vectors": [], "rust": []}
    for _ in range(args.rounds):
        for name, items in (("rows", rows), ("vectors", vecs)):
            search = index.search
            t = time.perf_counter()
            for q in items:
                search(q, args.k, beam_width=args.beam_width)
            results[name].append((time.perf_counter() - t) / m)
        results["rust"].append(
            sum(sum(_weft._rust_search_seconds(index, q, args.k, args.beam_width, 1)) for q in rows) / m
        )
    r1 = statistics.median(results["rust"])
    for name in ("rows", "vectors"):
        p1 = statistics.median(results[name])
        print(f"batch 1 ({name}): Python {p1 * 1e6:.1f} us/call, Rust {r1 * 1e6:.1f} us/call; "
              f"overhead {(p1 - r1) * 1e6:.1f} us (medians of {args.rounds} rounds of {m} calls)")


if __name__ == "__main__":
    main()
