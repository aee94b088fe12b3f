//! Range checks of a scenario's values after its keys have been read, with errors that name the
//! scenario, the dotted key and the valid range.

use crate::error::{Result, SimError};

/// Names the scenario in the errors of its checks.
pub struct Checker<'a> {
    /// The scenario's file or name.
    pub file: &'a str,
}

impl Checker<'_> {
    /// A [`SimError::InvalidScenario`] for `field`.
    pub fn invalid(&self, field: &str, value: impl ToString, valid: &str) -> SimError {
        SimError::InvalidScenario {
            file: self.file.to_string(),
            field: field.to_string(),
            value: value.to_string(),
            valid: valid.to_string(),
        }
    }
}

/// `value` if it lies in `lo..=hi`, else an error naming `field` and the range.
pub fn in_range(c: &Checker<'_>, field: &str, value: u64, lo: u64, hi: u64) -> Result<u64> {
    if (lo..=hi).contains(&value) {
        Ok(value)
    } else {
        Err(c.invalid(field, value, &format!("an integer in {lo}..={hi}")))
    }
}
