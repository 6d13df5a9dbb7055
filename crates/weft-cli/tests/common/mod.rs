//! Running the `weft` binary from the integration tests: one copy of the helpers every test
//! file uses (each file uses a subset).
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

/// The `weft` binary with `args`, on 2 worker threads: the one cargo built, or `$WEFT_CLI_BIN`
/// (a test binary carried to another machine, e.g. the GPU machine of a device pack, runs the
/// `weft` binary carried with it).
pub fn weft_cmd(args: &[&str]) -> Command {
    let bin = std::env::var_os("WEFT_CLI_BIN")
        .unwrap_or_else(|| std::ffi::OsString::from(env!("CARGO_BIN_EXE_weft")));
    let mut c = Command::new(bin);
    c.args(args).env("RAYON_NUM_THREADS", "2");
    c
}

/// Marks test `what`'s branch for a machine without a usable GPU: under `WEFT_REQUIRE_GPU` (as
/// on the GPU machine of a device pack; `weft::gpu::testing::gpu_required`) it fails with
/// `output` (what made the test take it), so that a GPU run cannot pass through the branch
/// meant for a machine without one.
pub fn no_gpu_branch(what: &str, output: &str) {
    assert!(
        !weft::gpu::testing::gpu_required(),
        "{what}: WEFT_REQUIRE_GPU is set but the test took its no-GPU branch:\n{output}"
    );
}

/// Runs `weft args` to the end.
pub fn weft(args: &[&str]) -> Output {
    weft_cmd(args).output().expect("the weft binary runs")
}

/// Bytes of an output stream as text.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Runs `args`, which must succeed.
pub fn ok(args: &[&str]) -> Output {
    let out = weft(args);
    assert!(
        out.status.success(),
        "weft {args:?} failed:\n{}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    out
}

/// stdout of a successful run.
pub fn ok_text(args: &[&str]) -> String {
    text(&ok(args).stdout)
}

/// The JSON document a successful run prints with `--json`.
pub fn ok_json(args: &[&str]) -> serde_json::Value {
    let mut all = args.to_vec();
    all.push("--json");
    serde_json::from_slice(&ok(&all).stdout).expect("--json prints JSON")
}

/// Runs `args`, which must fail without a panic; returns stderr.
pub fn fails(args: &[&str]) -> String {
    let out = weft(args);
    let err = text(&out.stderr);
    assert!(
        !out.status.success(),
        "weft {args:?} should fail:\n{}\n{err}",
        text(&out.stdout)
    );
    assert!(!err.contains("panicked"), "weft {args:?} panicked:\n{err}");
    err
}

/// [`fails`], with every one of `needles` in stderr.
pub fn fails_with(args: &[&str], needles: &[&str]) -> String {
    let err = fails(args);
    for needle in needles {
        assert!(
            err.contains(needle),
            "weft {args:?}: expected `{needle}` in:\n{err}"
        );
    }
    err
}

/// Runs `args`, which must fail without a panic, with every GPU hidden from the process
/// (`CUDA_VISIBLE_DEVICES` empty): a machine without a usable GPU, also on the GPU machine.
/// Each of `needles` must be in stderr; returns stderr.
pub fn fails_without_gpu(args: &[&str], needles: &[&str]) -> String {
    let out = weft_cmd(args)
        .env("CUDA_VISIBLE_DEVICES", "")
        .output()
        .expect("the weft binary runs");
    let err = text(&out.stderr);
    assert!(
        !out.status.success(),
        "weft {args:?} without a GPU should fail:\n{}\n{err}",
        text(&out.stdout)
    );
    assert!(!err.contains("panicked"), "weft {args:?} panicked:\n{err}");
    for needle in needles {
        assert!(
            err.contains(needle),
            "weft {args:?}: expected `{needle}` in:\n{err}"
        );
    }
    err
}

/// `dir/name` as a string argument.
pub fn p(dir: &Path, name: &str) -> String {
    dir.join(name).to_string_lossy().into_owned()
}

/// `n` SIFT-like points (`b.fbin`), their `queries` (`b.queries.fbin`) and an RNN-Descent graph
/// of them (`g.wgraph`) in `d`, made by `weft gen` and `weft build`; returns the three paths.
pub fn sift_rnndescent(d: &Path, n: usize, queries: usize) -> (String, String, String) {
    let (base, q, graph) = (p(d, "b.fbin"), p(d, "b.queries.fbin"), p(d, "g.wgraph"));
    let (n, queries) = (n.to_string(), queries.to_string());
    ok_json(&[
        "gen",
        "--preset",
        "sift",
        "-n",
        &n,
        "--queries",
        &queries,
        "--out",
        &base,
    ]);
    ok_json(&[
        "build",
        "--algo",
        "rnndescent",
        "--data",
        &base,
        "--out",
        &graph,
    ]);
    (base, q, graph)
}

/// `cmd --data base --graph graph --queries queries` followed by `extra`: the arguments every
/// `weft search` / `weft eval` call of the tests starts with.
pub fn graph_cmd<'a>(
    cmd: &'a str,
    base: &'a str,
    graph: &'a str,
    queries: &'a str,
    extra: &[&'a str],
) -> Vec<&'a str> {
    let mut args = vec![cmd, "--data", base, "--graph", graph, "--queries", queries];
    args.extend_from_slice(extra);
    args
}
