//! The context of a long operation: seed, threads, cancellation and progress.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::{Error, Result};

/// Receives progress reports from long work. Implementations must be cheap: builders call
/// [`Progress::advance`] from worker threads.
pub trait Progress: Send + Sync {
    /// A new stage begins, with `total` units of work if known.
    fn begin(&self, stage: &str, total: Option<u64>);
    /// `delta` more units of the current stage are done.
    fn advance(&self, delta: u64);
    /// The current stage is over.
    fn end(&self) {}
}

/// A [`Progress`] that ignores everything.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoProgress;

impl Progress for NoProgress {
    fn begin(&self, _stage: &str, _total: Option<u64>) {}
    fn advance(&self, _delta: u64) {}
}

/// A cancellation flag shared between the caller (who cancels) and the work (which polls).
#[derive(Clone, Debug, Default)]
pub struct CancelToken(Arc<AtomicBool>);

impl CancelToken {
    /// A token that is not cancelled.
    pub fn new() -> Self {
        Self::default()
    }

    /// Asks the work to stop; it returns [`Error::Cancelled`] at its next check.
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    /// Whether [`CancelToken::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// `Err(Error::Cancelled)` once cancelled.
    pub fn check(&self) -> Result<()> {
        if self.is_cancelled() {
            Err(Error::Cancelled)
        } else {
            Ok(())
        }
    }
}

/// Two tokens are equal when they share one flag (one is a clone of the other), whatever its
/// state.
impl PartialEq for CancelToken {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl Eq for CancelToken {}

/// The fewest threads [`max_threads`] allows, whatever the core count.
pub const THREADS_FLOOR: usize = 64;

/// The most threads a [`BuildCtx`] (and so any build or search) may start: 4 times the cores
/// available to this process, at least [`THREADS_FLOOR`]. Oversubscribing further gains
/// nothing, and an absurd count (100000) would spend minutes starting threads; a larger
/// request is an [`Error::InvalidParams`] for `threads`, never silently lowered.
pub fn max_threads() -> usize {
    available_cores().saturating_mul(4).max(THREADS_FLOOR)
}

/// The cores available to this process (1 when unknown).
pub fn available_cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// Checks a requested thread count: 1 to [`max_threads`].
pub fn check_threads(n: usize) -> Result<()> {
    let max = max_threads();
    if n == 0 || n > max {
        return Err(Error::invalid_param(
            "threads",
            format!(
                "the thread count must be between 1 and {max} (the larger of {THREADS_FLOOR} \
                 and 4 times the {} cores available), got {n}",
                available_cores()
            ),
        ));
    }
    Ok(())
}

/// Everything a build or search needs besides data and parameters.
#[derive(Clone)]
pub struct BuildCtx {
    seed: u64,
    threads: Option<usize>,
    cancel: CancelToken,
    progress: Arc<dyn Progress>,
}

impl std::fmt::Debug for BuildCtx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BuildCtx")
            .field("seed", &self.seed)
            .field("threads", &self.threads)
            .field("cancelled", &self.cancel.is_cancelled())
            .finish()
    }
}

impl Default for BuildCtx {
    fn default() -> Self {
        BuildCtx::new(0)
    }
}

impl BuildCtx {
    /// A context with `seed`, the global thread pool, no cancellation and no progress output.
    pub fn new(seed: u64) -> Self {
        BuildCtx {
            seed,
            threads: None,
            cancel: CancelToken::new(),
            progress: Arc::new(NoProgress),
        }
    }

    /// Runs on a pool of `threads` threads (`None`: rayon's global pool).
    pub fn with_threads(mut self, threads: Option<usize>) -> Self {
        self.threads = threads;
        self
    }

    /// Uses `cancel` as the cancellation flag.
    pub fn with_cancel(mut self, cancel: CancelToken) -> Self {
        self.cancel = cancel;
        self
    }

    /// Reports progress to `progress`.
    pub fn with_progress(mut self, progress: Arc<dyn Progress>) -> Self {
        self.progress = progress;
        self
    }

    /// The seed: the same seed and parameters give the same result on the CPU.
    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The requested thread count (`None`: rayon's global pool).
    pub fn threads(&self) -> Option<usize> {
        self.threads
    }

    /// The cancellation flag.
    pub fn cancel_token(&self) -> &CancelToken {
        &self.cancel
    }

    /// The progress sink.
    pub fn progress(&self) -> &dyn Progress {
        &*self.progress
    }

    /// `Err(Error::Cancelled)` once cancelled; call between units of work.
    pub fn check_cancelled(&self) -> Result<()> {
        self.cancel.check()
    }

    /// Runs `f` on the thread pool this context asks for; a thread count outside 1 to
    /// [`max_threads`] is an [`Error::InvalidParams`] for `threads`.
    pub fn install<R: Send>(&self, f: impl FnOnce() -> R + Send) -> Result<R> {
        match self.threads {
            None => Ok(f()),
            Some(n) => Ok(thread_pool(n)?.install(f)),
        }
    }
}

/// The most thread pools [`thread_pool`] keeps at once. A program that alternates between a
/// few thread counts reuses their pools; one that uses more counts evicts the least recently
/// used pool (its threads end once the work running on it, if any, returns).
pub const POOL_CACHE_SIZE: usize = 8;

/// The process's pools by thread count, most recently used last, at most [`POOL_CACHE_SIZE`].
static POOLS: Mutex<Vec<(usize, Arc<rayon::ThreadPool>)>> = Mutex::new(Vec::new());

/// A rayon pool of `n` threads, shared by every build and search that asks for `n` threads
/// ([`BuildCtx::install`]): starting a pool per call cost a short search most of its time (one
/// query per call with one thread: 9.2k instead of 34.5k queries per second). Pools live in a
/// process-wide cache of at most [`POOL_CACHE_SIZE`] pools keyed by thread count, behind a
/// lock taken only to look a pool up (work runs outside it); the same `n` gives the same pool
/// while it stays cached. A count outside 1 to [`max_threads`] is an [`Error::InvalidParams`]
/// for `threads`.
pub fn thread_pool(n: usize) -> Result<Arc<rayon::ThreadPool>> {
    check_threads(n)?;
    let mut pools = POOLS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(i) = pools.iter().position(|(count, _)| *count == n) {
        let entry = pools.remove(i);
        let pool = Arc::clone(&entry.1);
        pools.push(entry);
        return Ok(pool);
    }
    let pool = Arc::new(
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .thread_name(move |i| format!("weft-{n}-{i}"))
            .build()
            .map_err(|e| {
                Error::invalid_param("threads", format!("cannot start {n} threads: {e}"))
            })?,
    );
    if pools.len() >= POOL_CACHE_SIZE {
        pools.remove(0);
    }
    pools.push((n, Arc::clone(&pool)));
    Ok(pool)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 19's fault: `--threads 100000` spent minutes starting threads. The library refuses
    /// a count above `max_threads` at once, with a typed error.
    #[test]
    fn absurd_thread_counts_are_refused_before_any_thread_starts() {
        let start = std::time::Instant::now();
        let ctx = BuildCtx::new(0).with_threads(Some(100_000));
        match ctx.install(|| 1) {
            Err(Error::InvalidParams { name, reason }) => {
                assert_eq!(name, "threads");
                assert!(reason.contains("100000"), "{reason}");
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(start.elapsed().as_secs() < 5);
        assert!(
            BuildCtx::new(0)
                .with_threads(Some(0))
                .install(|| 1)
                .is_err()
        );
        assert_eq!(
            BuildCtx::new(0)
                .with_threads(Some(2))
                .install(|| 7)
                .unwrap(),
            7
        );
        assert!(max_threads() >= THREADS_FLOOR);
        check_threads(max_threads()).unwrap();
        assert!(check_threads(max_threads() + 1).is_err());
    }

    /// Issue 34 item 8: every call with `threads = n` built a new pool. Two calls with the same
    /// count now run on one pool (the same `Arc`, the same worker thread for one thread), and
    /// another count gets another pool.
    #[test]
    fn calls_with_one_thread_count_share_one_pool() {
        let a = thread_pool(3).unwrap();
        let b = thread_pool(3).unwrap();
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(a.current_num_threads(), 3);
        let c = thread_pool(5).unwrap();
        assert!(!Arc::ptr_eq(&a, &c));
        let ctx = BuildCtx::new(0).with_threads(Some(1));
        let first = ctx.install(|| std::thread::current().id()).unwrap();
        let second = ctx.install(|| std::thread::current().id()).unwrap();
        assert_eq!(first, second, "a second call started another pool");
        assert_ne!(first, std::thread::current().id());
        assert!(thread_pool(0).is_err());

        // Bounded: at most POOL_CACHE_SIZE pools, the least recently used evicted first (in
        // this test, not another, so that no eviction races the identity checks above).
        let counts = 10..10 + POOL_CACHE_SIZE + 2;
        for n in counts.clone() {
            thread_pool(n).unwrap();
        }
        let pools = POOLS.lock().unwrap();
        assert!(pools.len() <= POOL_CACHE_SIZE);
        assert_eq!(pools.last().map(|(n, _)| *n), Some(counts.end - 1));
        assert!(!pools.iter().any(|(n, _)| *n == 3));
    }
}
