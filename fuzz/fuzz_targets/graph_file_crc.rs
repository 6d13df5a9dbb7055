//! `graph_file` with the framing fixed up after mutation: the header's file length, the end
//! marker and the CRC-32 are made to match the bytes (`weft_fuzz::fix_graph_framing`), so the
//! checksummed loads (the default ones, and `weft::Index::load`'s) reach the header, the
//! section table, the payload and the graph validation instead of stopping at the CRC.
//!
//! A crash input is the bytes before the fix-up: run this target's binary on it to reproduce.
//!
//! Run: `fuzz/run.sh graph_file_crc` (or `cd fuzz && cargo +nightly fuzz run graph_file_crc`).

#![no_main]

use libfuzzer_sys::fuzz_target;
use weft_fuzz::{check_graph_file, fix_graph_framing, scratch_dir};

fuzz_target!(|data: &[u8]| {
    let mut bytes = data.to_vec();
    fix_graph_framing(&mut bytes);
    let path = scratch_dir().join("input.wgraph");
    std::fs::write(&path, &bytes).expect("write the input file");
    check_graph_file(&path);
});
