//! `cargo xtask test`.

use anyhow::Result;

use crate::util::{cargo, run};

/// Runs the workspace tests; with `--lint` also `cargo fmt --check` and clippy with -D warnings.
pub fn run_task(args: &[String]) -> Result<()> {
    let lint = args.iter().any(|a| a == "--lint");
    if lint {
        run(cargo().args(["fmt", "--all", "--check"]))?;
        run(cargo().args(["clippy", "--workspace", "--all-targets", "--", "-D", "warnings"]))?;
    }
    run(cargo().args(["test", "--workspace"]))?;
    Ok(())
}

pub use run_task as run;
