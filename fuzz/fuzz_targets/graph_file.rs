//! Feeds arbitrary bytes, as a `.wgraph` file (k-NN, fixed-degree or hierarchical graph),
//! through `weft_graph::storage::read_header` and `load` with every option (owned and
//! memory-mapped; checksum and validation on and off). Any outcome but a panic (or a crash, a
//! hang, a huge allocation) is fine when the file is malformed; a file that loads must agree
//! with its header, and owned and mapped loads must agree (`weft_fuzz::check_graph_file`).
//!
//! With the checksum verified, a mutated file rarely gets past the CRC: the loads without the
//! check reach the parser, and `graph_file_crc` fixes the CRC first.
//!
//! Run: `fuzz/run.sh graph_file` (or `cd fuzz && cargo +nightly fuzz run graph_file`).

#![no_main]

use libfuzzer_sys::fuzz_target;
use weft_fuzz::{check_graph_file, scratch_dir};

fuzz_target!(|data: &[u8]| {
    let path = scratch_dir().join("input.wgraph");
    std::fs::write(&path, data).expect("write the input file");
    check_graph_file(&path);
});
