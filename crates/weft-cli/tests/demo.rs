//! `weft demo`, the README's first command: on a machine with a usable GPU it builds and
//! searches on the GPU (a CPU comparison only when asked), elsewhere on the CPU; every row says
//! where it was built and searched.

mod common;

use common::{fails_with, no_gpu_branch, ok_json, ok_text};

/// The `(backend, search_backend)` of every row.
fn row_backends(j: &serde_json::Value) -> Vec<(String, String)> {
    j["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            (
                r["backend"].as_str().unwrap_or("?").to_string(),
                r["search_backend"].as_str().unwrap_or("?").to_string(),
            )
        })
        .collect()
}

#[test]
fn demo_takes_the_gpu_path_where_a_gpu_is_usable() {
    let j = ok_json(&[
        "demo",
        "-n",
        "2000",
        "--queries",
        "50",
        "--algos",
        "exact,nndescent,cagra",
    ]);
    let gpu = j["gpu"]["available"] == true;
    let want = if gpu { "gpu" } else { "cpu" };
    if !gpu {
        no_gpu_branch(
            "demo_takes_the_gpu_path_where_a_gpu_is_usable",
            &j.to_string(),
        );
        eprintln!(
            "demo_takes_the_gpu_path_where_a_gpu_is_usable: no usable GPU ({}); checking the \
             CPU path only",
            j["gpu"]["reason"]
        );
    }
    assert_eq!(j["backend"], want, "{j}");
    assert_eq!(j["backends"], serde_json::json!([want]), "{j}");
    assert_eq!(j["ground_truth"]["backend"], want, "{j}");
    let rows = row_backends(&j);
    assert_eq!(rows.len(), 3, "{j}");
    for (built, searched) in &rows {
        assert_eq!((built.as_str(), searched.as_str()), (want, want), "{j}");
    }
    // Every row: build time, search recall and QPS; the k-NN graph its graph recall.
    for r in j["results"].as_array().unwrap() {
        assert!(r["build_seconds"].as_f64().unwrap() >= 0.0);
        let points = r["search"].as_array().unwrap();
        assert!(!points.is_empty());
        for p in points {
            assert_eq!(p["backend"], want, "{r}");
            assert!(p["qps"].as_f64().unwrap() > 0.0);
        }
        assert!(
            points.last().unwrap()["recall"].as_f64().unwrap() > 0.8,
            "{r}"
        );
    }
    // Which kernel modules the GPU path used, and how they reached the GPU.
    let kernels = j["kernels"].as_array().unwrap();
    assert_eq!(!kernels.is_empty(), gpu, "{j}");
    if gpu {
        eprintln!("demo kernels: {kernels:?}");
        assert!(kernels.iter().any(|k| k["module"] == "gnnd"), "{j}");
    }
    let nnd = &j["results"][1];
    assert_eq!(nnd["algorithm"], "nndescent");
    assert!(nnd["graph_recall"]["mean"].as_f64().unwrap() > 0.8, "{nnd}");
    assert!(j["results"][2]["graph_recall"].is_null());
}

#[test]
fn demo_compares_with_the_cpu_only_when_asked() {
    let probe = ok_json(&["demo", "-n", "300", "--queries", "5", "--algos", "exact"]);
    if probe["gpu"]["available"] != true {
        no_gpu_branch(
            "demo_compares_with_the_cpu_only_when_asked",
            &probe.to_string(),
        );
        // Without a GPU there is nothing to compare: the CPU path, once.
        let j = ok_json(&[
            "demo",
            "-n",
            "300",
            "--queries",
            "5",
            "--algos",
            "exact",
            "--compare-cpu",
        ]);
        assert_eq!(j["backends"], serde_json::json!(["cpu"]));
        assert_eq!(row_backends(&j).len(), 1);
        let err = fails_with(
            &["demo", "-n", "300", "--backend", "gpu"],
            &["--backend gpu"],
        );
        assert!(err.contains("no usable GPU") || err.contains("without GPU support"));
        eprintln!("demo_compares_with_the_cpu_only_when_asked: SKIPPED the GPU part (no GPU)");
        return;
    }
    let j = ok_json(&[
        "demo",
        "-n",
        "1000",
        "--queries",
        "20",
        "--algos",
        "exact,nndescent",
        "--compare-cpu",
    ]);
    assert_eq!(j["backends"], serde_json::json!(["gpu", "cpu"]));
    let rows = row_backends(&j);
    let pairs: Vec<(&str, &str)> = rows.iter().map(|(b, s)| (b.as_str(), s.as_str())).collect();
    assert_eq!(
        pairs,
        [
            ("gpu", "gpu"),
            ("cpu", "cpu"),
            ("gpu", "gpu"),
            ("cpu", "cpu")
        ],
        "{j}"
    );
}

#[test]
fn demo_on_the_cpu_when_told() {
    let j = ok_json(&[
        "demo",
        "-n",
        "600",
        "--queries",
        "10",
        "--algos",
        "nndescent,rnndescent",
        "--backend",
        "cpu",
    ]);
    assert_eq!(j["backend"], "cpu");
    assert_eq!(
        row_backends(&j),
        [
            ("cpu".to_string(), "cpu".to_string()),
            ("cpu".to_string(), "cpu".to_string())
        ]
    );
    let text = ok_text(&[
        "demo",
        "-n",
        "600",
        "--queries",
        "10",
        "--algos",
        "rnndescent",
        "--backend",
        "cpu",
    ]);
    assert!(text.contains("builds and searches on the cpu"), "{text}");
    let help = ok_text(&["demo", "--help"]);
    assert!(
        help.contains("--backend") && help.contains("--compare-cpu"),
        "{help}"
    );
}
