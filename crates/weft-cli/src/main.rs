//! `weft`: build approximate-nearest-neighbour graphs and search them, from the command line.
//!
//! Every command has `--help`, prints a human summary (or one JSON document with `--json`),
//! shows progress bars on long work (on a terminal) and stops cleanly on Ctrl-C.

mod commands;
mod progress;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Build approximate-nearest-neighbour proximity graphs on GPUs and CPUs, and search them.
#[derive(Parser, Debug)]
#[command(name = "weft", version, about, long_about = None, propagate_version = true)]
pub struct Cli {
    /// Print one JSON document on stdout instead of the human summary.
    #[arg(long, global = true)]
    json: bool,
    /// No progress bars.
    #[arg(long, short, global = true)]
    quiet: bool,
    /// Worker threads (default: all cores).
    #[arg(long, global = true)]
    threads: Option<usize>,
    /// The command.
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Write a synthetic dataset (SIFT-, DEEP-, GIST-, GloVe-like or strongly clustered) and
    /// its queries.
    Gen(commands::gen_cmd::Args),
    /// Describe a vector, id or graph file, or (without a file) this machine.
    Info(commands::info::Args),
    /// Compute exact ground truth (k nearest base vectors of every query).
    Gt(commands::gt::Args),
    /// Build a graph on a vector file with a named algorithm.
    Build(commands::build::Args),
    /// Search a graph (or exhaustively) and write the neighbours.
    Search(commands::search::Args),
    /// Measure recall@k and queries per second over a sweep of the beam width.
    Eval(commands::eval::Args),
    /// The embedded default job: generate a dataset, build graphs, search, report recall and speed.
    Demo(commands::demo::Args),
    /// List the algorithms of this build with their default parameters.
    Algos(commands::algos::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let ctx = progress::Session::new(cli.quiet || cli.json, cli.threads);
    let result = match &cli.command {
        Command::Gen(a) => commands::gen_cmd::run(a, &ctx),
        Command::Info(a) => commands::info::run(a, &ctx),
        Command::Gt(a) => commands::gt::run(a, &ctx),
        Command::Build(a) => commands::build::run(a, &ctx),
        Command::Search(a) => commands::search::run(a, &ctx),
        Command::Eval(a) => commands::eval::run(a, &ctx),
        Command::Demo(a) => commands::demo::run(a, &ctx),
        Command::Algos(a) => commands::algos::run(a, &ctx),
    };
    match result {
        Ok(report) => {
            if cli.json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&report.json).expect("reports serialise")
                );
            } else {
                print!("{}", report.text);
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            let cancelled = matches!(
                e.downcast_ref::<weft::Error>(),
                Some(weft::Error::Cancelled)
            );
            if cli.json {
                let doc = serde_json::json!({ "error": format!("{e:#}"), "cancelled": cancelled });
                println!(
                    "{}",
                    serde_json::to_string_pretty(&doc).expect("errors serialise")
                );
            } else {
                eprintln!("error: {e:#}");
            }
            if cancelled {
                ExitCode::from(130)
            } else {
                ExitCode::FAILURE
            }
        }
    }
}
