//! Progress bars (indicatif) and cancellation for the commands: Ctrl-C (SIGINT), SIGTERM
//! (`kill`, a service manager stopping the process) and SIGHUP (the terminal closed) alike.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use weft::{BuildCtx, CancelToken, Progress};

/// The GPUs named by `--gpus`: a list of CUDA device numbers or every visible device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GpuSelection {
    /// These devices, in this order (at least one, none twice).
    List(Vec<usize>),
    /// Every device the process sees.
    All,
}

impl GpuSelection {
    /// Parses `all` or a comma-separated list of device numbers (`0,1`).
    pub fn parse(s: &str) -> Result<GpuSelection, String> {
        if s.trim().eq_ignore_ascii_case("all") {
            return Ok(GpuSelection::All);
        }
        let mut list = Vec::new();
        for part in s.split(',') {
            let d: usize = part
                .trim()
                .parse()
                .map_err(|_| format!("`{part}` is not a GPU number (give 0,1 or all)"))?;
            if list.contains(&d) {
                return Err(format!("GPU {d} is named twice"));
            }
            list.push(d);
        }
        Ok(GpuSelection::List(list))
    }
}

/// What every command gets: a cancellation token wired to Ctrl-C, a progress sink, the thread
/// count and the GPUs asked for.
pub struct Session {
    cancel: CancelToken,
    progress: Arc<Bars>,
    threads: Option<usize>,
    gpus: Option<GpuSelection>,
}

impl Session {
    /// Installs the handler of Ctrl-C (SIGINT), SIGTERM and SIGHUP: the first signal cancels
    /// the work (every command looks at the token: builds, searches, writes; a cancelled writer
    /// removes its temporary file) and the command ends with exit status 130; the second exits
    /// at once, with status 130, after deleting the temporary files of writes in progress (an
    /// exit runs no destructors; see `weft::core::temp_files`).
    pub fn new(quiet: bool, threads: Option<usize>, gpus: Option<GpuSelection>) -> Self {
        let cancel = CancelToken::new();
        let pressed = Arc::new(AtomicBool::new(false));
        let (token, again) = (cancel.clone(), Arc::clone(&pressed));
        // A failure to install the handler (e.g. one already set) only loses signal handling.
        let _ = ctrlc::set_handler(move || {
            if again.swap(true, Ordering::SeqCst) {
                weft::core::temp_files::remove_registered();
                eprintln!("\ninterrupted again: exiting");
                std::process::exit(130);
            }
            eprintln!("\ncancelling (press Ctrl-C or send SIGTERM again to exit now)...");
            token.cancel();
        });
        Session {
            cancel,
            progress: Arc::new(Bars::new(quiet)),
            threads,
            gpus,
        }
    }

    /// The GPUs asked for with `--gpus` (empty: the default device); `all` is counted here,
    /// and is an error naming the reason when no device can be counted.
    pub fn gpus(&self) -> anyhow::Result<Vec<usize>> {
        match &self.gpus {
            None => Ok(Vec::new()),
            Some(GpuSelection::List(list)) => Ok(list.clone()),
            Some(GpuSelection::All) => match weft::GpuStatus::device_count() {
                Ok(0) => anyhow::bail!("--gpus all: no CUDA device is visible"),
                Ok(n) => Ok((0..n).collect()),
                Err(e) => anyhow::bail!("--gpus all: {e}"),
            },
        }
    }

    /// Whether `--gpus` was given.
    pub fn gpus_given(&self) -> bool {
        self.gpus.is_some()
    }

    /// The algorithms of this build, with the GPU back ends on the first `--gpus` device (or
    /// the default one) when it is usable. A GPU asked for with `--gpus` that cannot be used is
    /// an error naming it, whatever the backend; every listed one is checked.
    pub fn registry(&self) -> anyhow::Result<weft::Registry> {
        let gpus = self.gpus()?;
        let mut first = None;
        for &d in gpus.iter().rev() {
            let status = weft::GpuStatus::require(Some(d)).map_err(|e| {
                anyhow::anyhow!(
                    "--gpus: {e} (leave --gpus out for the default GPU, or the CPU where there \
                     is none; nvidia-smi lists the GPUs)"
                )
            })?;
            first = Some(status);
        }
        let status = match first {
            Some(status) => status,
            None => weft::GpuStatus::require(None)?,
        };
        Ok(weft::Registry::with_gpu(status))
    }

    /// [`Session::registry`] for `command`, which builds on one GPU: several `--gpus` are an
    /// error (only searches spread over several GPUs).
    pub fn build_registry(&self, command: &str) -> anyhow::Result<weft::Registry> {
        let gpus = self.gpus()?;
        if gpus.len() > 1 {
            anyhow::bail!(
                "--gpus names {} GPUs, but {command} builds on one GPU: give one (--gpus {}); \
                 weft search and weft eval search on several",
                gpus.len(),
                gpus[0]
            );
        }
        self.registry()
    }

    /// A build context with `seed`, this session's threads, cancellation and progress.
    pub fn ctx(&self, seed: u64) -> BuildCtx {
        BuildCtx::new(seed)
            .with_threads(self.threads)
            .with_cancel(self.cancel.clone())
            .with_progress(self.progress.clone())
    }

    /// The token Ctrl-C cancels.
    pub fn cancel_token(&self) -> &CancelToken {
        &self.cancel
    }

    /// Reports a stage with no counter (a spinner).
    pub fn stage(&self, name: &str) {
        self.progress.begin(name, None);
    }

    /// Ends the current stage.
    pub fn done(&self) {
        self.progress.end();
    }

    /// The thread count requested on the command line.
    pub fn threads(&self) -> usize {
        self.threads.unwrap_or_else(rayon_threads)
    }
}

fn rayon_threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// One progress bar at a time, replaced at each stage; drawn on stderr when it is a terminal.
pub struct Bars {
    quiet: bool,
    bar: Mutex<Option<ProgressBar>>,
}

impl Bars {
    fn new(quiet: bool) -> Self {
        Bars {
            quiet,
            bar: Mutex::new(None),
        }
    }
}

impl Progress for Bars {
    fn begin(&self, stage: &str, total: Option<u64>) {
        let mut slot = self.bar.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(old) = slot.take() {
            old.finish_and_clear();
        }
        if self.quiet {
            return;
        }
        let bar = match total {
            Some(t) => ProgressBar::new(t).with_style(
                ProgressStyle::with_template("{spinner} {msg:<28} [{bar:30}] {pos}/{len} ({eta})")
                    .expect("valid template")
                    .progress_chars("=> "),
            ),
            None => ProgressBar::new_spinner().with_style(
                ProgressStyle::with_template("{spinner} {msg} ({elapsed})")
                    .expect("valid template"),
            ),
        };
        bar.set_draw_target(ProgressDrawTarget::stderr());
        bar.set_message(stage.to_string());
        bar.enable_steady_tick(Duration::from_millis(120));
        *slot = Some(bar);
    }

    fn advance(&self, delta: u64) {
        if let Some(bar) = self.bar.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
            bar.inc(delta);
        }
    }

    fn end(&self) {
        if let Some(bar) = self.bar.lock().unwrap_or_else(|p| p.into_inner()).take() {
            bar.finish_and_clear();
        }
    }
}
