"""Build an index, sweep the search beam and print recall against exact ground truth, the way
ann-benchmarks does.

    python crates/weft-py/examples/ann_benchmark_style.py                      # synthetic data
    python crates/weft-py/examples/ann_benchmark_style.py --data sift.fbin --queries sift.queries.fbin
    python crates/weft-py/examples/ann_benchmark_style.py --algorithm cagra --param graph_degree=32
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

import weft


def synthetic(n: int, dim: int, seed: int) -> np.ndarray:
    """Gaussian clusters of varied spread (about SIFT's difficulty at this size)."""
    rng = np.random.default_rng(seed)
    centers = rng.standard_normal((max(n // 500, 1), dim), dtype=np.float32) * 3.0
    labels = rng.integers(0, len(centers), n)
    scale = rng.uniform(0.5, 1.5, len(centers)).astype(np.float32)[labels, None]
    return centers[labels] + scale * rng.standard_normal((n, dim), dtype=np.float32)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", help="base vectors (fvecs, fbin, u8bin, i8bin, bvecs, npy)")
    ap.add_argument("--queries", help="query vectors (with --data)")
    ap.add_argument("--n", type=int, default=50_000, help="synthetic base size")
    ap.add_argument("--dim", type=int, default=64, help="synthetic dimension")
    ap.add_argument("--nq", type=int, default=1_000, help="synthetic query count")
    ap.add_argument("--algorithm", default="rnndescent")
    ap.add_argument("--param", action="append", default=[], metavar="NAME=VALUE",
                    help="an algorithm parameter (VALUE read as JSON), repeatable")
    ap.add_argument("--metric", default="l2")
    ap.add_argument("--backend", default="auto")
    ap.add_argument("-k", type=int, default=10)
    ap.add_argument("--beams", default="10,16,24,32,48,64,96,128,192,256")
    ap.add_argument("--seed", type=int, default=42)
    args = ap.parse_args()

    if args.data:
        base = weft.read(args.data)
        queries = weft.read(args.queries) if args.queries else base[: args.nq]
    else:
        both = synthetic(args.n + args.nq, args.dim, args.seed)
        base, queries = both[: args.n], both[args.n :]
    params = {}
    for p in args.param:
        name, _, value = p.partition("=")
        try:
            params[name] = json.loads(value)
        except json.JSONDecodeError:
            params[name] = value
    print(f"data: {base.shape[0]} x {base.shape[1]} {base.dtype}, {len(queries)} queries, "
          f"metric {args.metric}; GPU: {weft.gpu_info().get('available')}")

    t = time.perf_counter()
    truth, _ = weft.ground_truth(base, queries, args.k, metric=args.metric, backend=args.backend)
    print(f"exact ground truth: {time.perf_counter() - t:.2f} s")

    t = time.perf_counter()
    index = weft.build(base, metric=args.metric, algorithm=args.algorithm, backend=args.backend,
                       seed=args.seed, **params)
    print(f"build {args.algorithm} on {index.build_info['backend']}: "
          f"{time.perf_counter() - t:.2f} s  ({index!r})")
    index.search(queries[:100], args.k)  # first-search set-up (entry layer; GPU upload)

    print(f"{'beam':>6} {'recall@' + str(args.k):>10} {'QPS':>12} {'ms/query':>9}")
    for beam in (int(b) for b in args.beams.split(",")):
        if beam < args.k:
            continue
        t = time.perf_counter()
        ids, _ = index.search(queries, args.k, beam_width=beam, backend=args.backend)
        elapsed = time.perf_counter() - t
        print(f"{beam:>6} {weft.recall(ids, truth):>10.4f} {len(queries) / elapsed:>12.0f} "
              f"{elapsed / len(queries) * 1e3:>9.3f}")


if __name__ == "__main__":
    main()
