//! A NIC's send path's own parameters (a platform's `[nic_tx]` section): its line rate, its
//! descriptor, where its frames lie in a line, the driver's PIO writes and the NIC's own time
//! per frame; the model that uses them is [`crate::workload::nic_tx`].

use crate::config::params::{ParamReader, Valid};
use crate::error::Result;
use serde::Serialize;

/// The NIC's and the driver's parameters (a platform's `[nic_tx]` section).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct NicTxParams {
    /// Ethernet line rate.
    pub link_bits_per_s: u64,
    /// Preamble, start delimiter, FCS and inter-frame gap per frame.
    pub wire_overhead_bytes: u64,
    /// One send descriptor, read by the NIC from a consistent mapping.
    pub descriptor_bytes: u64,
    /// Where a frame's first byte lies within a cache line.
    pub frame_offset_bytes: u64,
    /// Programmed-I/O writes the driver makes per frame sent.
    pub pio_writes_per_frame: u64,
    /// The NIC's own serial time per frame besides its DMA reads.
    pub frame_ns: u64,
}

impl NicTxParams {
    /// Read the section under `prefix`.
    pub fn read(r: &mut ParamReader<'_>, prefix: &str) -> Result<NicTxParams> {
        let f = |n: &str| format!("{prefix}.{n}");
        Ok(NicTxParams {
            link_bits_per_s: r.u64(&f("link_bits_per_s"), 1_000_000..=1_000_000_000_000)?,
            wire_overhead_bytes: r.u64(&f("wire_overhead_bytes"), 0..=64)?,
            descriptor_bytes: r.pow2(&f("descriptor_bytes"), 4..=128)?,
            frame_offset_bytes: Valid::Range(0, 127).read(r, &f("frame_offset_bytes"))?,
            pio_writes_per_frame: Valid::Range(0, 16).read(r, &f("pio_writes_per_frame"))?,
            frame_ns: Valid::Range(0, 1_000_000).read(r, &f("frame_ns"))?,
        })
    }
}
