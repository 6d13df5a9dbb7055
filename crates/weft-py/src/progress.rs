//! Build progress for Python: `weft.build(progress=callable, verbose=True)`.
//!
//! The library reports progress from its worker threads through [`weft::Progress`]; a
//! [`Collector`] only records it (a short lock per report, no Python). The thread that called
//! `weft.build` waits for the build anyway, waking every few milliseconds (see
//! [`crate::run`]): there it hands what changed since its last look to the Python callable and
//! prints it when `verbose`, with the GIL held, so the callable runs on the caller's thread and
//! an exception it raises cancels the build and is raised by `weft.build`.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use pyo3::prelude::*;

/// One stage of a build as reported so far.
#[derive(Clone, Debug)]
struct Stage {
    name: String,
    total: Option<u64>,
    done: u64,
    ended: bool,
}

/// Records the library's reports for [`Reporter::poll`].
#[derive(Debug, Default)]
pub(crate) struct Collector {
    stages: Mutex<Vec<Stage>>,
}

impl weft::Progress for Collector {
    fn begin(&self, stage: &str, total: Option<u64>) {
        let mut stages = self.stages.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(last) = stages.last_mut() {
            last.ended = true;
        }
        stages.push(Stage {
            name: stage.to_owned(),
            total,
            done: 0,
            ended: false,
        });
    }

    fn advance(&self, delta: u64) {
        let mut stages = self.stages.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(last) = stages.last_mut() {
            last.done = last.done.saturating_add(delta);
        }
    }

    fn end(&self) {
        let mut stages = self.stages.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(last) = stages.last_mut() {
            last.ended = true;
        }
    }
}

/// Least time between two lines of `verbose` output within a stage.
const PRINT_EVERY: Duration = Duration::from_secs(1);

/// Hands a [`Collector`]'s reports to Python.
pub(crate) struct Reporter {
    /// The user's `progress(stage, done, total)`.
    callback: Option<Py<PyAny>>,
    /// Print to `sys.stderr`.
    verbose: bool,
    /// What was last handed on of each stage: `done`, and whether its end was.
    seen: Vec<(u64, bool)>,
    /// When `verbose` last printed.
    printed: Option<Instant>,
}

impl Reporter {
    /// A reporter to `callback` and, when `verbose`, to `sys.stderr`.
    pub(crate) fn new(callback: Option<Py<PyAny>>, verbose: bool) -> Self {
        Reporter {
            callback,
            verbose,
            seen: Vec::new(),
            printed: None,
        }
    }

    /// Whether there is anyone to report to.
    pub(crate) fn wanted(&self) -> bool {
        self.callback.is_some() || self.verbose
    }

    /// Calls the callable with `(stage, done, total)` for each stage that began, advanced or
    /// ended since the last call, and prints the same when `verbose` (a stage's beginning and
    /// end always, its advances at most every [`PRINT_EVERY`]).
    pub(crate) fn poll(&mut self, py: Python<'_>, collector: &Collector) -> PyResult<()> {
        let stages = collector
            .stages
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        for (i, stage) in stages.iter().enumerate() {
            let is_new = i >= self.seen.len();
            if is_new {
                self.seen.push((0, false));
            }
            let (done, ended) = self.seen[i];
            if !is_new && done == stage.done && ended == stage.ended {
                continue;
            }
            self.seen[i] = (stage.done, stage.ended);
            if let Some(cb) = &self.callback {
                cb.call1(py, (stage.name.as_str(), stage.done, stage.total))?;
            }
            if self.verbose {
                let due = self.printed.is_none_or(|t| t.elapsed() >= PRINT_EVERY);
                if is_new || stage.ended || due {
                    let of = stage.total.map(|t| format!("/{t}")).unwrap_or_default();
                    let state = if stage.ended { " done" } else { "" };
                    let line = format!("weft: {} {}{of}{state}\n", stage.name, stage.done);
                    py.import("sys")?
                        .getattr("stderr")?
                        .call_method1("write", (line,))?;
                    self.printed = Some(Instant::now());
                }
            }
        }
        Ok(())
    }
}
