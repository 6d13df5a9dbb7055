//! Pickling an `Index`: its state is the files of its own save format ([`weft::Index::save`]),
//! as `(STATE_VERSION, [(file name, bytes), ...])`.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use weft::graph::storage::{self, LoadOptions};
use weft::io::ReadOptions;
use weft::{Error, Index, Result};

/// The version of the pickled state's layout.
pub(crate) const STATE_VERSION: u32 = 1;

/// The graph file of a saved index folder.
const GRAPH_FILE: &str = "graph.wgraph";

/// A private scratch folder under the system's temporary folder, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> Result<Self> {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        loop {
            let n = NEXT.fetch_add(1, Ordering::Relaxed);
            let p = std::env::temp_dir().join(format!("weft-pickle-{}-{n}", std::process::id()));
            match std::fs::create_dir(&p) {
                Ok(()) => return Ok(Scratch(p)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(Error::io(p, e)),
            }
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The files of `index` saved, by name (sorted).
pub(crate) fn to_files(index: &Index) -> Result<Vec<(String, Vec<u8>)>> {
    let scratch = Scratch::new()?;
    let dir = scratch.0.join("index");
    index.save(&dir)?;
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&dir).map_err(|e| Error::io(&dir, e))? {
        let entry = entry.map_err(|e| Error::io(&dir, e))?;
        let path = entry.path();
        let bytes = std::fs::read(&path).map_err(|e| Error::io(&path, e))?;
        files.push((entry.file_name().to_string_lossy().into_owned(), bytes));
    }
    files.sort();
    Ok(files)
}

/// The index whose saved files are `files`, read into memory (checksum verified, graph
/// validated, data fingerprint checked, as [`Index::load`] does).
pub(crate) fn from_files(files: &[(String, Vec<u8>)]) -> Result<Index> {
    let scratch = Scratch::new()?;
    let dir = scratch.0.join("index");
    std::fs::create_dir(&dir).map_err(|e| Error::io(&dir, e))?;
    let mut data_path = None;
    for (name, bytes) in files {
        if Path::new(name).file_name().and_then(|n| n.to_str()) != Some(name.as_str()) {
            return Err(Error::InvalidInput(format!(
                "a pickled weft.Index names the file `{name}`, which is not a file name"
            )));
        }
        let path = dir.join(name);
        std::fs::write(&path, bytes).map_err(|e| Error::io(&path, e))?;
        if name.starts_with("data.") {
            data_path = Some(path);
        }
    }
    let Some(data_path) = data_path else {
        return Err(Error::InvalidInput(
            "a pickled weft.Index holds no vector file".into(),
        ));
    };
    let (graph, meta) = storage::load(dir.join(GRAPH_FILE), LoadOptions::default())?;
    let data = weft::io::read_any(&data_path, &ReadOptions::new().with_mmap(false))?;
    Index::from_parts(data, graph, meta)
}
