#!/usr/bin/env python3
"""Exact k-NN: weft (benches/examples/exact_cpu_bench.rs) against faiss-cpu IndexFlatL2.

Installs nothing. Expects faiss-cpu and numpy in a virtual environment, by default
target/peers-venv:

    python3 -m venv target/peers-venv && target/peers-venv/bin/pip install faiss-cpu numpy
    target/peers-venv/bin/python benches/peers/exact_vs_faiss.py            # k = 10 and 100

Generates a fixed Gaussian mixture (numpy seed 12345; 100k x 128 base, 10k queries by default),
writes it as .fbin files under target/peers-data/, times faiss (one warm-up, median of --reps),
builds and runs the weft example with the same thread count, checks that both return the same
neighbours (recall of weft against faiss) and prints a markdown table with both rates and the
ratio. Run it on a quiet machine: both sides are compute bound.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]


def gaussian_mixture(rng, rows, dim, centers):
    """`rows` points around `centers` (cluster spreads vary), float32."""
    which = rng.integers(0, len(centers), size=rows)
    spread = rng.uniform(0.3, 1.0, size=len(centers)).astype(np.float32)
    noise = rng.standard_normal((rows, dim), dtype=np.float32)
    return (centers[which] + noise * spread[which, None]).astype(np.float32)


def write_fbin(path, a):
    a = np.ascontiguousarray(a, dtype=np.float32)
    with open(path, "wb") as f:
        np.array(a.shape, dtype=np.uint32).tofile(f)
        a.tofile(f)


def make_data(args):
    out = ROOT / "target" / "peers-data"
    out.mkdir(parents=True, exist_ok=True)
    tag = f"gm_{args.n}_{args.nq}_{args.dim}"
    base_p, query_p = out / f"{tag}.base.fbin", out / f"{tag}.queries.fbin"
    rng = np.random.default_rng(12345)
    centers = rng.standard_normal((args.clusters, args.dim), dtype=np.float32) * 3.0
    base = gaussian_mixture(rng, args.n, args.dim, centers)
    queries = gaussian_mixture(rng, args.nq, args.dim, centers)
    if not (base_p.exists() and query_p.exists()):
        write_fbin(base_p, base)
        write_fbin(query_p, queries)
    return base, queries, base_p, query_p


def time_faiss(faiss, base, queries, k, reps):
    index = faiss.IndexFlatL2(base.shape[1])
    index.add(base)
    index.search(queries, k)  # warm-up
    times, cpu = [], []
    for _ in range(reps):
        t, c = time.perf_counter(), time.process_time()
        _, ids = index.search(queries, k)
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    return statistics.median(times), times, statistics.median(cpu), ids


def run_weft(base_p, query_p, k, threads, reps):
    ids_p = ROOT / "target" / "peers-data" / f"weft_ids_k{k}.u32"
    cmd = [
        str(ROOT / "target" / "release" / "examples" / "exact_cpu_bench"),
        "--base", str(base_p), "--queries", str(query_p), "--k", str(k),
        "--threads", str(threads), "--reps", str(reps), "--ids-out", str(ids_p),
    ]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    res = json.loads(out.strip().splitlines()[-1])
    ids = np.fromfile(ids_p, dtype=np.uint32).astype(np.int64)
    return res, ids


def recall(a, b, k):
    """Fraction of faiss's ids that weft also returned, per query, averaged."""
    a, b = a.reshape(-1, k), b.reshape(-1, k)
    hits = sum(len(np.intersect1d(x, y, assume_unique=True)) for x, y in zip(a, b))
    return hits / a.size


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=100_000)
    p.add_argument("--nq", type=int, default=10_000)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--clusters", type=int, default=100)
    p.add_argument("--k", type=int, nargs="+", default=[10, 100])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--no-build", action="store_true", help="use the existing release example")
    args = p.parse_args()

    import faiss  # imported late so that --help works without it

    faiss.omp_set_num_threads(args.threads)
    os.environ["RAYON_NUM_THREADS"] = str(args.threads)
    if not args.no_build:
        subprocess.run(
            ["cargo", "build", "--release", "-q", "-p", "weft-benches", "--example", "exact_cpu_bench"],
            cwd=ROOT, check=True,
        )
    base, queries, base_p, query_p = make_data(args)

    load = os.getloadavg()[0]
    print(f"exact k-NN, {args.n} x {args.dim} base, {args.nq} queries, L2, "
          f"{args.threads} threads, median of {args.reps} after a warm-up, faiss {faiss.__version__}, "
          f"load average {load:.2f} on {os.cpu_count()} CPUs" + (" (busy: timings are noisy)" if load > 0.5 else ""))
    print()
    print("| k | faiss IndexFlatL2 QPS | weft exact_search QPS | weft / faiss | recall weft vs faiss |")
    print("|---|---:|---:|---:|---:|")
    for k in args.k:
        f_med, f_times, f_cpu, f_ids = time_faiss(faiss, base, queries, k, args.reps)
        w, w_ids = run_weft(base_p, query_p, k, args.threads, args.reps)
        f_qps = args.nq / f_med
        r = recall(w_ids, f_ids.astype(np.int64).ravel(), k)
        print(f"| {k} | {f_qps:.0f} | {w['qps']:.0f} | {w['qps'] / f_qps:.2f} | {r:.4f} |", flush=True)
        print(f"<!-- k={k} faiss times {[round(t, 3) for t in f_times]}, "
              f"faiss CPU seconds per search {f_cpu:.2f} (includes OpenMP spinning), "
              f"weft times {[round(t, 3) for t in w['times_s']]}, weft CPU seconds per search "
              f"{w.get('cpu_s')}, weft isa {w['isa']} -->", file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
