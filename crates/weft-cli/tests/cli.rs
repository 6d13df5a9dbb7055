//! The `weft` binary end to end, as a user runs it.

mod common;

use std::path::Path;

use common::{fails_with, no_gpu_branch, ok_json, p, weft};

#[test]
fn gen_gt_build_search_eval() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (base, queries, gt, graph, res) = (
        p(d, "b.fbin"),
        p(d, "b.queries.fbin"),
        p(d, "gt.ivecs"),
        p(d, "g.wgraph"),
        p(d, "res.ibin"),
    );

    let g = ok_json(&[
        "gen",
        "--preset",
        "deep",
        "-n",
        "1200",
        "--queries",
        "30",
        "--out",
        &base,
    ]);
    assert_eq!(g["files"][0]["rows"], 1200);
    assert_eq!(g["files"][1]["path"], queries);

    let info = ok_json(&["info", &base, &queries]);
    assert_eq!(info[0]["rows"], 1200);
    assert_eq!(info[0]["dim"], 96);
    assert_eq!(info[0]["format"], "fbin");

    let t = ok_json(&[
        "gt",
        "--base",
        &base,
        "--queries",
        &queries,
        "-k",
        "20",
        "--out",
        &gt,
    ]);
    assert_eq!(t["queries"], 30);

    let b = ok_json(&[
        "build",
        "--algo",
        "rnndescent",
        "--data",
        &base,
        "--param",
        "degree=24",
        "--out",
        &graph,
    ]);
    assert_eq!(b["stats"]["num_nodes"], 1200);
    assert_eq!(b["params"]["degree"], 24);
    let gi = ok_json(&["info", &graph]);
    assert_eq!(gi[0]["type"], "graph");
    assert_eq!(gi[0]["algorithm"], "rnndescent");

    let s = ok_json(&[
        "search",
        "--data",
        &base,
        "--graph",
        &graph,
        "--queries",
        &queries,
        "-k",
        "10",
        "--beam",
        "64",
        "--out",
        &res,
    ]);
    assert_eq!(s["queries"], 30);
    let r = ok_json(&["info", &res]);
    assert_eq!(r[0]["rows"], 30);
    assert_eq!(r[0]["dim"], 10);

    let e = ok_json(&[
        "eval",
        "--data",
        &base,
        "--graph",
        &graph,
        "--queries",
        &queries,
        "--gt",
        &gt,
        "-k",
        "10",
        "--beam",
        "10,80",
        "--runs",
        "1",
    ]);
    let pts = e["points"].as_array().unwrap();
    assert_eq!(pts.len(), 2);
    assert!(
        pts[1]["recall"].as_f64().unwrap() >= 0.9,
        "recall at beam 80: {}",
        pts[1]["recall"]
    );

    // A graph must belong to its data.
    let other = p(d, "other.fbin");
    ok_json(&[
        "gen",
        "--preset",
        "deep",
        "-n",
        "500",
        "--queries",
        "0",
        "--out",
        &other,
    ]);
    fails_with(
        &[
            "search",
            "--data",
            &other,
            "--graph",
            &graph,
            "--queries",
            &queries,
        ],
        &["graph"],
    );
}

#[test]
fn gen_clustered_preset() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (base, queries) = (p(d, "c.fbin"), p(d, "c.queries.fbin"));
    let g = ok_json(&[
        "gen",
        "--preset",
        "clustered",
        "--clusters",
        "20",
        "--separation",
        "2.5",
        "-n",
        "400",
        "--queries",
        "25",
        "--seed",
        "5",
        "--out",
        &base,
    ]);
    assert_eq!(g["preset"], "clustered");
    assert_eq!(g["metric"], "l2");
    assert_eq!(g["clusters"], 20);
    assert_eq!(g["separation"], 2.5);
    assert_eq!(g["spec"]["clusters"], 20);
    assert_eq!(g["files"][0]["rows"], 400);
    assert_eq!(g["files"][1]["rows"], 25);
    assert_eq!(g["files"][1]["path"], queries);
    let info = ok_json(&["info", &base, &queries]);
    assert_eq!(info[0]["dim"], 128);
    assert_eq!(info[1]["rows"], 25);
    // The files hold the library's rows for the same parameters and seed.
    let generator = weft_io::SyntheticSpec::clustered(20, 2.5)
        .generator(5)
        .unwrap();
    let opts = weft_io::ReadOptions::new();
    let back: weft_core::Dataset<f32> = weft_io::read(&base, &opts).unwrap();
    assert_eq!(back.as_slice(), generator.base(400).unwrap().as_slice());
    let back: weft_core::Dataset<f32> = weft_io::read(&queries, &opts).unwrap();
    assert_eq!(back.as_slice(), generator.queries(25).unwrap().as_slice());

    // Defaults: 100 clusters, 4 diameters apart; the text names them.
    let dflt = p(d, "dflt.fbin");
    let g = ok_json(&[
        "gen",
        "--preset",
        "clustered",
        "-n",
        "300",
        "--queries",
        "0",
        "--out",
        &dflt,
    ]);
    assert_eq!(
        (g["clusters"].as_u64(), g["separation"].as_f64()),
        (Some(100), Some(4.0))
    );
    let out = weft(&[
        "gen",
        "--preset",
        "clustered",
        "-n",
        "10",
        "--queries",
        "0",
        "--out",
        &dflt,
    ]);
    assert!(out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("100 clusters, separation 4"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    // Bad options.
    let x = p(d, "x.fbin");
    fails_with(
        &[
            "gen",
            "--preset",
            "sift",
            "--clusters",
            "10",
            "-n",
            "10",
            "--out",
            &x,
        ],
        &["--clusters applies only to --preset clustered"],
    );
    fails_with(
        &[
            "gen",
            "--preset",
            "deep",
            "--separation",
            "2",
            "-n",
            "10",
            "--out",
            &x,
        ],
        &["--separation applies only to --preset clustered"],
    );
    fails_with(
        &[
            "gen",
            "--preset",
            "clustered",
            "--clusters",
            "0",
            "-n",
            "10",
            "--out",
            &x,
        ],
        &["invalid parameter `clusters`"],
    );
    for bad in ["0", "-1", "nan", "inf"] {
        fails_with(
            &[
                "gen",
                "--preset",
                "clustered",
                "--separation",
                bad,
                "-n",
                "10",
                "--out",
                &x,
            ],
            &["invalid parameter `separation`"],
        );
    }
    fails_with(
        &[
            "gen",
            "--preset",
            "clustered",
            "--clusters",
            "many",
            "--out",
            &x,
        ],
        &["--clusters"],
    );
    assert!(!Path::new(&x).exists());
    let help = weft(&["gen", "--help"]);
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(
        help.contains("--clusters") && help.contains("--separation") && help.contains("clustered")
    );
}

#[test]
fn demo_reports_exact_recall_one() {
    let d = ok_json(&["demo", "-n", "800", "--queries", "20", "--algos", "exact"]);
    let exact = &d["results"][0];
    assert_eq!(exact["algorithm"], "exact");
    assert_eq!(exact["search"][0]["recall"].as_f64().unwrap(), 1.0);
}

#[test]
fn bad_input_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (base, q96) = (p(d, "b.fbin"), p(d, "q.fbin"));
    ok_json(&[
        "gen",
        "--preset",
        "sift",
        "-n",
        "300",
        "--queries",
        "0",
        "--out",
        &base,
    ]);
    ok_json(&[
        "gen",
        "--preset",
        "deep",
        "-n",
        "10",
        "--queries",
        "0",
        "--out",
        &q96,
    ]);
    // Dimension mismatch between base and queries.
    fails_with(
        &[
            "gt",
            "--base",
            &base,
            "--queries",
            &q96,
            "-k",
            "5",
            "--out",
            &p(d, "gt.ivecs"),
        ],
        &["dimension"],
    );
    // k out of range.
    fails_with(
        &[
            "build",
            "--algo",
            "exact",
            "--data",
            &base,
            "-k",
            "300",
            "--out",
            &p(d, "g.wgraph"),
        ],
        &["parameter `k`"],
    );
    fails_with(
        &[
            "build",
            "--algo",
            "exact",
            "--data",
            &base,
            "-k",
            "0",
            "--out",
            &p(d, "g.wgraph"),
        ],
        &["parameter `k`"],
    );
    // Unknown extension, missing file, truncated file.
    let weird = p(d, "data.xyz");
    std::fs::write(&weird, b"12345678").unwrap();
    fails_with(&["info", &weird], &["data.xyz"]);
    fails_with(&["info", &p(d, "missing.fbin")], &["missing.fbin"]);
    let bytes = std::fs::read(&base).unwrap();
    let cut = p(d, "cut.fbin");
    std::fs::write(&cut, &bytes[..bytes.len() - 7]).unwrap();
    fails_with(
        &[
            "build",
            "--algo",
            "exact",
            "--data",
            &cut,
            "-k",
            "4",
            "--out",
            &p(d, "g.wgraph"),
        ],
        &["cut.fbin"],
    );
    // GPU-only algorithms without a GPU say so (with a GPU they build); unknown ones list what
    // exists; bad params are refused.
    let out = weft(&[
        "build",
        "--algo",
        "grnnd",
        "--data",
        &base,
        "--out",
        &p(d, "grnnd.wgraph"),
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() || err.contains("runs only on the GPU"),
        "weft build --algo grnnd: neither a graph nor the GPU-only error:\n{err}"
    );
    if !out.status.success() {
        no_gpu_branch("weft build --algo grnnd", &err);
    }
    fails_with(
        &[
            "build",
            "--algo",
            "hnsw",
            "--data",
            &base,
            "--out",
            &p(d, "g.wgraph"),
        ],
        &["available"],
    );
    fails_with(
        &[
            "build",
            "--algo",
            "rnndescent",
            "--data",
            &base,
            "--param",
            "degree=0",
            "--out",
            &p(d, "g.wgraph"),
        ],
        &["degree"],
    );
    fails_with(
        &[
            "build",
            "--algo",
            "rnndescent",
            "--data",
            &base,
            "--param",
            "bogus=1",
            "--out",
            &p(d, "g.wgraph"),
        ],
        &["bogus"],
    );
    // Nothing was written by the failed builds.
    assert!(!Path::new(&p(d, "g.wgraph")).exists());
}

#[test]
fn every_command_has_help() {
    for cmd in [
        "gen", "info", "gt", "build", "search", "eval", "demo", "algos",
    ] {
        let out = weft(&[cmd, "--help"]);
        assert!(out.status.success(), "{cmd} --help");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("--json"),
            "{cmd} --help lists --json"
        );
    }
    let a = ok_json(&["algos"]);
    let names: Vec<&str> = a["algorithms"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"exact") && names.contains(&"nndescent") && names.contains(&"rnndescent")
    );
    // GRNND runs only on the GPU: listed as an algorithm with a GPU, else under needs_gpu.
    let needs_gpu: Vec<&str> = a["needs_gpu"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"grnnd") != needs_gpu.contains(&"grnnd"));
    if !needs_gpu.is_empty() {
        no_gpu_branch("weft algorithms", &a.to_string());
    }
    assert_eq!(a["gpu_unavailable"].is_null(), needs_gpu.is_empty());
    let m = ok_json(&["info"]);
    assert!(m["cpu"]["threads"].as_u64().unwrap() >= 1);
}

#[test]
fn cagra_build_and_eval() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (base, queries, gt, graph) = (
        p(d, "c.fbin"),
        p(d, "c.queries.fbin"),
        p(d, "c.gt.ivecs"),
        p(d, "c.wgraph"),
    );
    ok_json(&[
        "gen",
        "--preset",
        "sift",
        "-n",
        "2000",
        "--queries",
        "50",
        "--out",
        &base,
    ]);
    ok_json(&[
        "gt",
        "--base",
        &base,
        "--queries",
        &queries,
        "-k",
        "10",
        "--out",
        &gt,
    ]);
    let b = ok_json(&[
        "build",
        "--algo",
        "cagra",
        "--backend",
        "cpu",
        "--data",
        &base,
        "--param",
        "graph_degree=24",
        "--param",
        "intermediate_degree=48",
        "--out",
        &graph,
    ]);
    assert_eq!(b["stats"]["num_nodes"], 2000);
    assert_eq!(b["params"]["graph_degree"], 24);
    let gi = ok_json(&["info", &graph]);
    assert_eq!(gi[0]["algorithm"], "cagra");
    let e = ok_json(&[
        "eval",
        "--data",
        &base,
        "--graph",
        &graph,
        "--queries",
        &queries,
        "--gt",
        &gt,
        "-k",
        "10",
        "--beam",
        "10,64",
        "--runs",
        "1",
    ]);
    let pts = e["points"].as_array().unwrap();
    assert!(
        pts[1]["recall"].as_f64().unwrap() >= 0.9,
        "cagra recall at beam 64: {}",
        pts[1]["recall"]
    );
    // Impossible parameters are refused before any work.
    fails_with(
        &[
            "build",
            "--algo",
            "cagra",
            "--data",
            &base,
            "--param",
            "graph_degree=64",
            "--param",
            "intermediate_degree=32",
            "--out",
            &graph,
        ],
        &["intermediate_degree"],
    );
}

#[test]
fn ggnn_build_and_eval() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (base, queries, gt, graph) = (
        p(d, "g.fbin"),
        p(d, "g.queries.fbin"),
        p(d, "g.gt.ivecs"),
        p(d, "g.wgraph"),
    );
    ok_json(&[
        "gen",
        "--preset",
        "sift",
        "-n",
        "2000",
        "--queries",
        "50",
        "--out",
        &base,
    ]);
    ok_json(&[
        "gt",
        "--base",
        &base,
        "--queries",
        &queries,
        "-k",
        "10",
        "--out",
        &gt,
    ]);
    let b = ok_json(&[
        "build",
        "--algo",
        "ggnn",
        "--data",
        &base,
        "--param",
        "k_build=24",
        "--out",
        &graph,
    ]);
    assert_eq!(b["stats"]["num_nodes"], 2000);
    assert_eq!(b["params"]["k_build"], 24);
    let gi = ok_json(&["info", &graph]);
    assert_eq!(gi[0]["algorithm"], "ggnn");
    let e = ok_json(&[
        "eval",
        "--data",
        &base,
        "--graph",
        &graph,
        "--queries",
        &queries,
        "--gt",
        &gt,
        "-k",
        "10",
        "--beam",
        "10,64",
        "--runs",
        "1",
    ]);
    let pts = e["points"].as_array().unwrap();
    assert!(
        pts[1]["recall"].as_f64().unwrap() >= 0.9,
        "ggnn recall at beam 64: {}",
        pts[1]["recall"]
    );
    // Impossible parameters are refused before any work.
    fails_with(
        &[
            "build",
            "--algo",
            "ggnn",
            "--data",
            &base,
            "--param",
            "segment_size=48",
            "--out",
            &graph,
        ],
        &["segment_size"],
    );
}

/// `weft build --gpu-mem-limit`: the budget reaches nndescent's `gpu_mem_limit` (on the GPU a
/// build that does not fit is split into shards; the CPU back end ignores it), other algorithms
/// and malformed sizes are refused.
#[test]
fn build_gpu_mem_limit_flag() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (base, graph) = (p(d, "b.fbin"), p(d, "g.wgraph"));
    ok_json(&[
        "gen",
        "--preset",
        "deep",
        "-n",
        "3000",
        "--queries",
        "0",
        "--out",
        &base,
    ]);
    // A budget that holds about a fifth of the set on the GPU (about 3 KB a row): five shards
    // there.
    let b = ok_json(&[
        "build",
        "--algo",
        "nndescent",
        "--data",
        &base,
        "-k",
        "16",
        "--gpu-mem-limit",
        "4M",
        "--out",
        &graph,
    ]);
    assert_eq!(b["stats"]["num_nodes"], 3000);
    assert_eq!(b["params"]["gpu_mem_limit"], 4u64 << 20);
    fails_with(
        &[
            "build",
            "--algo",
            "exact",
            "--data",
            &base,
            "-k",
            "5",
            "--gpu-mem-limit",
            "1G",
            "--out",
            &graph,
        ],
        &["--gpu-mem-limit applies to `nndescent`"],
    );
    fails_with(
        &[
            "build",
            "--algo",
            "nndescent",
            "--data",
            &base,
            "-k",
            "5",
            "--gpu-mem-limit",
            "lots",
            "--out",
            &graph,
        ],
        &["not a byte count"],
    );
    // Below the 1 MiB floor: refused as an impossible parameter.
    fails_with(
        &[
            "build",
            "--algo",
            "nndescent",
            "--data",
            &base,
            "-k",
            "5",
            "--gpu-mem-limit",
            "1000",
            "--out",
            &graph,
        ],
        &["gpu_mem_limit"],
    );
}

#[test]
fn search_backends_cpu_and_gpu() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (base, queries, graph) = (p(d, "s.fbin"), p(d, "s.queries.fbin"), p(d, "s.wgraph"));
    ok_json(&[
        "gen",
        "--preset",
        "sift",
        "-n",
        "1500",
        "--queries",
        "20",
        "--out",
        &base,
    ]);
    ok_json(&[
        "build",
        "--algo",
        "cagra",
        "--backend",
        "cpu",
        "--data",
        &base,
        "--param",
        "graph_degree=16",
        "--param",
        "intermediate_degree=32",
        "--out",
        &graph,
    ]);
    let common = [
        "search",
        "--data",
        &base,
        "--graph",
        &graph,
        "--queries",
        &queries,
        "-k",
        "10",
    ];
    let mut cpu = common.to_vec();
    cpu.extend(["--backend", "cpu", "--beam", "32"]);
    let s = ok_json(&cpu);
    assert_eq!(s["backend"], "cpu");
    assert_eq!(s["queries"], 20);
    let e = ok_json(&[
        "eval",
        "--data",
        &base,
        "--graph",
        &graph,
        "--queries",
        &queries,
        "-k",
        "10",
        "--beam",
        "32",
        "--runs",
        "1",
        "--backend",
        "cpu",
    ]);
    assert!(e["points"][0]["recall"].as_f64().unwrap() >= 0.8);
    // The GPU backend: results on a GPU machine, a clear error (never a panic) without one.
    let mut gpu = common.to_vec();
    gpu.extend([
        "--backend",
        "gpu",
        "--beam-width",
        "32",
        "--search-width",
        "1",
        "--team-size",
        "0",
        "--mode",
        "single-cta",
        "--json",
    ]);
    let out = weft(&gpu);
    // With --json the error is a JSON object on stdout.
    let err = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        !err.contains("panicked"),
        "weft search --backend gpu panicked:\n{err}"
    );
    if out.status.success() {
        let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(s["backend"], "gpu");
    } else {
        no_gpu_branch("weft search --backend gpu", &err);
        assert!(
            err.contains("GPU") || err.contains("CUDA"),
            "weft search --backend gpu without a GPU: unclear error:\n{err}"
        );
    }
    // Bad GPU parameters are typed errors on either machine (checked before any device work
    // where a GPU exists; without one the backend error comes first).
    let mut bad = common.to_vec();
    bad.extend(["--backend", "cpu", "--mode", "sideways"]);
    fails_with(&bad, &["sideways"]);
    // The CPU beam search's knobs reach it: a distance budget caps the distances, the entry
    // layer can be switched off, and an impossible value is refused on every back end.
    let mut budget = cpu.clone();
    budget.extend(["--max-distance-computations", "40", "--max-hops", "3"]);
    let b = ok_json(&budget);
    let per_query = b["distance_computations"].as_f64().unwrap() / 20.0;
    let full = s["distance_computations"].as_f64().unwrap() / 20.0;
    assert!(
        per_query <= 40.0 && per_query < full,
        "{per_query} vs {full}"
    );
    let mut no_layer = cpu.clone();
    no_layer.extend(["--no-entry-layer", "--entry-layer-degree", "4"]);
    assert_eq!(ok_json(&no_layer)["queries"], 20);
    for backend in ["cpu", "auto"] {
        let mut zero = common.to_vec();
        zero.extend(["--backend", backend, "--max-hops", "0"]);
        fails_with(&zero, &["max_hops"]);
        let mut degree = common.to_vec();
        degree.extend(["--backend", backend, "--entry-layer-degree", "0"]);
        fails_with(&degree, &["entry_layer.degree"]);
    }
}
