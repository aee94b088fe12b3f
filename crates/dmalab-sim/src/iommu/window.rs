//! Which DMA window a POWER partition gives a device: the default window of about 2 GB, mapped
//! per I/O through TCE hypervisor calls, or a 64-bit direct window that maps all partition memory
//! at a fixed offset (seed 000: "Using 64-bit direct DMA at offset 10000000000000"). The direct
//! window needs three things at once: a slot that supports it, a driver that supports 64-bit DMA,
//! and a partition whose maximum memory fits the window's 2 TB limit.

use crate::config::params::ParamReader;
use crate::error::Result;
use crate::iommu::Translation;
use serde::Serialize;

/// A partition's window parameters (a platform's `[window]` section).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WindowParams {
    /// Size of the default DMA window.
    pub default_window_bytes: u64,
    /// Largest memory a direct window can map.
    pub direct_window_max_bytes: u64,
    /// Offset at which the direct window maps memory.
    pub direct_offset: u64,
    /// The partition's maximum memory (not its current memory: the window must cover the most
    /// the partition may ever have).
    pub partition_max_memory_bytes: u64,
    /// Whether the device's slot supports 64-bit direct DMA.
    pub slot_direct: bool,
    /// Whether the device's driver supports 64-bit DMA.
    pub driver_direct: bool,
}

/// The window chosen, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WindowChoice {
    /// Direct window or per-I/O TCE mapping.
    pub translation: Translation,
    /// Why, as a kernel log or an administrator would put it.
    pub reason: String,
}

impl WindowParams {
    /// Read `[window]` (under `prefix`), each field range-checked.
    pub fn read(r: &mut ParamReader<'_>, prefix: &str) -> Result<WindowParams> {
        let f = |n: &str| format!("{prefix}.{n}");
        Ok(WindowParams {
            default_window_bytes: r.u64(&f("default_window_bytes"), 1 << 20..=1 << 50)?,
            direct_window_max_bytes: r.u64(&f("direct_window_max_bytes"), 1 << 20..=1 << 62)?,
            direct_offset: r.u64(&f("direct_offset"), 0..=u64::MAX >> 1)?,
            partition_max_memory_bytes: r
                .u64(&f("partition_max_memory_bytes"), 1 << 20..=1 << 62)?,
            slot_direct: r.choice(&f("slot_direct"), &["yes", "no"])? == "yes",
            driver_direct: r.choice(&f("driver_direct"), &["yes", "no"])? == "yes",
        })
    }

    /// The window the partition firmware and the kernel set up.
    pub fn choose(&self) -> WindowChoice {
        let default = |why: String| WindowChoice {
            translation: Translation::Tce,
            reason: why,
        };
        if !self.slot_direct {
            return default(
                "the slot does not support 64-bit DMA: default window, TCEs per I/O".into(),
            );
        }
        if !self.driver_direct {
            return default(
                "the driver does not support 64-bit DMA: default window, TCEs per I/O".into(),
            );
        }
        if self.partition_max_memory_bytes > self.direct_window_max_bytes {
            return default(format!(
                "partition maximum memory {} GiB exceeds the direct window's {} GiB: no direct window, TCEs per I/O",
                self.partition_max_memory_bytes >> 30,
                self.direct_window_max_bytes >> 30
            ));
        }
        WindowChoice {
            translation: Translation::DirectWindow,
            reason: format!("Using 64-bit direct DMA at offset {:x}", self.direct_offset),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> WindowParams {
        WindowParams {
            default_window_bytes: 2 << 30,
            direct_window_max_bytes: 2 << 40,
            direct_offset: 0x10_0000_0000_0000,
            partition_max_memory_bytes: 128 << 30,
            slot_direct: true,
            driver_direct: true,
        }
    }

    #[test]
    fn the_direct_window_needs_slot_driver_and_memory_to_fit() {
        assert_eq!(params().choose().translation, Translation::DirectWindow);
        assert_eq!(
            params().choose().reason,
            "Using 64-bit direct DMA at offset 10000000000000"
        );
        let big = WindowParams {
            partition_max_memory_bytes: 3 << 40,
            ..params()
        };
        assert_eq!(big.choose().translation, Translation::Tce);
        let exact = WindowParams {
            partition_max_memory_bytes: 2 << 40,
            ..params()
        };
        assert_eq!(exact.choose().translation, Translation::DirectWindow);
        assert_eq!(
            WindowParams {
                driver_direct: false,
                ..params()
            }
            .choose()
            .translation,
            Translation::Tce
        );
        assert_eq!(
            WindowParams {
                slot_direct: false,
                ..params()
            }
            .choose()
            .translation,
            Translation::Tce
        );
    }
}
