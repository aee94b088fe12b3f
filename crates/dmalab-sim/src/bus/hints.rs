//! DMA hints: what a chipset may be told about a mapping's DMA reads, per PCI read command and
//! per kind of mapping (seed 004, HP's ZX1 chipset).
//!
//! - **Prefetch depth** (PCI only): how many cache lines the host bridge keeps in flight beyond
//!   the one the device is reading, for a burst read.
//! - **Block size** (PCI only): where prefetching stops; it resumes when the device asks for the
//!   first line of the next block.
//! - **Relaxed ordering** ("PIOW/DMAR ordering" on the ZX1): DMA read data may pass programmed-I/O
//!   writes headed for the same bus. Off (ordering enforced), a PIO write that arrives while a
//!   read burst streams makes the bridge stop the burst, put the write on the bus, and fetch
//!   the rest of the read again.
//! - **Read current**: the I/O controller reads a line without taking it from the CPU's caches.
//!   Off, each line fetch takes ownership of the line, which costs a snoop of the CPU's caches.
//!
//! A mapping is *consistent* (long-lived, shared with the CPU: descriptor rings, a SCSI chip's
//! control data) or *streaming* (mapped for one transfer: packet and block data). Firmware sets
//! one default for every (mapping, command); seed 004 varied each separately.

use crate::bus::trace::Command;
use crate::config::params::{ParamReader, Valid};
use crate::error::Result;
use serde::{Deserialize, Serialize};

/// The most lines a bridge may prefetch ahead (the ZX1's hint field: 0 to 3, seed 004 §4.3).
pub const MAX_PREFETCH_LINES: u64 = 3;

/// The block sizes a hint may name, bytes (seed 004 Table 6: 512 to 4096).
pub const BLOCK_SIZES: [u64; 4] = [512, 1024, 2048, 4096];
const BLOCK_BYTES: Valid = Valid::OneOf(&BLOCK_SIZES);
/// The prefetch depths a hint may name.
const PREFETCH_LINES: Valid = Valid::Range(0, MAX_PREFETCH_LINES);

/// The kind of mapping a DMA goes through.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mapping {
    /// Long-lived and shared with the CPU (`dma_alloc_coherent`).
    Consistent,
    /// Mapped for one transfer (`dma_map_single`, `dma_map_sg`).
    Streaming,
}

impl Mapping {
    /// The name scenarios and records use.
    pub fn name(self) -> &'static str {
        match self {
            Mapping::Consistent => "consistent",
            Mapping::Streaming => "streaming",
        }
    }
}

/// The PCI read commands a hint is set for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ReadCommand {
    /// Memory Read.
    #[serde(rename = "MR")]
    Mr,
    /// Memory Read Line.
    #[serde(rename = "MRL")]
    Mrl,
    /// Memory Read Multiple.
    #[serde(rename = "MRM")]
    Mrm,
}

impl ReadCommand {
    /// Every read command, in the seed's order.
    pub const ALL: [ReadCommand; 3] = [ReadCommand::Mr, ReadCommand::Mrl, ReadCommand::Mrm];

    /// The command's name in the PCI specification (`MR`, `MRL`, `MRM`).
    pub fn name(self) -> &'static str {
        match self {
            ReadCommand::Mr => "MR",
            ReadCommand::Mrl => "MRL",
            ReadCommand::Mrm => "MRM",
        }
    }

    /// The read command a bus command is, if it is a PCI read.
    pub fn of(command: Command) -> Option<ReadCommand> {
        match command {
            Command::MemoryRead => Some(ReadCommand::Mr),
            Command::MemoryReadLine => Some(ReadCommand::Mrl),
            Command::MemoryReadMultiple => Some(ReadCommand::Mrm),
            _ => None,
        }
    }
}

/// The hints for one (mapping, read command).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DmaHints {
    /// Lines the bridge keeps in flight beyond the one being read, 0..=3.
    pub prefetch_lines: u64,
    /// Where prefetching stops, bytes: 512, 1024, 2048 or 4096.
    pub block_bytes: u64,
    /// DMA read data may pass PIO writes.
    pub relaxed_ordering: bool,
    /// Line fetches leave the line in the CPU's caches.
    pub read_current: bool,
}

impl DmaHints {
    /// Read the hints under `prefix` (`relaxed_ordering` and `read_current` are `on` or `off`).
    pub fn read(r: &mut ParamReader<'_>, prefix: &str) -> Result<DmaHints> {
        let f = |n: &str| format!("{prefix}.{n}");
        Ok(DmaHints {
            prefetch_lines: PREFETCH_LINES.read(r, &f("prefetch_lines"))?,
            block_bytes: BLOCK_BYTES.read(r, &f("block_bytes"))?,
            relaxed_ordering: r.choice(&f("relaxed_ordering"), &["on", "off"])? == "on",
            read_current: r.choice(&f("read_current"), &["on", "off"])? == "on",
        })
    }

    /// Check the ranges; errors name `field` and the valid range.
    pub fn validate(&self, field: &str) -> Result<()> {
        PREFETCH_LINES.check(&format!("{field}.prefetch_lines"), self.prefetch_lines)?;
        BLOCK_BYTES.check(&format!("{field}.block_bytes"), self.block_bytes)
    }
}

/// The hints of every (mapping, read command).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct HintTable {
    /// `[mapping][command]`: consistent then streaming; MR, MRL, MRM.
    entries: [[DmaHints; 3]; 2],
}

impl HintTable {
    /// The same hints everywhere (what firmware sets).
    pub fn uniform(hints: DmaHints) -> HintTable {
        HintTable {
            entries: [[hints; 3]; 2],
        }
    }

    fn index(mapping: Mapping, command: ReadCommand) -> (usize, usize) {
        let m = match mapping {
            Mapping::Consistent => 0,
            Mapping::Streaming => 1,
        };
        let c = match command {
            ReadCommand::Mr => 0,
            ReadCommand::Mrl => 1,
            ReadCommand::Mrm => 2,
        };
        (m, c)
    }

    /// The hints of (mapping, command).
    pub fn get(&self, mapping: Mapping, command: ReadCommand) -> DmaHints {
        let (m, c) = Self::index(mapping, command);
        self.entries[m][c]
    }

    /// Change the hints of (mapping, command).
    pub fn set(&mut self, mapping: Mapping, command: ReadCommand, hints: DmaHints) {
        let (m, c) = Self::index(mapping, command);
        self.entries[m][c] = hints;
    }
}

/// A change to a hint table, as scenarios and `dmalab trace --hint` write it: the hints given
/// replace the table's for the mapping and each of `commands` (every read command if absent).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HintChange {
    /// The read commands changed; all three when absent.
    pub commands: Option<Vec<ReadCommand>>,
    /// New prefetch depth, 0..=3.
    pub prefetch_lines: Option<u64>,
    /// New block size: 512, 1024, 2048 or 4096.
    pub block_bytes: Option<u64>,
    /// Relaxed ordering on or off.
    pub relaxed_ordering: Option<bool>,
    /// Read current on or off.
    pub read_current: Option<bool>,
}

impl HintChange {
    /// Whether the change changes nothing.
    pub fn is_empty(&self) -> bool {
        self.prefetch_lines.is_none()
            && self.block_bytes.is_none()
            && self.relaxed_ordering.is_none()
            && self.read_current.is_none()
    }

    /// Apply the change to `table` for `mapping`; out-of-range hints are refused with an error
    /// naming `hints.<field>`.
    pub fn apply(&self, table: &mut HintTable, mapping: Mapping) -> Result<()> {
        let commands = self.commands.as_deref().unwrap_or(&ReadCommand::ALL);
        for &c in commands {
            let mut h = table.get(mapping, c);
            h.prefetch_lines = self.prefetch_lines.unwrap_or(h.prefetch_lines);
            h.block_bytes = self.block_bytes.unwrap_or(h.block_bytes);
            h.relaxed_ordering = self.relaxed_ordering.unwrap_or(h.relaxed_ordering);
            h.read_current = self.read_current.unwrap_or(h.read_current);
            h.validate("hints")?;
            table.set(mapping, c, h);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FIRMWARE: DmaHints = DmaHints {
        prefetch_lines: 3,
        block_bytes: 4096,
        relaxed_ordering: false,
        read_current: true,
    };

    #[test]
    fn a_table_changes_only_what_it_is_told() {
        let mut t = HintTable::uniform(FIRMWARE);
        let relax_mrm = HintChange {
            commands: Some(vec![ReadCommand::Mrm]),
            relaxed_ordering: Some(true),
            ..HintChange::default()
        };
        relax_mrm.apply(&mut t, Mapping::Streaming).unwrap();
        assert!(t.get(Mapping::Streaming, ReadCommand::Mrm).relaxed_ordering);
        assert!(
            !t.get(Mapping::Consistent, ReadCommand::Mrm)
                .relaxed_ordering
        );
        assert!(!t.get(Mapping::Streaming, ReadCommand::Mrl).relaxed_ordering);
        assert_eq!(
            ReadCommand::of(Command::MemoryReadLine),
            Some(ReadCommand::Mrl)
        );
        assert_eq!(ReadCommand::of(Command::MemoryWrite), None);
    }

    #[test]
    fn out_of_range_hints_name_the_field() {
        let deep = DmaHints {
            prefetch_lines: 4,
            ..FIRMWARE
        };
        let err = deep.validate("hints").unwrap_err().to_string();
        assert!(
            err.contains("hints.prefetch_lines") && err.contains("0..=3"),
            "{err}"
        );
        let odd = DmaHints {
            block_bytes: 3000,
            ..FIRMWARE
        };
        assert!(odd
            .validate("h")
            .unwrap_err()
            .to_string()
            .contains("h.block_bytes"));
        assert!(FIRMWARE.validate("h").is_ok());
        let deep = HintChange {
            prefetch_lines: Some(9),
            ..HintChange::default()
        };
        let mut t = HintTable::uniform(FIRMWARE);
        let err = deep.apply(&mut t, Mapping::Consistent).unwrap_err();
        assert!(err.to_string().contains("hints.prefetch_lines"), "{err}");
    }
}
