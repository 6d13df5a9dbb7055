//! Where files are written and read: the one atomic output of every weft-io writer ([`Output`]),
//! the free-space check ([`check_free_space`]) and the input check ([`check_input_file`]).
//!
//! An output path that is a regular file (or none yet) is written to a temporary file beside it
//! that is renamed over it when complete ([`weft_core::temp_files`]). A character device such as
//! `/dev/null`, or a FIFO, is written in place, streaming: renaming a file over it would destroy
//! the device node or pipe. A directory (or a block device, a socket) is refused
//! ([`weft_core::temp_files::output_target`]).

use std::fs::File;
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;

use weft_core::temp_files::{self, OutputTarget};
use weft_core::{Error, Result};

/// Where the bytes of an [`Output`] go.
enum Sink {
    /// A temporary file beside the target, renamed over it by [`Output::commit`].
    Temp(tempfile::NamedTempFile),
    /// The target itself: a character device or a FIFO.
    Stream(File),
}

/// The open output of one write: a temporary file to rename over the target, or the target
/// itself when it is a character device or FIFO. Dropping it uncommitted deletes the temporary
/// file.
pub(crate) struct Output {
    sink: Sink,
    /// Keeps the temporary file on the process's list ([`weft_core::temp_files`]) until it is
    /// renamed or removed (`None` for a stream).
    _registration: Option<temp_files::Registration>,
}

impl Output {
    /// Opens the output for `path` (see the module documentation); a temporary file is created
    /// after the stale ones killed writers of `path` left behind are removed.
    pub(crate) fn create(path: &Path) -> Result<Self> {
        let name = path
            .file_name()
            .ok_or_else(|| Error::InvalidInput(format!("{} is not a file path", path.display())))?;
        if temp_files::output_target(path)? == OutputTarget::Stream {
            let file = std::fs::OpenOptions::new()
                .write(true)
                .open(path)
                .map_err(|e| Error::io(path, e))?;
            return Ok(Output {
                sink: Sink::Stream(file),
                _registration: None,
            });
        }
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        // `.name.<pid>.<random>.weft-tmp`: see weft_core::temp_files, whose cleanup of files
        // that killed writers of this target left behind runs first.
        temp_files::remove_stale(path);
        let temp = tempfile::Builder::new()
            .prefix(&temp_files::temp_prefix(name))
            .suffix(temp_files::TEMP_SUFFIX)
            .tempfile_in(dir)
            .map_err(|e| Error::io(path, e))?;
        let registration = temp_files::register(temp.path());
        Ok(Output {
            sink: Sink::Temp(temp),
            _registration: Some(registration),
        })
    }

    /// Whether the output is the target itself (a character device or FIFO), written in place.
    pub(crate) fn is_stream(&self) -> bool {
        matches!(self.sink, Sink::Stream(_))
    }

    /// Whether the output can go back to patch what it wrote (a FIFO cannot).
    pub(crate) fn can_seek(&mut self) -> bool {
        self.file().stream_position().is_ok()
    }

    /// The file written to.
    pub(crate) fn file(&mut self) -> &mut File {
        match &mut self.sink {
            Sink::Temp(t) => t.as_file_mut(),
            Sink::Stream(f) => f,
        }
    }

    /// Rewrites `bytes` at offset 0 (a header whose counts are known only at the end).
    pub(crate) fn patch_start(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let file = self.file();
        file.seek(SeekFrom::Start(0))?;
        file.write_all(bytes)
    }

    /// Completes the write: syncs the temporary file, makes it an ordinary file (0644) and
    /// renames it over `path`; a stream has nothing more to do (the caller flushed it).
    pub(crate) fn commit(self, path: &Path) -> Result<()> {
        let io = |e: std::io::Error| Error::io(path, e);
        match self.sink {
            Sink::Stream(_) => Ok(()),
            Sink::Temp(temp) => {
                let file = temp.as_file();
                file.sync_all().map_err(io)?;
                #[cfg(unix)]
                {
                    use std::os::unix::fs::PermissionsExt;
                    // Temporary files are created owner-only; a dataset is an ordinary file.
                    file.set_permissions(std::fs::Permissions::from_mode(0o644))
                        .map_err(io)?;
                }
                temp.persist(path).map_err(|e| io(e.error))?;
                Ok(())
            }
        }
    }
}

impl Write for Output {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.file().write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.file().flush()
    }
}

/// Writes `bytes` to `path` as every weft-io writer does: atomically (temporary file renamed
/// over it) for a regular file, in place for a character device or FIFO, refused for a
/// directory. For small files such as the `.weft.json` description beside a dataset.
pub fn write_file(path: impl AsRef<Path>, bytes: &[u8]) -> Result<()> {
    let path = path.as_ref();
    let mut out = Output::create(path)?;
    out.write_all(bytes)
        .and_then(|()| out.flush())
        .map_err(|e| Error::io(path, e))?;
    out.commit(path)
}

/// Bytes available to this process on the file system that would hold `path` (its directory),
/// or `None` where that cannot be told (not Unix, or the directory cannot be examined).
pub fn available_bytes(path: &Path) -> Option<u64> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    statvfs_available(dir)
}

#[cfg(unix)]
fn statvfs_available(dir: &Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes()).ok()?;
    // SAFETY: `c` is a NUL-terminated path that outlives the call, and `st` is a plain C struct
    // that statvfs fills in; an all-zero value is a valid one to start from.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: as above; statvfs only writes into `st`.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return None;
    }
    #[allow(clippy::unnecessary_cast)] // the field types differ between platforms
    Some((st.f_bavail as u64).saturating_mul(st.f_frsize as u64))
}

#[cfg(not(unix))]
fn statvfs_available(_dir: &Path) -> Option<u64> {
    None
}

/// Refuses, before anything is written, a write of `needed` bytes to `path` that its file
/// system has no room for: an [`Error::Io`] of kind `StorageFull` naming `path` that says the
/// bytes needed and available. A character device or FIFO (written in place) and a file
/// system whose free space cannot be told pass.
pub fn check_free_space(path: impl AsRef<Path>, needed: u64) -> Result<()> {
    let path = path.as_ref();
    if temp_files::output_target(path)? == OutputTarget::Stream {
        return Ok(());
    }
    match available_bytes(path) {
        Some(available) if available < needed => Err(Error::io(
            path,
            std::io::Error::new(
                std::io::ErrorKind::StorageFull,
                format!(
                    "not enough free space: the file needs {needed} bytes ({}), its file system \
                     has {available} bytes ({}) available (nothing was written)",
                    human_bytes(needed),
                    human_bytes(available)
                ),
            ),
        )),
        _ => Ok(()),
    }
}

/// `bytes` in binary units for people (`46.6 TiB`).
fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{bytes} B")
    } else {
        format!("{value:.1} {}", UNITS[unit])
    }
}

/// Refuses an input that is not a regular file (or a symbolic link to one), from its metadata
/// alone, without opening it: a FIFO would block its reader until a writer came, a character
/// device such as `/dev/zero` would never end, and a directory holds no data. The error is an
/// [`Error::Io`] naming `path`: kind `NotFound` (as the system says) for a missing file,
/// `IsADirectory` for a directory, `InvalidInput` for the rest.
pub fn check_input_file(path: impl AsRef<Path>) -> Result<()> {
    let path = path.as_ref();
    let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    let kind = meta.file_type();
    if kind.is_file() {
        return Ok(());
    }
    let (error_kind, what, why) = if kind.is_dir() {
        (std::io::ErrorKind::IsADirectory, "a directory", "")
    } else {
        (
            std::io::ErrorKind::InvalidInput,
            special_kind(&kind),
            special_why(&kind),
        )
    };
    Err(Error::io(
        path,
        std::io::Error::new(
            error_kind,
            format!("is {what}, not a regular file{why}: weft reads its inputs from regular files"),
        ),
    ))
}

/// What a file that is neither a regular file nor a directory is, for people.
fn special_kind(kind: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if kind.is_char_device() {
            return "a character device";
        }
        if kind.is_block_device() {
            return "a block device";
        }
        if kind.is_socket() {
            return "a socket";
        }
    }
    let _ = kind;
    "a special file"
}

/// Why reading such a file is refused, for the kinds where it is not plain.
fn special_why(kind: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() || kind.is_char_device() || kind.is_socket() {
            return " (reading it could block or never end; write the data to a file first)";
        }
    }
    let _ = kind;
    ""
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_for_people() {
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(51_600_000_000_000), "46.9 TiB");
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn a_write_beyond_the_free_space_is_refused_with_both_sizes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("huge.fvecs");
        let err = check_free_space(&path, u64::MAX).unwrap_err();
        let text = err.to_string();
        assert!(
            matches!(&err, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::StorageFull),
            "{text}"
        );
        assert!(
            text.contains(&u64::MAX.to_string()) && text.contains("available"),
            "{text}"
        );
        assert!(!path.exists());
        check_free_space(&path, 1).unwrap();
        // /dev/null is written in place and holds anything.
        check_free_space("/dev/null", u64::MAX).unwrap();
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn inputs_that_are_not_regular_files_are_refused_unopened() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("p.fbin");
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        // Opening the FIFO for reading would block this test forever.
        let err = check_input_file(&fifo).unwrap_err().to_string();
        assert!(err.contains("p.fbin") && err.contains("FIFO"), "{err}");
        let err = crate::info(&fifo).unwrap_err().to_string();
        assert!(err.contains("FIFO"), "{err}");
        let err = check_input_file("/dev/zero").unwrap_err().to_string();
        assert!(err.contains("character device"), "{err}");
        let err = check_input_file(dir.path()).unwrap_err().to_string();
        assert!(err.contains("is a directory"), "{err}");
        let file = dir.path().join("f.txt");
        std::fs::write(&file, b"1\n").unwrap();
        check_input_file(&file).unwrap();
    }

    #[test]
    #[cfg(target_os = "linux")]
    fn writes_to_a_fifo_stream_through_it_and_leave_it_a_fifo() {
        use std::io::Read;
        use std::os::unix::fs::FileTypeExt;
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("p.fbin");
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        let read_all = |path: std::path::PathBuf| {
            std::thread::spawn(move || {
                let mut bytes = vec![];
                std::fs::File::open(path)
                    .unwrap()
                    .read_to_end(&mut bytes)
                    .unwrap();
                bytes
            })
        };
        let is_fifo = |p: &Path| std::fs::symlink_metadata(p).unwrap().file_type().is_fifo();
        // A whole dataset: the header holds its row count from the start.
        let values: Vec<f32> = (0..12).map(|i| i as f32).collect();
        let data = weft_core::DatasetView::new(&values, 3, 4).unwrap();
        let reader = read_all(fifo.clone());
        crate::write(&fifo, data, None).unwrap();
        let bytes = reader.join().unwrap();
        assert_eq!(bytes.len(), 8 + 12 * 4);
        assert_eq!(&bytes[..8], &[3, 0, 0, 0, 4, 0, 0, 0]);
        assert!(is_fifo(&fifo), "the FIFO was replaced");
        // Streaming rows of a count known only at the end: a headerless format only, said
        // before anything is written (no reader is needed to see the refusal).
        let err = crate::VectorWriter::<f32>::create(&fifo, 4, None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("FIFO") && err.contains("fvecs"), "{err}");
        let vecs = dir.path().join("p.fvecs");
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&vecs)
                .status()
                .unwrap()
                .success()
        );
        let reader = read_all(vecs.clone());
        let mut w = crate::VectorWriter::<f32>::create(&vecs, 4, None).unwrap();
        w.push_rows(data).unwrap();
        assert_eq!(w.finish().unwrap(), 3);
        assert_eq!(reader.join().unwrap().len(), 3 * (4 + 16));
        assert!(is_fifo(&vecs));
        // A directory is refused by name, and stays a directory.
        let sub = dir.path().join("d.fbin");
        std::fs::create_dir(&sub).unwrap();
        let err = crate::write(&sub, data, None).unwrap_err().to_string();
        assert!(
            err.contains("d.fbin") && err.contains("is a directory"),
            "{err}"
        );
        assert!(sub.is_dir());
        // Nothing else was left in the folder (no temporary files).
        let mut names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["d.fbin", "p.fbin", "p.fvecs"]);
    }
}
