//! Feeds arbitrary bytes, as a file of every format, through every reader: `info`, whole and
//! row-range vector reads (memory-mapped and not), and id reads. Any outcome but a panic (or a
//! crash, or a huge allocation) is fine: bad input must come back as a typed error.
//!
//! Run: `fuzz/run.sh read_vectors` (or `cd fuzz && cargo +nightly fuzz run read_vectors`).

#![no_main]

use std::path::PathBuf;

use libfuzzer_sys::fuzz_target;
use weft_io::{Format, ReadOptions, VectorFile, info, read_ids};

/// A scratch directory for this process's files.
fn scratch_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("weft-fuzz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("scratch directory");
    dir
}

fuzz_target!(|data: &[u8]| {
    let dir = scratch_dir();
    for format in Format::ALL {
        let path = dir.join(format!("input.{format}"));
        std::fs::write(&path, data).expect("write the input file");
        if let Ok(i) = info(&path) {
            assert_eq!(i.format, format);
            assert!(i.data_bytes() <= i.file_bytes);
        }
        let _ = read_ids(&path, None);
        for mmap in [true, false] {
            let options = ReadOptions::new().with_mmap(mmap);
            let Ok(file) = VectorFile::open(&path, &options) else {
                continue;
            };
            let rows = file.rows();
            if let Ok(all) = file.read_any() {
                assert_eq!((all.rows(), all.dim()), (rows, file.dim()));
                let _ = all.to_f32();
            }
            // A few row ranges, including out-of-range ones.
            let a = data.first().map_or(0, |&b| b as usize) % (rows + 2);
            let b = data.last().map_or(0, |&b| b as usize) % (rows + 2);
            for range in [a..b, b..a, 0..rows, rows..rows + 1] {
                if let Ok(part) = file.read_rows_any(range.clone()) {
                    assert_eq!(part.rows(), range.len());
                }
                let _ = file.read_id_rows(range);
            }
        }
    }
});
