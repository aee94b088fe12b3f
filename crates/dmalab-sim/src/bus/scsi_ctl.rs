//! A SCSI controller's write path's own parameters (a platform's `[scsi_tx]` section): its
//! channels, the commands and scatter-gather entries it moves, the control data its SCRIPTS
//! processor reads, the SCSI bus's rate and the disks' limit; the model that uses them is
//! [`crate::workload::scsi_tx`].

use crate::config::params::{ParamReader, Valid};
use crate::error::Result;
use serde::Serialize;

/// The controller's, the driver's and the disks' parameters (a platform's `[scsi_tx]` section).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct ScsiTxParams {
    /// SCSI channels, each with its own SCRIPTS processor, sharing one PCI bus.
    pub channels: u64,
    /// Bytes per SCSI command.
    pub command_bytes: u64,
    /// Bytes per scatter-gather entry.
    pub sg_entry_bytes: u64,
    /// The most one of the chip's data reads moves, bytes: an entry's data goes in reads of
    /// this size, each its own PCI read command.
    pub burst_bytes: u64,
    /// Control data the SCRIPTS processor reads per scatter-gather entry, bytes (one read).
    pub entry_control_bytes: u64,
    /// Reads of control data per command besides the entries'.
    pub command_reads: u64,
    /// Bytes of each of those reads.
    pub command_read_bytes: u64,
    /// One SCSI channel's data rate, MB/s.
    pub scsi_mb_s: u64,
    /// The most the disks take through the host's I/O path, MB/s.
    pub array_mb_s: u64,
}

impl ScsiTxParams {
    /// Read the section under `prefix`.
    pub fn read(r: &mut ParamReader<'_>, prefix: &str) -> Result<ScsiTxParams> {
        let f = |n: &str| format!("{prefix}.{n}");
        let p = ScsiTxParams {
            channels: r.u64(&f("channels"), 1..=8)?,
            command_bytes: r.pow2(&f("command_bytes"), 512..=(1 << 24))?,
            sg_entry_bytes: r.pow2(&f("sg_entry_bytes"), 512..=(1 << 24))?,
            burst_bytes: r.pow2(&f("burst_bytes"), 8..=(1 << 24))?,
            entry_control_bytes: Valid::Range(1, 4096).read(r, &f("entry_control_bytes"))?,
            command_reads: Valid::Range(0, 1024).read(r, &f("command_reads"))?,
            command_read_bytes: Valid::Range(1, 4096).read(r, &f("command_read_bytes"))?,
            scsi_mb_s: Valid::Range(1, 100_000).read(r, &f("scsi_mb_s"))?,
            array_mb_s: Valid::Range(1, 100_000).read(r, &f("array_mb_s"))?,
        };
        if p.sg_entry_bytes > p.command_bytes {
            return Err(r.invalid(
                &f("sg_entry_bytes"),
                &toml::Value::Integer(i64::try_from(p.sg_entry_bytes).unwrap_or(i64::MAX)),
                &format!("at most command_bytes ({})", p.command_bytes),
            ));
        }
        if p.burst_bytes > p.sg_entry_bytes {
            return Err(r.invalid(
                &f("burst_bytes"),
                &toml::Value::Integer(i64::try_from(p.burst_bytes).unwrap_or(i64::MAX)),
                &format!("at most sg_entry_bytes ({})", p.sg_entry_bytes),
            ));
        }
        Ok(p)
    }

    /// The chip's data reads per scatter-gather entry.
    pub fn bursts(&self) -> u64 {
        self.sg_entry_bytes / self.burst_bytes
    }

    /// Scatter-gather entries per command.
    pub fn entries(&self) -> u64 {
        self.command_bytes / self.sg_entry_bytes
    }
}
