#!/usr/bin/env python3
"""RNN-Descent (weft, CPU) vs hnswlib HNSW and faiss IndexHNSWFlat on a fixed SIFT-like set.

One command, from the workspace root:

    python3 -m venv target/peers-venv && target/peers-venv/bin/pip install hnswlib faiss-cpu numpy
    target/peers-venv/bin/python benches/peers/rnndescent_vs_hnsw.py

It generates a fixed Gaussian-mixture set (100k x 128 base, 10k queries; low-rank clusters so the
intrinsic dimension is SIFT-like), writes base/query .fbin and ground-truth .ibin files under
target/peers-data/, computes the exact top-10 with faiss IndexFlatL2, builds hnswlib (M=16,
ef_construction=200) and faiss IndexHNSWFlat(d, 32) (faiss' default efConstruction = 40), sweeps
ef for recall@10 and QPS (2 threads), then builds and runs the Rust example
benches/examples/rnnd_bench.rs (release), which builds RNN-Descent and sweeps the
beam size L of weft's BeamSearch. Build times and per-point QPS are medians of --runs runs.
It prints a markdown table: build time (wall and process CPU), and QPS at recall@10 = 0.95
(linear interpolation between the two sweep points around 0.95), wall clock and CPU-time based.

Timings on a shared or busy machine are noisy: run it on a quiet machine for final numbers.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TARGET_RECALL = 0.95
K = 10


def write_bin(path, arr, dtype):
    arr = np.ascontiguousarray(arr, dtype=dtype)
    with open(path, "wb") as f:
        np.array(arr.shape, dtype=np.uint32).tofile(f)
        arr.tofile(f)


def make_data(n, nq, dim, seed, clusters=64, rank=24):
    """Gaussian mixture with low-rank clusters: x = c + A z + noise."""
    rng = np.random.default_rng(seed)
    centers = rng.normal(0.0, 4.0, size=(clusters, dim)).astype(np.float32)
    bases = rng.normal(0.0, 1.0, size=(clusters, dim, rank)).astype(np.float32) / np.sqrt(rank)
    weights = rng.dirichlet(np.ones(clusters) * 2.0)

    def draw(m):
        lab = rng.choice(clusters, size=m, p=weights)
        z = rng.normal(0.0, 3.0, size=(m, rank)).astype(np.float32)
        x = centers[lab] + np.einsum("mdr,mr->md", bases[lab], z, optimize=True)
        x += rng.normal(0.0, 0.3, size=(m, dim)).astype(np.float32)
        return x.astype(np.float32)

    return draw(n), draw(nq)


def recall_at_k(found, gt):
    hits = 0
    for f, g in zip(found, gt):
        hits += len(set(f[:K].tolist()) & set(g[:K].tolist()))
    return hits / (len(gt) * K)


def qps_at(points, target=TARGET_RECALL, field="qps"):
    """QPS (`field`) at `target` recall, interpolating between the sweep points around it."""
    pts = sorted(points, key=lambda p: p["recall"])
    for a, b in zip(pts, pts[1:]):
        if a["recall"] < target <= b["recall"]:
            t = (target - a["recall"]) / (b["recall"] - a["recall"])
            return a[field] + t * (b[field] - a[field])
    if pts and pts[0]["recall"] >= target:
        return max(p[field] for p in pts if p["recall"] >= target)
    return None


def time_queries(fn, reps):
    """Median wall and CPU (all threads) seconds of `reps` calls, and the last result."""
    times, cpu = [], []
    out = None
    for _ in range(reps):
        t, c = time.perf_counter(), time.process_time()
        out = fn()
        times.append(time.perf_counter() - t)
        cpu.append(time.process_time() - c)
    return statistics.median(times), statistics.median(cpu), out


def run_hnswlib(base, queries, gt, threads, runs, efs, reps):
    import hnswlib

    builds, cpu_builds, sweeps = [], [], []
    for r in range(runs):
        index = hnswlib.Index(space="l2", dim=base.shape[1])
        index.init_index(max_elements=base.shape[0], M=16, ef_construction=200, random_seed=100 + r)
        index.set_num_threads(threads)
        t, c = time.perf_counter(), time.process_time()
        index.add_items(base, num_threads=threads)
        builds.append(time.perf_counter() - t)
        cpu_builds.append(time.process_time() - c)
        sweep = []
        for ef in efs:
            index.set_ef(max(ef, K))
            secs, cpu, (labels, _) = time_queries(
                lambda: index.knn_query(queries, k=K, num_threads=threads), reps)
            sweep.append(point("ef", ef, recall_at_k(labels, gt), len(queries), secs, cpu, threads))
        sweeps.append(sweep)
    return builds, cpu_builds, merge_sweeps(sweeps, "ef")


def run_faiss(base, queries, gt, threads, runs, efs, reps):
    import faiss

    faiss.omp_set_num_threads(threads)
    builds, cpu_builds, sweeps = [], [], []
    for _ in range(runs):
        index = faiss.IndexHNSWFlat(base.shape[1], 32)
        t, c = time.perf_counter(), time.process_time()
        index.add(base)
        builds.append(time.perf_counter() - t)
        cpu_builds.append(time.process_time() - c)
        sweep = []
        for ef in efs:
            index.hnsw.efSearch = max(ef, K)
            secs, cpu, (_, labels) = time_queries(lambda: index.search(queries, K), reps)
            sweep.append(point("ef", ef, recall_at_k(labels, gt), len(queries), secs, cpu, threads))
        sweeps.append(sweep)
    return builds, cpu_builds, merge_sweeps(sweeps, "ef")


def point(key, value, recall, nq, secs, cpu, threads):
    """One sweep point: wall-clock QPS and CPU-time QPS (queries per CPU second x threads)."""
    return {key: value, "recall": recall, "qps": nq / secs, "cpu_qps": nq / max(cpu / threads, 1e-9)}


def merge_sweeps(sweeps, key):
    """Per sweep point: median QPS over runs, median recall."""
    out = []
    for i, p in enumerate(sweeps[0]):
        out.append({
            key: p[key],
            "recall": statistics.median(s[i]["recall"] for s in sweeps),
            "qps": statistics.median(s[i]["qps"] for s in sweeps),
            "cpu_qps": statistics.median(s[i]["cpu_qps"] for s in sweeps),
        })
    return out


def build_weft():
    subprocess.run(
        ["cargo", "build", "--release", "-p", "weft-benches", "--example", "rnnd_bench"],
        cwd=ROOT, check=True)


def run_weft(paths, threads, runs, ls, extra):
    exe = os.path.join(ROOT, "target", "release", "examples", "rnnd_bench")
    builds, cpu_builds, sweeps, last = [], [], [], None
    for r in range(runs):
        cmd = [exe, "--base", paths["base"], "--query", paths["query"], "--gt", paths["gt"],
               "--threads", str(threads), "--ls", ",".join(map(str, ls)), "--seed", str(1 + r)] + extra
        res = subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True, text=True)
        last = json.loads(res.stdout)
        builds.append(last["build_s"])
        cpu_builds.append(last["build_cpu_s"])
        sweeps.append(last["sweep"])
    return builds, cpu_builds, merge_sweeps(sweeps, "l"), last


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--nq", type=int, default=10_000)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=3, help="builds per library (median reported)")
    ap.add_argument("--reps", type=int, default=3, help="timed passes per sweep point (median)")
    ap.add_argument("--seed", type=int, default=20251122)
    ap.add_argument("--skip", default="", help="comma list of hnswlib,faiss,weft to skip")
    ap.add_argument("--weft-args", default="", help="extra arguments for rnnd_bench (e.g. '--t2 10')")
    args = ap.parse_args()
    skip = set(filter(None, args.skip.split(",")))
    if "weft" not in skip:
        build_weft()  # first, so that a build failure costs nothing

    data_dir = os.path.join(ROOT, "target", "peers-data")
    os.makedirs(data_dir, exist_ok=True)
    tag = f"gm{args.n}x{args.dim}q{args.nq}s{args.seed}"
    paths = {k: os.path.join(data_dir, f"{tag}.{k}.{ext}") for k, ext in
             [("base", "fbin"), ("query", "fbin"), ("gt", "ibin")]}
    base, queries = make_data(args.n, args.nq, args.dim, args.seed)
    write_bin(paths["base"], base, np.float32)
    write_bin(paths["query"], queries, np.float32)
    import faiss
    faiss.omp_set_num_threads(max(args.threads, 1))
    flat = faiss.IndexFlatL2(args.dim)
    flat.add(base)
    _, gt = flat.search(queries, K)
    write_bin(paths["gt"], gt.astype(np.int32), np.int32)
    print(f"data: {args.n} x {args.dim}, {args.nq} queries, {args.threads} threads, "
          f"{args.runs} runs (medians)", file=sys.stderr)

    # Fine steps around recall 0.95, so that the interpolation is fair to every index.
    efs = [10, 16, 20, 24, 28, 32, 40, 48, 64, 96, 128, 192, 256, 384]
    ls = [10, 16, 20, 24, 28, 32, 40, 48, 64, 96, 128, 192, 256]
    rows = []
    if "hnswlib" not in skip:
        b, cb, s = run_hnswlib(base, queries, gt, args.threads, args.runs, efs, args.reps)
        rows.append(("hnswlib HNSW (M=16, efC=200)", b, cb, s))
        print("hnswlib", json.dumps({"build_s": b, "build_cpu_s": cb, "sweep": s}), file=sys.stderr)
    if "faiss" not in skip:
        b, cb, s = run_faiss(base, queries, gt, args.threads, args.runs, efs, args.reps)
        rows.append(("faiss IndexHNSWFlat(32) (efC=40)", b, cb, s))
        print("faiss", json.dumps({"build_s": b, "build_cpu_s": cb, "sweep": s}), file=sys.stderr)
    if "weft" not in skip:
        b, cb, s, last = run_weft(paths, args.threads, args.runs, ls, args.weft_args.split())
        cfg = f"S={last['s']}, R={last['r']}, T1={last['t1']}, T2={last['t2']}, K={last['degree']}"
        rows.append((f"weft RNN-Descent ({cfg}) + beam", b, cb, s))
        print("weft", json.dumps({"build_s": b, "build_cpu_s": cb, "sweep": s,
                                  "avg_degree": last["avg_degree"]}), file=sys.stderr)

    print(f"\n{args.n} x {args.dim} Gaussian mixture, {args.nq} queries, {args.threads} threads, "
          f"median of {args.runs} builds\n")
    fmt = lambda q: "not reached" if q is None else f"{q:,.0f}"
    print("| index | build s (median) | build CPU s | max recall@10 | QPS @ recall@10 0.95 "
          "| CPU-time QPS @ 0.95 |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, b, cb, s in rows:
        print(f"| {name} | {statistics.median(b):.2f} | {statistics.median(cb):.2f} | "
              f"{max(p['recall'] for p in s):.4f} | {fmt(qps_at(s))} | {fmt(qps_at(s, field='cpu_qps'))} |")
    print("\nQPS: wall clock, 2 threads. CPU-time QPS: queries per (process CPU seconds / threads), "
          "less sensitive to other load on the machine (it counts idle spinning of worker pools).")


if __name__ == "__main__":
    main()
