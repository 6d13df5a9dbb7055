//! Prints a file's info line and times a full read (and, for vectors, the non-finite scan):
//! `cargo run --release -p weft-io --example read -- FILE [--no-mmap]`.

use std::time::Instant;

use weft_io::{ReadOptions, VectorFile};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let path = args.first().ok_or("usage: read FILE [--no-mmap]")?;
    let options = ReadOptions::new().with_mmap(!args.iter().any(|a| a == "--no-mmap"));
    let file = VectorFile::open(path, &options)?;
    println!("{}", file.info());
    let start = Instant::now();
    if file.info().element.is_id() {
        let ids = file.read_ids()?;
        println!(
            "read {} x {} ids in {:.2?}",
            ids.rows(),
            ids.cols(),
            start.elapsed()
        );
    } else {
        let data = file.read_any()?;
        println!(
            "read {} x {} {} in {:.2?} (memory-mapped: {})",
            data.rows(),
            data.dim(),
            data.dtype(),
            start.elapsed(),
            data.is_mapped()
        );
    }
    Ok(())
}
