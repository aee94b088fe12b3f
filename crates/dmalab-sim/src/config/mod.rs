//! What a user writes: platform files (every parameter with its unit and provenance, read by
//! [`params::ParamReader`]) and the [`platform::Platform`] they describe; scenarios in one
//! typed schema ([`scenario`], [`workload`]) whose unknown keys are refused; and the protocol
//! constants ([`proto`]) that the cost parameters, the scenarios and the workloads share.

pub mod check;
pub mod costs;
pub mod device;
pub mod params;
pub mod platform;
pub mod proto;
pub mod scenario;
pub mod workload;
