//! The one place long runs release the GIL, and where they listen for Ctrl-C.

use dmalab_sim::progress::Progress;
use pyo3::exceptions::PyKeyboardInterrupt;
use pyo3::prelude::*;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, RecvTimeoutError};
use std::time::Duration;

/// Set once for the whole process by [`interrupt`]: every run waiting in [`interruptible`], on
/// any thread, stops, and none starts after.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Stop every native run of this process, running or to come (the command line's Ctrl-C:
/// Python sees the signal on its main thread only, while runs go on in worker threads too).
/// For a process that is ending; nothing clears it.
#[pyfunction]
pub(crate) fn interrupt() {
    INTERRUPTED.store(true, Ordering::Relaxed);
}

fn interrupted() -> PyErr {
    PyKeyboardInterrupt::new_err("interrupted")
}

/// How often a thread waiting on a native run looks at Python's signals.
const SIGNAL_POLL: Duration = Duration::from_millis(50);

/// Run `f` with the GIL released, so other Python threads go on while Rust works.
pub(crate) fn without_gil<T: Send, F: FnOnce() -> T + Send>(py: Python<'_>, f: F) -> T {
    py.detach(f)
}

/// Run `f` with the GIL released on a worker thread while the calling thread looks at Python's
/// signals every [`SIGNAL_POLL`]. On a Ctrl-C (or any signal handler that raises) it cancels
/// `progress`, which `f`'s run must be reading, waits for the run to stop (within
/// [`dmalab_sim::progress::EVERY`] operations) and raises what the handler raised. Called from
/// a thread other than Python's main one, it never sees a signal (Python runs handlers on the
/// main thread only): the caller cancels `progress` itself, or calls [`interrupt`].
pub(crate) fn interruptible<T: Send, F: FnOnce() -> T + Send>(
    py: Python<'_>,
    progress: &Progress,
    f: F,
) -> PyResult<T> {
    if INTERRUPTED.load(Ordering::Relaxed) {
        return Err(interrupted());
    }
    py.detach(|| {
        std::thread::scope(|scope| {
            let (done, result) = sync_channel(1);
            let worker = scope.spawn(move || {
                // The receiver is gone only if the waiting side stopped listening.
                let _ = done.send(f());
            });
            loop {
                match result.recv_timeout(SIGNAL_POLL) {
                    Ok(value) => {
                        let _ = worker.join();
                        return Ok(value);
                    }
                    Err(RecvTimeoutError::Disconnected) => {
                        // The worker ended without a value: it panicked; pass the panic on.
                        if let Err(panic) = worker.join() {
                            std::panic::resume_unwind(panic);
                        }
                        unreachable!("a worker that returned sent its value");
                    }
                    Err(RecvTimeoutError::Timeout) => {
                        let signalled = if INTERRUPTED.load(Ordering::Relaxed) {
                            Err(interrupted())
                        } else {
                            Python::attach(|py| py.check_signals())
                        };
                        if let Err(raised) = signalled {
                            progress.cancel();
                            if let Err(panic) = worker.join() {
                                std::panic::resume_unwind(panic);
                            }
                            return Err(raised);
                        }
                    }
                }
            }
        })
    })
}
