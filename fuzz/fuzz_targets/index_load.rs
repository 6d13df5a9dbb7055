//! `weft::Index::load` on a folder holding a graph file and a vector file made from the input
//! (`weft_fuzz::split_index_input`: a `u32` length, the graph file, the vector file). The graph's
//! framing (length, end marker, CRC-32) is fixed up first (`weft_fuzz::fix_graph_framing`), as
//! `Index::load` always verifies the checksum; the vector bytes go under every data file name
//! `Index::save` uses, so whichever element type the graph records, its file is there. An index
//! that loads is then searched on the CPU (graph search and exact search, a few of its own
//! rows as queries): the results must be in range.
//!
//! Run: `fuzz/run.sh index_load` (or `cd fuzz && cargo +nightly fuzz run index_load`).

#![no_main]

use libfuzzer_sys::fuzz_target;
use weft::{AnyDataset, Backend, Dataset, Element, GraphView, INVALID, Index, SearchParams};
use weft_fuzz::{
    INDEX_DATA_FILES, INDEX_GRAPH_FILE, Tally, fix_graph_framing, scratch_dir, split_index_input,
};

static LOADED: Tally = Tally::new("Index::load succeeded");
static SEARCHED: Tally = Tally::new("a graph search returned results");

fuzz_target!(|data: &[u8]| {
    let Some((graph, vectors)) = split_index_input(data) else {
        return;
    };
    let mut graph = graph.to_vec();
    fix_graph_framing(&mut graph);
    let dir = scratch_dir().join("index");
    std::fs::create_dir_all(&dir).expect("index directory");
    std::fs::write(dir.join(INDEX_GRAPH_FILE), &graph).expect("write the graph file");
    for name in INDEX_DATA_FILES {
        std::fs::write(dir.join(name), vectors).expect("write the vector file");
    }
    let loaded = Index::load(&dir);
    LOADED.record(loaded.is_ok());
    let Ok(index) = loaded else {
        SEARCHED.record(false);
        return;
    };
    let rows = index.data().rows();
    assert_eq!(index.graph().num_nodes(), rows);
    if let Some(dim) = index.meta().dim {
        assert_eq!(dim, index.data().dim());
    }
    let pick = data.last().copied().unwrap_or(0) as usize;
    let searched = match index.data() {
        AnyDataset::F32(d) => search(&index, d, pick),
        AnyDataset::F16(d) => search(&index, d, pick),
        AnyDataset::U8(d) => search(&index, d, pick),
        AnyDataset::I8(d) => search(&index, d, pick),
    };
    SEARCHED.record(searched);
});

/// Searches the first rows of the data (at most 2) for `k` neighbours (1 to 8, from `pick`) with
/// the CPU graph search and the exact search. Whether the graph search returned results.
fn search<T: Element>(index: &Index, data: &Dataset<T>, pick: usize) -> bool {
    let rows = data.rows();
    if rows == 0 {
        return false;
    }
    let k = 1 + pick % rows.min(8);
    let Ok(queries) = data.view().slice_rows(0..rows.min(2)) else {
        return false;
    };
    let mut graph_search = false;
    for params in [SearchParams::with_beam_width(16), SearchParams::exact()] {
        let params = params.with_backend(Backend::Cpu);
        if let Ok(out) = index.search(queries, k, &params) {
            graph_search |= !params.exact;
            assert_eq!(out.neighbors.ids.len(), queries.rows() * k);
            for &id in &out.neighbors.ids {
                assert!(
                    id == INVALID || (id as usize) < rows,
                    "result id {id} of {rows}"
                );
            }
        }
    }
    graph_search
}
