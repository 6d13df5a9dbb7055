//! Generates a synthetic preset to a file and reports the time taken:
//! `cargo run --release -p weft-io --example generate -- sift 1000000 /tmp/sift.fbin [seed]`.

use std::time::Instant;

use weft_io::{Preset, Split, VectorWriter};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() < 3 {
        return Err("usage: generate PRESET ROWS OUTPUT [SEED]".into());
    }
    let preset: Preset = args[0].parse()?;
    let rows: u64 = args[1].parse()?;
    let seed: u64 = args.get(3).map_or(Ok(42), |s| s.parse())?;
    let generator = preset.generator(seed)?;

    let start = Instant::now();
    let in_memory = generator.generate::<f32>(Split::Base, 0..rows)?;
    let generated = start.elapsed();
    drop(in_memory);

    let start = Instant::now();
    let mut writer = VectorWriter::<f32>::create(&args[2], preset.dim(), None)?;
    generator.write_rows(Split::Base, rows, &mut writer)?;
    writer.finish()?;
    println!(
        "{preset}: {rows} x {} generated in memory in {:.2?}; streamed to {} in {:.2?} ({} threads)",
        preset.dim(),
        generated,
        args[2],
        start.elapsed(),
        rayon::current_num_threads()
    );
    Ok(())
}
