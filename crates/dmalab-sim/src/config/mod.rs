//! What a user writes: platform files (every parameter with its unit and provenance, read by
//! [`params::ParamReader`]) and the [`platform::Platform`] they describe.

pub mod params;
pub mod platform;
