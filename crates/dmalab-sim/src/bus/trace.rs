//! What a bus analyzer shows: the commands (or packets) of one DMA transfer, with their times,
//! and the totals a performance engineer reads first.

use crate::units::{BusAddr, Ps};
use serde::Serialize;
use std::fmt;

/// Which way the data of a DMA transfer moves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// The device reads memory (a NIC sending a frame, a disk writing a block).
    Read,
    /// The device writes memory (a NIC receiving a frame, a disk reading a block).
    Write,
}

impl Direction {
    /// Parse `read`/`tx` or `write`/`rx`.
    pub fn parse(text: &str) -> Option<Direction> {
        match text {
            "read" | "tx" => Some(Direction::Read),
            "write" | "rx" => Some(Direction::Write),
            _ => None,
        }
    }
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Direction::Read => "read",
            Direction::Write => "write",
        })
    }
}

/// A bus command or packet, by the name an analyzer prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Command {
    /// PCI Memory Read: less than a cache line.
    #[serde(rename = "MR")]
    MemoryRead,
    /// PCI Memory Read Line: up to the end of one cache line.
    #[serde(rename = "MRL")]
    MemoryReadLine,
    /// PCI Memory Read Multiple: several lines, the bridge prefetches.
    #[serde(rename = "MRM")]
    MemoryReadMultiple,
    /// PCI Memory Write.
    #[serde(rename = "MW")]
    MemoryWrite,
    /// PCI Memory Write and Invalidate: whole lines (the memory controller can skip the read).
    #[serde(rename = "MWI")]
    MemoryWriteInvalidate,
    /// PCI-X Memory Read Block: a burst read with a byte count, answered by split completions.
    #[serde(rename = "MRB")]
    MemoryReadBlock,
    /// PCI-X Memory Write Block: a burst write with a byte count.
    #[serde(rename = "MWB")]
    MemoryWriteBlock,
    /// PCI-X Split Completion carrying read data back to the requester.
    #[serde(rename = "SC")]
    SplitCompletion,
    /// PCIe Memory Read Request TLP.
    #[serde(rename = "MRd")]
    MemReadRequest,
    /// PCIe Memory Write Request TLP (posted).
    #[serde(rename = "MWr")]
    MemWriteRequest,
    /// PCIe Completion with Data TLP.
    #[serde(rename = "CplD")]
    CompletionWithData,
}

impl Command {
    /// The analyzer's short name.
    pub fn mnemonic(self) -> &'static str {
        match self {
            Command::MemoryRead => "MR",
            Command::MemoryReadLine => "MRL",
            Command::MemoryReadMultiple => "MRM",
            Command::MemoryWrite => "MW",
            Command::MemoryWriteInvalidate => "MWI",
            Command::MemoryReadBlock => "MRB",
            Command::MemoryWriteBlock => "MWB",
            Command::SplitCompletion => "SC",
            Command::MemReadRequest => "MRd",
            Command::MemWriteRequest => "MWr",
            Command::CompletionWithData => "CplD",
        }
    }
}

impl Command {
    /// Whether the entry carries data (a read request only asks for it; its completions carry
    /// it), so that totals count each byte once.
    pub fn carries_data(self) -> bool {
        !matches!(self, Command::MemoryReadBlock | Command::MemReadRequest)
    }
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.mnemonic())
    }
}

/// One line of an analyzer trace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TraceEntry {
    /// The first byte's bus address.
    pub addr: BusAddr,
    /// The command or packet type.
    pub command: Command,
    /// Data bytes carried (for a read request: bytes asked for).
    pub bytes: u64,
    /// When the command started (address phase, or first symbol of the packet).
    pub start_ps: Ps,
    /// When its last data byte crossed the bus.
    pub end_ps: Ps,
    /// Times the target told the master to retry before data moved (PCI delayed reads).
    pub retries: u32,
    /// Cache lines this command writes only in part (each a read-modify-write in memory).
    pub partial_lines: u32,
}

/// The totals under a trace.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TraceTotals {
    /// Commands (or packets) in the trace.
    pub commands: u64,
    /// Data bytes moved.
    pub bytes: u64,
    /// From the first command's start to the last byte.
    pub bus_time_ps: Ps,
    /// Retries seen (PCI delayed reads).
    pub retries: u64,
    /// Cache lines written in part.
    pub partial_lines: u64,
    /// Read-modify-writes the memory controller does for them.
    pub read_modify_writes: u64,
    /// Memory-controller time those read-modify-writes cost (not on the bus, but on memory).
    pub read_modify_write_ps: Ps,
}

/// The analyzer's view of one DMA transfer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Trace {
    /// The bus kind, such as `PCI 64-bit 33 MHz`.
    pub bus: String,
    /// Which way the data moves.
    pub direction: Direction,
    /// The transfer's first byte.
    pub addr: BusAddr,
    /// The transfer's length.
    pub length_bytes: u64,
    /// The commands in bus order.
    pub entries: Vec<TraceEntry>,
    /// The totals.
    pub totals: TraceTotals,
}

impl Trace {
    /// When the last command ends, from the transfer's start (zero for no command).
    pub fn end_ps(&self) -> Ps {
        self.entries.last().map_or(Ps::ZERO, |e| e.end_ps)
    }

    /// The commands as `(mnemonic, bytes, address)` triples, the form the seeds publish.
    pub fn commands(&self) -> Vec<(&'static str, u64, u64)> {
        self.entries
            .iter()
            .map(|e| (e.command.mnemonic(), e.bytes, e.addr.0))
            .collect()
    }
}

impl fmt::Display for Trace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} {} of {} bytes at {}",
            self.bus, self.direction, self.length_bytes, self.addr
        )?;
        writeln!(
            f,
            "{:>12} {:<5} {:>6} {:>11} {:>11} {:>7} {:>7}",
            "address", "cmd", "bytes", "start_us", "end_us", "retries", "partial"
        )?;
        for e in &self.entries {
            writeln!(
                f,
                "{:>12} {:<5} {:>6} {:>11.3} {:>11.3} {:>7} {:>7}",
                e.addr.to_string(),
                e.command.mnemonic(),
                e.bytes,
                e.start_ps.as_us_f64(),
                e.end_ps.as_us_f64(),
                e.retries,
                e.partial_lines
            )?;
        }
        let t = &self.totals;
        writeln!(
            f,
            "{} commands, {} bytes, {:.3} us from first command to last byte, {} retries, \
             {} partial lines ({} read-modify-writes, {:.3} us of memory time)",
            t.commands,
            t.bytes,
            t.bus_time_ps.as_us_f64(),
            t.retries,
            t.partial_lines,
            t.read_modify_writes,
            t.read_modify_write_ps.as_us_f64()
        )
    }
}

/// The longest single DMA transfer the bus models take (4 GiB).
pub const MAX_TRANSFER_BYTES: u64 = 1 << 32;

/// The longest transfer an analyzer trace lists command by command (16 MiB: 32,768 PCI
/// commands of 512 bytes, or 65,536 PCIe TLPs of 256 bytes, in about 100 MB of output). A
/// trace keeps every command, so its memory grows with the length; longer transfers are run
/// as workloads (`dmalab run`), whose models time a transfer without keeping its trace.
pub const MAX_TRACE_BYTES: u64 = 1 << 24;

/// The end (exclusive) of a transfer of `len_bytes` at `addr`, or an error naming the length
/// or the address: every bus model checks a transfer this way before cutting it up.
pub fn transfer_end(addr: BusAddr, len_bytes: u64) -> crate::Result<u64> {
    if len_bytes == 0 || len_bytes > MAX_TRANSFER_BYTES {
        return Err(crate::error::invalid_arg(
            "length_bytes",
            len_bytes,
            "1..=2^32",
        ));
    }
    addr.0.checked_add(len_bytes).ok_or_else(|| {
        crate::error::invalid_arg(
            "address",
            addr,
            "an address with address + length below 2^64",
        )
    })
}

/// Build the totals of `entries`, charging `rmw_ps` per partially written line.
pub fn totals(entries: &[TraceEntry], rmw_ps: Ps) -> TraceTotals {
    let first = entries.first().map_or(Ps::ZERO, |e| e.start_ps);
    let last = entries.iter().map(|e| e.end_ps).max().unwrap_or(first);
    let partial: u64 = entries.iter().map(|e| u64::from(e.partial_lines)).sum();
    TraceTotals {
        commands: entries.len() as u64,
        bytes: entries
            .iter()
            .filter(|e| e.command.carries_data())
            .map(|e| e.bytes)
            .sum(),
        bus_time_ps: last - first,
        retries: entries.iter().map(|e| u64::from(e.retries)).sum(),
        partial_lines: partial,
        read_modify_writes: partial,
        read_modify_write_ps: rmw_ps.times(partial),
    }
}
