//! `cargo xtask`: weft's developer tasks. Plain `cargo build` and `cargo test` never need it.
//!
//! - `cargo xtask test`: the workspace tests and the Python package's pytest suite (what CI runs),
//!   plus the GPU runs where a GPU is present.
//! - `cargo xtask kernels [--arch 80,90] [--check]`: compile every CUDA kernel with nvcc and NVRTC.
//! - `cargo xtask nvrtc-time [--arch 90] [--modules a,b] [--repeat N] [--units] [--first-use]`:
//!   NVRTC's compile time per kernel module, unit and algorithm's first use, with no cache (a
//!   build without nvcc, on its first GPU use); `--help` lists the options.
//! - `cargo xtask device-pack`: gather release binaries and a run script for the GPU machine.
//! - `cargo xtask bench`: the benchmark harness.
//! - `cargo xtask cuvs-wheels`: the cuVS wheels in parts for the GPU machine (its GPU peer).
//! - `cargo xtask tidy`: only weft-gpu names cudarc, dependencies point one way, none unused,
//!   the README's crate table matches the workspace, cited paths resolve, no circle between
//!   files.
//! - `cargo xtask package-check [--allow-dirty] [--verify]`: the publishable crates package (metadata,
//!   licenses, kernels and their headers), and the toolchain meets the MSRV.

mod bench;
mod cuvs_wheels;
mod device_pack;
mod file_circles;
mod kernels;
mod nvrtc_time;
mod package_check;
mod test;
mod tidy;
mod util;

use anyhow::{Result, bail};

const USAGE: &str = "\
usage: cargo xtask <task> [options]

tasks:
  test          run the workspace tests and the Python package's pytest suite, as CI does
                [--lint: fmt and clippy too] [--no-python: skip the Python package]
  kernels       compile every CUDA kernel with nvcc and NVRTC [--arch 80,90] [--check]
  nvrtc-time    NVRTC compile time per kernel module, unit or first use, empty cache (--help)
  device-pack   build release test/bench binaries and the CLI into device-pack/ for the GPU machine
  bench         run the benchmark harness
  cuvs-wheels   download the cuVS wheels and split them into device-pack-wheels-NN/ parts
  tidy          check that only weft-gpu names cudarc, dependencies point one way, none unused,
                the README's crate table matches the workspace and cited paths resolve
  package-check check that the publishable crates package (metadata, licenses, kernel sources
                and headers; cargo package --no-verify) and the toolchain meets the MSRV
                [--allow-dirty: package uncommitted changes too] [--verify: build each package
                from its .crate, as cargo publish does; slow]
  help          print this message";

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some((task, rest)) = args.split_first() else {
        println!("{USAGE}");
        return Ok(());
    };
    match task.as_str() {
        "test" => test::run(rest),
        "kernels" => kernels::run(rest),
        "nvrtc-time" => nvrtc_time::run(rest),
        "device-pack" => device_pack::run(rest),
        "bench" => bench::run(rest),
        "cuvs-wheels" => cuvs_wheels::run(rest),
        "tidy" => tidy::run(rest),
        "package-check" => package_check::run(rest),
        "help" | "--help" | "-h" => {
            println!("{USAGE}");
            Ok(())
        }
        other => bail!("unknown task `{other}`\n\n{USAGE}"),
    }
}
