//! Long work with the GIL released, cancelled by Ctrl-C.
//!
//! The work runs on a scoped worker thread; the calling thread waits with the GIL released and
//! wakes every [`POLL`] to run Python's signal handlers (`PyErr_CheckSignals`, which acts only on
//! the main thread). When a handler raises (Ctrl-C: `KeyboardInterrupt`), the work's
//! [`CancelToken`] is cancelled, the worker is awaited (the library returns soon after, at its
//! next look at the token) and the handler's exception is raised.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::Duration;

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use weft::CancelToken;

/// How often the waiting thread looks at Python's signals.
const POLL: Duration = Duration::from_millis(20);

/// Runs `work` on a worker thread with the GIL released; Ctrl-C (any exception raised by a
/// Python signal handler) cancels `token` and is raised once the worker has returned.
pub(crate) fn cancellable<R: Send>(
    py: Python<'_>,
    token: &CancelToken,
    work: impl FnOnce() -> R + Send,
) -> PyResult<R> {
    cancellable_polling(py, token, work, |_| Ok(()))
}

/// [`cancellable`], with `poll` called on the calling thread (GIL held) at every wake-up and
/// once more after the work has returned: it hands progress to Python. An exception from
/// `poll` cancels `token` like Ctrl-C and is raised once the worker has returned.
pub(crate) fn cancellable_polling<R: Send>(
    py: Python<'_>,
    token: &CancelToken,
    work: impl FnOnce() -> R + Send,
    mut poll: impl FnMut(Python<'_>) -> PyResult<()>,
) -> PyResult<R> {
    let done = Arc::new(AtomicBool::new(false));
    thread::scope(|s| {
        let caller = thread::current();
        let flag = Arc::clone(&done);
        let worker = thread::Builder::new()
            .name("weft-py".into())
            .spawn_scoped(s, move || {
                let result = work();
                flag.store(true, Ordering::Release);
                caller.unpark();
                result
            })
            .map_err(|e| PyRuntimeError::new_err(format!("cannot start a worker thread: {e}")))?;
        let mut interrupted: Option<PyErr> = None;
        while !done.load(Ordering::Acquire) {
            py.detach(|| thread::park_timeout(POLL));
            if interrupted.is_none()
                && !done.load(Ordering::Acquire)
                && let Err(e) = py.check_signals().and_then(|()| poll(py))
            {
                token.cancel();
                interrupted = Some(e);
            }
        }
        let result = match py.detach(|| worker.join()) {
            Ok(result) => result,
            Err(panic) => std::panic::resume_unwind(panic),
        };
        if interrupted.is_none()
            && let Err(e) = poll(py)
        {
            interrupted = Some(e);
        }
        match interrupted {
            Some(e) => Err(e),
            None => Ok(result),
        }
    })
}
