//! The `weft` binary's faults of issue 19, each as a user meets it: a write error on stdout,
//! absurd thread counts, malformed ground truth, an output naming an input, an empty dataset,
//! doubled or misleading error messages, float noise, the GPU back end without a GPU, cut-off
//! help, and serde's words for a bad `shard_schedule`.

mod common;

use std::path::Path;
use std::process::Stdio;

use common::{fails_with, fails_without_gpu, ok, ok_json, ok_text, p, text, weft, weft_cmd};

/// A small sift-like base set (and `queries` queries beside it, `<stem>.queries.fbin`).
fn make_data(dir: &Path, name: &str, n: usize, queries: usize) -> String {
    let path = p(dir, name);
    ok(&[
        "gen",
        "-n",
        &n.to_string(),
        "--queries",
        &queries.to_string(),
        "--out",
        &path,
    ]);
    path
}

fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// Writes an `.ivecs` id file, one row per element of `rows`.
fn write_ivecs(path: &str, rows: &[Vec<i32>]) {
    let mut bytes = vec![];
    for row in rows {
        bytes.extend_from_slice(&(row.len() as i32).to_le_bytes());
        for id in row {
            bytes.extend_from_slice(&id.to_le_bytes());
        }
    }
    std::fs::write(path, bytes).unwrap();
}

// 1. A write error on stdout.

#[cfg(target_os = "linux")]
#[test]
fn a_full_stdout_is_an_error_not_a_panic() {
    for args in [
        &["algos"][..],
        &["--json", "algos"],
        &["info"],
        &["--json", "info", "missing.fbin"],
        &["--help"],
        &["build", "--help"],
        &["--version"],
    ] {
        let full = std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .expect("/dev/full");
        let out = weft_cmd(args)
            .stdout(full)
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "weft {args:?}:\n{err}");
        assert!(!err.contains("panicked"), "weft {args:?} panicked:\n{err}");
        assert!(
            err.contains("error: writing the output to stdout") && err.contains("No space left"),
            "weft {args:?}:\n{err}"
        );
    }
}

#[cfg(unix)]
#[test]
fn a_closed_pipe_ends_quietly_with_status_141() {
    for args in [
        &["algos"][..],
        &["--json", "algos"],
        &["--json", "info"],
        &["search", "--help"],
    ] {
        // The reading end is closed before weft writes: every write fails with EPIPE.
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let out = weft_cmd(args)
            .stdout(writer)
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(141), "weft {args:?}:\n{err}");
        assert!(err.is_empty(), "weft {args:?} said:\n{err}");
    }
}

// 2. --threads bounds.

#[test]
fn absurd_thread_counts_are_refused_at_once() {
    let start = std::time::Instant::now();
    for bad in ["100000", "0", "many"] {
        let out = weft(&["--threads", bad, "algos"]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "--threads {bad}:\n{err}");
        assert!(err.contains("--threads"), "--threads {bad}:\n{err}");
    }
    let err = text(&weft(&["--threads", "100000", "algos"]).stderr);
    assert!(
        err.contains("the thread count must be between 1 and"),
        "{err}"
    );
    assert!(start.elapsed().as_secs() < 30);
    ok(&["--threads", "2", "algos"]);
    ok(&["--threads", "64", "algos"]);
}

// 3. Ground truth checked by eval.

#[test]
fn eval_rejects_out_of_range_and_repeated_ground_truth_ids() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let base = make_data(d, "b.fbin", 200, 5);
    let queries = p(d, "b.queries.fbin");
    let graph = p(d, "g.wgraph");
    ok(&[
        "build", "--algo", "exact", "-k", "10", "--data", &base, "--out", &graph,
    ]);
    let good: Vec<Vec<i32>> = (0..5)
        .map(|r| (0..10).map(|c| r * 10 + c).collect())
        .collect();
    let eval = |gt: &str| -> Vec<String> {
        [
            "eval",
            "--data",
            &base,
            "--graph",
            &graph,
            "--queries",
            &queries,
            "--gt",
            gt,
            "-k",
            "10",
            "--beam",
            "10",
            "--runs",
            "1",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    };

    let gt = p(d, "good.ivecs");
    write_ivecs(&gt, &good);
    ok(&strs(&eval(&gt)));

    let mut oob = good.clone();
    oob[3][7] = 200;
    let gt = p(d, "oob.ivecs");
    write_ivecs(&gt, &oob);
    fails_with(
        &strs(&eval(&gt)),
        &["row 3", "id 200", "200 indexed vectors"],
    );

    let mut negative = good.clone();
    negative[1][0] = -1;
    let gt = p(d, "neg.ivecs");
    write_ivecs(&gt, &negative);
    fails_with(&strs(&eval(&gt)), &["row 1", "-1"]);

    let mut dup = good.clone();
    dup[2][5] = dup[2][4];
    let gt = p(d, "dup.ivecs");
    write_ivecs(&gt, &dup);
    fails_with(&strs(&eval(&gt)), &["row 2", "more than once"]);

    // Only the k ids recall@k reads are checked: a 12-column file with junk past k = 10 is fine.
    let wide: Vec<Vec<i32>> = good
        .iter()
        .map(|r| {
            let mut r = r.clone();
            r.extend([-1, -1]);
            r
        })
        .collect();
    let gt = p(d, "wide.ivecs");
    write_ivecs(&gt, &wide);
    ok(&strs(&eval(&gt)));
}

// 4. An output naming an input.

#[test]
fn build_refuses_an_out_that_is_its_data() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let base = make_data(d, "b.fbin", 100, 0);
    let before = std::fs::read(&base).unwrap();
    std::fs::create_dir(d.join("sub")).unwrap();
    std::fs::hard_link(&base, d.join("hard.fbin")).unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(&base, d.join("sym.fbin")).unwrap();
    let mut outs = vec![
        base.clone(),
        d.join(".").join("b.fbin").to_string_lossy().into_owned(),
        d.join("sub/../b.fbin").to_string_lossy().into_owned(),
        p(d, "hard.fbin"),
    ];
    if cfg!(unix) {
        outs.push(p(d, "sym.fbin"));
    }
    for out in &outs {
        for algo in ["exact", "rnndescent"] {
            fails_with(
                &[
                    "build", "--algo", algo, "-k", "8", "--data", &base, "--out", out,
                ],
                &["is the same file as --data", "nothing was written"],
            );
            assert_eq!(std::fs::read(&base).unwrap(), before, "--out {out}");
        }
    }
    // The other commands that write files refuse the same.
    let queries = make_data(d, "q.fbin", 10, 0);
    fails_with(
        &[
            "gt",
            "--base",
            &base,
            "--queries",
            &queries,
            "-k",
            "5",
            "--out",
            &p(d, "hard.fbin"),
        ],
        &["is the same file as --base"],
    );
    fails_with(
        &["gen", "-n", "10", "--out", &base, "--queries-out", &base],
        &["--queries-out", "is the same file as --out"],
    );
    assert_eq!(std::fs::read(&base).unwrap(), before);
    // A new file beside the data is fine.
    ok(&[
        "build",
        "--algo",
        "exact",
        "-k",
        "8",
        "--data",
        &base,
        "--out",
        &p(d, "g.wgraph"),
    ]);
}

// 5. gen -n 0.

#[test]
fn gen_of_no_vectors_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = p(dir.path(), "z.fbin");
    for queries in ["0", "10"] {
        fails_with(
            &["gen", "-n", "0", "--queries", queries, "--out", &out],
            &["at least 1 vector"],
        );
    }
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

// 6. info's messages.

#[test]
fn info_says_an_os_error_once_and_offers_a_real_format_flag() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let err = fails_with(&["info", &p(d, "missing.fbin")], &["missing.fbin"]);
    assert_eq!(
        err.matches("No such file or directory").count(),
        1,
        "said twice:\n{err}"
    );

    let base = make_data(d, "b.fbin", 20, 0);
    let odd = p(d, "s.bin");
    std::fs::copy(&base, &odd).unwrap();
    let err = fails_with(&["info", &odd], &["s.bin", "unknown file extension `bin`"]);
    assert!(!err.contains("name the format explicitly"), "{err}");
    assert!(err.contains("--format"), "{err}");
    let info = ok_json(&["info", "--format", "fbin", &odd]);
    assert_eq!(
        (info[0]["rows"].as_u64(), info[0]["dim"].as_u64()),
        (Some(20), Some(128))
    );
    fails_with(
        &["info", "--format", "bogus", &odd],
        &["unknown format `bogus`"],
    );
    // The commands that read vectors have --format too, and say so.
    let err = fails_with(
        &[
            "build",
            "--algo",
            "exact",
            "-k",
            "5",
            "--data",
            &odd,
            "--out",
            &p(d, "g.wgraph"),
        ],
        &["unknown file extension `bin`", "--format FORMAT"],
    );
    assert!(!err.contains("name the format explicitly"), "{err}");
}

// 7. Numbers as written.

#[test]
fn parameters_print_as_their_f32_values() {
    let out = text(&ok(&["algos"]).stdout);
    assert!(!out.contains("0.0010000000474974513"), "{out}");
    assert!(!out.contains("0.6000000238418579"), "{out}");
    assert!(out.contains("\"delta\":0.001"), "{out}");
    let j = text(&ok(&["algos", "--json"]).stdout);
    assert!(!j.contains("0.0010000000474974513"), "{j}");
    assert!(j.contains("\"delta\": 0.001"), "{j}");

    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let base = make_data(d, "b.fbin", 200, 0);
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
    assert_eq!(b["params"]["rho"].as_f64(), Some(0.6));
    let info = text(&ok(&["info", &graph]).stdout);
    assert!(info.contains("\"rho\":0.6,"), "{info}");
}

#[test]
fn recall_is_an_exact_ratio() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let base = make_data(d, "b.fbin", 3000, 300);
    let queries = p(d, "b.queries.fbin");
    let graph = p(d, "g.wgraph");
    ok(&[
        "build",
        "--algo",
        "nndescent",
        "-k",
        "8",
        "--data",
        &base,
        "--out",
        &graph,
    ]);
    let k = 10usize;
    let args = [
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
        "10,11,12,13,14,15,16,20,24,32",
        "--runs",
        "1",
        "--backend",
        "cpu",
    ];
    let mut json_args = args.to_vec();
    json_args.push("--json");
    let doc = text(&ok(&json_args).stdout);
    // The numbers as printed, read with Rust's correctly rounded parser (serde_json's default
    // one may be a unit in the last place off).
    let recalls: Vec<f64> = doc
        .split("\"recall\": ")
        .skip(1)
        .map(|rest| {
            let end = rest.find([',', '\n', '}']).unwrap();
            rest[..end].trim().parse().unwrap()
        })
        .collect();
    assert_eq!(recalls.len(), 10, "{doc}");
    let total = (300 * k) as f64;
    for r in recalls {
        let hits = (r * total).round();
        assert_eq!(r, hits / total, "recall {r} is not hits / {total}");
    }
    // Text: four decimals.
    let t = text(&ok(&args).stdout);
    let rows: Vec<&str> = t
        .lines()
        .filter(|l| {
            let cols: Vec<&str> = l.split_whitespace().collect();
            cols.len() == 4 && cols.iter().all(|c| c.parse::<f64>().is_ok())
        })
        .collect();
    assert_eq!(rows.len(), 10, "{t}");
    for row in rows {
        let recall = row.split_whitespace().nth(1).unwrap();
        assert_eq!(
            recall.split_once('.').map(|(_, f)| f.len()),
            Some(4),
            "{row}"
        );
    }
}

// 8. The GPU back end without a GPU.

#[test]
fn gpu_backend_without_a_gpu_says_why_and_what_to_do() {
    // Every GPU hidden from the weft processes: the same errors on a machine with GPUs.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let base = make_data(d, "b.fbin", 100, 5);
    let queries = p(d, "b.queries.fbin");
    let graph = p(d, "g.wgraph");
    for algo in ["nndescent", "cagra", "rnndescent"] {
        let err = fails_without_gpu(
            &[
                "build",
                "--algo",
                algo,
                "-k",
                "8",
                "--backend",
                "gpu",
                "--data",
                &base,
                "--out",
                &graph,
            ],
            &["no usable GPU", "CUDA 13", "--backend cpu"],
        );
        assert!(!err.contains("in this build"), "{err}");
    }
    assert!(!Path::new(&graph).exists());
    fails_without_gpu(
        &[
            "gt",
            "--base",
            &base,
            "--queries",
            &queries,
            "-k",
            "5",
            "--backend",
            "gpu",
            "--out",
            &p(d, "gt.ivecs"),
        ],
        &["no usable GPU", "CUDA 13", "--backend cpu"],
    );
    ok(&[
        "build", "--algo", "exact", "-k", "8", "--data", &base, "--out", &graph,
    ]);
    for cmd in ["search", "eval"] {
        fails_without_gpu(
            &[
                cmd,
                "--data",
                &base,
                "--graph",
                &graph,
                "--queries",
                &queries,
                "--backend",
                "gpu",
            ],
            &["no usable GPU", "CUDA 13", "--backend cpu"],
        );
    }
}

// 9. Help texts.

#[test]
fn help_texts_are_whole_sentences() {
    let build = text(&ok(&["build", "--help"]).stdout);
    assert!(
        build.contains("it sets the nndescent parameter `gpu_mem_limit`"),
        "{build}"
    );
    assert!(!build.contains("pairwise; the parameter"), "{build}");
    let top = text(&ok(&["--help"]).stdout);
    assert!(
        top.starts_with("Build approximate-nearest-neighbour proximity graphs"),
        "{top}"
    );
    for cmd in [
        "gen", "info", "gt", "build", "search", "eval", "demo", "algos",
    ] {
        for flag in ["-h", "--help"] {
            let help = text(&ok(&[cmd, flag]).stdout);
            for line in help.lines().map(str::trim_end) {
                let dangling = [";", ",", ":", "(", " the", " a", " of", " and", " or"]
                    .iter()
                    .any(|end| line.ends_with(end));
                // Section headings ("Options:") and clap's "Possible values:" end with a colon.
                let heading = line.ends_with(':')
                    && (!line.starts_with(' ') || line.trim() == "Possible values:");
                assert!(
                    !dangling || heading,
                    "`weft {cmd} {flag}` cuts off: `{line}`"
                );
            }
        }
    }
}

// 10. shard_schedule.

#[test]
fn a_bad_shard_schedule_lists_the_accepted_values() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let base = make_data(d, "b.fbin", 100, 0);
    for bad in ["nearest", "bogus", "{\"nearest\":\"x\"}", "3"] {
        let param = format!("shard_schedule={bad}");
        let err = fails_with(
            &[
                "build",
                "--algo",
                "nndescent",
                "-k",
                "8",
                "--data",
                &base,
                "--param",
                &param,
                "--out",
                &p(d, "g.wgraph"),
            ],
            &[
                "invalid parameter `shard_schedule`",
                "`auto`",
                "`all_pairs`",
                "{\"nearest\": M}",
            ],
        );
        assert!(!err.contains("variant"), "{err}");
    }
    ok(&[
        "build",
        "--algo",
        "nndescent",
        "-k",
        "8",
        "--data",
        &base,
        "--param",
        "shard_schedule={\"nearest\": 2}",
        "--out",
        &p(d, "g.wgraph"),
    ]);
}

// 11. Finite values too large for finite distances (3e38).

/// Writes an `.fbin` vector file.
fn write_fbin(path: &str, rows: usize, dim: usize, values: &[f32]) {
    let mut bytes = vec![];
    bytes.extend_from_slice(&(rows as u32).to_le_bytes());
    bytes.extend_from_slice(&(dim as u32).to_le_bytes());
    for v in values {
        bytes.extend_from_slice(&v.to_le_bytes());
    }
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn huge_finite_values_are_refused_alike_by_every_builder() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (rows, dim) = (50, 8);
    let mut values: Vec<f32> = (0..rows * dim).map(|i| (i % 13) as f32).collect();
    values[17 * dim + 3] = 3e38;
    values[17 * dim + 4] = -3e38;
    let base = p(d, "huge.fbin");
    write_fbin(&base, rows, dim, &values);
    for (algo, metric) in [
        ("exact", "ip"),
        ("exact", "cosine"),
        ("exact", "l2"),
        ("nndescent", "ip"),
        ("rnndescent", "cosine"),
        ("cagra", "ip"),
    ] {
        let mut args = vec!["build", "--algo", algo, "--metric", metric, "--data", &base];
        if matches!(algo, "exact" | "nndescent") {
            args.extend(["-k", "4"]);
        }
        let out = p(d, "g.wgraph");
        args.extend(["--out", &out]);
        fails_with(&args, &["row 17", "too large", "scale the data down"]);
    }
    // The same values scaled below the limit build, with finite distances.
    let scaled: Vec<f32> = values.iter().map(|v| v * 1e-20).collect();
    let small = p(d, "small.fbin");
    write_fbin(&small, rows, dim, &scaled);
    let out = p(d, "g.wgraph");
    ok(&[
        "build", "--algo", "exact", "--metric", "ip", "-k", "4", "--data", &small, "--out", &out,
    ]);
    let found = ok_json(&[
        "search",
        "--exact",
        "--data",
        &small,
        "--graph",
        &out,
        "--queries",
        &small,
        "-k",
        "3",
    ]);
    for row in found["distances"].as_array().unwrap() {
        for v in row.as_array().unwrap() {
            assert!(v.as_f64().is_some_and(f64::is_finite), "{v}");
        }
    }
}

// 12. A graph used with other data of the same shape; what graph files record.

#[test]
fn a_graph_with_other_data_of_the_same_shape_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let a = make_data(d, "a.fbin", 400, 20);
    let b = p(d, "b.fbin");
    ok(&[
        "gen",
        "-n",
        "400",
        "--queries",
        "0",
        "--seed",
        "7",
        "--out",
        &b,
    ]);
    let graph = p(d, "g.wgraph");
    let built = ok_json(&[
        "build",
        "--algo",
        "rnndescent",
        "--seed",
        "9",
        "--data",
        &a,
        "--out",
        &graph,
    ]);
    // Recorded in the file and reported: seed, fingerprint, parameters one level deep.
    assert_eq!(built["seed"], 9);
    let fp = built["data_fingerprint"].as_str().unwrap().to_string();
    assert!(fp.starts_with("crc32:"), "{fp}");
    assert!(built["params"]["degree"].is_u64(), "{}", built["params"]);
    assert!(built["params"].get("params").is_none());
    assert_eq!(built["metric"], "l2");
    let info = ok_json(&["info", &graph]);
    assert_eq!(info[0]["seed"], 9);
    assert_eq!(info[0]["data_fingerprint"], fp.as_str());
    assert_eq!(info[0]["metric"], "l2");
    assert!(info[0]["params"]["degree"].is_u64());
    assert!(ok_text(&["info", &graph]).contains(&format!("seed: 9, data fingerprint: {fp}")));

    let queries = p(d, "a.queries.fbin");
    let with_a = ok_json(&[
        "search",
        "--data",
        &a,
        "--graph",
        &graph,
        "--queries",
        &queries,
        "--backend",
        "cpu",
    ]);
    assert_eq!(with_a["build"]["data_fingerprint"], fp.as_str());
    for cmd in ["search", "eval"] {
        fails_with(
            &[
                cmd,
                "--data",
                &b,
                "--graph",
                &graph,
                "--queries",
                &queries,
                "--backend",
                "cpu",
            ],
            &["other data of the same shape", &fp],
        );
    }

    // A graph file written before fingerprints were recorded is accepted with either.
    let (g, mut meta) =
        weft::graph::storage::load(&graph, weft::graph::storage::LoadOptions::default()).unwrap();
    let mut doc = meta.params_json().unwrap();
    doc.as_object_mut().unwrap().remove("data_fingerprint");
    meta.params = doc.to_string();
    let old = p(d, "old.wgraph");
    weft::graph::storage::save(&old, &g, &meta).unwrap();
    ok(&[
        "search",
        "--data",
        &b,
        "--graph",
        &old,
        "--queries",
        &queries,
        "--backend",
        "cpu",
    ]);
}
