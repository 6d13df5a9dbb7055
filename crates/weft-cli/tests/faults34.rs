//! Issue 34's faults, items 11, 13 (free space), 14 and 15, each as a user meets it: outputs
//! renamed over device nodes and FIFOs, `gen` starting files its disk cannot hold, a dataset's
//! `.weft.json` description overwritten or silently ignored when malformed, and inputs that
//! block or never end (FIFOs, `/dev/zero`). Item 13's signals are in `interrupts.rs`.
#![cfg(target_os = "linux")]

mod common;

use std::io::Read;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{fails_with, ok, ok_json, p, text, weft_cmd};

/// Makes a FIFO at `path`.
fn mkfifo(path: &Path) {
    let made = std::process::Command::new("mkfifo")
        .arg(path)
        .status()
        .unwrap();
    assert!(made.success(), "mkfifo {}", path.display());
}

/// Makes a character device node at `path` with the numbers of `/dev/null` (1, 3); false where
/// this process may not (not root, or no CAP_MKNOD).
fn mknod_null(path: &Path) -> bool {
    std::process::Command::new("mknod")
        .arg(path)
        .args(["c", "1", "3"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn is_char_device(path: &str) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_char_device())
}

fn is_fifo(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_fifo())
}

/// Starts a thread that reads `fifo` to its end and returns the bytes.
fn read_fifo(fifo: &Path) -> std::thread::JoinHandle<Vec<u8>> {
    let fifo = fifo.to_path_buf();
    std::thread::spawn(move || {
        let mut bytes = vec![];
        std::fs::File::open(&fifo)
            .unwrap()
            .read_to_end(&mut bytes)
            .unwrap();
        bytes
    })
}

/// Runs `weft args`, which must end (failing) within 30 s; kills it and fails the test if it
/// does not (it blocks on its input, or writes what it should have refused). Returns stderr.
fn fails_in_time(args: &[&str], needles: &[&str]) -> String {
    let mut child = weft_cmd(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > Duration::from_secs(30) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("weft {args:?} still running after 30 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let err = text(&out.stderr);
    assert!(!out.status.success(), "weft {args:?} should fail:\n{err}");
    assert!(!err.contains("panicked"), "{err}");
    for needle in needles {
        assert!(
            err.contains(needle),
            "weft {args:?}: expected `{needle}` in:\n{err}"
        );
    }
    err
}

/// The arguments of `weft gt` for the 5 nearest `base` points of each of `queries`, into `out`.
fn gt_args<'a>(base: &'a str, queries: &'a str, out: &'a str) -> [&'a str; 9] {
    [
        "gt",
        "--base",
        base,
        "--queries",
        queries,
        "-k",
        "5",
        "--out",
        out,
    ]
}

/// A small sift-like base set `b.fbin` with 20 queries `b.queries.fbin`.
fn small_data(d: &Path) -> (String, String) {
    let base = p(d, "b.fbin");
    ok(&["gen", "-n", "300", "--queries", "20", "--out", &base]);
    (base, p(d, "b.queries.fbin"))
}

fn weft_temp_files(d: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(d)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".weft-tmp"))
        .collect()
}

// 11. Outputs replace device nodes.

#[test]
fn outputs_to_a_character_device_are_written_in_place_not_renamed_over_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (base, queries) = small_data(d);
    // Each output kind to its own device node (the numbers of /dev/null), so that a rename over
    // one shows as a regular file where the node was.
    let nodes = [p(d, "null.wgraph"), p(d, "null.ivecs"), p(d, "null.fbin")];
    if !nodes.iter().all(|n| mknod_null(Path::new(n))) {
        eprintln!("skipped: this process cannot make device nodes (needs root)");
        return;
    }
    ok(&[
        "build", "--algo", "exact", "-k", "4", "--data", &base, "--out", &nodes[0],
    ]);
    assert!(is_char_device(&nodes[0]), "build replaced the device node");
    ok(&gt_args(&base, &queries, &nodes[1]));
    assert!(is_char_device(&nodes[1]), "gt replaced the device node");
    let json = ok_json(&["gen", "-n", "100", "--queries", "0", "--out", &nodes[2]]);
    assert!(is_char_device(&nodes[2]), "gen replaced the device node");
    // No description of a file that does not exist.
    assert!(!Path::new(&format!("{}.weft.json", nodes[2])).exists());
    assert_eq!(json["description"], serde_json::Value::Null);
    // search writes ids and distances to devices too.
    let graph = p(d, "g.wgraph");
    ok(&[
        "build", "--algo", "exact", "-k", "4", "--data", &base, "--out", &graph,
    ]);
    let dists = p(d, "null.dists.fvecs");
    assert!(mknod_null(Path::new(&dists)));
    ok(&[
        "search",
        "--data",
        &base,
        "--graph",
        &graph,
        "--queries",
        &queries,
        "-k",
        "3",
        "--out",
        &nodes[1],
        "--distances-out",
        &dists,
    ]);
    assert!(is_char_device(&nodes[1]) && is_char_device(&dists));
    assert_eq!(weft_temp_files(d), Vec::<PathBuf>::new());
}

#[test]
fn outputs_to_a_fifo_are_streamed_through_it() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (base, queries) = small_data(d);
    // gen: an fbin file whose header holds the row count from the start.
    let fifo = d.join("pipe.fbin");
    mkfifo(&fifo);
    let reader = read_fifo(&fifo);
    ok(&[
        "gen",
        "-n",
        "100",
        "--queries",
        "0",
        "--out",
        fifo.to_str().unwrap(),
    ]);
    // Checked first: a writer that renamed a file over the FIFO never opened it, and the
    // reader would wait for it forever.
    assert!(is_fifo(&fifo), "gen replaced the FIFO");
    let bytes = reader.join().unwrap();
    assert_eq!(bytes.len(), 8 + 100 * 128 * 4);
    assert_eq!(&bytes[..8], &[100, 0, 0, 0, 128, 0, 0, 0]);
    // build: a whole graph file, as `weft info` reads it once saved.
    let gfifo = d.join("pipe.wgraph");
    mkfifo(&gfifo);
    let reader = read_fifo(&gfifo);
    ok(&[
        "build",
        "--algo",
        "exact",
        "-k",
        "4",
        "--data",
        &base,
        "--out",
        gfifo.to_str().unwrap(),
    ]);
    assert!(is_fifo(&gfifo), "build replaced the FIFO");
    let graph = reader.join().unwrap();
    let saved = p(d, "copy.wgraph");
    std::fs::write(&saved, &graph).unwrap();
    let info = ok_json(&["info", &saved]);
    assert_eq!(info[0]["n"], 300);
    // gt: ids.
    let ififo = d.join("pipe.ibin");
    mkfifo(&ififo);
    let reader = read_fifo(&ififo);
    ok(&gt_args(&base, &queries, ififo.to_str().unwrap()));
    assert!(is_fifo(&ififo), "gt replaced the FIFO");
    assert_eq!(reader.join().unwrap().len(), 8 + 20 * 5 * 4);
    assert_eq!(weft_temp_files(d), Vec::<PathBuf>::new());
}

#[test]
fn an_output_that_is_a_directory_is_refused_before_any_work() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (base, queries) = small_data(d);
    let sub = p(d, "sub.wgraph");
    std::fs::create_dir(&sub).unwrap();
    fails_with(
        &[
            "build", "--algo", "exact", "-k", "4", "--data", &base, "--out", &sub,
        ],
        &["--out", "sub.wgraph", "is a directory"],
    );
    let ids = p(d, "sub.ivecs");
    std::fs::create_dir(&ids).unwrap();
    fails_with(&gt_args(&base, &queries, &ids), &["is a directory"]);
    let data = p(d, "sub.fbin");
    std::fs::create_dir(&data).unwrap();
    fails_with(
        &["gen", "-n", "10", "--queries", "0", "--out", &data],
        &["is a directory"],
    );
    assert!(Path::new(&sub).is_dir() && Path::new(&ids).is_dir() && Path::new(&data).is_dir());
}

// 13. gen starts a file its disk cannot hold.

#[test]
fn gen_refuses_a_dataset_larger_than_the_free_space() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for name in ["huge.fbin", "huge.fvecs"] {
        let out = p(d, name);
        // In time: a gen that starts writing 51 TB is stopped (and fails the test).
        let err = fails_in_time(
            &["gen", "-n", "100000000000", "--out", &out],
            &[name, "not enough free space", "bytes", "available"],
        );
        // 10^11 rows of 128 f32 (+ the header) and 10,000 queries: about 51 TB.
        assert!(err.contains("TiB"), "{err}");
        assert!(!Path::new(&out).exists());
    }
    assert_eq!(
        std::fs::read_dir(d).unwrap().count(),
        0,
        "nothing was written"
    );
}

// 14. The data's description can be overwritten silently, and a malformed one is ignored.

#[test]
fn a_dataset_description_is_never_an_output_and_never_silently_ignored() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let base = p(d, "x.fbin");
    ok(&[
        "gen",
        "--preset",
        "glove",
        "-n",
        "300",
        "--queries",
        "20",
        "--out",
        &base,
    ]);
    let sidecar = format!("{base}.weft.json");
    let recorded = std::fs::read_to_string(&sidecar).unwrap();
    assert!(recorded.contains("cosine"));
    // An output named as the description (of this data, or any) is refused before any work.
    for out in [sidecar.clone(), p(d, "other.weft.json")] {
        fails_with(
            &[
                "build", "--algo", "exact", "-k", "4", "--data", &base, "--out", &out,
            ],
            &["--out", ".weft.json", "refusing to write over it"],
        );
    }
    assert_eq!(std::fs::read_to_string(&sidecar).unwrap(), recorded);
    assert!(!Path::new(&p(d, "other.weft.json")).exists());
    let json = ok_json(&[
        "build",
        "--algo",
        "exact",
        "-k",
        "4",
        "--data",
        &base,
        "--out",
        &p(d, "g.wgraph"),
    ]);
    assert_eq!(json["metric"], "cosine");
    // A malformed description is an error naming it, not a fall back to l2.
    let queries = p(d, "x.queries.fbin");
    for bad in [
        "{ not json",
        r#"{"metric": "cosin"}"#,
        r#"{"preset": "glove"}"#,
    ] {
        std::fs::write(&sidecar, bad).unwrap();
        fails_with(
            &[
                "build",
                "--algo",
                "exact",
                "-k",
                "4",
                "--data",
                &base,
                "--out",
                &p(d, "h.wgraph"),
            ],
            &["x.fbin.weft.json", "malformed"],
        );
        fails_with(
            &gt_args(&base, &queries, &p(d, "t.ivecs")),
            &["x.fbin.weft.json", "malformed"],
        );
    }
    assert!(!Path::new(&p(d, "h.wgraph")).exists() && !Path::new(&p(d, "t.ivecs")).exists());
    // --metric decides then, with a warning that names the broken file.
    let out = ok(&[
        "build",
        "--algo",
        "exact",
        "-k",
        "4",
        "--metric",
        "l2",
        "--data",
        &base,
        "--out",
        &p(d, "h.wgraph"),
    ]);
    let err = text(&out.stderr);
    assert!(
        err.contains("warning") && err.contains("x.fbin.weft.json"),
        "{err}"
    );
}

// 15. Non-regular inputs block, and a beam width the user never gave is blamed.

#[test]
fn inputs_that_are_fifos_or_devices_are_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (base, queries) = small_data(d);
    let graph = p(d, "g.wgraph");
    ok(&[
        "build", "--algo", "exact", "-k", "4", "--data", &base, "--out", &graph,
    ]);
    let fifo = d.join("fifo");
    mkfifo(&fifo);
    let fifo = fifo.to_str().unwrap();
    fails_in_time(&["info", fifo], &[fifo, "FIFO", "not a regular file"]);
    let search = |filter: &str| {
        vec![
            "search",
            "--data",
            &base,
            "--graph",
            &graph,
            "--queries",
            &queries,
            "-k",
            "3",
            "--filter",
        ]
        .into_iter()
        .map(String::from)
        .chain([filter.to_string()])
        .collect::<Vec<_>>()
    };
    let args = search(fifo);
    fails_in_time(
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
        &["--filter", fifo, "FIFO"],
    );
    let args = search("/dev/zero");
    fails_in_time(
        &args.iter().map(String::as_str).collect::<Vec<_>>(),
        &["--filter /dev/zero", "character device"],
    );
    // Vector inputs and the graph alike.
    let fbin_fifo = p(d, "q.fbin");
    mkfifo(Path::new(&fbin_fifo));
    fails_in_time(
        &[
            "search",
            "--data",
            &base,
            "--graph",
            &graph,
            "--queries",
            &fbin_fifo,
            "-k",
            "3",
        ],
        &["q.fbin", "FIFO"],
    );
    fails_in_time(
        &[
            "search",
            "--data",
            &base,
            "--graph",
            fifo,
            "--queries",
            &queries,
            "-k",
            "3",
        ],
        &["--graph", "FIFO"],
    );
    fails_in_time(
        &[
            "build",
            "--algo",
            "exact",
            "-k",
            "4",
            "--data",
            &fbin_fifo,
            "--out",
            &p(d, "h.wgraph"),
        ],
        &["q.fbin", "FIFO"],
    );
    fails_in_time(&["info", d.to_str().unwrap()], &["is a directory"]);
}
