//! `weft`: build approximate-nearest-neighbour graphs and search them, from the command line.
//!
//! Every command has `--help`, prints a human summary (or one JSON document with `--json`),
//! shows progress bars on long work (on a terminal) and stops cleanly on Ctrl-C.
//!
//! Output goes through one fallible writer ([`emit`]): a write error on stdout is an error
//! message on stderr and exit status 1, never a panic; a closed pipe (`weft algos | head -1`)
//! ends the process quietly with status 141 (128 + SIGPIPE, what a shell reports for a command
//! killed by a closed pipe).

mod commands;
mod progress;

use std::io::{self, Write};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Build approximate-nearest-neighbour proximity graphs on GPUs and CPUs, and search them.
#[derive(Parser, Debug)]
#[command(name = "weft", version, propagate_version = true)]
pub struct Cli {
    /// Print one JSON document on stdout instead of the human summary.
    #[arg(long, global = true)]
    json: bool,
    /// No progress bars.
    #[arg(long, short, global = true)]
    quiet: bool,
    /// Worker threads (default: all cores): 1 up to the larger of 64 and 4 times the cores
    /// available (more would only slow the work down).
    #[arg(long, global = true, value_parser = parse_threads)]
    threads: Option<usize>,
    /// The GPUs the GPU work runs on: CUDA device numbers as nvidia-smi counts them,
    /// comma-separated (0,1), or `all` (default: device 0, or $WEFT_GPU_DEVICE when set).
    /// `weft search` and `weft eval` replicate the index over several GPUs, each searching a
    /// part of the batch; builds (build, gt, demo) run on one GPU and refuse several. Every
    /// GPU given here is used or the command fails, naming it: never the CPU instead. --gpu,
    /// its former name, still works.
    #[arg(
        long = "gpus",
        visible_alias = "gpu",
        global = true,
        value_name = "LIST",
        value_parser = progress::GpuSelection::parse
    )]
    gpus: Option<progress::GpuSelection>,
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

/// Parses `--threads`: 1 to `weft::core::ctx::max_threads()` (the larger of 64 and 4 times the
/// cores available; an absurd count such as 100000 would spend minutes starting threads), the
/// library's own check, so the same limit holds for every build and search.
fn parse_threads(s: &str) -> Result<usize, String> {
    let n: usize = s
        .trim()
        .parse()
        .map_err(|_| format!("`{s}` is not a thread count"))?;
    weft::core::ctx::check_threads(n).map_err(|e| match e {
        weft::Error::InvalidParams { reason, .. } => reason,
        other => other.to_string(),
    })?;
    Ok(n)
}

/// Exit status of a process whose output pipe was closed (128 + SIGPIPE).
const BROKEN_PIPE_STATUS: u8 = 141;

/// Writes `text` to stdout and flushes it: the one path by which the commands' output leaves.
fn emit(text: &str) -> io::Result<()> {
    let mut out = io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}

/// `code`, or the failure of writing the output: quiet status 141 for a closed pipe, else an
/// error on stderr and status 1.
fn finish(written: io::Result<()>, code: ExitCode) -> ExitCode {
    match written {
        Ok(()) => code,
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => ExitCode::from(BROKEN_PIPE_STATUS),
        Err(e) => {
            let _ = writeln!(io::stderr(), "error: writing the output to stdout: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The error and its causes, `: `-separated, each said once (an error whose message already
/// ends with its source's, such as an I/O error on a named file, does not repeat it).
fn error_message(e: &anyhow::Error) -> String {
    let mut msg = String::new();
    for cause in e.chain() {
        let s = cause.to_string();
        if msg.ends_with(&s) {
            continue;
        }
        if !msg.is_empty() {
            msg.push_str(": ");
        }
        msg.push_str(&s);
    }
    msg
}

/// The command line, or the exit status of a run that ends in parsing: a usage error on stderr
/// (status 2), or `--help` and `--version` written to stdout through [`emit`].
fn parse() -> Result<Cli, ExitCode> {
    Cli::try_parse().map_err(|e| {
        if e.use_stderr() {
            let _ = e.print();
            return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2));
        }
        let styled = e.render();
        let text = if io::IsTerminal::is_terminal(&io::stdout()) {
            styled.ansi().to_string()
        } else {
            styled.to_string()
        };
        finish(emit(&text), ExitCode::SUCCESS)
    })
}

fn main() -> ExitCode {
    let cli = match parse() {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    let ctx = progress::Session::new(cli.quiet || cli.json, cli.threads, cli.gpus);
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
            let written = if cli.json {
                serde_json::to_string_pretty(&report.json)
                    .map_err(io::Error::other)
                    .and_then(|doc| emit(&(doc + "\n")))
            } else {
                emit(&report.text)
            };
            finish(written, ExitCode::SUCCESS)
        }
        Err(e) => {
            let cancelled = matches!(
                e.downcast_ref::<weft::Error>(),
                Some(weft::Error::Cancelled)
            );
            let message = error_message(&e);
            let code = if cancelled {
                ExitCode::from(130)
            } else {
                ExitCode::FAILURE
            };
            if cli.json {
                let doc = serde_json::json!({ "error": message, "cancelled": cancelled });
                let written = serde_json::to_string_pretty(&doc)
                    .map_err(io::Error::other)
                    .and_then(|doc| emit(&(doc + "\n")));
                if written.is_err() {
                    // Stdout is gone: say it where it can still be read.
                    let _ = writeln!(io::stderr(), "error: {message}");
                }
                finish(written, code)
            } else {
                let _ = writeln!(io::stderr(), "error: {message}");
                code
            }
        }
    }
}
