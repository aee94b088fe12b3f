//! What a user writes: platform files (every parameter with its unit and provenance, read by
//! [`params::ParamReader`]) and the [`platform::Platform`] they describe; scenarios in one
//! typed schema ([`scenario`], [`workload`]) whose unknown keys are refused.

pub mod check;
pub mod costs;
pub mod device;
pub mod params;
pub mod platform;
pub mod scenario;
pub mod workload;
