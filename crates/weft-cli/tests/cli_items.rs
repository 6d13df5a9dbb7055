//! Issue 19 item 2, as a user meets it: default beams that fit k, a `--format` flag where vectors
//! are read, u8/i8 `gen`, the metric data was generated for, and ground truth of another
//! metric.

mod common;

use std::path::Path;

use common::{
    fails_with, graph_cmd, no_gpu_branch, ok, ok_json, ok_text, p, sift_rnndescent, text, weft,
};

/// A small sift-like base set and `<stem>.queries.fbin` beside it.
fn make_data(dir: &Path, name: &str, n: usize, queries: usize, preset: &str) -> String {
    let path = p(dir, name);
    ok(&[
        "gen",
        "--preset",
        preset,
        "-n",
        &n.to_string(),
        "--queries",
        &queries.to_string(),
        "--out",
        &path,
    ]);
    path
}

#[test]
fn k_100_works_with_the_default_beams() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let base = make_data(d, "b.fbin", 1000, 20, "sift");
    let queries = p(d, "b.queries.fbin");
    let graph = p(d, "g.wgraph");
    ok(&[
        "build",
        "--algo",
        "rnndescent",
        "--data",
        &base,
        "--out",
        &graph,
    ]);
    // The backend is left at auto: the CPU here, the GPU where there is one.
    let found = ok_json(&[
        "search",
        "--data",
        &base,
        "--graph",
        &graph,
        "--queries",
        &queries,
        "-k",
        "100",
    ]);
    assert_eq!(found["ids"][0].as_array().unwrap().len(), 100);
    assert_eq!(found["beam_width"], 128);
    assert_eq!(found["seed"], 0);
    let eval = ok_json(&[
        "eval",
        "--data",
        &base,
        "--graph",
        &graph,
        "--queries",
        &queries,
        "-k",
        "100",
        "--runs",
        "1",
    ]);
    let beams: Vec<u64> = eval["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["beam_width"].as_u64().unwrap())
        .collect();
    assert_eq!(beams, [100, 128, 256, 512]);
    // A width below k is refused by the user's own option names, never a GPU parameter.
    for cmd in ["search", "eval"] {
        let err = fails_with(
            &[
                cmd,
                "--data",
                &base,
                "--graph",
                &graph,
                "--queries",
                &queries,
                "-k",
                "100",
                "--beam-width",
                "50",
            ],
            &["--beam-width 50 is below -k 100"],
        );
        assert!(!err.contains("itopk"), "{err}");
        assert!(!err.contains("invalid parameter"), "{err}");
    }
}

#[test]
fn a_format_flag_reads_files_whose_extension_says_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let fbin = make_data(d, "b.fbin", 300, 10, "sift");
    let base = p(d, "b.bin");
    let queries = p(d, "q.bin");
    std::fs::copy(&fbin, &base).unwrap();
    std::fs::copy(p(d, "b.queries.fbin"), &queries).unwrap();
    let graph = p(d, "g.wgraph");
    // Without it, the error names the flag that exists.
    fails_with(
        &[
            "build",
            "--algo",
            "rnndescent",
            "--data",
            &base,
            "--out",
            &graph,
        ],
        &["unknown file extension `bin`", "--format FORMAT"],
    );
    ok(&[
        "build",
        "--algo",
        "rnndescent",
        "--data",
        &base,
        "--format",
        "fbin",
        "--out",
        &graph,
    ]);
    ok(&[
        "gt",
        "--base",
        &base,
        "--queries",
        &queries,
        "--format",
        "fbin",
        "-k",
        "5",
        "--out",
        &p(d, "gt.ivecs"),
    ]);
    for cmd in ["search", "eval"] {
        ok(&[
            cmd,
            "--data",
            &base,
            "--graph",
            &graph,
            "--queries",
            &queries,
            "--format",
            "fbin",
            "-k",
            "5",
        ]);
    }
    fails_with(
        &[
            "search",
            "--data",
            &base,
            "--graph",
            &graph,
            "--queries",
            &queries,
            "--format",
            "bin",
        ],
        &["unknown format `bin`", "fbin"],
    );
}

#[test]
fn gen_writes_u8_and_i8_data() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // sift values are integers in 0..=255: as u8, unchanged.
    let f32s = make_data(d, "s.fbin", 200, 5, "sift");
    let u8s = p(d, "s.u8bin");
    let g = ok_json(&[
        "gen",
        "-n",
        "200",
        "--queries",
        "5",
        "--dtype",
        "u8",
        "--out",
        &u8s,
    ]);
    assert_eq!(g["dtype"], "u8");
    assert_eq!(g["scale"], 1.0);
    let info = ok_json(&["info", &u8s, &f32s]);
    assert_eq!(info[0]["element"], "u8");
    let (a, b) = (std::fs::read(&u8s).unwrap(), std::fs::read(&f32s).unwrap());
    for (i, &v) in a[8..].iter().enumerate().take(1000) {
        let x = f32::from_le_bytes(b[8 + 4 * i..12 + 4 * i].try_into().unwrap());
        assert_eq!(v as f32, x);
    }
    // glove has negative values: u8 is refused, i8 scales them into -127..=127.
    fails_with(
        &[
            "gen",
            "--preset",
            "glove",
            "-n",
            "50",
            "--dtype",
            "u8",
            "--out",
            &p(d, "g.u8bin"),
        ],
        &["negative values", "--dtype i8"],
    );
    let i8s = p(d, "g.i8bin");
    let g = ok_json(&[
        "gen",
        "--preset",
        "glove",
        "-n",
        "300",
        "--queries",
        "10",
        "--dtype",
        "i8",
        "--out",
        &i8s,
    ]);
    assert_eq!(g["dtype"], "i8");
    assert!(g["scale"].as_f64().unwrap() > 1.0);
    let bytes = std::fs::read(&i8s).unwrap();
    assert!(bytes[8..].iter().any(|&b| (b as i8) < -60));
    assert!(bytes[8..].iter().any(|&b| (b as i8) > 60));
    // The format must hold the type, and the i8 set builds and searches.
    fails_with(
        &["gen", "-n", "10", "--dtype", "i8", "--out", &p(d, "x.fbin")],
        &["fbin cannot hold i8"],
    );
    let graph = p(d, "g.wgraph");
    let b = ok_json(&["build", "--algo", "cagra", "--data", &i8s, "--out", &graph]);
    assert_eq!(b["dtype"], "i8");
    assert_eq!(b["metric"], "cosine");
    ok(&[
        "eval",
        "--data",
        &i8s,
        "--graph",
        &graph,
        "--queries",
        &p(d, "g.queries.i8bin"),
        "--runs",
        "1",
    ]);
}

#[test]
fn build_and_gt_take_the_metric_the_data_was_generated_for() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let base = make_data(d, "g.fbin", 400, 10, "glove");
    let described: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(p(d, "g.fbin.weft.json")).unwrap()).unwrap();
    assert_eq!(described["metric"], "cosine");
    let graph = p(d, "g.wgraph");
    let b = ok_json(&[
        "build",
        "--algo",
        "rnndescent",
        "--data",
        &base,
        "--out",
        &graph,
    ]);
    assert_eq!(b["metric"], "cosine");
    assert!(
        ok_text(&[
            "build",
            "--algo",
            "rnndescent",
            "--data",
            &base,
            "--out",
            &graph
        ])
        .contains("metric cosine: the one")
    );
    let gt = ok_json(&[
        "gt",
        "--base",
        &base,
        "--queries",
        &p(d, "g.queries.fbin"),
        "-k",
        "5",
        "--out",
        &p(d, "gt.ivecs"),
    ]);
    assert_eq!(gt["metric"], "cosine");
    // Another metric is taken as asked, with a warning.
    let out = weft(&[
        "build",
        "--algo",
        "rnndescent",
        "--data",
        &base,
        "--metric",
        "l2",
        "--out",
        &graph,
    ]);
    assert!(out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("warning: --metric l2, but") && err.contains("generated for cosine"),
        "{err}"
    );
    assert_eq!(ok_json(&["info", &graph])[0]["metric"], "l2");
    // Data without a description: l2, silently, as before.
    let sift = make_data(d, "s.fbin", 100, 0, "sift");
    std::fs::remove_file(p(d, "s.fbin.weft.json")).unwrap();
    let b = ok_json(&[
        "build",
        "--algo",
        "rnndescent",
        "--data",
        &sift,
        "--out",
        &graph,
    ]);
    assert_eq!(b["metric"], "l2");
}

#[test]
fn eval_warns_about_ground_truth_of_another_metric() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let base = make_data(d, "s.fbin", 1000, 40, "sift");
    let queries = p(d, "s.queries.fbin");
    let graph = p(d, "g.wgraph");
    ok(&[
        "build",
        "--algo",
        "rnndescent",
        "--data",
        &base,
        "--out",
        &graph,
    ]);
    for metric in ["ip", "l2"] {
        let gt = p(d, &format!("gt-{metric}.ivecs"));
        ok(&[
            "gt",
            "--base",
            &base,
            "--queries",
            &queries,
            "--metric",
            metric,
            "-k",
            "10",
            "--out",
            &gt,
        ]);
        let out = weft(&[
            "--json",
            "eval",
            "--data",
            &base,
            "--graph",
            &graph,
            "--queries",
            &queries,
            "--gt",
            &gt,
            "--runs",
            "1",
            "--beam",
            "16",
        ]);
        assert!(out.status.success());
        let err = text(&out.stderr);
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        if metric == "ip" {
            assert!(
                err.contains("warning: the ground truth agrees with exact l2 search")
                    && err.contains("--metric ip"),
                "{err}"
            );
            assert!(doc["ground_truth_warning"].is_string());
        } else {
            assert!(!err.contains("warning"), "{err}");
            assert!(doc["ground_truth_warning"].is_null());
        }
    }
}

#[test]
fn errors_name_the_options_that_set_them() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let base = make_data(d, "s.fbin", 200, 5, "sift");
    let graph = p(d, "g.wgraph");
    let build = |algo: &str, extra: &[&str], needles: &[&str]| {
        let mut args = vec!["build", "--algo", algo, "--data", &base, "--out", &graph];
        args.extend_from_slice(extra);
        fails_with(&args, needles);
    };
    build("cagra", &["-k", "5"], &["(set by -k)", "leave -k out"]);
    build("nndescent", &[], &["(set by -k)", "give -k N"]);
    build("nndescent", &["-k", "500"], &["(set by -k)", "k = 500"]);
    build(
        "rnndescent",
        &["--param", "rho=abc"],
        &["invalid parameter `rho` (set by --param rho)"],
    );
    build("bogus", &[], &["(set by --algo)", "rnndescent"]);
    ok(&[
        "build",
        "--algo",
        "rnndescent",
        "--data",
        &base,
        "--out",
        &graph,
    ]);
    fails_with(
        &[
            "search",
            "--data",
            &base,
            "--graph",
            &graph,
            "--queries",
            &p(d, "s.queries.fbin"),
            "-k",
            "500",
            "--beam",
            "512",
            "--backend",
            "cpu",
        ],
        &["(set by -k)", "k = 500 exceeds"],
    );
}

/// `--gpu N` picks the GPU; one that cannot be used (no machine has a GPU 999) is an error
/// that names it on every command with GPU work, never the CPU instead; on a GPU machine
/// `--gpu 0` builds and searches there.
#[test]
fn gpu_option_names_the_device() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (base, queries, graph) = sift_rnndescent(d, 600, 10);
    let search = graph_cmd("search", &base, &graph, &queries, &["-k", "5"]);
    for args in [
        &[
            "build",
            "--algo",
            "rnndescent",
            "--data",
            &base,
            "--out",
            &p(d, "x.wgraph"),
        ][..],
        &search[..],
        &[
            "gt",
            "--base",
            &base,
            "--queries",
            &queries,
            "-k",
            "5",
            "--out",
            &p(d, "gt.ivecs"),
        ],
        &["demo", "-n", "300", "--queries", "5", "--algos", "exact"],
    ] {
        let mut with = args.to_vec();
        with.extend(["--gpu", "999"]);
        fails_with(&with, &["--gpus", "GPU 999", "cannot be used"]);
        // A list naming a GPU twice, or something else than numbers, is a usage error.
        let mut twice = args.to_vec();
        twice.extend(["--gpus", "0,0"]);
        fails_with(&twice, &["named twice"]);
        let mut word = args.to_vec();
        word.extend(["--gpus", "first"]);
        fails_with(&word, &["not a GPU number"]);
    }
    // Builds run on one GPU: several are refused before any work, on any machine.
    for args in [
        &[
            "build",
            "--algo",
            "rnndescent",
            "--data",
            &base,
            "--out",
            &p(d, "x.wgraph"),
        ][..],
        &["demo", "-n", "300", "--queries", "5", "--algos", "exact"],
    ] {
        let mut with = args.to_vec();
        with.extend(["--gpus", "0,1"]);
        fails_with(&with, &["names 2 GPUs", "builds on one GPU"]);
    }
    assert!(!std::path::Path::new(&p(d, "x.wgraph")).exists());
    // `all` is every visible GPU: a search on all of them, or a clear error where none is.
    let mut on_all = search.to_vec();
    on_all.extend(["--gpus", "all", "--backend", "gpu", "--json"]);
    let all = weft(&on_all);
    if all.status.success() {
        let found: serde_json::Value = serde_json::from_slice(&all.stdout).unwrap();
        assert_eq!(found["backend"], "gpu");
        let gpus = found["gpus"].as_array().expect("the GPUs searched on");
        assert!(!gpus.is_empty() && gpus[0] == 0, "{gpus:?}");
    } else {
        let err = format!("{}{}", text(&all.stderr), text(&all.stdout));
        no_gpu_branch("weft search --gpus all", &err);
        assert!(err.contains("--gpus"), "{err}");
    }
    let gpu0 = weft(&["info", "--gpu", "0", "--json"]);
    if !gpu0.status.success() {
        no_gpu_branch("weft info --gpu 0", &text(&gpu0.stderr));
        return;
    }
    let mut on0 = search.to_vec();
    on0.extend(["--gpu", "0", "--backend", "gpu"]);
    let found = ok_json(&on0);
    assert_eq!(found["backend"], "gpu");
}
