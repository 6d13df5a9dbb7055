#!/usr/bin/env python3
"""CPU peers of the benchmark harness: hnswlib, faiss-cpu (IndexHNSWFlat) and pynndescent on a
dataset prepared by weft-bench (the same base, queries and ground-truth files weft is measured
on), written as weft-bench/1 JSON lines (see benches/src/schema.rs).

    python ann_peers.py --data target/bench-data/prepared/sift-like-100k [--data DIR ...] \
        --lib hnswlib --out bench-out/peers.jsonl [--threads 2] [--runs 2] [--params 10,16,32]

`cargo xtask bench --peers` runs it once per library (every dataset in one process, so numba
compiles pynndescent once) in the pinned virtual environment target/peers-venv. The peak RSS of
each dataset is the process's high-water mark, reset before the dataset is loaded.

Per library: a warm-up build on the first 10,000 rows (numba JIT for pynndescent), reported
apart; --runs timed builds (median, min, max); the search sweep at batch = all queries (the
--threads threads) and batch = 1 (one query per call, one thread); recall@1/@10/@100 against the
prepared ground truth ids, exactly as weft's runner counts them (ids only, k = min(100, param)).
Graph quality where the library exposes its graph (pynndescent's k-NN graph): recall of the first
10 / k neighbours of 1,000 sampled vertices against their exact neighbours (faiss brute force,
ids only), degrees and unreachable vertices from vertex 0.
"""
import argparse
import importlib.metadata
import json
import os
import resource
import socket
import statistics
import sys
import time

import numpy as np

WARMUP_ROWS = 10_000


def read_bin(path):
    dtype = {"fbin": "<f4", "u8bin": "u1", "i8bin": "i1", "ibin": "<u4"}[path.rsplit(".", 1)[1]]
    with open(path, "rb") as f:
        rows, dim = np.fromfile(f, dtype="<u4", count=2)
        return np.fromfile(f, dtype=dtype, count=int(rows) * int(dim)).reshape(int(rows), int(dim))


def rss_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return float("nan")


def peak_rss_mib():
    """The resident-set high-water mark (VmHWM, reset by reset_peak_rss), else ru_maxrss."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def reset_peak_rss():
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:
        pass


def recall(found, gt, k):
    """Mean recall@k by ids (found: queries x >= k ids, gt: queries x >= k ids)."""
    hits = 0
    for f, g in zip(found, gt):
        hits += len(set(int(x) for x in f[:k]) & set(int(x) for x in g[:k]))
    return hits / (len(gt) * k)


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "unknown CPU"


class Lib:
    """One library: build(x) -> index, search(index, q, k, param, threads) -> ids."""

    search_param = "ef"

    def __init__(self, metric, threads):
        self.metric, self.threads = metric, threads


class Hnswlib(Lib):
    name, algo = "hnswlib", "hnsw"
    params = {"M": 16, "ef_construction": 100}

    def build(self, x):
        import hnswlib

        space = {"l2": "l2", "ip": "ip", "cosine": "cosine"}[self.metric]
        index = hnswlib.Index(space=space, dim=x.shape[1])
        index.init_index(max_elements=len(x), M=self.params["M"],
                         ef_construction=self.params["ef_construction"], random_seed=100)
        index.add_items(x, np.arange(len(x)), num_threads=self.threads)
        return index

    def search(self, index, q, k, param, threads):
        index.set_ef(max(int(param), k))
        ids, _ = index.knn_query(q, k=k, num_threads=threads)
        return ids


class FaissHnsw(Lib):
    name, algo = "faiss", "hnsw"
    params = {"M": 16, "efConstruction": 100}

    def build(self, x):
        import faiss

        faiss.omp_set_num_threads(self.threads)
        if self.metric == "l2":
            index = faiss.IndexHNSWFlat(x.shape[1], self.params["M"])
        else:  # ip, and cosine on unit-normalised rows
            index = faiss.IndexHNSWFlat(x.shape[1], self.params["M"], faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = self.params["efConstruction"]
        index.add(self.prep(x))
        return index

    def prep(self, x):
        if self.metric == "cosine":
            x = x / np.maximum(np.linalg.norm(x, axis=1, keepdims=True), 1e-30)
        return np.ascontiguousarray(x, dtype=np.float32)

    def search(self, index, q, k, param, threads):
        import faiss

        faiss.omp_set_num_threads(threads)
        index.hnsw.efSearch = max(int(param), k)
        _, ids = index.search(self.prep(q), k)
        return ids


class PyNNDescent(Lib):
    name, algo = "pynndescent", "nndescent"
    params = {"n_neighbors": 32, "random_state": 42}
    search_param = "epsilon"

    def build(self, x):
        import numba
        from pynndescent import NNDescent

        numba.set_num_threads(self.threads)
        metric = {"l2": "euclidean", "ip": "dot", "cosine": "cosine"}[self.metric]
        index = NNDescent(x, metric=metric, n_jobs=self.threads, **self.params)
        index.prepare()
        return index

    def search(self, index, q, k, param, threads):
        import numba

        numba.set_num_threads(threads)
        ids, _ = index.query(q, k=k, epsilon=float(param))
        return ids

    def graph(self, index):
        return index.neighbor_graph[0]


LIBS = {"hnswlib": Hnswlib, "faiss": FaissHnsw, "pynndescent": PyNNDescent}
DIST_NAME = {"hnswlib": "hnswlib", "faiss": "faiss-cpu", "pynndescent": "pynndescent"}


def faiss_exact(xs, rows, k, metric):
    """The exact k nearest ids of rows `rows` of `xs` (cosine rows already normalised), by
    faiss brute force."""
    import faiss

    flat = faiss.IndexFlatL2(xs.shape[1]) if metric == "l2" else faiss.IndexFlatIP(xs.shape[1])
    flat.add(xs)
    _, exact = flat.search(xs[rows], k)
    return exact


def graph_quality(graph, x, metric, sample=1000, seed=7, exact_knn=faiss_exact):
    """Recall@10 and @k of a k-NN graph (self excluded) on sampled rows; degrees; reachability.
    `exact_knn(xs, rows, k, metric)` gives the exact neighbours (default: faiss brute force)."""
    n, k = graph.shape
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.choice(n, size=min(sample, n), replace=False))
    xs = np.ascontiguousarray(x, dtype=np.float32)
    if metric == "cosine":
        xs = xs / np.maximum(np.linalg.norm(xs, axis=1, keepdims=True), 1e-30)
    exact = exact_knn(xs, rows, k + 1, metric)
    truth = [[u for u in e if u != v][:k] for v, e in zip(rows, exact)]
    found = [[u for u in graph[v] if u != v and u >= 0] for v in rows]
    r10 = recall(found, truth, min(10, k))
    rk = recall(found, truth, k)
    valid = graph[graph >= 0]
    indeg = np.bincount(valid, minlength=n)
    outdeg = (graph >= 0).sum(1)
    seen = np.zeros(n, dtype=bool)
    seen[0] = True
    frontier = np.array([0])
    while len(frontier):
        nb = graph[frontier].ravel()
        nb = np.unique(nb[nb >= 0])
        nb = nb[~seen[nb]]
        seen[nb] = True
        frontier = nb
    return {
        "recall_at_10": r10, "recall_k": int(k), "recall_at_k": rk, "sample": len(rows),
        "out_degree": [float(outdeg.min()), float(outdeg.mean()), float(outdeg.max())],
        "in_degree": [float(indeg.min()), float(indeg.mean()), float(indeg.max())],
        "unreachable": int(n - seen.sum()), "scc_count": None,
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", required=True, action="append",
                    help="a folder prepared by weft-bench (repeatable)")
    ap.add_argument("--lib", required=True, choices=sorted(LIBS))
    ap.add_argument("--out", required=True, help="JSON-lines file to append to")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--runs", type=int, default=2, help="timed builds (at most)")
    ap.add_argument("--build-budget", type=float, default=None,
                    help="start a further timed build only while the builds so far took less "
                         "than this many seconds (as weft-bench's quick suite)")
    ap.add_argument("--params", default="10,16,32,64,128,256",
                    help="search parameter values (ef; pynndescent maps them to epsilon)")
    ap.add_argument("--batch1", type=int, default=10**9,
                    help="queries timed one per call (default: all)")
    ap.add_argument("--passes", type=int, default=1)
    ap.add_argument("--suite", default="quick")
    ap.add_argument("--commit", default="unknown")
    a = ap.parse_args()
    for d in a.data:
        run_dataset(d, a)


def run_dataset(data, a):
    reset_peak_rss()
    with open(os.path.join(data, "meta.json")) as f:
        meta = json.load(f)
    x = read_bin(os.path.join(data, meta["base"])).astype(np.float32)
    q = read_bin(os.path.join(data, meta["queries"])).astype(np.float32)
    gt = read_bin(os.path.join(data, meta["gt"]))
    lib = LIBS[a.lib](meta["metric"], a.threads)
    kcap = min(100, gt.shape[1], len(x))
    if a.lib == "pynndescent":
        # epsilon plays the part of the beam width: k = 10 over its useful range, then k = 100
        # (recall@100) at two settings.
        points = [(e, min(10, kcap)) for e in (0.0, 0.02, 0.05, 0.1, 0.2, 0.3)]
        points += [(e, kcap) for e in (0.1, 0.3)]
    else:
        points = [(int(v), min(int(v), kcap)) for v in a.params.split(",")]
    rss_before = rss_mib()

    tag = f"[{meta['name']}] {a.lib}"
    warm_rows = min(WARMUP_ROWS, len(x))
    t = time.perf_counter()
    lib.build(x[:warm_rows])
    warm_s = time.perf_counter() - t
    print(f"{tag}: warm-up on {warm_rows} rows {warm_s:.2f} s", file=sys.stderr)
    runs, index = [], None
    for r in range(max(1, a.runs)):
        if r > 0 and a.build_budget is not None and sum(runs) >= a.build_budget:
            break
        index = None
        t = time.perf_counter()
        index = lib.build(x)
        runs.append(time.perf_counter() - t)
        print(f"{tag}: build {r + 1} of {a.runs}: {runs[-1]:.2f} s", file=sys.stderr)
    peak = peak_rss_mib()
    graph = None
    if hasattr(lib, "graph"):
        graph = graph_quality(lib.graph(index), x, meta["metric"])
        print(f"{tag}: graph recall@10 {graph['recall_at_10']:.4f}", file=sys.stderr)

    sweep = []
    nq = len(q)
    lib.search(index, q[:100], points[0][1], points[0][0], a.threads)  # warm pass
    for v, k in points:
        times = []
        for _ in range(max(1, a.passes)):
            t = time.perf_counter()
            ids = lib.search(index, q, k, v, a.threads)
            times.append(time.perf_counter() - t)
        point = {"batch": nq, "param": float(v), "k": k, "queries": nq,
                 "qps": nq / statistics.median(times), "recall_at_1": recall(ids, gt, 1),
                 "recall_at_10": recall(ids, gt, 10) if k >= 10 else None,
                 "recall_at_100": recall(ids, gt, 100) if k >= 100 else None,
                 "distances_per_query": None}
        print(f"{tag}: {lib.search_param}={v} batch {nq}: {point['qps']:.0f} QPS, "
              f"recall@10 {point['recall_at_10']}", file=sys.stderr)
        sweep.append(point)
    m = min(a.batch1, nq)
    for v, k in points if m else []:
        found = []
        t = time.perf_counter()
        for i in range(m):
            found.append(lib.search(index, q[i:i + 1], k, v, 1)[0])
        s = time.perf_counter() - t
        sweep.append({"batch": 1, "param": float(v), "k": k, "queries": m, "qps": m / s,
                      "recall_at_1": recall(found, gt[:m], 1),
                      "recall_at_10": recall(found, gt[:m], 10) if k >= 10 else None,
                      "recall_at_100": recall(found, gt[:m], 100) if k >= 100 else None,
                      "distances_per_query": None})
    print(f"{tag}: batch-1 sweep on {m} queries done", file=sys.stderr)

    rec = {
        "schema": "weft-bench/1",
        "suite": a.suite,
        "env": {"commit": a.commit, "timestamp": int(time.time()), "host": socket.gethostname(),
                "cpu": cpu_model(), "cpus": os.cpu_count(),
                "gpu": {"available": False, "reason": "CPU peer library"}},
        "dataset": {"name": meta["name"], "source": meta["source"], "n": meta["n"],
                    "nq": meta["nq"], "dim": meta["dim"], "dtype": meta["dtype"],
                    "metric": meta["metric"], "gt_k": meta["gt_k"]},
        "algorithm": {"library": a.lib, "version": importlib.metadata.version(DIST_NAME[a.lib]),
                      "name": lib.algo, "backend": "cpu", "params": lib.params,
                      "threads": a.threads, "search_param": lib.search_param},
        "build": {"runs_s": runs, "median_s": statistics.median(runs), "min_s": min(runs),
                  "max_s": max(runs), "warmup_s": warm_s, "warmup_rows": warm_rows},
        "memory": {"peak_rss_mib": peak, "rss_before_mib": rss_before, "device_peak_mib": None},
        "graph": graph,
        "sweep": sweep,
        "error": None,
    }
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "a") as f:
        f.write(json.dumps(rec) + "\n")


if __name__ == "__main__":
    main()
