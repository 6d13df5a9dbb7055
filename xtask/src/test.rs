//! `cargo xtask test`.

use anyhow::Result;

use crate::util::{cargo, run as sh};

/// Runs the workspace tests; with `--lint` also `cargo fmt --check` and clippy with -D warnings.
pub fn run(args: &[String]) -> Result<()> {
    let lint = args.iter().any(|a| a == "--lint");
    if lint {
        sh(cargo().args(["fmt", "--all", "--check"]))?;
        sh(cargo().args([
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ]))?;
    }
    sh(cargo().args(["test", "--workspace"]))?;
    Ok(())
}
