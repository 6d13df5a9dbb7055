//! The temporary files of weft's atomic writers (graph files, vector and id files): their
//! names, their removal when a process is interrupted, and the removal of those a killed
//! process left behind.
//!
//! A writer of `dir/name` writes `dir/.name.<pid>.<unique>.weft-tmp` and renames it over
//! `dir/name` once complete, so a reader never sees half a file. Such a temporary file is:
//!
//! - removed by the writer on any error or cancellation (its guard's `Drop`);
//! - **registered** while it exists ([`register`]): [`remove_registered`] deletes every one of
//!   this process's, for exits that skip destructors (the `weft` CLI calls it when a second
//!   Ctrl-C exits at once);
//! - **removed by the next writer of the same target** when its process is gone
//!   ([`remove_stale`]): a process killed outright (SIGKILL, a crash, power loss) cannot clean
//!   up, so before creating its own temporary file a writer of `dir/name` deletes each
//!   `dir/.name.<pid>.*.weft-tmp` whose `<pid>` is not a running process (on Linux: no
//!   `/proc/<pid>`). Files of running processes are left alone (another writer may be at work).
//!   Where liveness cannot be told (not Linux) nothing is removed, and the names say what they
//!   are: hidden, the target's name, the writer's pid and the `.weft-tmp` suffix; any of them
//!   whose process is gone can be deleted by hand. Pids are those of this process's pid
//!   namespace: two containers writing the same target in a shared folder at the same moment
//!   could take each other's live temporary file for a dead one's (each write still renames
//!   its own file, or fails).
//!
//! A target that is not a regular file is never renamed over ([`output_target`]): a character
//! device (`/dev/null`) or a FIFO is written in place, streaming, with no temporary file; a
//! directory or any other kind of file is refused.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::{Error, Result};

/// The suffix of every weft temporary file.
pub const TEMP_SUFFIX: &str = ".weft-tmp";

/// The temporary files of this process that exist now.
static LIVE: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// `.name.<pid>.`: how this process's temporary files for a target named `name` begin (the
/// unique part and [`TEMP_SUFFIX`] follow).
pub fn temp_prefix(name: &OsStr) -> OsString {
    let mut p = OsString::from(".");
    p.push(name);
    p.push(format!(".{}.", std::process::id()));
    p
}

/// The temporary file `dir/.name.<pid>.<unique>.weft-tmp` for the target `dir/name`.
pub fn temp_path(dir: &Path, name: &OsStr, unique: impl std::fmt::Display) -> PathBuf {
    let mut p = temp_prefix(name);
    p.push(format!("{unique}{TEMP_SUFFIX}"));
    dir.join(p)
}

/// Keeps a temporary file in this process's list while it lives (dropping it takes the path
/// off the list; it does not delete the file).
#[derive(Debug)]
pub struct Registration(PathBuf);

impl Drop for Registration {
    fn drop(&mut self) {
        let mut live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = live.iter().position(|p| *p == self.0) {
            live.swap_remove(i);
        }
    }
}

/// Puts `path` on the list [`remove_registered`] deletes, until the returned guard is dropped.
pub fn register(path: &Path) -> Registration {
    LIVE.lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(path.to_path_buf());
    Registration(path.to_path_buf())
}

/// Deletes every registered temporary file of this process; returns how many were deleted. For
/// exits that skip destructors (`std::process::exit` from a signal handler).
pub fn remove_registered() -> usize {
    let live = LIVE.lock().unwrap_or_else(|e| e.into_inner());
    live.iter()
        .filter(|p| std::fs::remove_file(p).is_ok())
        .count()
}

/// Whether process `pid` is running: on Linux, whether `/proc/<pid>` exists; elsewhere it
/// cannot be told cheaply and every process counts as running.
fn process_running(pid: u32) -> bool {
    if cfg!(target_os = "linux") {
        Path::new("/proc").join(pid.to_string()).exists()
    } else {
        true
    }
}

/// Deletes the temporary files (and folders) that writers of `target` left behind in its
/// directory when their process died (`.name.<pid>.*.weft-tmp` whose `<pid>` no longer runs,
/// this process's own never); returns how many were deleted. Errors (an unreadable directory, a file gone
/// meanwhile) are ignored: this is housekeeping, and the write that follows reports real
/// problems.
pub fn remove_stale(target: &Path) -> usize {
    let Some(name) = target.file_name() else {
        return 0;
    };
    let dir = match target.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut head = OsString::from(".");
    head.push(name);
    head.push(".");
    let (Some(head), Ok(entries)) = (head.to_str(), std::fs::read_dir(dir)) else {
        return 0;
    };
    let me = std::process::id();
    let mut removed = 0;
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let Some(rest) = file_name
            .to_str()
            .and_then(|f| f.strip_prefix(head))
            .and_then(|r| r.strip_suffix(TEMP_SUFFIX))
        else {
            continue;
        };
        let Some(pid) = rest
            .split_once('.')
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        // A folder: the temporary folder of an index save (`weft::Index::save`).
        let path = entry.path();
        let gone = || match entry.file_type() {
            Ok(t) if t.is_dir() => std::fs::remove_dir_all(&path).is_ok(),
            _ => std::fs::remove_file(&path).is_ok(),
        };
        if pid != me && !process_running(pid) && gone() {
            removed += 1;
        }
    }
    removed
}

/// How a writer treats its target path ([`output_target`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputTarget {
    /// No file yet, or a regular file (or a symbolic link to one): written to a temporary file
    /// beside it that is renamed over it when complete.
    Replace,
    /// A character device (such as `/dev/null`) or a FIFO, or a symbolic link to one: opened
    /// and written in place, streaming, never replaced (renaming a file over it would destroy
    /// the device node or pipe).
    Stream,
}

/// What the output path `path` is, for a writer: [`OutputTarget::Replace`] for a regular file
/// or none, [`OutputTarget::Stream`] for a character device or FIFO. A directory, a block
/// device or a socket is refused with an [`Error::Io`] naming the path (kind `IsADirectory` for
/// a directory, `InvalidInput` otherwise); nothing is written.
pub fn output_target(path: &Path) -> Result<OutputTarget> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(OutputTarget::Replace),
        Err(e) => return Err(Error::io(path, e)),
    };
    let kind = meta.file_type();
    if kind.is_file() {
        return Ok(OutputTarget::Replace);
    }
    if kind.is_dir() {
        return Err(Error::io(
            path,
            std::io::Error::new(
                std::io::ErrorKind::IsADirectory,
                "is a directory: give the path of a file to write (nothing was written)",
            ),
        ));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_char_device() || kind.is_fifo() {
            return Ok(OutputTarget::Stream);
        }
        let what = if kind.is_block_device() {
            "a block device"
        } else if kind.is_socket() {
            "a socket"
        } else {
            "not a regular file"
        };
        Err(Error::io(
            path,
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "is {what}: weft writes regular files, character devices (such as \
                     /dev/null) and FIFOs only (nothing was written)"
                ),
            ),
        ))
    }
    #[cfg(not(unix))]
    Err(Error::io(
        path,
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "is not a regular file: refusing to write over it (nothing was written)",
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pid no process has: that of a child which has exited and been reaped.
    fn dead_pid() -> u32 {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        pid
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn stale_files_of_dead_writers_are_removed_and_live_ones_kept() {
        let dir = std::env::temp_dir().join(format!("weft-temp-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let target = dir.join("g.wgraph");
        let dead = dir.join(format!(".g.wgraph.{}.0{TEMP_SUFFIX}", dead_pid()));
        let mine = temp_path(&dir, OsStr::new("g.wgraph"), 0);
        let other_target = dir.join(format!(".h.wgraph.{}.0{TEMP_SUFFIX}", dead_pid()));
        let not_ours = dir.join(format!(".g.wgraph.{}.0.tmp", dead_pid()));
        for p in [&dead, &mine, &other_target, &not_ours] {
            std::fs::write(p, b"x").unwrap();
        }
        // A killed index save's temporary folder.
        let dead_dir = dir.join(format!(".g.wgraph.{}.1{TEMP_SUFFIX}", dead_pid()));
        std::fs::create_dir_all(&dead_dir).unwrap();
        std::fs::write(dead_dir.join("data.fbin"), b"x").unwrap();
        assert_eq!(remove_stale(&target), 2);
        assert!(!dead.exists() && !dead_dir.exists());
        assert!(mine.exists() && other_target.exists() && not_ours.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn registered_files_are_removed_on_request() {
        let dir = std::env::temp_dir().join(format!("weft-temp-reg-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let a = temp_path(&dir, OsStr::new("a.fbin"), 1);
        let b = temp_path(&dir, OsStr::new("b.fbin"), 2);
        std::fs::write(&a, b"x").unwrap();
        std::fs::write(&b, b"x").unwrap();
        let _ga = register(&a);
        let gb = register(&b);
        drop(gb); // b is committed: no longer this process's to remove.
        assert!(remove_registered() >= 1);
        assert!(!a.exists());
        assert!(b.exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn outputs_that_are_not_regular_files_are_streamed_to_or_refused() {
        let dir = std::env::temp_dir().join(format!("weft-temp-kind-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("f.fbin");
        assert_eq!(output_target(&file).unwrap(), OutputTarget::Replace);
        std::fs::write(&file, b"x").unwrap();
        assert_eq!(output_target(&file).unwrap(), OutputTarget::Replace);
        assert_eq!(
            output_target(Path::new("/dev/null")).unwrap(),
            OutputTarget::Stream
        );
        let fifo = dir.join("p.fbin");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        assert_eq!(output_target(&fifo).unwrap(), OutputTarget::Stream);
        let err = output_target(&dir).unwrap_err();
        assert!(
            matches!(&err, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::IsADirectory),
            "{err}"
        );
        assert!(err.to_string().contains("is a directory"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
