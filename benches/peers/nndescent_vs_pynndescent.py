#!/usr/bin/env python3
"""weft-nndescent vs pynndescent: build time and graph recall@k on the same data, one command.

    python3 benches/peers/nndescent_vs_pynndescent.py [--rows 100000] [--dim 128] [--k 32]
        [--threads 2] [--repeats 3] [--data FILE.fbin] [--sample 1000]

Run from the workspace root. It
  1. creates the venv target/peers-venv with pynndescent + numpy if missing and re-executes
     itself inside it;
  2. writes (or reuses) a seeded SIFT-like set target/peers/sift_like_<rows>x<dim>.fbin
     (u32 rows, u32 dim, f32 row-major): a Gaussian mixture whose clusters live on random
     16-dimensional subspaces, plus isotropic noise, clipped at 0 (low intrinsic dimension,
     like SIFT); or reads --data;
  3. computes exact k neighbours (self excluded) of a seeded sample of points by numpy brute
     force and writes them to target/peers/gt_*.bin for the Rust side;
  4. runs pynndescent (JIT warm-up on a tiny set and one untimed full-size build first) --repeats times with
     n_neighbors = k + 1 (pynndescent lists the point itself first; it is dropped, so both sides
     return k non-self neighbours) and n_jobs = --threads;
  5. builds and runs the weft example (release) --repeats times with --threads;
  6. prints medians as a markdown table row (time ratio pynndescent / weft included).

Timings on a machine shared with other work are noisy; medians of --repeats runs soften that.
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
VENV = os.path.join(ROOT, "target", "peers-venv")
PY = os.path.join(VENV, "bin", "python")


def ensure_venv():
    if os.path.abspath(sys.prefix) == os.path.abspath(VENV) or "--no-venv" in sys.argv:
        return
    if not os.path.exists(PY):
        subprocess.check_call([sys.executable, "-m", "venv", VENV])
    probe = subprocess.run([PY, "-c", "import pynndescent, numpy"], capture_output=True)
    if probe.returncode != 0:
        subprocess.check_call([PY, "-m", "pip", "install", "-q", "pynndescent", "numpy"])
    os.execv(PY, [PY] + sys.argv)


def sift_like(rows, dim, seed):
    import numpy as np

    rng = np.random.default_rng(seed)
    clusters, latent = 64, 16
    centers = rng.uniform(0.0, 40.0, size=(clusters, dim)).astype(np.float32)
    bases = rng.normal(0.0, 6.0, size=(clusters, latent, dim)).astype(np.float32)
    label = rng.integers(0, clusters, size=rows)
    out = np.empty((rows, dim), dtype=np.float32)
    step = 20000
    for s in range(0, rows, step):
        e = min(rows, s + step)
        z = rng.normal(size=(e - s, latent)).astype(np.float32)
        lab = label[s:e]
        x = centers[lab] + np.einsum("nl,nld->nd", z, bases[lab])
        x += rng.normal(0.0, 1.5, size=x.shape).astype(np.float32)
        out[s:e] = np.maximum(x, 0.0)
    return out


def write_fbin(path, x):
    import numpy as np

    with open(path, "wb") as f:
        np.array(x.shape, dtype="<u4").tofile(f)
        x.astype("<f4").tofile(f)


def read_fbin(path):
    import numpy as np

    with open(path, "rb") as f:
        rows, dim = np.fromfile(f, dtype="<u4", count=2)
        return np.fromfile(f, dtype="<f4", count=int(rows) * int(dim)).reshape(int(rows), int(dim))


def exact_sample(x, sample, k):
    """Exact k nearest (squared L2, self excluded) of the sample rows, float64 brute force."""
    import numpy as np

    xd = x.astype(np.float64)
    norms = (xd * xd).sum(1)
    out = np.empty((len(sample), k), dtype=np.uint32)
    for s in range(0, len(sample), 100):
        ids = sample[s : s + 100]
        q = xd[ids]
        d = norms[None, :] - 2.0 * q @ xd.T + (q * q).sum(1)[:, None]
        d[np.arange(len(ids)), ids] = np.inf
        part = np.argpartition(d, k, axis=1)[:, :k]
        order = np.argsort(np.take_along_axis(d, part, 1), axis=1)
        out[s : s + len(ids)] = np.take_along_axis(part, order, 1)
    return out


def recall(graph_rows, truth):
    hits = 0
    for g, t in zip(graph_rows, truth):
        hits += len(set(int(v) for v in g) & set(int(v) for v in t))
    return hits / truth.size


def run_pynndescent(x, k, threads, sample, truth, repeats, seed):
    import numpy as np
    import numba
    from pynndescent import NNDescent

    numba.set_num_threads(threads)
    # JIT warm-up, excluded from timing: a tiny set first, then one untimed build on the full
    # set (some numba paths compile only at full size: a first full build is ~2x slower).
    NNDescent(x[:2000], n_neighbors=k + 1, metric="euclidean", n_jobs=threads, random_state=seed)
    NNDescent(x, n_neighbors=k + 1, metric="euclidean", n_jobs=threads, random_state=seed + 99)
    times, recalls = [], []
    for r in range(repeats):
        t0 = time.perf_counter()
        index = NNDescent(x, n_neighbors=k + 1, metric="euclidean", n_jobs=threads,
                          random_state=seed + r)
        ids, _ = index.neighbor_graph
        times.append(time.perf_counter() - t0)
        rows = []
        for v in sample:
            row = [int(u) for u in ids[v] if u != v and u >= 0][:k]
            rows.append(row)
        recalls.append(recall(rows, truth))
        del index
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    return times, recalls, rss


def run_weft(data_path, gt_path, k, threads, repeats, seed, params, exe=None):
    if exe is None:
        subprocess.check_call(["cargo", "build", "--release", "-q", "-p", "weft-benches",
                               "--example", "nndescent_bench"], cwd=ROOT)
        exe = os.path.join(ROOT, "target", "release", "examples", "nndescent_bench")
    out = []
    for r in range(repeats):
        cmd = [exe, data_path, gt_path, "--k", str(k), "--threads", str(threads),
               "--seed", str(seed + r)]
        if params:
            cmd += ["--params", params]
        res = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT)
        out.append(json.loads(res.stdout.strip().splitlines()[-1]))
    return out


def main():
    ensure_venv()
    import numpy as np

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--k", type=int, default=32)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--sample", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--data", help="an existing .fbin instead of the generated set")
    ap.add_argument("--params", help="NnDescentParams JSON for weft")
    ap.add_argument("--skip-peer", action="store_true", help="run weft only")
    ap.add_argument("--weft-bin", help="a prebuilt nndescent_bench (default: cargo build it)")
    ap.add_argument("--no-venv", action="store_true",
                    help="use this interpreter as is (pynndescent + numpy importable)")
    a = ap.parse_args()

    work = os.path.join(ROOT, "target", "peers")
    os.makedirs(work, exist_ok=True)
    if a.data:
        data_path = os.path.abspath(a.data)
        x = read_fbin(data_path)
        name = os.path.basename(data_path)
    else:
        name = f"sift_like_{a.rows}x{a.dim}.fbin"
        data_path = os.path.join(work, name)
        if not os.path.exists(data_path):
            write_fbin(data_path, sift_like(a.rows, a.dim, 12345))
        x = read_fbin(data_path)
    n, d = x.shape
    rng = np.random.default_rng(777)
    sample = np.sort(rng.choice(n, size=min(a.sample, n), replace=False)).astype(np.uint32)
    gt_path = os.path.join(work, f"gt_{name}_{a.k}_{len(sample)}.bin")
    if not os.path.exists(gt_path):
        truth = exact_sample(x, sample, a.k)
        with open(gt_path, "wb") as f:
            np.array([len(sample), a.k], dtype="<u4").tofile(f)
            sample.astype("<u4").tofile(f)
            truth.astype("<u4").tofile(f)
    else:
        g = np.fromfile(gt_path, dtype="<u4")
        truth = g[2 + len(sample):].reshape(len(sample), a.k)

    py_t = py_r = None
    py_rss = float("nan")
    if not a.skip_peer:
        py_times, py_recalls, py_rss = run_pynndescent(x, a.k, a.threads, sample, truth,
                                                       a.repeats, a.seed)
        py_t, py_r = statistics.median(py_times), statistics.median(py_recalls)
        print(f"pynndescent runs: times {['%.2f' % t for t in py_times]} recalls "
              f"{['%.4f' % r for r in py_recalls]}", file=sys.stderr)
    weft = run_weft(data_path, gt_path, a.k, a.threads, a.repeats, a.seed, a.params, a.weft_bin)
    w_t = statistics.median(r["build_s"] for r in weft)
    w_r = statistics.median(r["recall"] for r in weft)
    w_rss = max(r["peak_rss_mib"] for r in weft)
    print("weft runs: " + json.dumps(weft), file=sys.stderr)

    print("| data | n x d | k | threads | pynndescent s | pynndescent recall | weft s | "
          "weft recall | speed-up | weft peak RSS MiB | pynndescent process peak RSS MiB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    fmt = lambda v, p: "-" if v is None else f"{v:.{p}f}"
    ratio = None if py_t is None else py_t / w_t
    print(f"| {name} | {n} x {d} | {a.k} | {a.threads} | {fmt(py_t, 2)} | {fmt(py_r, 4)} | "
          f"{w_t:.2f} | {w_r:.4f} | {fmt(ratio, 2)}x | {w_rss:.0f} | {py_rss:.0f} |")


if __name__ == "__main__":
    main()
