//! `weft search` / `weft eval --search-precision exact|f16`: the GPU search's f16 traversal
//! (f32 data, exact f32 rerank) on a GPU machine, the same clear errors as any GPU search
//! without one, and unknown values refused on either.

mod common;

use common::{fails_with, graph_cmd, no_gpu_branch, sift_rnndescent, weft};

#[test]
fn search_precision_option() {
    let dir = tempfile::tempdir().unwrap();
    let (base, queries, graph) = sift_rnndescent(dir.path(), 1500, 20);
    for cmd in ["search", "eval"] {
        let mut args = graph_cmd(cmd, &base, &graph, &queries, &["-k", "10"]);
        args.extend([
            "--backend",
            "gpu",
            "--beam",
            "32",
            "--search-precision",
            "f16",
        ]);
        if cmd == "eval" {
            args.extend(["--runs", "1"]);
        }
        args.push("--json");
        let out = weft(&args);
        let all = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        );
        assert!(!all.contains("panicked"), "weft {cmd} panicked:\n{all}");
        if out.status.success() {
            let s: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            if cmd == "search" {
                assert_eq!(s["backend"], "gpu");
                assert_eq!(s["search"], "cagra_gpu", "{s}");
                assert_eq!(s["search_precision"], "f16", "{s}");
                assert!(s["mode"].as_str().unwrap().contains("f16 traversal"), "{s}");
            }
        } else {
            no_gpu_branch("search_precision_option", &all);
            assert!(
                all.contains("GPU") || all.contains("CUDA"),
                "weft {cmd} --search-precision f16 without a GPU: unclear error:\n{all}"
            );
        }
    }
    let extra = ["-k", "10", "--backend", "cpu", "--search-precision", "f8"];
    fails_with(
        &graph_cmd("search", &base, &graph, &queries, &extra),
        &["f8"],
    );
}
