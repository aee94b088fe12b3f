//! PCI-X (mode 1 at 66 to 133 MHz; mode 2 at 266 or 533 MT/s with double or quad data rate) as
//! a bus analyzer sees it: Memory Read Block requests answered by split completions, and Memory
//! Write Block bursts, each with its byte count.
//!
//! The model follows the PCI-X Addendum to the PCI Local Bus Specification (rev. 1.0a; rev. 2.0a
//! for mode 2) and seed 004's summary of it (split transactions replace delayed-read retries,
//! burst commands with a byte count replace MRM, MRL and MWI, up to 32 outstanding tags):
//!
//! - **Bus.** One shared, half-duplex bus: every command, request or completion, holds it for
//!   `command_overhead_clocks` (arbitration, address and attribute phases, the target's
//!   response, turnaround) and then its data phases. A data phase moves `width_bits / 8` bytes,
//!   and mode 2 moves `transfers_per_clock` of them per clock (the address and attribute phases
//!   stay at one per clock). A burst that starts or ends inside a bus word still takes that
//!   word's data phase.
//! - **Reads.** The device issues Memory Read Block requests with a byte count of at most the
//!   Maximum Memory Read Byte Count (MMRBC, the PCI-X Command register), never crossing a 4 KiB
//!   boundary; the target (the host bridge) answers each with a Split Response, which the
//!   model charges as one clock after the overhead. The device keeps up to
//!   `max_outstanding_split_transactions` requests outstanding (also a PCI-X Command register
//!   field), so the bridge's latency overlaps. `split_completion_latency_ns` after a request
//!   ends, the bridge has all its data and returns it, in request order, as Split Completions.
//!   It disconnects a split completion only at the naturally aligned multiples of
//!   `split_completion_boundary_bytes` (which are ADBs, see
//!   [`ALLOWABLE_DISCONNECT_BOUNDARY_BYTES`]): 4096 models a bridge that returns the whole byte
//!   count in one split completion, 128 one that disconnects at every ADB (as a bridge streaming
//!   from a small buffer does, such as Intel's 41210, whose manual says it disconnects at the
//!   next ADB when its read buffer runs dry). Each further piece pays the command overhead.
//!   Requests and completions share the bus: whichever was ready first takes it next (a
//!   completion winning a tie), and when both are already waiting the arbiter alternates
//!   between the device and the bridge, as PCI arbitration must be fair (PCI 2.2 §3.4).
//! - **Writes** are Memory Write Block bursts, posted: one burst runs to the end of the
//!   transfer or to the next 4 KiB boundary, whichever comes first, and each burst's partial
//!   cache lines cost the memory controller a read-modify-write.
//!
//! Seed 001 says PCI-X with MMRBC = 2048 "reads larger chunks", which is why buffer alignment
//! matters less there than on conventional PCI: a 1514-byte frame is one request.

use crate::bus::memctl::partial_lines;
use crate::bus::pcie::boundary_after;
use crate::bus::trace::{totals, transfer_end, Command, Direction, Trace, TraceEntry};
use crate::config::params::{ParamReader, Valid};
use crate::error::Result;
use crate::units::{BusAddr, Ps};
use std::collections::VecDeque;

/// The Allowable Disconnect Boundary: the naturally aligned 128-byte blocks at whose edges
/// alone a PCI-X initiator or target may end a burst before its byte count is done (PCI-X
/// Addendum 1.0a, the ADB of its terminology and burst-termination rules; Cavium's Octeon
/// register descriptions also gloss ADBs as "128 Byte aligned chunks").
pub const ALLOWABLE_DISCONNECT_BOUNDARY_BYTES: u64 = 128;

/// No PCI-X sequence of this model crosses a 4 KiB boundary: a byte count holds at most 4096
/// bytes (the 12-bit Byte Count field, 0 meaning 4096), and DMA engines, like PCIe requesters
/// (PCIe 3.0 §2.2.7), keep each burst inside one page.
pub const BLOCK_BOUNDARY_BYTES: u64 = 4096;

pub use crate::bus::trace::MAX_TRANSFER_BYTES;

const WIDTH: Valid = Valid::OneOf(&[32, 64]);
const CLOCK_HZ: Valid = Valid::Range(1_000_000, 133_333_334);
const TRANSFERS_PER_CLOCK: Valid = Valid::OneOf(&[1, 2, 4]);
/// MMRBC: the PCI-X Command register's two-bit field encodes 512, 1024, 2048 or 4096 bytes.
const MMRBC: Valid = Valid::Pow2(512, 4096);
/// The PCI-X Command register's three-bit Maximum Outstanding Split Transactions field encodes
/// exactly these values.
const OUTSTANDING: Valid = Valid::OneOf(&[1, 2, 3, 4, 8, 12, 16, 32]);
const LATENCY_NS: Valid = Valid::Range(0, 1_000_000);
const COMPLETION_BOUNDARY: Valid =
    Valid::Pow2(ALLOWABLE_DISCONNECT_BOUNDARY_BYTES, BLOCK_BOUNDARY_BYTES);
const OVERHEAD_CLOCKS: Valid = Valid::Range(1, 1000);
const CACHE_LINE: Valid = Valid::Pow2(4, 1024);
const READ_MODIFY_WRITE_NS: Valid = Valid::Range(0, 100_000);

/// The parameters of a PCI-X bus, its host bridge, and the device on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PciXParams {
    /// Data path width: 32 or 64 bits.
    pub width_bits: u64,
    /// Bus clock: 66.67, 100 or 133.33 MHz (any value in 1 MHz..=133.33 MHz is accepted).
    pub clock_hz: u64,
    /// Data transfers per clock: 1 (mode 1), 2 (mode 2, PCI-X 266) or 4 (mode 2, PCI-X 533).
    pub transfers_per_clock: u64,
    /// The Maximum Memory Read Byte Count: 512, 1024, 2048 or 4096 bytes.
    pub max_memory_read_byte_count_bytes: u64,
    /// Read requests the device keeps outstanding at most: 1, 2, 3, 4, 8, 12, 16 or 32.
    pub max_outstanding_split_transactions: u64,
    /// From the end of a read request to the bridge's first split completion (its fetch from
    /// memory across the host bridge).
    pub split_completion_latency_ns: u64,
    /// Where the bridge disconnects its split completions: naturally aligned multiples of this
    /// (a power of two from the ADB, 128, to 4096, meaning one completion per request).
    pub split_completion_boundary_bytes: u64,
    /// Clocks every command spends before its first data phase: arbitration, address and
    /// attribute phases, the target's response, turnaround.
    pub command_overhead_clocks: u64,
    /// The cache-line size of the memory controller.
    pub cache_line_bytes: u64,
    /// The memory controller's time for one partial-line write (read, merge, write back).
    pub read_modify_write_ns: u64,
}

impl PciXParams {
    /// Read the parameters under `prefix` (such as `bus.pcix`), each as `{prefix}.{field}`,
    /// checking each against its valid range.
    pub fn read(r: &mut ParamReader<'_>, prefix: &str) -> Result<PciXParams> {
        let path = |field: &str| format!("{prefix}.{field}");
        Ok(PciXParams {
            width_bits: WIDTH.read(r, &path("width_bits"))?,
            clock_hz: CLOCK_HZ.read(r, &path("clock_hz"))?,
            transfers_per_clock: TRANSFERS_PER_CLOCK.read(r, &path("transfers_per_clock"))?,
            max_memory_read_byte_count_bytes: MMRBC
                .read(r, &path("max_memory_read_byte_count_bytes"))?,
            max_outstanding_split_transactions: OUTSTANDING
                .read(r, &path("max_outstanding_split_transactions"))?,
            split_completion_latency_ns: LATENCY_NS
                .read(r, &path("split_completion_latency_ns"))?,
            split_completion_boundary_bytes: COMPLETION_BOUNDARY
                .read(r, &path("split_completion_boundary_bytes"))?,
            command_overhead_clocks: OVERHEAD_CLOCKS.read(r, &path("command_overhead_clocks"))?,
            cache_line_bytes: CACHE_LINE.read(r, &path("cache_line_bytes"))?,
            read_modify_write_ns: READ_MODIFY_WRITE_NS.read(r, &path("read_modify_write_ns"))?,
        })
    }

    /// Check parameters built in code against the ranges [`PciXParams::read`] enforces.
    pub fn validate(&self) -> Result<()> {
        WIDTH.check("width_bits", self.width_bits)?;
        CLOCK_HZ.check("clock_hz", self.clock_hz)?;
        TRANSFERS_PER_CLOCK.check("transfers_per_clock", self.transfers_per_clock)?;
        MMRBC.check(
            "max_memory_read_byte_count_bytes",
            self.max_memory_read_byte_count_bytes,
        )?;
        OUTSTANDING.check(
            "max_outstanding_split_transactions",
            self.max_outstanding_split_transactions,
        )?;
        LATENCY_NS.check(
            "split_completion_latency_ns",
            self.split_completion_latency_ns,
        )?;
        COMPLETION_BOUNDARY.check(
            "split_completion_boundary_bytes",
            self.split_completion_boundary_bytes,
        )?;
        OVERHEAD_CLOCKS.check("command_overhead_clocks", self.command_overhead_clocks)?;
        CACHE_LINE.check("cache_line_bytes", self.cache_line_bytes)?;
        READ_MODIFY_WRITE_NS.check("read_modify_write_ns", self.read_modify_write_ns)
    }
}

/// A piece of a split completion waiting for the bus.
#[derive(Clone, Copy, Debug)]
struct PendingCompletion {
    at: u64,
    upto: u64,
    ready: Ps,
    /// Whether this piece ends its request (and so frees the request's tag).
    last: bool,
}

/// A PCI-X bus ready to turn DMA transfers into traces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PciXBus {
    params: PciXParams,
    clock: Ps,
}

impl PciXBus {
    /// A bus with these parameters, checked by [`PciXParams::validate`].
    pub fn new(params: PciXParams) -> Result<PciXBus> {
        params.validate()?;
        let clock = Ps::clock_period(params.clock_hz);
        Ok(PciXBus { params, clock })
    }

    /// The parameters.
    pub fn params(&self) -> &PciXParams {
        &self.params
    }

    /// The bus's name for traces, such as `PCI-X 64-bit 133 MHz` or `PCI-X 64-bit 133 MHz QDR`.
    pub fn name(&self) -> String {
        // Whole MHz, truncated: the standards name 66.67 MHz "66 MHz".
        let mhz = self.params.clock_hz / 1_000_000;
        let rate = match self.params.transfers_per_clock {
            2 => " DDR",
            4 => " QDR",
            _ => "",
        };
        format!("PCI-X {}-bit {mhz} MHz{rate}", self.params.width_bits)
    }

    /// The duration of one bus clock.
    pub fn clock(&self) -> Ps {
        self.clock
    }

    /// The commands of one DMA transfer of `len_bytes` at `addr`, timed from zero, in bus order.
    pub fn transfer(&self, direction: Direction, addr: BusAddr, len_bytes: u64) -> Result<Trace> {
        let end = transfer_end(addr, len_bytes)?;
        let entries = match direction {
            Direction::Write => self.write_entries(addr.0, end),
            Direction::Read => self.read_entries(addr.0, end),
        };
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

    fn write_entries(&self, addr: u64, end: u64) -> Vec<TraceEntry> {
        let mut entries = Vec::new();
        let mut now = Ps::ZERO;
        let mut at = addr;
        while at < end {
            let upto = boundary_after(at, BLOCK_BOUNDARY_BYTES).min(end);
            let start = now;
            now += self.burst_time(at, upto - at);
            let mut e = entry(Command::MemoryWriteBlock, (at, upto), start, now);
            e.partial_lines = partial_lines(BusAddr(at), upto - at, self.params.cache_line_bytes);
            entries.push(e);
            at = upto;
        }
        entries
    }

    /// Requests and split completions on the one bus: at each step the command that was ready
    /// first takes the bus when it frees (a completion wins a tie); when both are waiting, the
    /// agent that did not have the bus last gets it.
    fn read_entries(&self, addr: u64, end: u64) -> Vec<TraceEntry> {
        let p = &self.params;
        let requests = self.read_requests(addr, end);
        let tags = usize::try_from(p.max_outstanding_split_transactions).unwrap_or(usize::MAX);
        let latency = Ps::from_ns(p.split_completion_latency_ns);
        let request_time = self
            .clock
            .times(p.command_overhead_clocks.saturating_add(1));
        let mut tag_free_at: Vec<Ps> = Vec::with_capacity(requests.len());
        let mut pending: VecDeque<PendingCompletion> = VecDeque::new();
        let mut entries = Vec::new();
        let mut bus_free = Ps::ZERO;
        let mut next = 0;
        let mut last_was_request = false;
        loop {
            let request = requests.get(next).copied();
            let request_ready = match request {
                Some(_) if next < tags => Some(Ps::ZERO),
                Some(_) => tag_free_at.get(next - tags).copied(),
                None => None,
            };
            let completion_ready = pending.front().map(|c| c.ready);
            let take_request = match (request_ready, completion_ready) {
                (None, None) => break,
                (Some(r), Some(c)) if r <= bus_free && c <= bus_free => !last_was_request,
                (Some(r), Some(c)) => r < c,
                (Some(_), None) => true,
                (None, Some(_)) => false,
            };
            last_was_request = take_request;
            if let (true, Some((at, upto)), Some(ready)) = (take_request, request, request_ready) {
                let start = bus_free.max(ready);
                bus_free = start + request_time;
                entries.push(entry(Command::MemoryReadBlock, (at, upto), start, bus_free));
                pending.extend(self.completion_pieces(at, upto, bus_free + latency));
                next += 1;
            } else if let Some(c) = pending.pop_front() {
                let start = bus_free.max(c.ready);
                bus_free = start + self.burst_time(c.at, c.upto - c.at);
                entries.push(entry(
                    Command::SplitCompletion,
                    (c.at, c.upto),
                    start,
                    bus_free,
                ));
                if c.last {
                    tag_free_at.push(bus_free);
                }
            }
        }
        entries
    }

    /// `[addr, end)` cut into Memory Read Block byte counts: as long as MMRBC allows, never
    /// crossing 4 KiB.
    fn read_requests(&self, addr: u64, end: u64) -> Vec<(u64, u64)> {
        let mmrbc = self.params.max_memory_read_byte_count_bytes;
        let mut requests = Vec::new();
        let mut at = addr;
        while at < end {
            let upto = at
                .saturating_add(mmrbc)
                .min(boundary_after(at, BLOCK_BOUNDARY_BYTES))
                .min(end);
            requests.push((at, upto));
            at = upto;
        }
        requests
    }

    /// The split completions of the request `[at, upto)`, cut at the bridge's disconnect
    /// boundary, all ready at `ready`.
    fn completion_pieces(&self, at: u64, upto: u64, ready: Ps) -> Vec<PendingCompletion> {
        let boundary = self.params.split_completion_boundary_bytes;
        let mut pieces = Vec::new();
        let mut next = at;
        while next < upto {
            let piece_end = boundary_after(next, boundary).min(upto);
            pieces.push(PendingCompletion {
                at: next,
                upto: piece_end,
                ready,
                last: piece_end == upto,
            });
            next = piece_end;
        }
        pieces
    }

    /// One burst of `bytes` at `at`: the command overhead, then its data phases.
    fn burst_time(&self, at: u64, bytes: u64) -> Ps {
        let p = &self.params;
        let word = p.width_bits / 8;
        // `at + bytes` is at most the transfer's end, which was checked not to overflow.
        let words = (at + bytes).div_ceil(word) - at / word;
        let data_clocks = words.div_ceil(p.transfers_per_clock);
        self.clock
            .times(p.command_overhead_clocks.saturating_add(data_clocks))
    }
}

/// The entry of one command over `[at, upto)`, from `start` to `end`.
fn entry(command: Command, (at, upto): (u64, u64), start: Ps, end: Ps) -> TraceEntry {
    TraceEntry {
        addr: BusAddr(at),
        command,
        bytes: upto - at,
        start_ps: start,
        end_ps: end,
        retries: 0,
        partial_lines: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::SimError;
    use std::collections::BTreeMap;

    fn params(mmrbc: u64) -> PciXParams {
        PciXParams {
            width_bits: 64,
            clock_hz: 133_333_333,
            transfers_per_clock: 1,
            max_memory_read_byte_count_bytes: mmrbc,
            max_outstanding_split_transactions: 4,
            split_completion_latency_ns: 1000,
            split_completion_boundary_bytes: 4096,
            command_overhead_clocks: 4,
            cache_line_bytes: 128,
            read_modify_write_ns: 180,
        }
    }

    fn bus(p: PciXParams) -> PciXBus {
        PciXBus::new(p).expect("valid test parameters")
    }

    fn pieces(t: &Trace, command: Command) -> Vec<(u64, u64)> {
        t.entries
            .iter()
            .filter(|e| e.command == command)
            .map(|e| (e.addr.0, e.bytes))
            .collect()
    }

    #[test]
    fn a_frame_is_one_request_with_mmrbc_2048() {
        // Seed 001's transmit buffer address.
        let t = bus(params(2048))
            .transfer(Direction::Read, BusAddr(0x420A8), 1514)
            .unwrap();
        assert_eq!(pieces(&t, Command::MemoryReadBlock), [(0x420A8, 1514)]);
        assert_eq!(pieces(&t, Command::SplitCompletion), [(0x420A8, 1514)]);
        assert_eq!(t.totals.bytes, 1514);
        assert_eq!(t.bus, "PCI-X 64-bit 133 MHz");
    }

    #[test]
    fn mmrbc_512_needs_several_requests() {
        let t = bus(params(512))
            .transfer(Direction::Read, BusAddr(0x420A8), 1514)
            .unwrap();
        let requests = pieces(&t, Command::MemoryReadBlock);
        assert_eq!(requests, [(0x420A8, 512), (0x422A8, 512), (0x424A8, 490)]);
        let completions = pieces(&t, Command::SplitCompletion);
        assert_eq!(completions.iter().map(|c| c.1).sum::<u64>(), 1514);
        assert_eq!(completions, requests);
        // All three requests go out before the first completion returns.
        let kinds: Vec<Command> = t.entries.iter().map(|e| e.command).collect();
        assert_eq!(kinds[..3], [Command::MemoryReadBlock; 3]);
    }

    #[test]
    fn a_short_read_costs_request_latency_and_completion() {
        let b = bus(params(2048));
        let t = b.transfer(Direction::Read, BusAddr(0x1000), 64).unwrap();
        // Request: 4 overhead clocks and the split response; completion: 4 + 8 data phases.
        assert_eq!(
            t.totals.bus_time_ps,
            b.clock().times(5 + 12) + Ps::from_ns(1000)
        );
    }

    #[test]
    fn outstanding_requests_overlap_the_latency() {
        let one = PciXParams {
            max_outstanding_split_transactions: 1,
            ..params(512)
        };
        let serial = bus(one)
            .transfer(Direction::Read, BusAddr(0), 4096)
            .unwrap();
        let overlapped = bus(params(512))
            .transfer(Direction::Read, BusAddr(0), 4096)
            .unwrap();
        let s = serial.totals.bus_time_ps.0;
        let o = overlapped.totals.bus_time_ps.0;
        // Eight requests: eight latencies in series against about two (four tags).
        assert!(o * 2 < s, "{o} vs {s}");
    }

    #[test]
    fn the_bridge_can_disconnect_at_every_adb() {
        let p = PciXParams {
            split_completion_boundary_bytes: 128,
            ..params(512)
        };
        let t = bus(p)
            .transfer(Direction::Read, BusAddr(0x1010), 300)
            .unwrap();
        assert_eq!(
            pieces(&t, Command::SplitCompletion),
            [(0x1010, 112), (0x1080, 128), (0x1100, 60)]
        );
    }

    #[test]
    fn mode_2_moves_more_per_clock() {
        let qdr = PciXParams {
            transfers_per_clock: 4,
            ..params(4096)
        };
        let b = bus(qdr);
        assert_eq!(b.name(), "PCI-X 64-bit 133 MHz QDR");
        let t = b.transfer(Direction::Write, BusAddr(0), 4096).unwrap();
        // 512 words at four a clock.
        assert_eq!(t.totals.bus_time_ps, b.clock().times(4 + 128));
    }

    #[test]
    fn writes_burst_to_4k_boundaries() {
        let b = bus(params(2048));
        let t = b.transfer(Direction::Write, BusAddr(0x2012), 1514).unwrap();
        assert_eq!(pieces(&t, Command::MemoryWriteBlock), [(0x2012, 1514)]);
        assert_eq!(t.totals.partial_lines, 2);
        let t = b.transfer(Direction::Write, BusAddr(0x800), 8192).unwrap();
        assert_eq!(
            pieces(&t, Command::MemoryWriteBlock),
            [(0x800, 2048), (0x1000, 4096), (0x2000, 2048)]
        );
        assert_eq!(t.totals.partial_lines, 0);
    }

    #[test]
    fn bad_input_is_refused() {
        let b = bus(params(2048));
        assert!(b.transfer(Direction::Read, BusAddr(0), 0).is_err());
        assert!(b
            .transfer(Direction::Read, BusAddr(u64::MAX - 4), 8)
            .is_err());
        let err = PciXBus::new(params(256)).unwrap_err();
        assert!(
            err.to_string().contains("a power of two in 512..=4096"),
            "{err}"
        );
        let err = PciXBus::new(PciXParams {
            max_outstanding_split_transactions: 5,
            ..params(512)
        })
        .unwrap_err();
        assert!(
            err.to_string().contains("one of 1, 2, 3, 4, 8, 12, 16, 32"),
            "{err}"
        );
    }

    #[test]
    fn reads_from_a_platform_file() {
        let text = r#"
            [bus.pcix]
            width_bits = { value = 64, source = "seed 001" }
            clock_hz = { value = 133_333_333, source = "PCI-X 133" }
            transfers_per_clock = { value = 1, source = "mode 1" }
            max_memory_read_byte_count_bytes = { value = 2048, source = "seed 001" }
            max_outstanding_split_transactions = { value = 4, assumed = "typical NIC" }
            split_completion_latency_ns = { value = 1000, assumed = "bridge and memory" }
            split_completion_boundary_bytes = { value = 4096, assumed = "whole byte count" }
            command_overhead_clocks = { value = 4, assumed = "address, attribute, response" }
            cache_line_bytes = { value = 128, source = "seed 001" }
            read_modify_write_ns = { value = 180, assumed = "DRAM" }
        "#;
        let table: toml::Table = text.parse().unwrap();
        let mut r = ParamReader::new("p.toml", &table, &BTreeMap::new()).unwrap();
        assert_eq!(PciXParams::read(&mut r, "bus.pcix").unwrap(), params(2048));
        let bad = text.replace("value = 2048", "value = 3000");
        let table: toml::Table = bad.parse().unwrap();
        let mut r = ParamReader::new("p.toml", &table, &BTreeMap::new()).unwrap();
        let err = PciXParams::read(&mut r, "bus.pcix").unwrap_err();
        assert!(matches!(err, SimError::InvalidField { .. }), "{err}");
        assert!(
            err.to_string()
                .contains("bus.pcix.max_memory_read_byte_count_bytes"),
            "{err}"
        );
    }
}
