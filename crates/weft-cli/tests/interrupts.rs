//! Issue 19's interruption faults, as a user meets them: `search` and `gen` ignored the first
//! Ctrl-C, a second Ctrl-C left a hidden temporary file behind, and so did a process killed
//! while writing (SIGKILL), with nothing that ever removed it.
//!
//! What weft does now (see `weft_core::temp_files`): the first Ctrl-C cancels every command
//! (exit status 130, no output file, no temporary file); the second exits at once after
//! deleting the temporary files of the writes in progress; and a writer removes the temporary
//! files that killed writers of the same target left behind (`.name.<pid>.*.weft-tmp` of a pid
//! that no longer runs).
#![cfg(target_os = "linux")]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use common::{ok, p, text, weft_cmd};

/// The weft temporary files in `dir`.
fn temp_files(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().ends_with(".weft-tmp"))
        .collect()
}

/// Waits (up to 60 s) until `dir` holds a weft temporary file, i.e. `child` is writing.
fn wait_for_temp_file(dir: &Path, child: &mut Child) {
    let start = Instant::now();
    while temp_files(dir).is_empty() {
        if let Some(status) = child.try_wait().unwrap() {
            panic!("weft ended ({status}) before it wrote anything");
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no temporary file appeared"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn signal(child: &Child, sig: &str) {
    let status = std::process::Command::new("kill")
        .args([sig, &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Waits for `child` to end within `limit`; kills it and fails the test otherwise.
fn wait_within(mut child: Child, limit: Duration, what: &str) -> (Option<i32>, String) {
    let start = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            let out = child.wait_with_output().unwrap();
            return (out.status.code(), text(&out.stderr));
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still running {limit:?} after Ctrl-C");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `weft gen` of `n` sift-like vectors (and no queries) to `out`, started in the background.
fn spawn_gen(out: &str, n: u64) -> Child {
    weft_cmd(&["gen", "-n", &n.to_string(), "--queries", "0", "--out", out])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Rows that take `weft gen` far longer than the tests wait (about 1.5 GB).
const BIG: u64 = 3_000_000;

#[test]
fn gen_stops_at_the_first_ctrl_c_and_leaves_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = p(dir.path(), "big.fbin");
    let mut child = spawn_gen(&out, BIG);
    wait_for_temp_file(dir.path(), &mut child);
    signal(&child, "-INT");
    let (code, err) = wait_within(child, Duration::from_secs(20), "gen");
    assert_eq!(code, Some(130), "{err}");
    assert!(err.contains("cancelled"), "{err}");
    assert!(!err.contains("interrupted again"), "{err}");
    assert!(!Path::new(&out).exists());
    assert_eq!(temp_files(dir.path()), Vec::<PathBuf>::new());
}

#[test]
fn a_second_ctrl_c_exits_and_removes_the_temporary_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = p(dir.path(), "big.fbin");
    let mut child = spawn_gen(&out, BIG);
    wait_for_temp_file(dir.path(), &mut child);
    signal(&child, "-INT");
    signal(&child, "-INT");
    let (code, err) = wait_within(child, Duration::from_secs(20), "gen");
    assert_eq!(code, Some(130), "{err}");
    assert!(!Path::new(&out).exists());
    assert_eq!(temp_files(dir.path()), Vec::<PathBuf>::new());
}

/// Issue 34 item 13: SIGTERM (`kill`, a service manager) killed `weft gen` outright (exit 143)
/// and left its hidden temporary file; it cancels like Ctrl-C now, and so does SIGHUP.
#[test]
fn sigterm_and_sighup_cancel_like_ctrl_c_and_leave_no_file() {
    for sig in ["-TERM", "-HUP"] {
        let dir = tempfile::tempdir().unwrap();
        let out = p(dir.path(), "big.fbin");
        let mut child = spawn_gen(&out, BIG);
        wait_for_temp_file(dir.path(), &mut child);
        signal(&child, sig);
        let (code, err) = wait_within(child, Duration::from_secs(20), "gen");
        assert_eq!(code, Some(130), "kill {sig}: {err}");
        assert!(err.contains("cancelled"), "kill {sig}: {err}");
        assert!(!Path::new(&out).exists());
        assert_eq!(temp_files(dir.path()), Vec::<PathBuf>::new(), "kill {sig}");
    }
    // A second SIGTERM exits at once, and removes the temporary file too.
    let dir = tempfile::tempdir().unwrap();
    let out = p(dir.path(), "big.fbin");
    let mut child = spawn_gen(&out, BIG);
    wait_for_temp_file(dir.path(), &mut child);
    signal(&child, "-TERM");
    signal(&child, "-TERM");
    let (code, err) = wait_within(child, Duration::from_secs(20), "gen");
    assert_eq!(code, Some(130), "{err}");
    assert_eq!(temp_files(dir.path()), Vec::<PathBuf>::new());
}

#[test]
fn search_stops_at_the_first_ctrl_c() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let base = p(d, "b.fbin");
    let queries = p(d, "q.fbin");
    ok(&[
        "gen",
        "-n",
        "50000",
        "--queries",
        "100000",
        "--out",
        &base,
        "--queries-out",
        &queries,
    ]);
    ok(&[
        "build",
        "--algo",
        "exact",
        "-k",
        "2",
        "--data",
        &base,
        "--out",
        &p(d, "g.wgraph"),
    ]);
    // An exhaustive search of 100,000 queries over 50,000 vectors on one thread: far longer
    // than the 1.5 s before the signal, even on a fast machine.
    let child = weft_cmd(&[
        "--threads",
        "1",
        "search",
        "--exact",
        "--data",
        &base,
        "--graph",
        &p(d, "g.wgraph"),
        "--queries",
        &queries,
        "-k",
        "10",
        "--out",
        &p(d, "ids.ivecs"),
    ])
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    // Past start-up (the handler is installed first thing), into loading or searching.
    std::thread::sleep(Duration::from_millis(1500));
    signal(&child, "-INT");
    let (code, err) = wait_within(child, Duration::from_secs(30), "search");
    assert_eq!(code, Some(130), "{err}");
    assert!(err.contains("cancelled"), "{err}");
    assert!(!err.contains("interrupted again"), "{err}");
    assert!(!Path::new(&p(d, "ids.ivecs")).exists());
}

#[test]
fn the_next_write_removes_what_a_killed_writer_left() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let out = p(d, "big.fbin");
    let mut child = spawn_gen(&out, BIG);
    wait_for_temp_file(d, &mut child);
    child.kill().unwrap(); // SIGKILL: no handler runs.
    child.wait().unwrap();
    let left = temp_files(d);
    assert_eq!(left.len(), 1, "a killed writer leaves its temporary file");
    let name = left[0].file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        name.starts_with(".big.fbin.") && name.ends_with(".weft-tmp"),
        "{name}"
    );
    // Another target's writer leaves it alone; the next writer of the same target removes it.
    ok(&[
        "gen",
        "-n",
        "10",
        "--queries",
        "0",
        "--out",
        &p(d, "other.fbin"),
    ]);
    assert_eq!(temp_files(d), left);
    ok(&["gen", "-n", "10", "--queries", "0", "--out", &out]);
    assert_eq!(temp_files(d), Vec::<PathBuf>::new());

    // The same for graph files: a stale temporary file of a dead writer of g.wgraph goes.
    let dead = {
        let mut c = std::process::Command::new("true").spawn().unwrap();
        let pid = c.id();
        c.wait().unwrap();
        pid
    };
    let stale = d.join(format!(".g.wgraph.{dead}.0.weft-tmp"));
    std::fs::write(&stale, b"half a graph").unwrap();
    ok(&[
        "build",
        "--algo",
        "exact",
        "-k",
        "2",
        "--data",
        &p(d, "other.fbin"),
        "--out",
        &p(d, "g.wgraph"),
    ]);
    assert!(!stale.exists());
    assert!(d.join("g.wgraph").exists());
}
