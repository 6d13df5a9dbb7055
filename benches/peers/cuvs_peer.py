#!/usr/bin/env python3
"""GPU peer of the benchmark harness: cuVS NN-descent and cuVS CAGRA on a dataset prepared by
weft-bench (the same base, queries and ground-truth files weft is measured on), written as
weft-bench/1 JSON lines (see benches/src/schema.rs), beside weft's GPU records.

    python cuvs_peer.py --data DIR [--data DIR ...] --out bench/peers.jsonl [--suite quick]
        [--algo nndescent,cagra] [--runs 2] [--build-budget 30] [--params 32,64,128]
        [--batch1 1000] [--passes 1] [--commit SHA] [--dtype f32|f16]
    python cuvs_peer.py --self-check    # no GPU: the record path on a tiny set, with numpy

The device run of the harness runs it (`device-pack/run.sh --bench-suite quick --peers`) with
cuVS installed from the wheels that `cargo xtask cuvs-wheels` carries to the GPU machine.

What is measured, per dataset:
- `cuvs nndescent (gpu)`: cuVS NN-descent, graph_degree 64 (intermediate 128, cuVS's default
  20 iterations); the build is timed from host vectors to the host k-NN graph (as weft's GPU
  builds are: host in, host out). Its graph is searched with cuVS's CAGRA search
  (`cagra.from_graph`), as weft searches its GPU k-NN graphs with its CAGRA search.
- `cuvs cagra (gpu)`: CAGRA with the NN-descent build, graph_degree 64, intermediate 128;
  timed from host vectors to the built index on the GPU.
- a warm-up build on the first 10,000 rows (CUDA context, library start-up), reported apart;
  --runs timed builds (another only while the builds so far took under --build-budget s).
- graph quality of each graph: recall of the first 10 / 64 neighbours of 1,000 sampled rows
  against their exact neighbours (brute force on the GPU), degrees, unreachable rows from row 0.
- the search sweep over itopk_size (search_width 1, cuVS's automatic algorithm choice),
  k = min(itopk, 100), at batch = all queries and batch 1 (one query per call): each timed from
  host queries to host ids (upload, search, download), like weft's GPU search; recall by ids
  against the prepared ground truth, exactly as ann_peers.py and weft's runner count it.
- with --dtype f16 or f32,f16 (label `cuvs <algo> (gpu, f16 data)`, `params.dtype` = "f16"): the same
  builds on the f32 data, then the graph is searched over an f16 copy of the base and the
  queries (`cagra.from_graph` with float16 arrays): half the bytes per distance, the
  counterpart of weft's `--search-precision f16` (weft reranks its list with exact f32
  distances; cuVS returns f16 distances, and recall is counted by ids either way). Values of
  magnitude >= 65520 overflow f16: the run fails with that error.
Device memory comes from an RMM pool (as cuVS's own benchmarks use); build memory is the
process's peak RSS (the device peak is not sampled: `device_peak_mib` is null).
"""
import argparse
import copy
import importlib.metadata
import json
import os
import socket
import statistics
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ann_peers import (  # noqa: E402
    cpu_model,
    graph_quality,
    peak_rss_mib,
    read_bin,
    reset_peak_rss,
    rss_mib,
)

WARMUP_ROWS = 10_000
GRAPH_DEGREE = 64
INTERMEDIATE_DEGREE = 128
# itopk_size: cuVS rounds it up to a multiple of 32, so the sweep starts at 32.
QUICK_ITOPK = "32,48,64,96,128,160,192,256,384"
FULL_ITOPK = "32,40,48,56,64,80,96,112,128,160,192,224,256,320,384,512"
ALGOS = ("nndescent", "cagra")
DTYPES = ("f32", "f16")
# The smallest magnitude that float16 rounds to infinity.
F16_OVERFLOW = 65520.0
# weft's metric names (meta.json) to cuVS's.
METRICS = {"l2": "sqeuclidean", "ip": "inner_product", "cosine": "cosine"}


def recall(found, gt, k):
    """Mean recall@k by ids: the share of each query's k true ids among its first k found
    (duplicates in `found` count once, as a set intersection)."""
    found = np.asarray(found)[:, :k].astype(np.int64)
    truth = np.asarray(gt)[: len(found), :k].astype(np.int64)
    hits = (truth[:, :, None] == found[:, None, :]).any(axis=2).sum()
    return float(hits) / (len(truth) * k)


def sweep_point(batch, param, k, queries, seconds, ids, gt):
    """One weft-bench/1 sweep point (ids: queries x k)."""
    return {"batch": batch, "param": float(param), "k": k, "queries": queries,
            "qps": queries / seconds, "recall_at_1": recall(ids, gt, 1),
            "recall_at_10": recall(ids, gt, 10) if k >= 10 else None,
            "recall_at_100": recall(ids, gt, 100) if k >= 100 else None,
            "distances_per_query": None}


class CuvsGpu:
    """The cuVS calls: builds and the CAGRA search, host arrays in and out."""

    library = "cuvs"

    def __init__(self):
        import cupy as cp
        import rmm
        from cuvs.common import Resources

        self.cp = cp
        try:
            rmm.mr.set_current_device_resource(
                rmm.mr.PoolMemoryResource(rmm.mr.CudaMemoryResource(), initial_pool_size=2**30))
            self.pool = True
        except Exception as e:  # an older rmm: plain cudaMalloc
            print(f"cuvs: no RMM pool ({e})", file=sys.stderr)
            self.pool = False
        self.res = Resources()

    def version(self):
        for dist in ("cuvs-cu13", "cuvs-cu12", "cuvs"):
            try:
                return importlib.metadata.version(dist)
            except importlib.metadata.PackageNotFoundError:
                pass
        import cuvs

        return getattr(cuvs, "__version__", "unknown")

    def gpu(self):
        rt = self.cp.cuda.runtime
        props = rt.getDeviceProperties(0)
        name = props["name"]
        return {"available": True,
                "device": {"name": name.decode() if isinstance(name, bytes) else name,
                           "compute_capability": [int(props["major"]), int(props["minor"])],
                           "driver_version": int(rt.driverGetVersion()),
                           "memory_mib": int(props["totalGlobalMem"]) >> 20},
                "kernel_mode": "cuVS wheels (precompiled)", "cubins": ["libcuvs"]}

    def nndescent_params(self):
        from cuvs.neighbors import nn_descent

        p = nn_descent.IndexParams(graph_degree=GRAPH_DEGREE,
                                   intermediate_graph_degree=INTERMEDIATE_DEGREE)
        return {"graph_degree": p.graph_degree,
                "intermediate_graph_degree": p.intermediate_graph_degree,
                "max_iterations": p.max_iterations,
                "termination_threshold": p.termination_threshold}

    def cagra_params(self):
        return {"graph_degree": GRAPH_DEGREE, "intermediate_graph_degree": INTERMEDIATE_DEGREE,
                "build_algo": "nn_descent", "nn_descent_niter": 20}

    def build_nndescent(self, x, metric):
        """The k-NN graph (host, rows x 64) and the dataset on the device for its search."""
        from cuvs.neighbors import nn_descent

        p = nn_descent.IndexParams(metric=METRICS[metric], graph_degree=GRAPH_DEGREE,
                                   intermediate_graph_degree=INTERMEDIATE_DEGREE)
        index = nn_descent.build(p, x, resources=self.res)
        self.res.sync()
        return np.asarray(index.graph, dtype=np.uint32)

    def searchable_graph(self, graph, x, metric):
        """A CAGRA index over a given graph (the NN-descent graph), to search it."""
        from cuvs.neighbors import cagra

        x_dev = self.cp.asarray(x)
        index = cagra.from_graph(graph, x_dev, metric=METRICS[metric], resources=self.res)
        self.res.sync()
        return (index, x_dev)

    def build_cagra(self, x, metric):
        from cuvs.neighbors import cagra

        p = cagra.IndexParams(metric=METRICS[metric], graph_degree=GRAPH_DEGREE,
                              intermediate_graph_degree=INTERMEDIATE_DEGREE,
                              build_algo="nn_descent", nn_descent_niter=20)
        index = cagra.build(p, x, resources=self.res)
        self.res.sync()
        return (index, None)

    def graph_of(self, built):
        return self.cp.asarray(built[0].graph).get().astype(np.uint32)

    def exact_knn(self, xs, rows, k, metric):
        """Exact neighbours of rows `rows` of `xs` by brute force on the GPU (chunks of rows)."""
        cp = self.cp
        xd = cp.asarray(xs)
        norms = (xd * xd).sum(axis=1)
        out = []
        for s in range(0, len(rows), 256):
            qd = xd[cp.asarray(rows[s:s + 256])]
            dots = qd @ xd.T
            score = norms[None, :] - 2.0 * dots if metric == "l2" else -dots
            part = cp.argpartition(score, k, axis=1)[:, :k]
            order = cp.take_along_axis(score, part, axis=1).argsort(axis=1)
            out.append(cp.take_along_axis(part, order, axis=1).get())
        return np.concatenate(out)

    def searcher(self, built, k, itopk, batch):
        """A function of host queries (batch x dim) to host ids (batch x k) for one setting."""
        from cuvs.neighbors import cagra

        cp, res, index = self.cp, self.res, built[0]
        sp = cagra.SearchParams(itopk_size=itopk)
        nb = cp.empty((batch, k), dtype=cp.uint32)
        dist = cp.empty((batch, k), dtype=cp.float32)

        def search(q):
            qd = cp.asarray(q)
            cagra.search(sp, index, qd, k, neighbors=nb, distances=dist, resources=res)
            res.sync()
            return nb.get()

        return search


class NumpyStandIn:
    """--self-check: exact search and graphs with numpy in place of cuVS (no GPU)."""

    library = "cuvs"
    pool = False

    def version(self):
        return "self-check"

    def gpu(self):
        return {"available": False, "reason": "cuvs_peer.py --self-check (numpy stand-in)"}

    def nndescent_params(self):
        return {"graph_degree": GRAPH_DEGREE, "intermediate_graph_degree": INTERMEDIATE_DEGREE}

    def cagra_params(self):
        return {"graph_degree": GRAPH_DEGREE, "intermediate_graph_degree": INTERMEDIATE_DEGREE,
                "build_algo": "nn_descent"}

    def exact_knn(self, xs, rows, k, metric):
        d = ((xs[rows, None, :] - xs[None, :, :]) ** 2).sum(-1) if metric == "l2" \
            else -(xs[rows] @ xs.T)
        return np.argsort(d, axis=1)[:, :k]

    def build_nndescent(self, x, metric):
        deg = min(GRAPH_DEGREE, len(x) - 1)
        return self.exact_knn(x, np.arange(len(x)), deg + 1, metric)[:, 1:].astype(np.uint32)

    def searchable_graph(self, graph, x, metric):
        return (graph, x)

    def build_cagra(self, x, metric):
        return (self.build_nndescent(x, metric), x)

    def graph_of(self, built):
        return built[0]

    def searcher(self, built, k, itopk, batch):
        x = built[1]

        def search(q):
            qf, xf = q.astype(np.float32), x.astype(np.float32)
            d = ((qf[:, None, :] - xf[None, :, :]) ** 2).sum(-1)
            return np.argsort(d, axis=1)[:, :k]

        return search


def timed_builds(build, x, metric, runs, budget, tag):
    """Warm-up on the first rows, then timed builds: (warm-up s, warm-up rows, [s], result)."""
    warm_rows = min(WARMUP_ROWS, len(x))
    t = time.perf_counter()
    build(x[:warm_rows], metric)
    warm_s = time.perf_counter() - t
    print(f"{tag}: warm-up on {warm_rows} rows {warm_s:.2f} s", file=sys.stderr)
    times, built = [], None
    for r in range(max(1, runs)):
        if r > 0 and budget is not None and sum(times) >= budget:
            break
        built = None
        t = time.perf_counter()
        built = build(x, metric)
        times.append(time.perf_counter() - t)
        print(f"{tag}: build {r + 1} of {runs}: {times[-1]:.2f} s", file=sys.stderr)
    return warm_s, warm_rows, times, built


def search_sweep(lib, built, q, gt, itopks, batch1, passes, tag):
    """The sweep at batch = all queries, then batch 1 on the first `batch1` queries."""
    nq, kcap = len(q), min(100, gt.shape[1])
    points = []
    for itopk in itopks:
        k = min(itopk, kcap)
        search = lib.searcher(built, k, itopk, nq)
        # An untimed pass per setting: cuVS compiles (JIT-links) a kernel variant on its first
        # use, which took seconds inside a timed pass.
        search(q)
        times = []
        for _ in range(max(1, passes)):
            t = time.perf_counter()
            ids = search(q)
            times.append(time.perf_counter() - t)
        p = sweep_point(nq, itopk, k, nq, statistics.median(times), ids, gt)
        print(f"{tag}: itopk={itopk} batch {nq}: {p['qps']:.0f} QPS, recall@10 "
              f"{p['recall_at_10']}", file=sys.stderr)
        points.append(p)
    m = min(batch1, nq)
    for itopk in itopks if m else []:
        k = min(itopk, kcap)
        search = lib.searcher(built, k, itopk, 1)
        search(q[:1])
        found = []
        t = time.perf_counter()
        for i in range(m):
            found.append(search(q[i:i + 1])[0])
        points.append(sweep_point(1, itopk, k, m, time.perf_counter() - t, found, gt[:m]))
    if m:
        print(f"{tag}: batch-1 sweep on {m} queries done", file=sys.stderr)
    return points


def half_copies(x, q):
    """float16 copies of the base and the queries; a ValueError when a value overflows f16."""
    for name, arr in (("base", x), ("queries", q)):
        big = float(np.abs(arr).max()) if arr.size else 0.0
        if not big < F16_OVERFLOW:
            raise ValueError(f"--dtype f16: the {name} holds a value of magnitude {big:g}, "
                             f"which overflows float16 (>= {F16_OVERFLOW:g})")
    return (np.ascontiguousarray(x, dtype=np.float16),
            np.ascontiguousarray(q, dtype=np.float16))


def run_dataset(lib, data, a, out):
    """Every algorithm of --algo on the prepared folder `data`, one record each, appended."""
    with open(os.path.join(data, "meta.json")) as f:
        meta = json.load(f)
    x = np.ascontiguousarray(read_bin(os.path.join(data, meta["base"])), dtype=np.float32)
    q = np.ascontiguousarray(read_bin(os.path.join(data, meta["queries"])), dtype=np.float32)
    gt = read_bin(os.path.join(data, meta["gt"]))
    itopks = [int(v) for v in a.params.split(",")]
    for algo in a.algo.split(","):
        tag = f"[{meta['name']}] cuvs {algo}"
        reset_peak_rss()
        rss_before = rss_mib()
        rec = {
            "schema": "weft-bench/1",
            "suite": a.suite,
            "env": {"commit": a.commit, "timestamp": int(time.time()),
                    "host": socket.gethostname(), "cpu": cpu_model(), "cpus": os.cpu_count(),
                    "gpu": lib.gpu()},
            "dataset": {"name": meta["name"], "source": meta["source"], "n": meta["n"],
                        "nq": meta["nq"], "dim": meta["dim"], "dtype": meta["dtype"],
                        "metric": meta["metric"], "gt_k": meta["gt_k"]},
            "algorithm": {"library": lib.library, "version": lib.version(), "name": algo,
                          "backend": "gpu", "params": {}, "threads": 1,
                          "search_param": "itopk"},
            "build": None, "memory": None, "graph": None, "sweep": [], "error": None,
        }
        # One record per --dtype over the same build: its search on f32 or on f16 copies.
        dtypes = a.dtype.split(",")
        recs = []
        try:
            if meta["metric"] not in METRICS:
                raise ValueError(f"metric {meta['metric']} has no cuVS name")
            params = lib.nndescent_params() if algo == "nndescent" else lib.cagra_params()
            params.update({"metric": METRICS[meta["metric"]], "input": "host",
                           "rmm_pool": lib.pool, "dtype": dtypes[0]})
            rec["algorithm"]["params"] = params
            build = lib.build_nndescent if algo == "nndescent" else lib.build_cagra
            warm_s, warm_rows, times, built = timed_builds(
                build, x, meta["metric"], a.runs, a.build_budget, tag)
            rec["build"] = {"runs_s": times, "median_s": statistics.median(times),
                            "min_s": min(times), "max_s": max(times), "warmup_s": warm_s,
                            "warmup_rows": warm_rows}
            rec["memory"] = {"peak_rss_mib": peak_rss_mib(), "rss_before_mib": rss_before,
                             "device_peak_mib": None}
            graph = built if algo == "nndescent" else lib.graph_of(built)
            ids = graph.astype(np.int64)
            ids[ids >= len(x)] = -1  # cuVS marks missing neighbours with the largest uint32
            rec["graph"] = graph_quality(ids, x, meta["metric"], exact_knn=lib.exact_knn)
            print(f"{tag}: graph recall@10 {rec['graph']['recall_at_10']:.4f}", file=sys.stderr)
            for dtype in dtypes:
                r = copy.deepcopy(rec)
                r["algorithm"]["params"]["dtype"] = dtype
                dtag = f"{tag} ({dtype})"
                try:
                    if dtype == "f16":
                        # The graph built on f32, searched over f16 copies of base and queries.
                        xs, qs = half_copies(x, q)
                        searched = lib.searchable_graph(graph, xs, meta["metric"])
                    elif algo == "nndescent":
                        qs, searched = q, lib.searchable_graph(graph, x, meta["metric"])
                    else:
                        qs, searched = q, built
                    r["sweep"] = search_sweep(lib, searched, qs, gt, itopks, a.batch1,
                                              a.passes, dtag)
                except Exception as e:  # this dtype's record says why
                    r["error"] = f"{type(e).__name__}: {e}"
                    print(f"{dtag}: failed: {r['error']}", file=sys.stderr)
                searched = None
                recs.append(r)
        except Exception as e:  # the record says why, the other algorithms still run
            rec["error"] = f"{type(e).__name__}: {e}"
            print(f"{tag}: failed: {rec['error']}", file=sys.stderr)
            recs = [rec]
        built = None
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        with open(out, "a") as f:
            for r in recs:
                f.write(json.dumps(r) + "\n")


def write_tiny_prepared(folder, n=300, nq=20, dim=8, seed=3):
    """A prepared-dataset folder (meta.json, base/queries .fbin, exact gt .ibin) for --self-check."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, dim)).astype(np.float32)
    q = rng.standard_normal((nq, dim)).astype(np.float32)
    gt = np.argsort(((q[:, None, :] - x[None, :, :]) ** 2).sum(-1), axis=1)[:, :100]

    def write(name, arr, dtype):
        with open(os.path.join(folder, name), "wb") as f:
            np.array(arr.shape, dtype="<u4").tofile(f)
            arr.astype(dtype).tofile(f)

    write("base.fbin", x, "<f4")
    write("queries.fbin", q, "<f4")
    write("gt.ibin", gt, "<u4")
    meta = {"name": "self-check", "source": "cuvs_peer.py --self-check", "metric": "l2",
            "dtype": "f32", "n": n, "nq": nq, "dim": dim, "base": "base.fbin",
            "queries": "queries.fbin", "gt": "gt.ibin", "gt_k": 100}
    with open(os.path.join(folder, "meta.json"), "w") as f:
        json.dump(meta, f)


# The keys of a weft-bench/1 record and of its parts (benches/src/schema.rs).
RECORD_KEYS = {"schema", "suite", "env", "dataset", "algorithm", "build", "memory", "graph",
               "sweep", "error"}
POINT_KEYS = {"batch", "param", "k", "queries", "qps", "recall_at_1", "recall_at_10",
              "recall_at_100", "distances_per_query"}


def self_check(a):
    """Runs the record path with the numpy stand-in on a tiny set; prints the records."""
    with tempfile.TemporaryDirectory() as tmp:
        write_tiny_prepared(tmp)
        out = os.path.join(tmp, "peers.jsonl")
        a.params, a.batch1, a.runs = "32,64", 5, 1
        a.dtype = ",".join(DTYPES)
        run_dataset(NumpyStandIn(), tmp, a, out)
        with open(out) as f:
            lines = f.read().splitlines()
    assert len(lines) == len(DTYPES) * len(a.algo.split(",")), lines
    assert sorted(json.loads(x)["algorithm"]["params"]["dtype"] for x in lines) == \
        sorted(DTYPES * len(a.algo.split(","))), lines
    for line in lines:
        r = json.loads(line)
        assert set(r) == RECORD_KEYS, sorted(r)
        assert r["error"] is None, r["error"]
        assert r["algorithm"]["library"] == "cuvs" and r["algorithm"]["backend"] == "gpu"
        assert {p["batch"] for p in r["sweep"]} == {1, 20}
        for p in r["sweep"]:
            assert set(p) == POINT_KEYS, sorted(p)
            assert p["recall_at_10"] == 1.0, p  # exact stand-in search
        assert r["graph"]["recall_at_10"] == 1.0
        print(line)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", action="append", default=[],
                    help="a folder prepared by weft-bench (repeatable)")
    ap.add_argument("--out", help="JSON-lines file to append to")
    ap.add_argument("--algo", default=",".join(ALGOS), help="nndescent,cagra (default: both)")
    ap.add_argument("--suite", default="quick")
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("--runs", type=int, default=None, help="timed builds (quick 2, full 3)")
    ap.add_argument("--build-budget", type=float, default=None,
                    help="another timed build only while the builds so far took less than "
                         "this many seconds (default: 30 for quick)")
    ap.add_argument("--params", default=None,
                    help="itopk_size values (default: a dense sweep for the suite)")
    ap.add_argument("--batch1", type=int, default=None,
                    help="queries timed one per call (quick 1000, full all)")
    ap.add_argument("--passes", type=int, default=None, help="timed passes (quick 1, full 3)")
    ap.add_argument("--dtype", default="f32",
                    help="the element types searched, one record each over the same build: "
                         "f32, f16 (the graph built on f32, searched over f16 copies of the "
                         "base and the queries) or f32,f16")
    ap.add_argument("--self-check", action="store_true",
                    help="no GPU: the record path with a numpy stand-in; prints the records")
    a = ap.parse_args()
    for algo in a.algo.split(","):
        if algo not in ALGOS:
            ap.error(f"unknown algorithm {algo} (nndescent, cagra)")
    for dtype in a.dtype.split(","):
        if dtype not in DTYPES:
            ap.error(f"unknown --dtype {dtype} (f32, f16)")
    quick = a.suite == "quick"
    if a.runs is None:
        a.runs = 2 if quick else 3
    if a.build_budget is None and quick:
        a.build_budget = 30.0
    if a.params is None:
        a.params = QUICK_ITOPK if quick else FULL_ITOPK
    if a.batch1 is None:
        a.batch1 = 1000 if quick else 10**9
    if a.passes is None:
        a.passes = 1 if quick else 3
    if a.self_check:
        self_check(a)
        return
    if not a.data or not a.out:
        ap.error("--data and --out are needed (or --self-check)")
    lib = CuvsGpu()
    for d in a.data:
        run_dataset(lib, d, a, a.out)


if __name__ == "__main__":
    main()
