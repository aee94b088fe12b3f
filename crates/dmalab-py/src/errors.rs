//! The Python exception hierarchy and the one mapping from each core error to it.
//!
//! ```text
//! DmalabError
//! +-- ConfigError              bad domain parameters, unknown allocator
//! +-- AllocationError
//! |   +-- InvalidRequestError  zero size, alignment/boundary not a power of two, limit outside
//! |   +-- NoSpaceError
//! |   +-- NotAllocatedError    double free or never allocated
//! |   +-- SizeMismatchError
//! |   +-- FreeOfReservedError
//! |   +-- ReserveConflictError
//! |   +-- OutOfDomainError
//! +-- BenchError
//! +-- PlatformError            a platform file that cannot be read, a field out of range
//! +-- ScenarioError            a model argument out of range, an unknown claim
//!
//! An allocator refusal inside a simulated run keeps its allocator class (a `NoSpaceError` is
//! an `AllocationError`), with the mapping layer's operation in its message.
//! ```

use dmalab_bench::BenchError as CoreBenchError;
use dmalab_iova::IovaError;
use dmalab_sim::SimError;
use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyKeyboardInterrupt};
use pyo3::prelude::*;

create_exception!(
    dmalab,
    DmalabError,
    PyException,
    "Base class of every error dmalab raises."
);
create_exception!(
    dmalab,
    ConfigError,
    DmalabError,
    "A configuration value is outside its valid range."
);
create_exception!(
    dmalab,
    AllocationError,
    DmalabError,
    "An IOVA domain refused an operation."
);
create_exception!(
    dmalab,
    InvalidRequestError,
    AllocationError,
    "An allocation request is malformed."
);
create_exception!(
    dmalab,
    NoSpaceError,
    AllocationError,
    "No free range satisfies the request."
);
create_exception!(
    dmalab,
    NotAllocatedError,
    AllocationError,
    "Free of a range that is not live: double free or never allocated."
);
create_exception!(
    dmalab,
    SizeMismatchError,
    AllocationError,
    "Free with a size different from the allocation's."
);
create_exception!(
    dmalab,
    FreeOfReservedError,
    AllocationError,
    "Free of a reserved range."
);
create_exception!(
    dmalab,
    ReserveConflictError,
    AllocationError,
    "Reservation overlapping an allocation."
);
create_exception!(
    dmalab,
    OutOfDomainError,
    AllocationError,
    "A range outside the domain."
);
create_exception!(
    dmalab,
    BenchError,
    DmalabError,
    "A benchmark could not run as asked."
);

create_exception!(
    dmalab,
    PlatformError,
    DmalabError,
    "A platform file is missing, unreadable, or has a field out of its valid range."
);
create_exception!(
    dmalab,
    ScenarioError,
    DmalabError,
    "A scenario or model argument is outside its valid range, or names nothing dmalab knows."
);

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("DmalabError", py.get_type::<DmalabError>())?;
    m.add("ConfigError", py.get_type::<ConfigError>())?;
    m.add("AllocationError", py.get_type::<AllocationError>())?;
    m.add("InvalidRequestError", py.get_type::<InvalidRequestError>())?;
    m.add("NoSpaceError", py.get_type::<NoSpaceError>())?;
    m.add("NotAllocatedError", py.get_type::<NotAllocatedError>())?;
    m.add("SizeMismatchError", py.get_type::<SizeMismatchError>())?;
    m.add("FreeOfReservedError", py.get_type::<FreeOfReservedError>())?;
    m.add(
        "ReserveConflictError",
        py.get_type::<ReserveConflictError>(),
    )?;
    m.add("OutOfDomainError", py.get_type::<OutOfDomainError>())?;
    m.add("BenchError", py.get_type::<BenchError>())?;
    m.add("PlatformError", py.get_type::<PlatformError>())?;
    m.add("ScenarioError", py.get_type::<ScenarioError>())?;
    Ok(())
}

/// Every allocator error to its Python class, exhaustively.
pub(crate) fn iova_err(e: IovaError) -> PyErr {
    let msg = e.to_string();
    iova_class(&e, msg)
}

/// The Python class of allocator error `e`, carrying `msg`.
fn iova_class(e: &IovaError, msg: String) -> PyErr {
    match e {
        IovaError::InvalidPageSize { .. }
        | IovaError::InvalidAddressBits { .. }
        | IovaError::InvalidDomain { .. }
        | IovaError::DomainTooLarge { .. }
        | IovaError::InvalidTuning { .. }
        | IovaError::UnknownAllocator { .. } => ConfigError::new_err(msg),
        IovaError::ZeroSize
        | IovaError::AlignmentNotPowerOfTwo { .. }
        | IovaError::BoundaryNotPowerOfTwo { .. }
        | IovaError::SizeExceedsBoundary { .. }
        | IovaError::LimitOutsideDomain { .. } => InvalidRequestError::new_err(msg),
        IovaError::NoSpace { .. } => NoSpaceError::new_err(msg),
        IovaError::NotAllocated { .. } => NotAllocatedError::new_err(msg),
        IovaError::SizeMismatch { .. } => SizeMismatchError::new_err(msg),
        IovaError::FreeOfReserved { .. } => FreeOfReservedError::new_err(msg),
        IovaError::ReserveOverlapsAllocation { .. } => ReserveConflictError::new_err(msg),
        IovaError::RangeOutsideDomain { .. } => OutOfDomainError::new_err(msg),
    }
}

/// Benchmark errors to Python; allocator errors inside keep their own class.
pub(crate) fn bench_err(e: CoreBenchError) -> PyErr {
    match e {
        CoreBenchError::Allocator(inner) => iova_err(inner),
        other => BenchError::new_err(other.to_string()),
    }
}

/// Every simulator error to its Python class, exhaustively.
pub(crate) fn sim_err(e: SimError) -> PyErr {
    let msg = e.to_string();
    match e {
        SimError::FileRead { .. }
        | SimError::Syntax { .. }
        | SimError::MissingField { .. }
        | SimError::InvalidField { .. }
        | SimError::MissingProvenance { .. }
        | SimError::UnknownKey { .. }
        | SimError::UnknownPlatform { .. }
        | SimError::UnknownDevice { .. }
        | SimError::UnknownChoice { .. }
        | SimError::NotDescribed { .. } => PlatformError::new_err(msg),
        SimError::InvalidArgument { .. }
        | SimError::InvalidScenario { .. }
        | SimError::ScenarioSchema { .. }
        | SimError::UnknownClaim { .. }
        | SimError::Memory { .. } => ScenarioError::new_err(msg),
        SimError::Iova { source, .. } => iova_class(&source, msg),
        // A run cancelled through its progress handle (a Ctrl-C seen by the caller).
        SimError::Interrupted { .. } => PyKeyboardInterrupt::new_err(msg),
    }
}
