//! Memory a run will need, estimated from its inputs before it allocates, against what the
//! machine has: a run that would not fit is refused with one line that names the inputs to
//! lower, instead of an abort half-way (an allocation failure ends a Rust process).
//!
//! What is available is the smaller of the kernel's `MemAvailable` (`/proc/meminfo`; unknown
//! elsewhere) and `DMALAB_MAX_MEMORY` (bytes, or with a K, M, G or T suffix: binary units),
//! which the command line's `--max-memory` sets.

use crate::error::{Result, SimError};

/// The environment variable that caps the memory a run may plan to use.
pub const MAX_MEMORY_ENV: &str = "DMALAB_MAX_MEMORY";

/// A limit and where it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limit {
    /// Bytes a run may use.
    pub bytes: u64,
    /// What set it: `MemAvailable` or `DMALAB_MAX_MEMORY`.
    pub source: &'static str,
}

/// A size such as `512M`, `8G` or `1048576` (bytes); binary units.
pub fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let (digits, shift) = match t.char_indices().last()? {
        (i, 'k' | 'K') => (&t[..i], 10),
        (i, 'm' | 'M') => (&t[..i], 20),
        (i, 'g' | 'G') => (&t[..i], 30),
        (i, 't' | 'T') => (&t[..i], 40),
        _ => (t, 0),
    };
    let n: u64 = digits.trim().parse().ok()?;
    n.checked_mul(1u64 << shift).filter(|&b| b > 0)
}

/// The memory a run may use now, if anything says (`None`: no limit known).
pub fn available() -> Result<Option<Limit>> {
    let mut limit = meminfo_available().map(|bytes| Limit {
        bytes,
        source: "MemAvailable",
    });
    if let Ok(text) = std::env::var(MAX_MEMORY_ENV) {
        let bytes = parse_size(&text).ok_or_else(|| SimError::InvalidArgument {
            field: MAX_MEMORY_ENV.into(),
            value: format!("{text:?}"),
            valid: "a size in bytes, or with a K, M, G or T suffix, above 0".into(),
        })?;
        if limit.as_ref().is_none_or(|l| bytes < l.bytes) {
            limit = Some(Limit {
                bytes,
                source: MAX_MEMORY_ENV,
            });
        }
    }
    Ok(limit)
}

fn meminfo_available() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// Refuse a run that needs about `need` bytes if that is more than is available; `lower`
/// names the inputs that set it (`workload.threads x workload.queue_depth`).
pub fn admit(need: u64, lower: &str) -> Result<()> {
    match available()? {
        Some(limit) if need > limit.bytes => Err(SimError::Memory {
            need: gib(need),
            available: gib(limit.bytes),
            limit_from: limit.source,
            lower: lower.into(),
        }),
        _ => Ok(()),
    }
}

/// Bytes in GiB, two decimals, for a message.
fn gib(bytes: u64) -> String {
    format!("{:.2} GiB", bytes as f64 / (1u64 << 30) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_in_binary_units_and_nonsense_is_none() {
        assert_eq!(parse_size("1048576"), Some(1 << 20));
        assert_eq!(parse_size("512M"), Some(512 << 20));
        assert_eq!(parse_size(" 8g "), Some(8 << 30));
        assert_eq!(parse_size("2T"), Some(2 << 40));
        for bad in ["", "G", "0", "-1G", "1.5G", "abc", "99999999999999999999T"] {
            assert_eq!(parse_size(bad), None, "{bad}");
        }
    }

    #[test]
    fn the_machine_has_a_limit_and_a_run_past_it_is_refused() {
        // This test reads the real machine (Linux has /proc/meminfo); it sets no variable,
        // so that tests running beside it are not affected.
        let Some(limit) = available().unwrap() else {
            return;
        };
        assert!(admit(limit.bytes / 2, "x").is_ok());
        let e = admit(limit.bytes.saturating_mul(2), "workload.threads").unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("workload.threads") && text.contains("GiB"),
            "{text}"
        );
    }
}
