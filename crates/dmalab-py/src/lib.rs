//! The private native module `dmalab._native`: thin wrappers over the core crates, no logic.

mod bench;
mod convert;
mod errors;
mod gil;
mod iova;
mod sim;

use pyo3::prelude::*;

/// Module initialisation: classes, functions and the exception hierarchy.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    errors::register(m)?;
    iova::register(m)?;
    bench::register(m)?;
    sim::register(m)?;
    m.add_function(wrap_pyfunction!(gil::interrupt, m)?)?;
    Ok(())
}
