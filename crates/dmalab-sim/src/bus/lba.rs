//! A host bridge that streams a PCI read's cache lines from the I/O controller one by one,
//! under the DMA hints of the read's mapping (HP ZX1's PCI bus adapter, the "LBA", seed 004).
//!
//! dmalab's model, from the PCI Local Bus Specification 2.2 and seed 004's account of the ZX1:
//! - **A delayed read.** The bridge retries the device's read (PCI 2.2 §3.3.3.3) and asks the
//!   I/O controller for the first line, which is ready `rope_ns + ioc_line_ns` after the bridge
//!   decoded the address (the I/O controller delivers a line in about 110 ns, seed 004 §4.3;
//!   the rope between the bridge and the controller adds its round trip). The device repeats
//!   its read every retry interval until the line is there.
//! - **Prefetch depth** (the read command's hint, for Memory Read Multiple): the bridge asks for
//!   that many lines beyond the first at once, and each time the device wants a line, for the
//!   line that many ahead of it, so that `depth` lines beyond the wanted one are always asked
//!   for. With depth 0 it asks for a line only when the device wants it.
//! - **Block size**: prefetching never asks for a line past the end of the block the device is
//!   reading; the next block's first line is asked for when the device reaches it.
//! - **Stalls**: a line not there when the device wants it costs wait states while the wait is
//!   at most 8 clocks (the target's subsequent latency, PCI 2.2 §3.5.1.2); past that the bridge
//!   disconnects, and the device issues a new read for the rest, which waits like any delayed
//!   read, while the lines already asked for keep coming.
//! - **Ordering**: with relaxed ordering off, a programmed-I/O write that reaches the bridge
//!   while a burst streams stops the burst at the next line: the bridge disconnects, masters the
//!   bus for the write (command overhead and one data phase) and drops the lines it had
//!   fetched, since read data may not pass the write; the device's new read fetches them again.
//!   With relaxed ordering on, the write waits for the burst to end. Writes that arrive while no
//!   data flows go on the bus between the device's retries.
//! - **Read current** off: each line fetch takes the line from the CPU's caches (`ownership_ns`
//!   more per line).
//!
//! The bridge times its reads through `PciTiming`, which the PCI bus model implements; its
//! unit tests are in `pci.rs`, with the bus.

use crate::bus::hints::{DmaHints, HintTable, Mapping, ReadCommand};
use crate::bus::trace::{Command, TraceEntry};
use crate::config::params::{ParamReader, Valid};
use crate::error::Result;
use crate::units::{BusAddr, Ps};

/// The subsequent-latency rule: a target must complete each data phase after the first within
/// 8 clocks or disconnect (PCI Local Bus Specification 2.2, §3.5.1.2).
pub const SUBSEQUENT_LATENCY_CLOCKS: u64 = 8;

const NS: Valid = Valid::Range(0, 100_000);

/// The bridge's parameters (a platform's `[bus.pci.lba]` section).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LbaParams {
    /// The I/O controller's time to deliver one line.
    pub ioc_line_ns: u64,
    /// The round trip between the bridge and the I/O controller, on top of the line's delivery.
    pub rope_ns: u64,
    /// A line fetch's extra time when it takes ownership from the CPU's caches (read current off).
    pub ownership_ns: u64,
    /// The firmware's hints, the same for every mapping and read command.
    pub firmware_hints: DmaHints,
}

impl LbaParams {
    /// Read the section under `prefix`; the firmware's hints are under `{prefix}.hints`.
    pub fn read(r: &mut ParamReader<'_>, prefix: &str) -> Result<LbaParams> {
        let f = |n: &str| format!("{prefix}.{n}");
        Ok(LbaParams {
            ioc_line_ns: NS.read(r, &f("ioc_line_ns"))?,
            rope_ns: NS.read(r, &f("rope_ns"))?,
            ownership_ns: NS.read(r, &f("ownership_ns"))?,
            firmware_hints: DmaHints::read(r, &f("hints"))?,
        })
    }

    /// The firmware's hints for every mapping and read command.
    pub fn firmware_table(&self) -> HintTable {
        HintTable::uniform(self.firmware_hints)
    }

    /// From the bridge asking for a line to the line being ready to send.
    pub fn line_fetch_ns(&self, read_current: bool) -> u64 {
        self.rope_ns + self.ioc_line_ns + if read_current { 0 } else { self.ownership_ns }
    }
}

/// What a transfer's reads go through besides the bus: the mapping's kind, the hints in force
/// and the PIO writes that reach the bridge while the transfer runs (times from its start).
#[derive(Clone, Copy, Debug)]
pub struct ReadContext<'a> {
    /// Consistent or streaming.
    pub mapping: Mapping,
    /// The hints of every (mapping, read command).
    pub hints: &'a HintTable,
    /// When PIO writes reach the bridge, ascending.
    pub pio_writes: &'a [Ps],
}

/// What the bridge's reads need of the conventional PCI bus they cross: its clock, its command
/// timing and cache line, and the data phases of a span of bytes. The PCI bus model
/// implements it, so the bridge does not depend on that model.
pub(crate) trait PciTiming {
    /// The duration of one bus clock.
    fn clock(&self) -> Ps;
    /// Clocks every command spends before its first data phase.
    fn command_overhead_clocks(&self) -> u64;
    /// How often a retried master repeats its read, in clocks.
    fn retry_interval_clocks(&self) -> u64;
    /// The cache-line size the device and the bridges use.
    fn cache_line_bytes(&self) -> u64;
    /// Data phases of `bytes` at `at`: whole bus words.
    fn data_phases(&self, at: u64, bytes: u64) -> u64;
}

/// One transfer's reads through the bridge: the lines asked for and not yet sent, and the PIO
/// writes not yet on the bus.
pub(crate) struct LbaReads<'a, B> {
    bus: &'a B,
    lba: &'a LbaParams,
    ctx: ReadContext<'a>,
    /// (line address, ready time) of lines asked for and not yet sent.
    inflight: Vec<(u64, Ps)>,
    /// The next PIO write not yet on the bus.
    next_pio: usize,
}

impl<'a, B: PciTiming> LbaReads<'a, B> {
    pub(crate) fn new(bus: &'a B, lba: &'a LbaParams, ctx: ReadContext<'a>) -> Self {
        LbaReads {
            bus,
            lba,
            ctx,
            inflight: Vec::new(),
            next_pio: 0,
        }
    }

    /// Put every PIO write that has arrived by `now` on the bus; returns when the bus is free.
    pub(crate) fn flush_pio(&mut self, mut now: Ps) -> Ps {
        let tenure = self.pio_tenure();
        while let Some(&p) = self.ctx.pio_writes.get(self.next_pio) {
            if p > now {
                break;
            }
            now = now.max(p) + tenure;
            self.next_pio += 1;
        }
        now
    }

    fn pio_tenure(&self) -> Ps {
        self.bus
            .clock()
            .times(self.bus.command_overhead_clocks() + 1)
    }

    fn pio_arrived_by(&self, t: Ps) -> bool {
        self.ctx
            .pio_writes
            .get(self.next_pio)
            .is_some_and(|&p| p <= t)
    }

    fn ready(&self, line: u64) -> Option<Ps> {
        self.inflight
            .iter()
            .find(|(a, _)| *a == line)
            .map(|&(_, r)| r)
    }

    fn request(&mut self, line: u64, at: Ps, fetch: Ps) {
        if self.ready(line).is_none() {
            self.inflight.push((line, at + fetch));
        }
    }

    fn take(&mut self, line: u64) {
        self.inflight.retain(|(a, _)| *a != line);
    }

    /// Ask for the `depth` lines after `line` that lie in its block.
    fn prefetch_after(&mut self, line: u64, h: &DmaHints, depth: u64, at: Ps, fetch: Ps) {
        let step = self.bus.cache_line_bytes();
        let block_end = (line / h.block_bytes + 1) * h.block_bytes;
        for k in 1..=depth {
            let next = line + k * step;
            if next >= block_end {
                break;
            }
            self.request(next, at, fetch);
        }
    }

    /// Time read `command` for `[at, upto)` issued at `now`: the trace entry, where the burst
    /// stopped (`upto` unless disconnected) and when the bus is free for the next command.
    pub(crate) fn command(
        &mut self,
        command: Command,
        at: u64,
        upto: u64,
        now: Ps,
    ) -> (TraceEntry, u64, Ps) {
        let clock = self.bus.clock();
        let read = ReadCommand::of(command).unwrap_or(ReadCommand::Mr);
        let h = self.ctx.hints.get(self.ctx.mapping, read);
        let depth = if read == ReadCommand::Mrm {
            h.prefetch_lines
        } else {
            0
        };
        let fetch = Ps::from_ns(self.lba.line_fetch_ns(h.read_current));
        let overhead = clock.times(self.bus.command_overhead_clocks());
        let interval = clock.times(self.bus.retry_interval_clocks());
        let line = self.bus.cache_line_bytes();
        let first = at / line * line;
        let t_addr = now + overhead;
        self.request(first, t_addr, fetch);
        self.prefetch_after(first, &h, depth, t_addr, fetch);
        // The delayed read: the device repeats until the first line is there; PIO writes that
        // arrive meanwhile use the bus between its attempts.
        let ready = self.ready(first).unwrap_or(t_addr);
        let attempts = ready.0.saturating_sub(now.0).div_ceil(interval.0.max(1));
        let mut t = now + interval.times(attempts) + overhead;
        let after_pio = self.flush_pio(t);
        if after_pio > t {
            t = after_pio + overhead;
        }
        let entry = |end: Ps, bytes: u64| TraceEntry {
            addr: BusAddr(at),
            command,
            bytes,
            start_ps: now,
            end_ps: end,
            retries: u32::try_from(attempts).unwrap_or(u32::MAX),
            partial_lines: 0,
        };
        let mut cur = first;
        while cur < upto {
            if cur != first {
                if !h.relaxed_ordering && self.pio_arrived_by(t) {
                    // Ordering enforced: the burst stops for the write, and what was fetched
                    // for the read is fetched again after it.
                    let stop = t + clock;
                    self.inflight.clear();
                    let free = self.flush_pio(stop);
                    return (entry(stop, cur - at), cur, free);
                }
                // The device wants `cur`: the bridge asks for it if it has not, and for the
                // lines `depth` beyond it, before any wait.
                self.request(cur, t, fetch);
                self.prefetch_after(cur, &h, depth, t, fetch);
                let ready = self.ready(cur).unwrap_or(t);
                if ready > t {
                    let wait = clock.times((ready - t).0.div_ceil(clock.0.max(1)));
                    if wait > clock.times(SUBSEQUENT_LATENCY_CLOCKS) {
                        let stop = t + clock;
                        return (entry(stop, cur - at), cur, stop);
                    }
                    t += wait;
                }
            }
            self.take(cur);
            let lo = at.max(cur);
            let hi = upto.min(cur + line);
            t += clock.times(self.bus.data_phases(lo, hi - lo));
            cur += line;
        }
        let free = self.flush_pio(t);
        (entry(t, upto - at), upto, free)
    }
}
