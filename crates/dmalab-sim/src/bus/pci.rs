//! Conventional PCI (32/64-bit, 33/66 MHz) as a bus analyzer sees it: which command a device
//! issues for each piece of a DMA transfer, where bridges disconnect it, and what each costs in
//! clocks through the bridges.
//!
//! The model follows the PCI Local Bus Specification (rev. 2.2/3.0, §3.1.1 on the memory
//! commands, §3.3.3.3 on delayed transactions, §3.2.4 and §3.5 on bursts and target
//! disconnects) and the bus traces of seed 001 (an e1000 behind the bridges of an IBM p660's RIO
//! drawer):
//!
//! - **Reads.** A master with more than a line to fetch asks for prefetching with Memory Read
//!   Multiple (MRM); the bridge prefetches up to its *prefetch boundary* (512 bytes with the
//!   seed's firmware, 256 with the old one) and disconnects there. With only the rest of the
//!   current line wanted, the master uses Memory Read Line (MRL), and for less than that,
//!   Memory Read (MR). Seed 001's traces fix the rule between MRM and MRL: at 0x42600 with 146
//!   bytes left (one whole line and 18 bytes) the e1000 used MRL 128 and then MR 18, so MRM
//!   needs the rest of the current line *and the whole next line*.
//! - **Delayed reads.** A bridge cannot answer a read at once: it retries the master, fetches
//!   the data across the hierarchy (through several bridges and the RIO link on the p660, "at
//!   least 700 ns to issue the command" in the seed), and completes the read when the master
//!   repeats it. The master repeats every `retry_interval_clocks`; every repeat before the data
//!   is ready is a retry in the trace.
//! - **Writes** are posted: the bridge accepts the data at once after its initial wait states,
//!   and disconnects at the same boundary. Memory Write and Invalidate (MWI) promises whole
//!   lines; see [`WriteCommandPolicy`] for the two behaviours dmalab models.
//! - **Data phases** move `width` bytes per clock; a transfer that starts or ends inside a bus
//!   word still takes the whole data phase (byte enables mask the rest).

use crate::bus::hints::Mapping;
use crate::bus::lba::{LbaParams, LbaReads, PciTiming, ReadContext};
use crate::bus::memctl::partial_lines;
use crate::bus::trace::{totals, transfer_end, Command, Direction, Trace, TraceEntry};
use crate::config::params::{ParamReader, Valid};
use crate::error::Result;
use crate::units::{BusAddr, Ps};

/// How a device chooses between MWI and MW when it writes memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteCommandPolicy {
    /// MWI for whole lines only, MW for any partial line (what the PCI specification asks of an
    /// MWI master).
    LineExact,
    /// Line-exact when the transfer starts on a cache line; when it starts inside a line the
    /// device bursts MWI up to the disconnect boundary, partial lines included (the e1000 of
    /// seed 001: `MWI 494 @0x2012` and `MWI 508 @0x2400` in the unaligned receive trace, but
    /// `MWI 384` then `MW 106` in the aligned one).
    LineExactIfAligned,
}

impl WriteCommandPolicy {
    /// The names used in platform files.
    pub const NAMES: [&'static str; 2] = ["line-exact", "line-exact-if-aligned"];

    fn parse(name: &str) -> Option<Self> {
        match name {
            "line-exact" => Some(Self::LineExact),
            "line-exact-if-aligned" => Some(Self::LineExactIfAligned),
            _ => None,
        }
    }
}

/// The parameters of a conventional PCI bus with its bridges, and of the device on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PciParams {
    /// Data path width: 32 or 64 bits.
    pub width_bits: u64,
    /// Bus clock: 33.33 or 66.67 MHz (any value in 1 MHz..=66.67 MHz is accepted).
    pub clock_hz: u64,
    /// The cache-line size the device and the bridges use (the Cache Line Size register).
    pub cache_line_bytes: u64,
    /// Where the bridge ends a prefetching read or a posted write burst (a power of two).
    pub prefetch_boundary_bytes: u64,
    /// Clocks every command spends before its first data phase on the bus: arbitration,
    /// address phase, the target's decode, turnaround.
    pub command_overhead_clocks: u64,
    /// A posted write's extra initial wait states at the bridge.
    pub write_latency_clocks: u64,
    /// From a read's first address phase until the bridge has the data (its delayed-read fetch
    /// across the bridges to memory and back).
    pub read_fetch_latency_ns: u64,
    /// How often a retried master repeats its read, in clocks.
    pub retry_interval_clocks: u64,
    /// The memory controller's time for one partial-line write (read, merge, write back).
    pub read_modify_write_ns: u64,
    /// The device's choice between MWI and MW.
    pub write_policy: WriteCommandPolicy,
    /// A host bridge that streams reads line by line under DMA hints (`[bus.pci.lba]`); without
    /// one, a read's data is all there once its delayed read completes.
    pub lba: Option<LbaParams>,
}

impl PciParams {
    /// Read the parameters under `prefix` (such as `bus.pci`) and the device's write policy
    /// from `device_prefix` (such as `nic`).
    pub fn read(r: &mut ParamReader<'_>, prefix: &str, device_prefix: &str) -> Result<PciParams> {
        let width_bits = Valid::OneOf(&[32, 64]).read(r, &format!("{prefix}.width_bits"))?;
        let policy_field = format!("{device_prefix}.write_commands");
        let policy = r.choice(&policy_field, &WriteCommandPolicy::NAMES)?;
        let fetch_field = format!("{prefix}.read_fetch_latency_ns");
        let lba_prefix = format!("{prefix}.lba");
        let lba = if r.has_table(&lba_prefix) {
            Some(LbaParams::read(r, &lba_prefix)?)
        } else {
            None
        };
        let read_fetch_latency_ns = match &lba {
            None => r.u64(&fetch_field, 0..=1_000_000)?,
            Some(l) => {
                if r.has_table(&fetch_field) {
                    return Err(r.invalid(
                        &fetch_field,
                        &toml::Value::String("given".into()),
                        &format!(
                            "absent: with {lba_prefix} a line's fetch is computed from it \
                             ({lba_prefix}.rope_ns + {lba_prefix}.ioc_line_ns)"
                        ),
                    ));
                }
                l.line_fetch_ns(true)
            }
        };
        let params = PciParams {
            width_bits,
            clock_hz: r.u64(&format!("{prefix}.clock_hz"), 1_000_000..=66_666_667)?,
            cache_line_bytes: r.pow2(&format!("{prefix}.cache_line_bytes"), 4..=1024)?,
            prefetch_boundary_bytes: r
                .pow2(&format!("{prefix}.prefetch_boundary_bytes"), 4..=65536)?,
            command_overhead_clocks: r
                .u64(&format!("{prefix}.command_overhead_clocks"), 1..=1000)?,
            write_latency_clocks: r.u64(&format!("{prefix}.write_latency_clocks"), 0..=1000)?,
            read_fetch_latency_ns,
            retry_interval_clocks: r.u64(&format!("{prefix}.retry_interval_clocks"), 1..=1000)?,
            read_modify_write_ns: r.u64(&format!("{prefix}.read_modify_write_ns"), 0..=100_000)?,
            write_policy: WriteCommandPolicy::parse(&policy)
                .unwrap_or(WriteCommandPolicy::LineExact),
            lba,
        };
        if params.prefetch_boundary_bytes < params.cache_line_bytes {
            let v = toml::Value::Integer(params.prefetch_boundary_bytes as i64);
            let valid = format!(
                "at least the cache line ({} bytes)",
                params.cache_line_bytes
            );
            return Err(r.invalid(&format!("{prefix}.prefetch_boundary_bytes"), &v, &valid));
        }
        Ok(params)
    }
}

/// A conventional PCI bus ready to turn transfers into traces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PciBus {
    params: PciParams,
    clock: Ps,
}

impl PciBus {
    /// A bus with these parameters (read and range-checked by [`PciParams::read`]).
    pub fn new(params: PciParams) -> PciBus {
        let clock = Ps::clock_period(params.clock_hz);
        PciBus { params, clock }
    }

    /// The parameters.
    pub fn params(&self) -> &PciParams {
        &self.params
    }

    /// The bus's name for traces, such as `PCI 64-bit 33 MHz`.
    pub fn name(&self) -> String {
        // Whole MHz, truncated: the standards name 66.67 MHz "66 MHz".
        let mhz = self.params.clock_hz / 1_000_000;
        format!("PCI {}-bit {} MHz", self.params.width_bits, mhz)
    }

    /// The duration of one bus clock.
    pub fn clock(&self) -> Ps {
        self.clock
    }

    /// The commands of one DMA transfer of `len_bytes` at `addr`, timed from zero; reads
    /// through a hinted host bridge use its firmware's hints on a streaming mapping.
    pub fn transfer(&self, direction: Direction, addr: BusAddr, len_bytes: u64) -> Result<Trace> {
        self.transfer_with(direction, addr, len_bytes, None)
    }

    /// [`PciBus::transfer`] with the mapping, hints and PIO writes of `ctx` for the reads of a
    /// hinted host bridge (the bus's other reads and its writes do not use them).
    pub fn transfer_with(
        &self,
        direction: Direction,
        addr: BusAddr,
        len_bytes: u64,
        ctx: Option<&ReadContext<'_>>,
    ) -> Result<Trace> {
        let end = transfer_end(addr, len_bytes)?;
        let mut entries = Vec::new();
        let mut at = addr.0;
        let mut now = Ps::ZERO;
        let start_aligned = addr.0.is_multiple_of(self.params.cache_line_bytes);
        // Only reads go through a hinted bridge; without a context they take the firmware's
        // hints on a streaming mapping, with no PIO writes.
        let firmware = self.params.lba.map(|l| l.firmware_table());
        let mut lba = match (&self.params.lba, &firmware) {
            (Some(l), Some(table)) if direction == Direction::Read => {
                let default = ReadContext {
                    mapping: Mapping::Streaming,
                    hints: table,
                    pio_writes: &[],
                };
                Some(LbaReads::new(self, l, ctx.copied().unwrap_or(default)))
            }
            _ => None,
        };
        while at < end {
            let (command, upto) = match direction {
                Direction::Read => self.next_read(at, end),
                Direction::Write => self.next_write(at, end, start_aligned),
            };
            let (entry, stopped, free) = match lba.as_mut() {
                Some(reads) => {
                    let now = reads.flush_pio(now);
                    reads.command(command, at, upto, now)
                }
                None => {
                    let e = self.timed(command, BusAddr(at), upto - at, now);
                    let end = e.end_ps;
                    (e, upto, end)
                }
            };
            now = free;
            entries.push(entry);
            at = stopped;
        }
        let rmw = Ps::from_ns(self.params.read_modify_write_ns);
        let totals = totals(&entries, rmw);
        Ok(Trace {
            bus: self.name(),
            direction,
            addr,
            length_bytes: len_bytes,
            entries,
            totals,
        })
    }

    /// The read command a master issues at `at` with data wanted up to `end`, and where it ends.
    fn next_read(&self, at: u64, end: u64) -> (Command, u64) {
        let line = self.params.cache_line_bytes;
        let line_end = (at / line + 1) * line;
        if end >= line_end + line {
            (
                Command::MemoryReadMultiple,
                end.min(self.boundary_after(at)),
            )
        } else if end >= line_end {
            (Command::MemoryReadLine, line_end)
        } else {
            (Command::MemoryRead, end)
        }
    }

    /// The write command at `at` with data up to `end`, and where the burst ends.
    fn next_write(&self, at: u64, end: u64, start_aligned: bool) -> (Command, u64) {
        let line = self.params.cache_line_bytes;
        let burst_end = end.min(self.boundary_after(at));
        let first_full = at.div_ceil(line) * line;
        let full_end = burst_end / line * line;
        if full_end <= first_full {
            return (Command::MemoryWrite, burst_end);
        }
        let merge =
            self.params.write_policy == WriteCommandPolicy::LineExactIfAligned && !start_aligned;
        if merge {
            (Command::MemoryWriteInvalidate, burst_end)
        } else if !at.is_multiple_of(line) {
            (Command::MemoryWrite, first_full)
        } else {
            (Command::MemoryWriteInvalidate, full_end)
        }
    }

    fn boundary_after(&self, at: u64) -> u64 {
        let b = self.params.prefetch_boundary_bytes;
        (at / b + 1).saturating_mul(b)
    }

    /// Data phases of `bytes` at `at`: whole bus words.
    pub(crate) fn data_phases(&self, at: u64, bytes: u64) -> u64 {
        let w = self.params.width_bits / 8;
        let first = at / w;
        let last = (at + bytes).div_ceil(w);
        last - first
    }

    /// Time one command starting at `now`.
    fn timed(&self, command: Command, addr: BusAddr, bytes: u64, now: Ps) -> TraceEntry {
        let p = &self.params;
        let overhead = self.clock.times(p.command_overhead_clocks);
        let data = self.clock.times(self.data_phases(addr.0, bytes));
        let (retries, first_data) = match command {
            Command::MemoryRead | Command::MemoryReadLine | Command::MemoryReadMultiple => {
                // The first attempt is retried; the master repeats every retry interval until
                // an attempt finds the fetched data waiting (PCI 2.2 §3.3.3.3).
                let ready = Ps::from_ns(p.read_fetch_latency_ns) + overhead;
                let interval = self.clock.times(p.retry_interval_clocks);
                let attempts = ready.0.div_ceil(interval.0.max(1));
                (attempts, interval.times(attempts) + overhead)
            }
            _ => (0, overhead + self.clock.times(p.write_latency_clocks)),
        };
        let partial = match command {
            Command::MemoryWrite | Command::MemoryWriteInvalidate => {
                partial_lines(addr, bytes, p.cache_line_bytes)
            }
            _ => 0,
        };
        TraceEntry {
            addr,
            command,
            bytes,
            start_ps: now,
            end_ps: now + first_data + data,
            retries: u32::try_from(retries).unwrap_or(u32::MAX),
            partial_lines: partial,
        }
    }
}

impl PciTiming for PciBus {
    fn clock(&self) -> Ps {
        self.clock
    }

    fn command_overhead_clocks(&self) -> u64 {
        self.params.command_overhead_clocks
    }

    fn retry_interval_clocks(&self) -> u64 {
        self.params.retry_interval_clocks
    }

    fn cache_line_bytes(&self) -> u64 {
        self.params.cache_line_bytes
    }

    fn data_phases(&self, at: u64, bytes: u64) -> u64 {
        PciBus::data_phases(self, at, bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bus(boundary: u64, policy: WriteCommandPolicy) -> PciBus {
        PciBus::new(PciParams {
            width_bits: 64,
            clock_hz: 33_333_333,
            cache_line_bytes: 128,
            prefetch_boundary_bytes: boundary,
            command_overhead_clocks: 4,
            write_latency_clocks: 5,
            read_fetch_latency_ns: 1400,
            retry_interval_clocks: 4,
            read_modify_write_ns: 100,
            write_policy: policy,
            lba: None,
        })
    }

    fn cmds(t: &Trace) -> Vec<(&'static str, u64)> {
        t.entries
            .iter()
            .map(|e| (e.command.mnemonic(), e.bytes))
            .collect()
    }

    #[test]
    fn short_reads_use_mr_and_mrl() {
        let b = bus(512, WriteCommandPolicy::LineExact);
        let t = b.transfer(Direction::Read, BusAddr(0x1000), 64).unwrap();
        assert_eq!(cmds(&t), [("MR", 64)]);
        let t = b.transfer(Direction::Read, BusAddr(0x1040), 64).unwrap();
        assert_eq!(cmds(&t), [("MRL", 64)]);
        let t = b.transfer(Direction::Read, BusAddr(0x1000), 256).unwrap();
        assert_eq!(cmds(&t), [("MRM", 256)]);
    }

    #[test]
    fn old_firmware_boundary_splits_more() {
        let b = bus(256, WriteCommandPolicy::LineExact);
        let t = b.transfer(Direction::Read, BusAddr(0x4800), 1514).unwrap();
        assert_eq!(
            cmds(&t),
            [
                ("MRM", 256),
                ("MRM", 256),
                ("MRM", 256),
                ("MRM", 256),
                ("MRM", 256),
                ("MRL", 128),
                ("MR", 106)
            ]
        );
    }

    #[test]
    fn line_exact_writes_split_partial_heads() {
        let b = bus(512, WriteCommandPolicy::LineExact);
        let t = b.transfer(Direction::Write, BusAddr(0x2012), 1514).unwrap();
        assert_eq!(
            cmds(&t),
            [
                ("MW", 110),
                ("MWI", 384),
                ("MWI", 512),
                ("MWI", 384),
                ("MW", 124)
            ]
        );
        assert_eq!(t.totals.partial_lines, 2);
    }

    #[test]
    fn reads_count_delayed_read_retries() {
        let b = bus(512, WriteCommandPolicy::LineExact);
        let t = b.transfer(Direction::Read, BusAddr(0), 8).unwrap();
        // (1400 ns fetch + 4 clocks) / (4 clocks of 30 ns) = 12.7, so 13 attempts are retried.
        assert_eq!(t.entries[0].retries, 13);
        assert_eq!(t.entries[0].end_ps, Ps::from_ns(13 * 120 + 120 + 30));
    }

    #[test]
    fn bad_lengths_are_refused() {
        let b = bus(512, WriteCommandPolicy::LineExact);
        assert!(b.transfer(Direction::Read, BusAddr(0), 0).is_err());
        assert!(b
            .transfer(Direction::Read, BusAddr(u64::MAX - 4), 8)
            .is_err());
    }
}

/// The reads of a hinted host bridge (`lba.rs`) as the bus times them.
#[cfg(test)]
mod lba_tests {
    use super::*;
    use crate::bus::hints::{DmaHints, HintTable};

    const FIRMWARE: DmaHints = DmaHints {
        prefetch_lines: 3,
        block_bytes: 4096,
        relaxed_ordering: false,
        read_current: true,
    };

    /// A ZX1-like bus: 64-bit 66 MHz, 128-byte lines, a 300 ns line fetch.
    fn zx1(rope_ns: u64) -> PciBus {
        PciBus::new(PciParams {
            width_bits: 64,
            clock_hz: 66_666_667,
            cache_line_bytes: 128,
            prefetch_boundary_bytes: 4096,
            command_overhead_clocks: 4,
            write_latency_clocks: 2,
            read_fetch_latency_ns: 0,
            retry_interval_clocks: 4,
            read_modify_write_ns: 100,
            write_policy: WriteCommandPolicy::LineExact,
            lba: Some(LbaParams {
                ioc_line_ns: 110,
                rope_ns,
                ownership_ns: 60,
                firmware_hints: FIRMWARE,
            }),
        })
    }

    fn read(bus: &PciBus, hints: DmaHints, addr: u64, len: u64, pio: &[Ps]) -> Trace {
        let table = HintTable::uniform(hints);
        let ctx = ReadContext {
            mapping: Mapping::Streaming,
            hints: &table,
            pio_writes: pio,
        };
        bus.transfer_with(Direction::Read, BusAddr(addr), len, Some(&ctx))
            .unwrap()
    }

    #[test]
    fn deep_prefetch_streams_a_burst_without_stalls() {
        let bus = zx1(190);
        let t = read(&bus, FIRMWARE, 0, 1024, &[]);
        assert_eq!(t.commands(), [("MRM", 1024, 0)]);
        // 300 ns fetch + 60 ns of overhead: 6 attempts of 60 ns, then 4 clocks and 128 phases.
        let clock = bus.clock();
        assert_eq!(t.end_ps(), clock.times(6 * 4 + 4 + 128));
    }

    #[test]
    fn without_prefetch_every_line_is_a_new_read() {
        let bus = zx1(190);
        let shallow = DmaHints {
            prefetch_lines: 0,
            ..FIRMWARE
        };
        let t = read(&bus, shallow, 0, 1024, &[]);
        assert_eq!(t.entries.len(), 8);
        assert!(t.entries.iter().all(|e| e.bytes == 128));
        assert!(t.end_ps() > read(&bus, FIRMWARE, 0, 1024, &[]).end_ps().times(2));
    }

    #[test]
    fn one_line_ahead_waits_when_a_line_outlasts_the_device() {
        // A 300 ns fetch against 240 ns per line: 60 ns (4 clocks) of wait states for the third,
        // fifth and seventh lines. The second was asked for with the first; each later line is
        // asked for when the device wants the one before it, so a line that waited gives the
        // next the 60 ns it lacked.
        let bus = zx1(190);
        let one = DmaHints {
            prefetch_lines: 1,
            ..FIRMWARE
        };
        let t = read(&bus, one, 0, 1024, &[]);
        assert_eq!(t.entries.len(), 1);
        let deep = read(&bus, FIRMWARE, 0, 1024, &[]).end_ps();
        assert_eq!(t.end_ps() - deep, bus.clock().times(3 * 4));
    }

    #[test]
    fn prefetch_stops_at_the_block_and_resumes_when_asked() {
        let bus = zx1(190);
        let small = DmaHints {
            block_bytes: 512,
            ..FIRMWARE
        };
        let t = read(&bus, small, 0, 1024, &[]);
        // The line at 512 is asked for only when the device reaches it: a disconnect there.
        assert_eq!(t.commands(), [("MRM", 512, 0), ("MRM", 512, 512)]);
    }

    #[test]
    fn an_ordered_pio_write_stops_the_burst_and_refetches() {
        let bus = zx1(190);
        let pio = [Ps::from_ns(600)];
        let ordered = read(&bus, FIRMWARE, 0, 1024, &pio);
        assert_eq!(ordered.entries.len(), 2);
        let relaxed = DmaHints {
            relaxed_ordering: true,
            ..FIRMWARE
        };
        let free = read(&bus, relaxed, 0, 1024, &pio);
        assert_eq!(free.entries.len(), 1);
        assert_eq!(free.end_ps(), read(&bus, FIRMWARE, 0, 1024, &[]).end_ps());
        assert!(ordered.end_ps() > free.end_ps());
    }

    #[test]
    fn read_current_off_slows_each_fetch() {
        let bus = zx1(190);
        let owned = DmaHints {
            read_current: false,
            ..FIRMWARE
        };
        assert!(
            read(&bus, owned, 0, 128, &[]).end_ps() > read(&bus, FIRMWARE, 0, 128, &[]).end_ps()
        );
    }
}
