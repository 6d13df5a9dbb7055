//! Replacing a saved index's folder in one step.
//!
//! [`crate::Index::save`] writes a new folder beside the target, `.name.<pid>.<n>.weft-tmp` in
//! the same parent (hidden, named like weft's temporary files, see
//! [`weft_core::temp_files`]), and renames it to the target once every file is complete. An
//! existing target is first renamed aside (`.name.<pid>.<n>-old.weft-tmp`) and removed after the
//! new folder is in place. So:
//!
//! - a save that fails part-way (a full disk, a file size limit, an error, a cancellation)
//!   removes its temporary folder and leaves the old index as it was, loadable;
//! - saves into one folder from several threads or processes never mix their files: each
//!   renames a complete folder of its own, and the last rename wins;
//! - a reader that loads during a save finds the old index, the new one, or (between the two
//!   renames of a replacement, a moment) no folder: never half of one.
//!
//! A target that exists must be a folder holding only an index's files (or weft's temporary
//! files): the folder is replaced whole, so one holding anything else is refused rather than
//! lost. The temporary and set-aside folders of a process that was killed outright are removed
//! by the next save to the same target (those of running processes are left alone).

use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use weft_core::temp_files::{TEMP_SUFFIX, remove_stale, temp_path};
use weft_core::{Error, Result};

/// Renames tried before a save that keeps losing the race to other savers gives up.
const ATTEMPTS: usize = 64;

/// The unique part of this process's temporary folder names.
static NEXT: AtomicU64 = AtomicU64::new(0);

/// Removes a folder when dropped, unless disarmed.
struct RemoveOnDrop(Option<PathBuf>);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = std::fs::remove_dir_all(p);
        }
    }
}

/// Whether `e` says that a rename's target exists (a folder that is not empty).
fn target_exists(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        ErrorKind::AlreadyExists | ErrorKind::DirectoryNotEmpty
    )
}

/// Writes the folder `dir` through `write` (which fills the folder it is given) and puts it in
/// place of any folder `dir` in one rename, as the module says. `allowed`: whether an
/// existing `dir` may hold an entry of that name (besides hidden `.weft-tmp` files); another name is an
/// [`Error::InvalidInput`] and nothing is written. An empty `dir` is an
/// [`Error::InvalidParams`] for `path`.
pub(crate) fn replace_dir(
    dir: &Path,
    allowed: impl Fn(&str) -> bool,
    write: impl FnOnce(&Path) -> Result<()>,
) -> Result<()> {
    if dir.as_os_str().is_empty() {
        return Err(Error::invalid_param(
            "path",
            "an empty path names no folder: give the folder to save the index into",
        ));
    }
    let io = |p: &Path, e: std::io::Error| Error::io(p, e);
    // A link to a folder: the folder it names is replaced, the link kept. `.`, `..`, `a/..`:
    // the folder they name.
    let is_link = std::fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_symlink());
    let dir: PathBuf = if is_link || dir.file_name().is_none() {
        std::fs::canonicalize(dir).map_err(|e| io(dir, e))?
    } else {
        dir.to_path_buf()
    };
    let Some(name) = dir.file_name().map(|n| n.to_os_string()) else {
        return Err(Error::invalid_param(
            "path",
            format!(
                "{} is the root folder: an index is saved into a folder of its own",
                dir.display()
            ),
        ));
    };
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    check_existing(&dir, &allowed)?;
    std::fs::create_dir_all(&parent).map_err(|e| io(&parent, e))?;
    remove_stale(&dir);

    let unique = |tag: &str| {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        temp_path(&parent, &name, format!("{n}{tag}"))
    };
    let temp = loop {
        let t = unique("");
        match std::fs::create_dir(&t) {
            Ok(()) => break t,
            Err(e) if e.kind() == ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(io(&t, e)),
        }
    };
    let mut guard = RemoveOnDrop(Some(temp.clone()));
    write(&temp)?;

    let mut aside: Vec<PathBuf> = Vec::new();
    let mut last_error = None;
    for _ in 0..ATTEMPTS {
        match std::fs::rename(&temp, &dir) {
            Ok(()) => {
                guard.0 = None;
                for old in aside {
                    let _ = std::fs::remove_dir_all(old);
                }
                return Ok(());
            }
            Err(e) if target_exists(&e) => {
                // Another index is there (the old one, or another saver's): set it aside.
                let old = unique("-old");
                match std::fs::rename(&dir, &old) {
                    Ok(()) => aside.push(old),
                    Err(e) if e.kind() == ErrorKind::NotFound => {} // another saver moved it
                    Err(e) => return Err(io(&dir, e)),
                }
                last_error = Some(e);
            }
            Err(e) => {
                // Put back what was set aside, if the place is still free.
                if let Some(old) = aside.pop() {
                    let _ = std::fs::rename(&old, &dir);
                }
                for old in aside {
                    let _ = std::fs::remove_dir_all(old);
                }
                return Err(io(&dir, e));
            }
        }
    }
    for old in aside {
        let _ = std::fs::remove_dir_all(old);
    }
    Err(io(
        &dir,
        last_error.unwrap_or_else(|| std::io::Error::other("other saves kept replacing it")),
    ))
}

/// Refuses an existing `dir` that is not a folder, or that holds a name outside `allowed` and
/// weft's temporary files: replacing it would lose that.
fn check_existing(dir: &Path, allowed: &dyn Fn(&str) -> bool) -> Result<()> {
    let meta = match std::fs::metadata(dir) {
        Ok(m) => m,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io(dir, e)),
    };
    if !meta.is_dir() {
        return Err(Error::InvalidInput(format!(
            "{} exists and is not a folder: an index is saved into a folder",
            dir.display()
        )));
    }
    // A folder that another saver sets aside between these calls is no longer there to check:
    // the renames below handle what is there then.
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io(dir, e)),
    };
    for entry in entries {
        let entry = match entry {
            Ok(entry) => entry,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(Error::io(dir, e)),
        };
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let temporary = name.starts_with('.') && name.ends_with(TEMP_SUFFIX);
        if !temporary && !allowed(&name) {
            return Err(Error::InvalidInput(format!(
                "{} holds `{name}`, which is not part of a weft index: saving replaces the \
                 folder whole, so save into a new or empty folder or over a saved index",
                dir.display()
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Algorithm, Index, SearchParams};
    use weft_core::Dataset;

    fn index(seed: u64) -> Index {
        let (n, dim) = (300usize, 8usize);
        let mut rng = weft_core::rng::SplitMix64::new(seed);
        let values: Vec<f32> = (0..n * dim).map(|_| rng.below(1000) as f32).collect();
        Index::builder(Algorithm::exact(5))
            .build(Dataset::from_vec(values, n, dim).unwrap())
            .unwrap()
    }

    fn same(a: &Index, b: &Index) -> bool {
        let q = weft_core::Dataset::from_vec(vec![3.0f32; 8], 1, 8).unwrap();
        let p = SearchParams::exact();
        let (x, y) = (
            a.search(q.view(), 5, &p).unwrap(),
            b.search(q.view(), 5, &p).unwrap(),
        );
        x.neighbors.ids == y.neighbors.ids
            && crate::index::data_fingerprint(a.data()) == crate::index::data_fingerprint(b.data())
    }

    fn hidden_entries(parent: &Path) -> Vec<String> {
        std::fs::read_dir(parent)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with('.'))
            .collect()
    }

    /// Issue 34 item 12: a save that failed part-way (here after its data file, before its
    /// graph) left the new vectors beside the old graph, an index that no longer loaded.
    #[test]
    fn a_save_that_fails_part_way_leaves_the_old_index_loadable() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("idx");
        let (a, b) = (index(1), index(2));
        a.save(&dir).unwrap();
        let injected = replace_dir(
            &dir,
            |n| ["graph.wgraph", "data.fbin"].contains(&n),
            |tmp| {
                let (name, format) = crate::index::data_file_name(b.data().dtype());
                weft_io::write_any(tmp.join(name), b.data(), Some(format))?;
                Err(Error::Io {
                    path: tmp.join("graph.wgraph"),
                    source: std::io::Error::other("injected: file too large"),
                })
            },
        );
        assert!(matches!(injected, Err(Error::Io { .. })), "{injected:?}");
        let loaded = Index::load(&dir).unwrap();
        assert!(same(&loaded, &a));
        assert!(
            hidden_entries(root.path()).is_empty(),
            "a temporary folder was left"
        );
        // A complete save replaces it whole.
        b.save(&dir).unwrap();
        assert!(same(&Index::load(&dir).unwrap(), &b));
        assert!(hidden_entries(root.path()).is_empty());
    }

    /// Two threads saving into one folder: every load afterwards finds one index whole.
    #[test]
    fn concurrent_saves_never_mix_files() {
        let root = tempfile::tempdir().unwrap();
        let dir = root.path().join("idx");
        let (a, b) = (index(3), index(4));
        std::thread::scope(|s| {
            for i in [&a, &b] {
                let dir = &dir;
                s.spawn(move || {
                    for _ in 0..20 {
                        i.save(dir).unwrap();
                    }
                });
            }
        });
        let loaded = Index::load(&dir).unwrap();
        assert!(same(&loaded, &a) || same(&loaded, &b));
        assert!(hidden_entries(root.path()).is_empty());
    }

    #[test]
    fn empty_paths_and_foreign_folders_are_refused() {
        let a = index(5);
        match a.save("") {
            Err(Error::InvalidParams { name, .. }) => assert_eq!(name, "path"),
            other => panic!("{other:?}"),
        }
        let root = tempfile::tempdir().unwrap();
        std::fs::write(root.path().join("notes.txt"), b"mine").unwrap();
        match a.save(root.path()) {
            Err(Error::InvalidInput(m)) => assert!(m.contains("notes.txt"), "{m}"),
            other => panic!("{other:?}"),
        }
        assert!(root.path().join("notes.txt").exists());
        let file = root.path().join("file");
        std::fs::write(&file, b"x").unwrap();
        assert!(matches!(a.save(&file), Err(Error::InvalidInput(_))));
        // An existing empty folder is fine, and so is saving over a saved index.
        let empty = root.path().join("empty");
        std::fs::create_dir(&empty).unwrap();
        a.save(&empty).unwrap();
        a.save(&empty).unwrap();
        assert!(same(&Index::load(&empty).unwrap(), &a));
    }
}
