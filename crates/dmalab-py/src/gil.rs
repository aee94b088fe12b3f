//! The one place long runs release the GIL.

use pyo3::prelude::*;

/// Run `f` with the GIL released, so other Python threads go on while Rust works.
pub(crate) fn without_gil<T: Send, F: FnOnce() -> T + Send>(py: Python<'_>, f: F) -> T {
    py.detach(f)
}
