//! What the fuzz targets share: a scratch directory, the graph file's framing fix-up (length,
//! end marker, CRC-32) and the checks run on a graph file, and the encoding of an index input
//! (a graph file and a vector file in one byte string).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use weft_core::{GraphView, NodeId};
use weft_graph::hier::HierGraph;
use weft_graph::storage::{self, GraphHeader, LoadOptions, StoredGraph};

/// The fixed header of a graph file, in bytes (`weft_graph::storage`, "Byte layout").
pub const GRAPH_HEADER_LEN: usize = 64;
/// The trailer: CRC-32 of everything before it, then `GEND`.
pub const GRAPH_TRAILER_LEN: usize = 8;

/// A scratch directory for this process's files (created once).
pub fn scratch_dir() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("weft-fuzz-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("scratch directory");
        dir
    })
}

/// Counts how many inputs reached a point (a graph that loads, an index that searches), to
/// tell how deep a target gets. With `WEFT_FUZZ_TALLY` set in the environment, every tally
/// prints `weft-fuzz tally: NAME: HITS of RUNS inputs` to stderr when the process exits
/// (`fuzz/run.sh` sets it and reports the lines).
pub struct Tally {
    name: &'static str,
    runs: AtomicU64,
    hits: AtomicU64,
    registered: OnceLock<()>,
}

/// The tallies that counted something, printed at exit.
static TALLIES: Mutex<Vec<&'static Tally>> = Mutex::new(Vec::new());

unsafe extern "C" {
    /// The C library's `atexit` (libFuzzer ends a `-runs=N` run with `exit`).
    fn atexit(f: extern "C" fn()) -> std::ffi::c_int;
}

extern "C" fn print_tallies() {
    let tallies = TALLIES.lock().unwrap_or_else(|e| e.into_inner());
    for t in tallies.iter() {
        eprintln!(
            "weft-fuzz tally: {}: {} of {} inputs",
            t.name,
            t.hits.load(Ordering::Relaxed),
            t.runs.load(Ordering::Relaxed)
        );
    }
}

impl Tally {
    /// A tally printed as `name`.
    pub const fn new(name: &'static str) -> Self {
        Tally {
            name,
            runs: AtomicU64::new(0),
            hits: AtomicU64::new(0),
            registered: OnceLock::new(),
        }
    }

    /// Counts one input, a hit or not.
    pub fn record(&'static self, hit: bool) {
        self.runs.fetch_add(1, Ordering::Relaxed);
        self.hits.fetch_add(u64::from(hit), Ordering::Relaxed);
        self.registered.get_or_init(|| {
            static AT_EXIT: OnceLock<()> = OnceLock::new();
            if std::env::var_os("WEFT_FUZZ_TALLY").is_none() {
                return;
            }
            TALLIES.lock().unwrap_or_else(|e| e.into_inner()).push(self);
            AT_EXIT.get_or_init(|| {
                // SAFETY: registers a plain `extern "C" fn()` that only reads atomics under a
                // mutex and writes to stderr.
                unsafe { atexit(print_tallies) };
            });
        });
    }
}

/// Makes the framing of a would-be graph file consistent so that a load gets past it to the
/// header, the section table and the payload: the header's file length becomes the actual
/// length, the trailer's end marker `GEND`, and the CRC-32 that of the bytes before the trailer.
/// Inputs too short for a header and a trailer are left as they are.
pub fn fix_graph_framing(bytes: &mut [u8]) {
    let len = bytes.len();
    if len < GRAPH_HEADER_LEN + GRAPH_TRAILER_LEN {
        return;
    }
    bytes[16..24].copy_from_slice(&(len as u64).to_le_bytes());
    bytes[len - 4..].copy_from_slice(b"GEND");
    let body = len - GRAPH_TRAILER_LEN;
    let crc = crc32fast::hash(&bytes[..body]);
    bytes[body..body + 4].copy_from_slice(&crc.to_le_bytes());
}

/// Every way to load a graph file.
pub fn all_load_options() -> impl Iterator<Item = LoadOptions> {
    [false, true].into_iter().flat_map(|mmap| {
        [true, false].into_iter().flat_map(move |verify_checksum| {
            [true, false].into_iter().map(move |validate| LoadOptions {
                mmap,
                verify_checksum,
                validate,
            })
        })
    })
}

/// Reads the graph file at `path` every way there is (`read_header`, then `load` owned and
/// memory-mapped, with and without the checksum and the validation) and checks what comes back:
/// no panic, a loaded graph agrees with the header, a validated one passes `validate`, an owned
/// load and a mapped one with the same checks accept the same files and return the same graph.
/// Tallies the files that some load accepts and those the default load (owned, checksum and
/// validation on) accepts.
pub fn check_graph_file(path: &Path) {
    static ANY: Tally = Tally::new("graph loads with some option");
    static DEFAULT: Tally = Tally::new("graph loads with the default options");
    let header = storage::read_header(path);
    let mut loaded: Vec<(LoadOptions, Option<StoredGraph>)> = Vec::new();
    for options in all_load_options() {
        let graph = match storage::load(path, options) {
            Ok((graph, meta)) => {
                let h = header
                    .as_ref()
                    .expect("a file that loads has a readable header");
                check_against_header(&graph, h);
                assert_eq!(
                    meta, h.meta,
                    "load and read_header disagree on the metadata"
                );
                if options.validate {
                    graph.validate().expect("a validated load is valid");
                } else {
                    // An unvalidated graph may be invalid; checking it must not panic.
                    let _ = graph.validate();
                }
                walk(&graph, options.validate);
                Some(graph)
            }
            Err(_) => None,
        };
        loaded.push((options, graph));
    }
    // Owned (the first four) against memory-mapped (the last four), same checks.
    let (owned, mapped) = loaded.split_at(4);
    for ((o, a), (m, b)) in owned.iter().zip(mapped) {
        assert_eq!(
            (o.verify_checksum, o.validate),
            (m.verify_checksum, m.validate)
        );
        match (a, b) {
            (None, None) => {}
            (Some(a), Some(b)) => assert_same_graph(a, b),
            _ => panic!(
                "owned and mapped loads disagree (checksum {}, validate {}): owned {}, mapped {}",
                o.verify_checksum,
                o.validate,
                a.is_some(),
                b.is_some()
            ),
        }
    }
    ANY.record(loaded.iter().any(|(_, g)| g.is_some()));
    DEFAULT.record(
        loaded
            .iter()
            .any(|(o, g)| *o == LoadOptions::default() && g.is_some()),
    );
}

fn check_against_header(graph: &StoredGraph, h: &GraphHeader) {
    assert_eq!(graph.kind(), h.kind);
    assert_eq!(graph.num_nodes(), h.n);
    assert_eq!(graph.max_degree(), h.degree);
    assert_eq!(graph.entry_points().len(), h.num_entry_points);
    assert_eq!(
        h.layers.first().map(|l| (l.len, l.degree)),
        Some((h.n, h.degree))
    );
    if let StoredGraph::Hier(g) = graph {
        assert_eq!(g.num_layers(), h.layers.len());
        for (l, shape) in h.layers.iter().enumerate() {
            let lg = g.layer_graph(l).expect("every layer of the header exists");
            assert_eq!((lg.n(), lg.degree()), (shape.len, shape.degree));
        }
    } else {
        assert_eq!(h.layers.len(), 1);
    }
}

/// Touches every row (and for a hierarchy every layer's id maps), as a search would. Ids are
/// only followed when the graph was validated.
fn walk(graph: &StoredGraph, valid: bool) {
    let n = graph.num_nodes();
    let mut sum = 0u64;
    // A degree-0 graph may declare up to MAX_NODES empty rows in a tiny file: nothing to touch.
    let rows = if graph.max_degree() == 0 { 0 } else { n };
    for v in 0..rows {
        let row = graph.neighbors(v as NodeId);
        assert!(row.len() <= graph.max_degree());
        for &u in row {
            if valid {
                assert!((u as usize) < n, "a validated graph links out of range");
            }
            sum = sum.wrapping_add(u as u64);
        }
    }
    for &e in graph.entry_points() {
        sum = sum.wrapping_add(e as u64);
    }
    match graph {
        StoredGraph::Knn(g) => {
            for v in 0..rows {
                let d = g.row_dists(v);
                assert_eq!(d.len(), g.k());
                sum = sum.wrapping_add(d.iter().map(|x| x.to_bits() as u64).sum());
            }
        }
        StoredGraph::Hier(g) => walk_hier(g, valid, &mut sum),
        StoredGraph::Fixed(_) => {}
    }
    std::hint::black_box(sum);
}

fn walk_hier(g: &HierGraph, valid: bool, sum: &mut u64) {
    for l in 1..g.num_layers() {
        let layer = g.layer(l).expect("layers 1.. exist");
        for local in 0..layer.len() as NodeId {
            let global = g
                .global_id(l, local)
                .expect("every local vertex has a global id");
            assert_eq!(
                g.local_id(l, global),
                Some(local),
                "the id maps are inverse"
            );
            if valid {
                // Descending: the point is in the layer below.
                assert!(g.local_id(l - 1, global).is_some());
            }
            *sum = sum.wrapping_add(global as u64);
        }
    }
}

fn assert_same_graph(a: &StoredGraph, b: &StoredGraph) {
    assert_eq!(a.kind(), b.kind());
    assert_eq!(a.num_nodes(), b.num_nodes());
    assert_eq!(a.max_degree(), b.max_degree());
    assert_eq!(a.entry_points(), b.entry_points());
    match (a, b) {
        (StoredGraph::Knn(a), StoredGraph::Knn(b)) => {
            assert_eq!(a.ids(), b.ids());
            let bits = |d: &[f32]| d.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(a.dists()), bits(b.dists()));
        }
        (StoredGraph::Fixed(a), StoredGraph::Fixed(b)) => assert_eq!(a.ids(), b.ids()),
        (StoredGraph::Hier(a), StoredGraph::Hier(b)) => {
            assert_eq!(a.num_layers(), b.num_layers());
            for l in 0..a.num_layers() {
                assert_eq!(
                    a.layer_graph(l).map(|g| g.ids()),
                    b.layer_graph(l).map(|g| g.ids())
                );
                if l >= 1 {
                    assert_eq!(
                        a.layer(l).map(|x| x.global_ids()),
                        b.layer(l).map(|x| x.global_ids())
                    );
                }
            }
        }
        _ => unreachable!("kinds compared above"),
    }
}

/// Splits an index input: a little-endian `u32` length `g`, then `g` bytes of graph file
/// (fewer when the input ends first), then the vector file. `None` for inputs under 4 bytes.
/// The seed generator (`seedgen`) writes this encoding.
pub fn split_index_input(data: &[u8]) -> Option<(&[u8], &[u8])> {
    let (len, rest) = data.split_first_chunk::<4>()?;
    let g = (u32::from_le_bytes(*len) as usize).min(rest.len());
    Some(rest.split_at(g))
}

/// Every name [`weft::Index::save`] gives the vector file (one per element type).
pub const INDEX_DATA_FILES: [&str; 4] = ["data.fbin", "data.npy", "data.u8bin", "data.i8bin"];
/// The name [`weft::Index::save`] gives the graph file.
pub const INDEX_GRAPH_FILE: &str = "graph.wgraph";
