//! The on-disk graph format (`.wgraph`).
//!
//! One file holds one graph — a [`KnnGraph`], a [`FixedDegreeGraph`] or a [`HierGraph`] — with
//! its [`GraphMeta`] (metric, element type and dimension of the data it was built on, and the
//! algorithm and parameters that built it, as JSON). Payload sections start on 64-byte
//! boundaries, so a memory-mapped file serves ids and distances in place through
//! [`SharedSlice`] ([`LoadOptions::mmap`]): no copy, no parse.
//!
//! # Byte layout (version 1, all integers little-endian)
//!
//! ```text
//! offset  size  field
//! 0       8     magic "WEFTGRPH"
//! 8       4     u32 format version (1)
//! 12      4     u32 header_len = 64 + 32 * num_sections
//! 16      8     u64 file_len: total file size, trailer included
//! 24      1     u8 kind: 0 = k-NN, 1 = fixed-degree, 2 = hierarchical
//! 25      1     u8 metric code (Metric::code: 0 = l2, 1 = ip, 2 = cosine)
//! 26      1     u8 dtype code of the data (DType::code), 255 = not recorded
//! 27      1     reserved, 0
//! 28      4     u32 num_sections
//! 32      8     u64 n: number of points (vertices of layer 0)
//! 40      8     u64 degree: k of a k-NN graph, slots per row otherwise (layer 0)
//! 48      8     u64 dim of the data, 0 = not recorded
//! 56      4     u32 num_layers (1 unless hierarchical)
//! 60      4     reserved, 0
//! 64      32*S  section table, S = num_sections entries of:
//!                 u32 tag, u32 layer, u64 offset (from file start, multiple of 64),
//!                 u64 rows, u64 cols   (byte length = rows * cols * element size)
//! ...           sections, each at its offset; zero bytes in between
//! file_len-8 4  u32 CRC-32 (IEEE, crc32fast) of bytes [0, file_len - 8)
//! file_len-4 4  trailer magic "GEND"
//! ```
//!
//! Section tags (element type; shape):
//!
//! | tag | name         | element | rows x cols                  | present in      |
//! |-----|--------------|---------|------------------------------|-----------------|
//! | 1   | params       | u8      | JSON byte length x 1         | every kind      |
//! | 2   | entry points | u32     | count x 1 (global ids)       | every kind (0 rows for k-NN) |
//! | 3   | ids          | u32     | layer size x layer degree    | every layer     |
//! | 4   | distances    | f32     | n x k                        | k-NN            |
//! | 5   | global ids   | u32     | layer size x 1               | layers >= 1     |
//!
//! Every (tag, layer) pair appears exactly once; sections do not overlap. The writer orders
//! them: params, entry points, then per layer ids (and distances, or global ids).
//!
//! # Guarantees
//!
//! - Writes are atomic: a temporary file in the same directory is written, fsynced and renamed
//!   over the target (then the directory is fsynced). A failure removes the temporary file and
//!   leaves any previous file untouched. Temporary files are named and cleaned up as
//!   [`weft_core::temp_files`] says (also after an interrupted or killed process).
//! - Loads check, before allocating anything, that the header's sizes fit the actual file. With
//!   [`LoadOptions::verify_checksum`] (the default) the CRC is checked; with
//!   [`LoadOptions::validate`] (the default) the graph invariants are checked too.
//! - Every defect is an [`Error::Format`] whose reason starts with a stable phrase, one per
//!   [`FormatIssue`] (wrong magic, unsupported version, truncated file, trailing bytes, bad
//!   trailer, checksum mismatch, inconsistent header, sizes beyond the file);
//!   [`FormatIssue::of`] classifies an error. Operating-system failures are [`Error::Io`]; a
//!   graph that breaks its invariants is [`Error::InvalidGraph`].
//!
//! Memory-mapped loads are supported on little-endian machines only (every machine weft
//! targets); owned loads convert on big-endian ones.
//!
//! # Example
//!
//! ```
//! use weft_core::{KnnGraph, Metric};
//! use weft_graph::storage::{GraphMeta, LoadOptions, load, read_header, save_knn};
//! # fn main() -> weft_core::Result<()> {
//! # let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("tiny.wgraph");
//! let graph = KnnGraph::from_parts(2, 1, vec![1, 0], vec![0.5, 0.5])?;
//! let meta = GraphMeta::new(Metric::L2Squared).with_params("exact", &serde_json::json!({}))?;
//! save_knn(&path, &graph, &meta)?;
//! assert_eq!(read_header(&path)?.n, 2); // cheap: header, section table and parameters
//! let (stored, meta_back) = load(&path, LoadOptions::mmap())?; // zero-copy, verified
//! assert_eq!(stored.into_knn()?.ids(), graph.ids());
//! assert_eq!(meta_back.algorithm().as_deref(), Some("exact"));
//! # Ok(())
//! # }
//! ```

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use weft_core::{
    ByteSource, DType, Error, FixedDegreeGraph, GraphView, KnnGraph, MAX_NODES, Metric, NodeId,
    Result, SharedSlice,
};

use crate::hier::{HierGraph, HierLayer};

/// The first 8 bytes of every graph file.
pub const MAGIC: [u8; 8] = *b"WEFTGRPH";
/// The format version this code writes and reads.
pub const VERSION: u32 = 1;
/// Alignment of every section, in bytes.
pub const ALIGN: u64 = 64;
/// The conventional file extension.
pub const EXTENSION: &str = "wgraph";
/// The largest number of layers a hierarchical graph file may declare.
pub const MAX_LAYERS: usize = 64;

const HEADER_LEN: usize = 64;
const SECTION_LEN: usize = 32;
const TRAILER_LEN: u64 = 8;
const TRAILER_MAGIC: [u8; 4] = *b"GEND";
const NO_DTYPE: u8 = 255;

const TAG_PARAMS: u32 = 1;
const TAG_ENTRY: u32 = 2;
const TAG_IDS: u32 = 3;
const TAG_DISTS: u32 = 4;
const TAG_GLOBAL: u32 = 5;

fn tag_name(tag: u32) -> &'static str {
    match tag {
        TAG_PARAMS => "params",
        TAG_ENTRY => "entry points",
        TAG_IDS => "ids",
        TAG_DISTS => "distances",
        TAG_GLOBAL => "global ids",
        _ => "unknown",
    }
}

/// What is wrong with a malformed graph file. Every [`Error::Format`] this module returns has a
/// reason of the form `"<prefix>: <details>"`; [`FormatIssue::of`] recovers the issue from it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FormatIssue {
    /// The file does not start with [`MAGIC`].
    BadMagic,
    /// The format version is not [`VERSION`].
    UnsupportedVersion,
    /// The file is shorter than its header says (or than any header).
    Truncated,
    /// The file is longer than its header says.
    TrailingBytes,
    /// The end marker after the checksum is missing.
    BadTrailer,
    /// The CRC-32 of the file differs from the stored one.
    ChecksumMismatch,
    /// Header fields or sections contradict each other (shape, kind, codes, alignment, overlap).
    Inconsistent,
    /// A section (or the header) claims bytes beyond the end of the file.
    ExceedsFile,
}

impl FormatIssue {
    const ALL: [FormatIssue; 8] = [
        FormatIssue::BadMagic,
        FormatIssue::UnsupportedVersion,
        FormatIssue::Truncated,
        FormatIssue::TrailingBytes,
        FormatIssue::BadTrailer,
        FormatIssue::ChecksumMismatch,
        FormatIssue::Inconsistent,
        FormatIssue::ExceedsFile,
    ];

    /// The stable phrase the error's reason starts with.
    pub const fn prefix(self) -> &'static str {
        match self {
            FormatIssue::BadMagic => "bad magic",
            FormatIssue::UnsupportedVersion => "unsupported version",
            FormatIssue::Truncated => "truncated",
            FormatIssue::TrailingBytes => "trailing bytes",
            FormatIssue::BadTrailer => "bad trailer",
            FormatIssue::ChecksumMismatch => "checksum mismatch",
            FormatIssue::Inconsistent => "inconsistent header",
            FormatIssue::ExceedsFile => "exceeds the file",
        }
    }

    /// The issue behind an [`Error::Format`] returned by this module (`None` for other errors).
    pub fn of(err: &Error) -> Option<Self> {
        match err {
            Error::Format { reason, .. } => Self::ALL.into_iter().find(|i| {
                reason
                    .strip_prefix(i.prefix())
                    .is_some_and(|rest| rest.starts_with(':'))
            }),
            _ => None,
        }
    }

    /// An [`Error::Format`] on `path` for this issue.
    fn error(self, path: &Path, details: impl std::fmt::Display) -> Error {
        Error::format(path, format!("{}: {details}", self.prefix()))
    }
}

/// Which graph a file holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum GraphKind {
    /// A [`KnnGraph`] (ids and distances).
    Knn,
    /// A [`FixedDegreeGraph`].
    Fixed,
    /// A [`HierGraph`].
    Hier,
}

impl GraphKind {
    /// The byte stored in the header.
    pub const fn code(self) -> u8 {
        match self {
            GraphKind::Knn => 0,
            GraphKind::Fixed => 1,
            GraphKind::Hier => 2,
        }
    }

    /// Inverse of [`GraphKind::code`].
    pub const fn from_code(code: u8) -> Option<Self> {
        match code {
            0 => Some(GraphKind::Knn),
            1 => Some(GraphKind::Fixed),
            2 => Some(GraphKind::Hier),
            _ => None,
        }
    }

    /// `knn`, `fixed` or `hier`.
    pub const fn name(self) -> &'static str {
        match self {
            GraphKind::Knn => "knn",
            GraphKind::Fixed => "fixed",
            GraphKind::Hier => "hier",
        }
    }
}

impl std::fmt::Display for GraphKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What a graph file records besides the graph.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GraphMeta {
    /// The metric the graph was built under.
    pub metric: Metric,
    /// The element type of the data, if recorded.
    pub dtype: Option<DType>,
    /// The dimension of the data, if recorded (never `Some(0)`).
    pub dim: Option<usize>,
    /// The algorithm and parameters that built the graph, as a JSON document (see
    /// [`GraphMeta::with_params`]); `{}` when unknown. Builds through `weft::Index` record
    /// `{"algorithm", "params", "backend", "k", "seed", "data_fingerprint"}` (files written
    /// before the seed and fingerprint have neither, and nest `backend`, `k` and the
    /// parameters under `params`; [`GraphMeta::algorithm_params`] reads both).
    pub params: String,
}

impl GraphMeta {
    /// Metadata with only the metric.
    pub fn new(metric: Metric) -> Self {
        GraphMeta {
            metric,
            dtype: None,
            dim: None,
            params: "{}".into(),
        }
    }

    /// Records the data's element type and dimension.
    pub fn with_data(mut self, dtype: DType, dim: usize) -> Self {
        self.dtype = Some(dtype);
        self.dim = Some(dim);
        self
    }

    /// Records `{"algorithm": algorithm, "params": params}` as the parameters.
    pub fn with_params<P: Serialize + ?Sized>(
        mut self,
        algorithm: &str,
        params: &P,
    ) -> Result<Self> {
        let value = serde_json::json!({
            "algorithm": algorithm,
            "params": serde_json::to_value(params).map_err(|e| {
                Error::InvalidInput(format!("parameters of {algorithm} do not serialise: {e}"))
            })?,
        });
        self.params = value.to_string();
        Ok(self)
    }

    /// The parameters as a JSON value.
    pub fn params_json(&self) -> Result<serde_json::Value> {
        serde_json::from_str(&self.params)
            .map_err(|e| Error::InvalidInput(format!("graph parameters are not JSON: {e}")))
    }

    /// The `algorithm` field of the parameters, if present.
    pub fn algorithm(&self) -> Option<String> {
        self.params_json()
            .ok()?
            .get("algorithm")?
            .as_str()
            .map(str::to_owned)
    }

    /// This metadata with the top-level field `key` of the parameter document set to `value`
    /// (the document is an object; see [`GraphMeta::with_params`]).
    pub fn with_field(mut self, key: &str, value: serde_json::Value) -> Result<Self> {
        let mut doc = match self.params_json()? {
            serde_json::Value::Object(m) => m,
            _ => serde_json::Map::new(),
        };
        doc.insert(key.to_string(), value);
        self.params = serde_json::Value::Object(doc).to_string();
        Ok(self)
    }

    /// Records the build's seed (field `seed`).
    pub fn with_seed(self, seed: u64) -> Result<Self> {
        self.with_field("seed", seed.into())
    }

    /// The build's seed, when recorded (files written before seeds were recorded have none).
    pub fn seed(&self) -> Option<u64> {
        self.params_json().ok()?.get("seed")?.as_u64()
    }

    /// Records the fingerprint of the data the graph was built on (field `data_fingerprint`;
    /// see [`data_fingerprint`]).
    pub fn with_data_fingerprint(self, fingerprint: &str) -> Result<Self> {
        self.with_field("data_fingerprint", fingerprint.into())
    }

    /// The recorded fingerprint of the data the graph was built on; `None` for files written
    /// before fingerprints were recorded (accepted with any data of the right shape).
    pub fn data_fingerprint(&self) -> Option<String> {
        self.params_json()
            .ok()?
            .get("data_fingerprint")?
            .as_str()
            .map(str::to_owned)
    }

    /// The algorithm's own parameters: the `params` field. Files written before the record
    /// was flattened nest them once more (`params.params`, beside `backend` and `k`); those are
    /// unwrapped. `None` when not recorded.
    pub fn algorithm_params(&self) -> Option<serde_json::Value> {
        let doc = self.params_json().ok()?;
        let params = doc.get("params")?;
        match params.get("params") {
            Some(inner) if params.get("backend").is_some() => Some(inner.clone()),
            _ => Some(params.clone()),
        }
    }

    /// A top-level field of the parameter document (for older files, also looked up in the
    /// nested record, as [`GraphMeta::algorithm_params`] does).
    pub fn field(&self, key: &str) -> Option<serde_json::Value> {
        let doc = self.params_json().ok()?;
        doc.get(key)
            .or_else(|| doc.get("params")?.get(key))
            .cloned()
    }

    fn check(&self) -> Result<()> {
        if self.dim == Some(0) {
            return Err(Error::invalid_param(
                "dim",
                "a recorded dimension must be at least 1",
            ));
        }
        self.params_json().map(|_| ())
    }
}

/// Bytes hashed per parallel task by [`data_fingerprint`].
const FINGERPRINT_CHUNK: usize = 8 << 20;

/// The fingerprint of a dataset that a graph file records (see
/// [`GraphMeta::with_data_fingerprint`]), so that a graph used with other data of the same
/// shape is detected: `crc32:` and 8 hex digits, the CRC-32 of the element type's code, the
/// row count and the dimension (little-endian `u8`, `u64`, `u64`) followed by the row-major
/// element bytes `data`. Computed in parallel chunks (about 10 GB/s per core; 512 MB of
/// vectors take some tens of milliseconds). A CRC tells data apart by accident only once in
/// 2^32, which is what it is for: catching a mix-up, not an adversary.
pub fn data_fingerprint(dtype: DType, rows: usize, dim: usize, data: &[u8]) -> String {
    use rayon::prelude::*;
    let mut head = crc32fast::Hasher::new();
    head.update(&[dtype.code()]);
    head.update(&(rows as u64).to_le_bytes());
    head.update(&(dim as u64).to_le_bytes());
    let parts: Vec<crc32fast::Hasher> = data
        .par_chunks(FINGERPRINT_CHUNK)
        .map(|chunk| {
            let mut h = crc32fast::Hasher::new();
            h.update(chunk);
            h
        })
        .collect();
    for part in &parts {
        head.combine(part);
    }
    format!("crc32:{:08x}", head.finalize())
}

/// How [`load`] reads a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoadOptions {
    /// Memory-map the file and use ids and distances in place (zero-copy) instead of reading
    /// them into owned vectors. The file must not be modified while the graph lives (weft only
    /// ever replaces graph files by renaming).
    pub mmap: bool,
    /// Check the CRC-32 of the whole file (reads every byte once).
    pub verify_checksum: bool,
    /// Check the graph's invariants (`validate()` of the loaded graph).
    pub validate: bool,
}

impl Default for LoadOptions {
    /// Owned read, checksum verified, graph validated.
    fn default() -> Self {
        LoadOptions {
            mmap: false,
            verify_checksum: true,
            validate: true,
        }
    }
}

impl LoadOptions {
    /// Memory-mapped, checksum verified, graph validated.
    pub fn mmap() -> Self {
        LoadOptions {
            mmap: true,
            ..Self::default()
        }
    }

    /// Memory-mapped with no verification at all: for huge graphs from a trusted source. Only the
    /// header and section table are checked.
    pub fn fast() -> Self {
        LoadOptions {
            mmap: true,
            verify_checksum: false,
            validate: false,
        }
    }

    /// Sets [`LoadOptions::verify_checksum`].
    pub fn verify_checksum(mut self, yes: bool) -> Self {
        self.verify_checksum = yes;
        self
    }

    /// Sets [`LoadOptions::validate`].
    pub fn validate(mut self, yes: bool) -> Self {
        self.validate = yes;
        self
    }
}

/// A loaded graph of any kind.
#[derive(Clone, Debug)]
pub enum StoredGraph {
    /// A k-NN graph.
    Knn(KnnGraph),
    /// A fixed-degree search graph.
    Fixed(FixedDegreeGraph),
    /// A hierarchical search graph.
    Hier(HierGraph),
}

impl StoredGraph {
    /// Which kind this is.
    pub fn kind(&self) -> GraphKind {
        match self {
            StoredGraph::Knn(_) => GraphKind::Knn,
            StoredGraph::Fixed(_) => GraphKind::Fixed,
            StoredGraph::Hier(_) => GraphKind::Hier,
        }
    }

    /// The k-NN graph, or [`Error::InvalidInput`] naming the kind found.
    pub fn into_knn(self) -> Result<KnnGraph> {
        match self {
            StoredGraph::Knn(g) => Ok(g),
            other => Err(wrong_kind(GraphKind::Knn, other.kind())),
        }
    }

    /// The fixed-degree graph, or [`Error::InvalidInput`] naming the kind found.
    pub fn into_fixed(self) -> Result<FixedDegreeGraph> {
        match self {
            StoredGraph::Fixed(g) => Ok(g),
            other => Err(wrong_kind(GraphKind::Fixed, other.kind())),
        }
    }

    /// The hierarchical graph, or [`Error::InvalidInput`] naming the kind found.
    pub fn into_hier(self) -> Result<HierGraph> {
        match self {
            StoredGraph::Hier(g) => Ok(g),
            other => Err(wrong_kind(GraphKind::Hier, other.kind())),
        }
    }

    /// A copy whose rows (a hierarchy's layer 0) are in huge pages, for searches that read rows
    /// in no useful order (see [`weft_core::huge_pages`]). `None` where no copy is made (small
    /// graphs, not Linux, not enough memory).
    pub fn copy_to_huge_pages(&self) -> Option<StoredGraph> {
        match self {
            StoredGraph::Knn(g) => g.copy_to_huge_pages().map(StoredGraph::Knn),
            StoredGraph::Fixed(g) => g.copy_to_huge_pages().map(StoredGraph::Fixed),
            StoredGraph::Hier(g) => g.copy_to_huge_pages().map(StoredGraph::Hier),
        }
    }

    /// The graph as a [`GraphView`] (a hierarchy's layer 0).
    pub fn as_view(&self) -> &dyn GraphView {
        match self {
            StoredGraph::Knn(g) => g,
            StoredGraph::Fixed(g) => g,
            StoredGraph::Hier(g) => g,
        }
    }

    /// Checks the graph's invariants.
    pub fn validate(&self) -> Result<()> {
        match self {
            StoredGraph::Knn(g) => g.validate(),
            StoredGraph::Fixed(g) => g.validate(),
            StoredGraph::Hier(g) => g.validate(),
        }
    }
}

fn wrong_kind(want: GraphKind, found: GraphKind) -> Error {
    Error::InvalidInput(format!(
        "expected a {want} graph, the file holds a {found} graph"
    ))
}

impl GraphView for StoredGraph {
    fn num_nodes(&self) -> usize {
        self.as_view().num_nodes()
    }
    fn max_degree(&self) -> usize {
        self.as_view().max_degree()
    }
    fn neighbors(&self, v: NodeId) -> &[NodeId] {
        match self {
            StoredGraph::Knn(g) => g.neighbors(v),
            StoredGraph::Fixed(g) => g.neighbors(v),
            StoredGraph::Hier(g) => g.neighbors(v),
        }
    }
    fn entry_points(&self) -> &[NodeId] {
        match self {
            StoredGraph::Knn(g) => g.entry_points(),
            StoredGraph::Fixed(g) => g.entry_points(),
            StoredGraph::Hier(g) => g.entry_points(),
        }
    }
}

/// One entry of the section table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SectionInfo {
    /// The section's tag (see the module docs).
    pub tag: u32,
    /// The layer it belongs to (0 unless hierarchical).
    pub layer: u32,
    /// Byte offset from the start of the file.
    pub offset: u64,
    /// Rows.
    pub rows: u64,
    /// Columns.
    pub cols: u64,
}

impl SectionInfo {
    fn elem_size(&self) -> u64 {
        if self.tag == TAG_PARAMS { 1 } else { 4 }
    }

    /// The section's name: `params`, `entry points`, `ids`, `distances`, `global ids` (or
    /// `unknown`).
    pub fn name(&self) -> &'static str {
        tag_name(self.tag)
    }

    /// Length in bytes (saturating; the loader rejects overflowing sections).
    pub fn byte_len(&self) -> u64 {
        self.rows
            .saturating_mul(self.cols)
            .saturating_mul(self.elem_size())
    }
}

/// The shape of one layer as the header declares it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LayerShape {
    /// Vertices in the layer.
    pub len: usize,
    /// Slots per row.
    pub degree: usize,
}

/// What [`read_header`] returns: everything but the payload.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GraphHeader {
    /// Format version.
    pub version: u32,
    /// Which graph the file holds.
    pub kind: GraphKind,
    /// Number of points (vertices of layer 0).
    pub n: usize,
    /// k of a k-NN graph; slots per row of layer 0 otherwise.
    pub degree: usize,
    /// Every layer's shape, layer 0 first (one entry unless hierarchical).
    pub layers: Vec<LayerShape>,
    /// Number of entry points.
    pub num_entry_points: usize,
    /// File size in bytes.
    pub file_len: u64,
    /// The CRC-32 stored in the trailer (not verified by [`read_header`]).
    pub checksum: u32,
    /// The section table.
    pub sections: Vec<SectionInfo>,
    /// Metric, data type and dimension, parameters.
    pub meta: GraphMeta,
}

// ---------------------------------------------------------------------------------------------
// Saving
// ---------------------------------------------------------------------------------------------

enum Payload<'a> {
    Bytes(&'a [u8]),
    U32(&'a [u32]),
    F32(&'a [f32]),
}

impl Payload<'_> {
    fn byte_len(&self) -> u64 {
        match self {
            Payload::Bytes(b) => b.len() as u64,
            Payload::U32(v) => v.len() as u64 * 4,
            Payload::F32(v) => v.len() as u64 * 4,
        }
    }
}

struct OutSection<'a> {
    tag: u32,
    layer: u32,
    rows: u64,
    cols: u64,
    payload: Payload<'a>,
}

/// Saves a k-NN graph (validated first).
pub fn save_knn(path: impl AsRef<Path>, graph: &KnnGraph, meta: &GraphMeta) -> Result<()> {
    graph.validate()?;
    let sections = vec![
        OutSection {
            tag: TAG_IDS,
            layer: 0,
            rows: graph.n() as u64,
            cols: graph.k() as u64,
            payload: Payload::U32(graph.ids()),
        },
        OutSection {
            tag: TAG_DISTS,
            layer: 0,
            rows: graph.n() as u64,
            cols: graph.k() as u64,
            payload: Payload::F32(graph.dists()),
        },
    ];
    save_sections(
        path.as_ref(),
        GraphKind::Knn,
        meta,
        (graph.n(), graph.k(), 1),
        &[],
        sections,
    )
}

/// Saves a fixed-degree graph with its entry points (validated first).
pub fn save_fixed(
    path: impl AsRef<Path>,
    graph: &FixedDegreeGraph,
    meta: &GraphMeta,
) -> Result<()> {
    graph.validate()?;
    let sections = vec![OutSection {
        tag: TAG_IDS,
        layer: 0,
        rows: graph.n() as u64,
        cols: graph.degree() as u64,
        payload: Payload::U32(graph.ids()),
    }];
    save_sections(
        path.as_ref(),
        GraphKind::Fixed,
        meta,
        (graph.n(), graph.degree(), 1),
        graph.entry_points(),
        sections,
    )
}

/// Saves a hierarchical graph (validated first).
pub fn save_hier(path: impl AsRef<Path>, graph: &HierGraph, meta: &GraphMeta) -> Result<()> {
    graph.validate()?;
    if graph.num_layers() > MAX_LAYERS {
        return Err(Error::InvalidInput(format!(
            "{} layers exceed the file format's {MAX_LAYERS}",
            graph.num_layers()
        )));
    }
    let base = graph.base();
    let mut sections = vec![OutSection {
        tag: TAG_IDS,
        layer: 0,
        rows: base.n() as u64,
        cols: base.degree() as u64,
        payload: Payload::U32(base.ids()),
    }];
    for (i, layer) in graph.upper_layers().iter().enumerate() {
        let l = (i + 1) as u32;
        let g = layer.graph();
        sections.push(OutSection {
            tag: TAG_IDS,
            layer: l,
            rows: g.n() as u64,
            cols: g.degree() as u64,
            payload: Payload::U32(g.ids()),
        });
        sections.push(OutSection {
            tag: TAG_GLOBAL,
            layer: l,
            rows: layer.len() as u64,
            cols: 1,
            payload: Payload::U32(layer.global_ids()),
        });
    }
    save_sections(
        path.as_ref(),
        GraphKind::Hier,
        meta,
        (base.n(), base.degree(), graph.num_layers()),
        graph.entry_points(),
        sections,
    )
}

/// Saves any [`StoredGraph`].
pub fn save(path: impl AsRef<Path>, graph: &StoredGraph, meta: &GraphMeta) -> Result<()> {
    match graph {
        StoredGraph::Knn(g) => save_knn(path, g, meta),
        StoredGraph::Fixed(g) => save_fixed(path, g, meta),
        StoredGraph::Hier(g) => save_hier(path, g, meta),
    }
}

const fn align_up(x: u64) -> u64 {
    x.div_ceil(ALIGN) * ALIGN
}

fn save_sections(
    path: &Path,
    kind: GraphKind,
    meta: &GraphMeta,
    (n, degree, num_layers): (usize, usize, usize),
    entry_points: &[NodeId],
    payload_sections: Vec<OutSection<'_>>,
) -> Result<()> {
    meta.check()?;
    let mut sections = vec![
        OutSection {
            tag: TAG_PARAMS,
            layer: 0,
            rows: meta.params.len() as u64,
            cols: 1,
            payload: Payload::Bytes(meta.params.as_bytes()),
        },
        OutSection {
            tag: TAG_ENTRY,
            layer: 0,
            rows: entry_points.len() as u64,
            cols: 1,
            payload: Payload::U32(entry_points),
        },
    ];
    sections.extend(payload_sections);

    // Layout.
    let header_len = HEADER_LEN + SECTION_LEN * sections.len();
    let mut offsets = Vec::with_capacity(sections.len());
    let mut end = header_len as u64;
    for s in &sections {
        let offset = align_up(end);
        offsets.push(offset);
        end = offset + s.payload.byte_len();
    }
    let file_len = end + TRAILER_LEN;

    // Header and section table.
    let mut head = Vec::with_capacity(header_len);
    head.extend_from_slice(&MAGIC);
    head.extend_from_slice(&VERSION.to_le_bytes());
    head.extend_from_slice(&(header_len as u32).to_le_bytes());
    head.extend_from_slice(&file_len.to_le_bytes());
    head.push(kind.code());
    head.push(meta.metric.code());
    head.push(meta.dtype.map_or(NO_DTYPE, DType::code));
    head.push(0);
    head.extend_from_slice(&(sections.len() as u32).to_le_bytes());
    head.extend_from_slice(&(n as u64).to_le_bytes());
    head.extend_from_slice(&(degree as u64).to_le_bytes());
    head.extend_from_slice(&(meta.dim.unwrap_or(0) as u64).to_le_bytes());
    head.extend_from_slice(&(num_layers as u32).to_le_bytes());
    head.extend_from_slice(&0u32.to_le_bytes());
    debug_assert_eq!(head.len(), HEADER_LEN);
    for (s, &offset) in sections.iter().zip(&offsets) {
        head.extend_from_slice(&s.tag.to_le_bytes());
        head.extend_from_slice(&s.layer.to_le_bytes());
        head.extend_from_slice(&offset.to_le_bytes());
        head.extend_from_slice(&s.rows.to_le_bytes());
        head.extend_from_slice(&s.cols.to_le_bytes());
    }

    write_atomic(path, |w| {
        let mut w = CrcWriter {
            inner: w,
            hasher: crc32fast::Hasher::new(),
            pos: 0,
        };
        w.write_all(&head)?;
        for (s, &offset) in sections.iter().zip(&offsets) {
            w.pad_to(offset)?;
            match s.payload {
                Payload::Bytes(b) => w.write_all(b)?,
                Payload::U32(v) => write_u32s(&mut w, v)?,
                Payload::F32(v) => write_f32s(&mut w, v)?,
            }
        }
        debug_assert_eq!(w.pos, file_len - TRAILER_LEN);
        let crc = w.hasher.finalize();
        w.inner.write_all(&crc.to_le_bytes())?;
        w.inner.write_all(&TRAILER_MAGIC)?;
        Ok(())
    })
}

struct CrcWriter<W> {
    inner: W,
    hasher: crc32fast::Hasher,
    pos: u64,
}

impl<W: Write> CrcWriter<W> {
    fn pad_to(&mut self, offset: u64) -> io::Result<()> {
        const ZEROS: [u8; ALIGN as usize] = [0; ALIGN as usize];
        while self.pos < offset {
            let k = (offset - self.pos).min(ALIGN) as usize;
            self.write_all(&ZEROS[..k])?;
        }
        Ok(())
    }
}

impl<W: Write> Write for CrcWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let k = self.inner.write(buf)?;
        self.hasher.update(&buf[..k]);
        self.pos += k as u64;
        Ok(k)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

fn write_u32s(w: &mut impl Write, v: &[u32]) -> io::Result<()> {
    if cfg!(target_endian = "little") {
        return w.write_all(bytemuck::cast_slice(v));
    }
    let mut buf = Vec::with_capacity(4 * 4096);
    for chunk in v.chunks(4096) {
        buf.clear();
        for x in chunk {
            buf.extend_from_slice(&x.to_le_bytes());
        }
        w.write_all(&buf)?;
    }
    Ok(())
}

fn write_f32s(w: &mut impl Write, v: &[f32]) -> io::Result<()> {
    if cfg!(target_endian = "little") {
        return w.write_all(bytemuck::cast_slice(v));
    }
    let mut buf = Vec::with_capacity(4 * 4096);
    for chunk in v.chunks(4096) {
        buf.clear();
        for x in chunk {
            buf.extend_from_slice(&x.to_le_bytes());
        }
        w.write_all(&buf)?;
    }
    Ok(())
}

/// Removes the temporary file unless the write was committed, and keeps it on the process's
/// list of temporary files meanwhile ([`weft_core::temp_files`]).
struct TempGuard {
    path: Option<PathBuf>,
    _registration: weft_core::temp_files::Registration,
}

impl Drop for TempGuard {
    fn drop(&mut self) {
        if let Some(p) = self.path.take() {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// Writes `path` atomically: temporary file `.name.<pid>.<n>.weft-tmp` in the same directory
/// (see [`weft_core::temp_files`]: those that killed writers of `path` left behind are removed
/// first), write, fsync, rename, fsync of the directory. A character device or FIFO is written
/// in place instead, never replaced; a directory is refused
/// ([`weft_core::temp_files::output_target`]).
fn write_atomic(path: &Path, body: impl FnOnce(&mut dyn Write) -> io::Result<()>) -> Result<()> {
    if weft_core::temp_files::output_target(path)? == weft_core::temp_files::OutputTarget::Stream {
        let file = OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(|e| Error::io(path, e))?;
        let mut w = io::BufWriter::with_capacity(1 << 20, file);
        body(&mut w)
            .and_then(|()| w.flush())
            .map_err(|e| Error::io(path, e))?;
        return Ok(());
    }
    let name = path
        .file_name()
        .ok_or_else(|| Error::InvalidInput(format!("{} is not a file path", path.display())))?;
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    weft_core::temp_files::remove_stale(path);
    let mut attempt = 0u32;
    let (tmp, file) = loop {
        let tmp = weft_core::temp_files::temp_path(&dir, name, attempt);
        match OpenOptions::new().write(true).create_new(true).open(&tmp) {
            Ok(f) => break (tmp, f),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists && attempt < 10_000 => {
                attempt += 1;
            }
            Err(e) => return Err(Error::io(tmp, e)),
        }
    };
    let mut guard = TempGuard {
        _registration: weft_core::temp_files::register(&tmp),
        path: Some(tmp.clone()),
    };
    let mut w = io::BufWriter::with_capacity(1 << 20, file);
    body(&mut w).map_err(|e| Error::io(&tmp, e))?;
    let file = w
        .into_inner()
        .map_err(|e| Error::io(&tmp, e.into_error()))?;
    file.sync_all().map_err(|e| Error::io(&tmp, e))?;
    drop(file);
    std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e))?;
    guard.path = None;
    sync_dir(&dir)
}

#[cfg(unix)]
fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io(dir, e))
}

#[cfg(not(unix))]
fn sync_dir(_dir: &Path) -> Result<()> {
    // Directories cannot be opened for syncing here; the rename itself is atomic.
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Loading
// ---------------------------------------------------------------------------------------------

/// The fixed part of the header, decoded.
struct RawHeader {
    header_len: u64,
    file_len: u64,
    kind: GraphKind,
    metric: Metric,
    dtype: Option<DType>,
    num_sections: usize,
    n: u64,
    degree: u64,
    dim: u64,
    num_layers: usize,
}

fn le_u32(b: &[u8], at: usize) -> u32 {
    let mut x = [0u8; 4];
    x.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(x)
}

fn le_u64(b: &[u8], at: usize) -> u64 {
    let mut x = [0u8; 8];
    x.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(x)
}

/// Checks magic, version and the file length; `prefix` holds the file's first bytes (up to 64).
fn check_prefix(path: &Path, prefix: &[u8], actual_len: u64) -> Result<()> {
    let m = prefix.len().min(MAGIC.len());
    if prefix[..m] != MAGIC[..m] {
        return Err(FormatIssue::BadMagic.error(path, "not a weft graph file"));
    }
    if prefix.len() < 12 {
        return Err(FormatIssue::Truncated.error(
            path,
            format!("{actual_len} bytes cannot hold a graph header"),
        ));
    }
    let version = le_u32(prefix, 8);
    if version != VERSION {
        return Err(FormatIssue::UnsupportedVersion.error(
            path,
            format!("{version} (this build reads version {VERSION})"),
        ));
    }
    if prefix.len() < HEADER_LEN {
        return Err(FormatIssue::Truncated.error(
            path,
            format!("{actual_len} bytes cannot hold a graph header"),
        ));
    }
    let file_len = le_u64(prefix, 16);
    if file_len > actual_len {
        return Err(FormatIssue::Truncated.error(
            path,
            format!("the header says {file_len} bytes, the file has {actual_len}"),
        ));
    }
    if file_len < actual_len {
        return Err(FormatIssue::TrailingBytes.error(
            path,
            format!("the header says {file_len} bytes, the file has {actual_len}"),
        ));
    }
    Ok(())
}

fn inconsistent(path: &Path, what: impl std::fmt::Display) -> Error {
    FormatIssue::Inconsistent.error(path, what)
}

/// Decodes the fixed header (after [`check_prefix`]).
fn parse_header(path: &Path, b: &[u8]) -> Result<RawHeader> {
    let header_len = le_u32(b, 12) as u64;
    let file_len = le_u64(b, 16);
    let kind = GraphKind::from_code(b[24])
        .ok_or_else(|| inconsistent(path, format!("unknown graph kind {}", b[24])))?;
    let metric = Metric::from_code(b[25])
        .ok_or_else(|| inconsistent(path, format!("unknown metric code {}", b[25])))?;
    let dtype = match b[26] {
        NO_DTYPE => None,
        c => Some(
            DType::from_code(c)
                .ok_or_else(|| inconsistent(path, format!("unknown dtype code {c}")))?,
        ),
    };
    let num_sections = le_u32(b, 28) as usize;
    let n = le_u64(b, 32);
    let degree = le_u64(b, 40);
    let dim = le_u64(b, 48);
    let num_layers = le_u32(b, 56) as usize;
    if n > MAX_NODES as u64 {
        return Err(inconsistent(path, format!("n = {n} exceeds the id space")));
    }
    if num_layers == 0 || num_layers > MAX_LAYERS {
        return Err(inconsistent(
            path,
            format!("{num_layers} layers (1 to {MAX_LAYERS} allowed)"),
        ));
    }
    if kind != GraphKind::Hier && num_layers != 1 {
        return Err(inconsistent(
            path,
            format!("a {kind} graph with {num_layers} layers"),
        ));
    }
    let expected_sections = match kind {
        GraphKind::Knn => 4,
        GraphKind::Fixed => 3,
        GraphKind::Hier => 2 + 2 * num_layers - 1,
    };
    if num_sections != expected_sections {
        return Err(inconsistent(
            path,
            format!(
                "{num_sections} sections, a {kind} graph of {num_layers} layer(s) has {expected_sections}"
            ),
        ));
    }
    let want_len = (HEADER_LEN + SECTION_LEN * num_sections) as u64;
    if header_len != want_len {
        return Err(inconsistent(
            path,
            format!("header length {header_len}, expected {want_len}"),
        ));
    }
    if header_len + TRAILER_LEN > file_len {
        return Err(FormatIssue::ExceedsFile.error(
            path,
            format!("a {header_len}-byte header in a {file_len}-byte file"),
        ));
    }
    Ok(RawHeader {
        header_len,
        file_len,
        kind,
        metric,
        dtype,
        num_sections,
        n,
        degree,
        dim,
        num_layers,
    })
}

/// The checked section table: sections indexed by kind.
struct Layout {
    /// All sections in table order.
    sections: Vec<SectionInfo>,
    params: usize,
    entry: usize,
    /// Per layer: (ids section, distances or global ids section).
    ids: Vec<usize>,
    dists: Option<usize>,
    global: Vec<usize>,
}

fn parse_sections(path: &Path, h: &RawHeader, table: &[u8]) -> Result<Layout> {
    let mut sections = Vec::with_capacity(h.num_sections);
    for i in 0..h.num_sections {
        let b = &table[i * SECTION_LEN..(i + 1) * SECTION_LEN];
        sections.push(SectionInfo {
            tag: le_u32(b, 0),
            layer: le_u32(b, 4),
            offset: le_u64(b, 8),
            rows: le_u64(b, 16),
            cols: le_u64(b, 24),
        });
    }
    let payload_end = h.file_len - TRAILER_LEN;
    let mut slots: Vec<Option<usize>> = vec![None; 3 + 2 * h.num_layers];
    // slot layout: 0 params, 1 entry, 2 dists, 3 + 2l ids(l), 4 + 2l global(l)
    for (i, s) in sections.iter().enumerate() {
        let name = tag_name(s.tag);
        let layer = s.layer as usize;
        let slot = match s.tag {
            TAG_PARAMS | TAG_ENTRY | TAG_DISTS if layer != 0 => None,
            TAG_PARAMS => Some(0),
            TAG_ENTRY => Some(1),
            TAG_DISTS if h.kind == GraphKind::Knn => Some(2),
            TAG_IDS if layer < h.num_layers => Some(3 + 2 * layer),
            TAG_GLOBAL if h.kind == GraphKind::Hier && layer >= 1 && layer < h.num_layers => {
                Some(4 + 2 * layer)
            }
            _ => None,
        }
        .ok_or_else(|| {
            inconsistent(
                path,
                format!(
                    "unexpected section tag {} ({name}) for layer {layer} of a {} graph",
                    s.tag, h.kind
                ),
            )
        })?;
        if slots[slot].replace(i).is_some() {
            return Err(inconsistent(
                path,
                format!("section {name} of layer {layer} appears twice"),
            ));
        }
        let bytes = s
            .rows
            .checked_mul(s.cols)
            .and_then(|x| x.checked_mul(s.elem_size()))
            .ok_or_else(|| {
                FormatIssue::ExceedsFile.error(path, format!("section {name} size overflows"))
            })?;
        if s.offset % ALIGN != 0 {
            return Err(inconsistent(
                path,
                format!(
                    "section {name} at offset {} is not {ALIGN}-byte aligned",
                    s.offset
                ),
            ));
        }
        if s.offset < h.header_len || s.offset.checked_add(bytes).is_none_or(|e| e > payload_end) {
            return Err(FormatIssue::ExceedsFile.error(
                path,
                format!(
                    "section {name} [{}, +{bytes}) is outside the payload [{}, {payload_end})",
                    s.offset, h.header_len
                ),
            ));
        }
        if (s.tag != TAG_IDS) && s.cols != 1 && s.tag != TAG_DISTS {
            return Err(inconsistent(
                path,
                format!("section {name} has {} columns, expected 1", s.cols),
            ));
        }
    }
    // Every expected section is present (the count matched, and no slot repeats, but a
    // hierarchy's slots 2 and 4 are never used, so check explicitly).
    let missing = |slot: usize, what: String| -> Result<usize> {
        slots[slot].ok_or_else(|| inconsistent(path, format!("missing section {what}")))
    };
    let params = missing(0, "params".into())?;
    let entry = missing(1, "entry points".into())?;
    let mut ids = Vec::with_capacity(h.num_layers);
    let mut global = Vec::new();
    for l in 0..h.num_layers {
        ids.push(missing(3 + 2 * l, format!("ids of layer {l}"))?);
        if l >= 1 {
            global.push(missing(4 + 2 * l, format!("global ids of layer {l}"))?);
        }
    }
    let dists = if h.kind == GraphKind::Knn {
        Some(missing(2, "distances".into())?)
    } else {
        None
    };

    // Non-overlap.
    let mut order: Vec<usize> = (0..sections.len()).collect();
    order.sort_by_key(|&i| sections[i].offset);
    for w in order.windows(2) {
        let (a, b) = (&sections[w[0]], &sections[w[1]]);
        if a.offset + a.byte_len() > b.offset {
            return Err(inconsistent(
                path,
                format!(
                    "sections {} and {} overlap",
                    tag_name(a.tag),
                    tag_name(b.tag)
                ),
            ));
        }
    }

    // Shapes.
    let s0 = &sections[ids[0]];
    if s0.rows != h.n || s0.cols != h.degree {
        return Err(inconsistent(
            path,
            format!(
                "layer 0 ids are {} x {}, the header says {} x {}",
                s0.rows, s0.cols, h.n, h.degree
            ),
        ));
    }
    if let Some(d) = dists {
        let d = &sections[d];
        if d.rows != h.n || d.cols != h.degree {
            return Err(inconsistent(
                path,
                format!(
                    "distances are {} x {}, the ids {} x {}",
                    d.rows, d.cols, h.n, h.degree
                ),
            ));
        }
        if sections[entry].rows != 0 {
            return Err(inconsistent(path, "a k-NN graph with entry points"));
        }
    }
    for (i, &g) in global.iter().enumerate() {
        let (gs, is) = (&sections[g], &sections[ids[i + 1]]);
        if gs.rows != is.rows {
            return Err(inconsistent(
                path,
                format!(
                    "layer {} has {} vertices but {} global ids",
                    i + 1,
                    is.rows,
                    gs.rows
                ),
            ));
        }
    }
    for s in &sections {
        if s.tag == TAG_IDS && s.rows > MAX_NODES as u64 {
            return Err(inconsistent(
                path,
                format!("layer {} exceeds the id space", s.layer),
            ));
        }
    }
    Ok(Layout {
        sections,
        params,
        entry,
        ids,
        dists,
        global,
    })
}

fn meta_of(path: &Path, h: &RawHeader, params: &[u8]) -> Result<GraphMeta> {
    let params = std::str::from_utf8(params)
        .map_err(|_| inconsistent(path, "the params section is not UTF-8"))?
        .to_owned();
    let dim = match h.dim {
        0 => None,
        d => Some(usize::try_from(d).map_err(|_| inconsistent(path, "dim does not fit usize"))?),
    };
    Ok(GraphMeta {
        metric: h.metric,
        dtype: h.dtype,
        dim,
        params,
    })
}

fn open(path: &Path) -> Result<(File, u64)> {
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    let len = file.metadata().map_err(|e| Error::io(path, e))?.len();
    Ok((file, len))
}

/// Reads up to `buf.len()` bytes, stopping early only at end of file.
fn read_full(file: &mut File, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match file.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(k) => got += k,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

fn read_exact_at(path: &Path, file: &mut File, buf: &mut [u8]) -> Result<()> {
    file.read_exact(buf).map_err(|e| {
        if e.kind() == io::ErrorKind::UnexpectedEof {
            FormatIssue::Truncated.error(path, "the file ended early (it changed while being read)")
        } else {
            Error::io(path, e)
        }
    })
}

/// Header, section table and raw header bytes (for the checksum).
struct Head {
    raw: RawHeader,
    layout: Layout,
    bytes: Vec<u8>,
}

fn read_head(path: &Path, file: &mut File, actual_len: u64) -> Result<Head> {
    let mut prefix = [0u8; HEADER_LEN];
    let got = read_full(file, &mut prefix).map_err(|e| Error::io(path, e))?;
    check_prefix(path, &prefix[..got], actual_len)?;
    let raw = parse_header(path, &prefix)?;
    let mut bytes = vec![0u8; raw.header_len as usize];
    bytes[..HEADER_LEN].copy_from_slice(&prefix);
    read_exact_at(path, file, &mut bytes[HEADER_LEN..])?;
    let layout = parse_sections(path, &raw, &bytes[HEADER_LEN..])?;
    Ok(Head { raw, layout, bytes })
}

fn read_trailer(path: &Path, trailer: &[u8]) -> Result<u32> {
    if trailer[4..8] != TRAILER_MAGIC {
        return Err(FormatIssue::BadTrailer.error(path, "the end marker is missing"));
    }
    Ok(le_u32(trailer, 0))
}

fn checksum_error(path: &Path, stored: u32, computed: u32) -> Error {
    FormatIssue::ChecksumMismatch.error(
        path,
        format!("stored {stored:#010x}, computed {computed:#010x}"),
    )
}

/// Reads the header, section table and parameters of a graph file without loading or verifying
/// the payload (cheap, for `weft info`).
pub fn read_header(path: impl AsRef<Path>) -> Result<GraphHeader> {
    let path = path.as_ref();
    let (mut file, actual_len) = open(path)?;
    let head = read_head(path, &mut file, actual_len)?;
    let (raw, layout) = (&head.raw, &head.layout);
    let read_at = |file: &mut File, offset: u64, len: usize| -> Result<Vec<u8>> {
        use std::io::{Seek, SeekFrom};
        file.seek(SeekFrom::Start(offset))
            .map_err(|e| Error::io(path, e))?;
        let mut buf = vec![0u8; len];
        read_exact_at(path, file, &mut buf)?;
        Ok(buf)
    };
    let p = &layout.sections[layout.params];
    let params = read_at(&mut file, p.offset, p.byte_len() as usize)?;
    let trailer = read_at(&mut file, raw.file_len - TRAILER_LEN, TRAILER_LEN as usize)?;
    let checksum = read_trailer(path, &trailer)?;
    let layers = layout
        .ids
        .iter()
        .map(|&i| LayerShape {
            len: layout.sections[i].rows as usize,
            degree: layout.sections[i].cols as usize,
        })
        .collect();
    Ok(GraphHeader {
        version: VERSION,
        kind: raw.kind,
        n: raw.n as usize,
        degree: raw.degree as usize,
        layers,
        num_entry_points: layout.sections[layout.entry].rows as usize,
        file_len: raw.file_len,
        checksum,
        sections: layout.sections.clone(),
        meta: meta_of(path, raw, &params)?,
    })
}

/// A memory map as a [`ByteSource`].
struct MappedFile(memmap2::Mmap);

impl ByteSource for MappedFile {
    fn bytes(&self) -> &[u8] {
        &self.0
    }
}

/// A section's contents, owned or a window of the mapped file.
enum SectionData {
    Bytes(Vec<u8>),
    U32(SharedSlice<u32>),
    F32(SharedSlice<f32>),
}

/// Loads a graph file of any kind, with its metadata.
pub fn load(path: impl AsRef<Path>, options: LoadOptions) -> Result<(StoredGraph, GraphMeta)> {
    let path = path.as_ref();
    let (mut file, actual_len) = open(path)?;
    let (head, mut data) = if options.mmap {
        load_mapped(path, &file, actual_len, options.verify_checksum)?
    } else {
        load_owned(path, &mut file, actual_len, options.verify_checksum)?
    };
    let (raw, layout) = (&head.raw, &head.layout);
    let params = match &data[layout.params] {
        SectionData::Bytes(b) => b.clone(),
        _ => Vec::new(),
    };
    let meta = meta_of(path, raw, &params)?;
    let n = raw.n as usize;
    let degree = raw.degree as usize;
    let entry = take_u32(&mut data, layout.entry).into_vec();
    let base_ids = take_u32(&mut data, layout.ids[0]);
    let graph = match raw.kind {
        GraphKind::Knn => {
            let dists = match layout.dists {
                Some(i) => take_f32(&mut data, i),
                None => SharedSlice::from_vec(Vec::new()),
            };
            StoredGraph::Knn(KnnGraph::from_parts(n, degree, base_ids, dists)?)
        }
        GraphKind::Fixed => {
            StoredGraph::Fixed(FixedDegreeGraph::new(n, degree, base_ids)?.with_entry_points(entry))
        }
        GraphKind::Hier => {
            let base = FixedDegreeGraph::new(n, degree, base_ids)?;
            let mut upper = Vec::with_capacity(raw.num_layers - 1);
            for l in 1..raw.num_layers {
                let s = &layout.sections[layout.ids[l]];
                let ids = take_u32(&mut data, layout.ids[l]);
                let global = take_u32(&mut data, layout.global[l - 1]);
                let g = FixedDegreeGraph::new(s.rows as usize, s.cols as usize, ids)?;
                upper.push(HierLayer::new(g, global).map_err(|e| in_file(path, e))?);
            }
            StoredGraph::Hier(HierGraph::new(base, upper, entry).map_err(|e| in_file(path, e))?)
        }
    };
    if options.validate {
        graph.validate().map_err(|e| in_file(path, e))?;
    }
    Ok((graph, meta))
}

fn take_u32(data: &mut [SectionData], i: usize) -> SharedSlice<u32> {
    match std::mem::replace(&mut data[i], SectionData::Bytes(Vec::new())) {
        SectionData::U32(v) => v,
        _ => SharedSlice::from_vec(Vec::new()),
    }
}

fn take_f32(data: &mut [SectionData], i: usize) -> SharedSlice<f32> {
    match std::mem::replace(&mut data[i], SectionData::Bytes(Vec::new())) {
        SectionData::F32(v) => v,
        _ => SharedSlice::from_vec(Vec::new()),
    }
}

/// Names the file in a graph-invariant error.
fn in_file(path: &Path, e: Error) -> Error {
    match e {
        Error::InvalidGraph(msg) => Error::InvalidGraph(format!("{}: {msg}", path.display())),
        other => other,
    }
}

fn load_mapped(
    path: &Path,
    file: &File,
    actual_len: u64,
    verify: bool,
) -> Result<(Head, Vec<SectionData>)> {
    if cfg!(target_endian = "big") {
        return Err(Error::Unsupported(
            "memory-mapped graph loads need a little-endian machine; load without mmap".into(),
        ));
    }
    // SAFETY: the map is read-only and lives inside an `Arc` owned by the returned slices. The
    // file must not be truncated or modified while mapped; weft never modifies a graph file in
    // place (saves write a new file and rename it), which `LoadOptions::mmap` documents.
    let map = unsafe { memmap2::Mmap::map(file) }.map_err(|e| Error::io(path, e))?;
    let bytes: &[u8] = &map;
    if bytes.len() as u64 != actual_len {
        return Err(FormatIssue::Truncated.error(path, "the file changed while being mapped"));
    }
    check_prefix(path, &bytes[..bytes.len().min(HEADER_LEN)], actual_len)?;
    let file_len = actual_len as usize;
    let body_end = file_len - TRAILER_LEN as usize;
    // The prefix check guarantees file_len >= 64; the trailer follows the header.
    if file_len < HEADER_LEN + TRAILER_LEN as usize {
        return Err(FormatIssue::Truncated.error(path, "no room for the trailer"));
    }
    let stored = read_trailer(path, &bytes[body_end..])?;
    if verify {
        let computed = crc32fast::hash(&bytes[..body_end]);
        if computed != stored {
            return Err(checksum_error(path, stored, computed));
        }
    }
    let raw = parse_header(path, &bytes[..HEADER_LEN])?;
    let table = &bytes[HEADER_LEN..raw.header_len as usize];
    let layout = parse_sections(path, &raw, table)?;
    let head_bytes = bytes[..raw.header_len as usize].to_vec();
    let source: Arc<dyn ByteSource> = Arc::new(MappedFile(map));
    let mut data = Vec::with_capacity(layout.sections.len());
    for s in &layout.sections {
        let off = s.offset as usize;
        let count = (s.rows * s.cols) as usize;
        data.push(match s.tag {
            TAG_PARAMS => SectionData::Bytes(source.bytes()[off..off + count].to_vec()),
            TAG_DISTS => SectionData::F32(
                SharedSlice::from_source(Arc::clone(&source), off, count)
                    .map_err(|e| inconsistent(path, e))?,
            ),
            _ => SectionData::U32(
                SharedSlice::from_source(Arc::clone(&source), off, count)
                    .map_err(|e| inconsistent(path, e))?,
            ),
        });
    }
    Ok((
        Head {
            raw,
            layout,
            bytes: head_bytes,
        },
        data,
    ))
}

/// Computes the CRC of `[0, file_len - 8)` by streaming the file from the start.
fn crc_of_file(path: &Path, file: &mut File, file_len: u64) -> Result<u32> {
    use std::io::{Seek, SeekFrom};
    file.seek(SeekFrom::Start(0))
        .map_err(|e| Error::io(path, e))?;
    let mut hasher = crc32fast::Hasher::new();
    let mut left = file_len - TRAILER_LEN;
    let mut buf = vec![0u8; 1 << 20];
    while left > 0 {
        let k = left.min(buf.len() as u64) as usize;
        read_exact_at(path, file, &mut buf[..k])?;
        hasher.update(&buf[..k]);
        left -= k as u64;
    }
    Ok(hasher.finalize())
}

fn load_owned(
    path: &Path,
    file: &mut File,
    actual_len: u64,
    verify: bool,
) -> Result<(Head, Vec<SectionData>)> {
    let head = match read_head(path, file, actual_len) {
        Ok(h) => h,
        Err(e @ Error::Format { .. })
            if verify && actual_len >= HEADER_LEN as u64 + TRAILER_LEN =>
        {
            // A malformed header may be a corrupted one: report the checksum when it disagrees,
            // as that is the root cause.
            let mut prefix = [0u8; HEADER_LEN];
            use std::io::{Seek, SeekFrom};
            file.seek(SeekFrom::Start(0))
                .map_err(|e| Error::io(path, e))?;
            let got = read_full(file, &mut prefix).map_err(|e| Error::io(path, e))?;
            if check_prefix(path, &prefix[..got], actual_len).is_ok() {
                let computed = crc_of_file(path, file, actual_len)?;
                let mut trailer = [0u8; TRAILER_LEN as usize];
                read_exact_at(path, file, &mut trailer)?;
                let stored = read_trailer(path, &trailer)?;
                if computed != stored {
                    return Err(checksum_error(path, stored, computed));
                }
            }
            return Err(e);
        }
        Err(e) => return Err(e),
    };
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&head.bytes);
    let mut pos = head.raw.header_len;
    let sections = &head.layout.sections;
    let mut order: Vec<usize> = (0..sections.len()).collect();
    order.sort_by_key(|&i| sections[i].offset);
    let mut data: Vec<Option<SectionData>> = (0..sections.len()).map(|_| None).collect();
    let mut gap = vec![0u8; ALIGN as usize * 16];
    let mut skip_to = |file: &mut File, hasher: &mut crc32fast::Hasher, pos: &mut u64, to: u64| {
        while *pos < to {
            let k = (to - *pos).min(gap.len() as u64) as usize;
            read_exact_at(path, file, &mut gap[..k])?;
            hasher.update(&gap[..k]);
            *pos += k as u64;
        }
        Ok::<_, Error>(())
    };
    for &i in &order {
        let s = &sections[i];
        skip_to(file, &mut hasher, &mut pos, s.offset)?;
        let count = (s.rows * s.cols) as usize;
        let d = match s.tag {
            TAG_PARAMS => {
                let mut v = vec![0u8; count];
                read_exact_at(path, file, &mut v)?;
                hasher.update(&v);
                SectionData::Bytes(v)
            }
            TAG_DISTS => {
                let mut v = vec![0f32; count];
                read_exact_at(path, file, bytemuck::cast_slice_mut(&mut v))?;
                hasher.update(bytemuck::cast_slice(&v));
                if cfg!(target_endian = "big") {
                    for x in &mut v {
                        *x = f32::from_bits(u32::from_le(x.to_bits()));
                    }
                }
                SectionData::F32(v.into())
            }
            _ => {
                let mut v = vec![0u32; count];
                read_exact_at(path, file, bytemuck::cast_slice_mut(&mut v))?;
                hasher.update(bytemuck::cast_slice(&v));
                if cfg!(target_endian = "big") {
                    for x in &mut v {
                        *x = u32::from_le(*x);
                    }
                }
                SectionData::U32(v.into())
            }
        };
        pos += s.byte_len();
        data[i] = Some(d);
    }
    let body_end = head.raw.file_len - TRAILER_LEN;
    skip_to(file, &mut hasher, &mut pos, body_end)?;
    let mut trailer = [0u8; TRAILER_LEN as usize];
    read_exact_at(path, file, &mut trailer)?;
    let stored = read_trailer(path, &trailer)?;
    if verify {
        let computed = hasher.finalize();
        if computed != stored {
            return Err(checksum_error(path, stored, computed));
        }
    }
    let data = data
        .into_iter()
        .map(|d| d.unwrap_or(SectionData::Bytes(Vec::new())))
        .collect();
    Ok((head, data))
}
