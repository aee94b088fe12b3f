//! Conventional PCI: for every size and alignment, the commands of a transfer cover it exactly
//! and respect the rules of each command and the bridges' boundary.

use dmalab_sim::bus::pci::{PciBus, PciParams, WriteCommandPolicy};
use dmalab_sim::bus::trace::{Command, Direction};
use dmalab_sim::units::BusAddr;
use proptest::prelude::*;

fn bus(line: u64, boundary: u64, width_bits: u64, policy: WriteCommandPolicy) -> PciBus {
    PciBus::new(PciParams {
        width_bits,
        clock_hz: 33_333_333,
        cache_line_bytes: line,
        prefetch_boundary_bytes: boundary,
        command_overhead_clocks: 4,
        write_latency_clocks: 5,
        read_fetch_latency_ns: 1400,
        retry_interval_clocks: 4,
        read_modify_write_ns: 180,
        write_policy: policy,
        lba: None,
    })
}

fn params() -> impl Strategy<Value = (u64, u64, u64, WriteCommandPolicy)> {
    (5u32..=8, 0u32..=4, prop::bool::ANY, prop::bool::ANY).prop_map(|(l, b, wide, exact)| {
        let line = 1u64 << l;
        let policy = if exact {
            WriteCommandPolicy::LineExact
        } else {
            WriteCommandPolicy::LineExactIfAligned
        };
        (line, line << b, if wide { 64 } else { 32 }, policy)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn commands_cover_the_transfer_and_obey_their_rules(
        (line, boundary, width, policy) in params(),
        addr in 0u64..(1 << 40),
        len in 1u64..=16384,
        write in prop::bool::ANY,
    ) {
        let b = bus(line, boundary, width, policy);
        let dir = if write { Direction::Write } else { Direction::Read };
        let t = b.transfer(dir, BusAddr(addr), len).unwrap();
        let mut at = addr;
        let mut clock = t.entries[0].start_ps;
        for e in &t.entries {
            prop_assert_eq!(e.addr.0, at, "gap or overlap");
            prop_assert!(e.bytes > 0);
            prop_assert!(e.start_ps >= clock && e.end_ps > e.start_ps, "time runs backwards");
            clock = e.end_ps;
            let end = at + e.bytes;
            // No command crosses the bridges' prefetch/disconnect boundary.
            prop_assert!((end - 1) / boundary == at / boundary, "{:?} crosses a boundary", e);
            match e.command {
                Command::MemoryRead | Command::MemoryReadLine => {
                    prop_assert!((end - 1) / line == at / line, "{:?} leaves its line", e);
                }
                Command::MemoryReadMultiple => {
                    // More than the rest of its line, unless the bridge disconnected it there.
                    prop_assert!(e.bytes > line - at % line || end % boundary == 0, "{:?}", e);
                }
                Command::MemoryWriteInvalidate => prop_assert!(e.bytes >= line, "MWI of less than a line"),
                Command::MemoryWrite => {}
                other => prop_assert!(false, "{other:?} on conventional PCI"),
            }
            if policy == WriteCommandPolicy::LineExact && e.command == Command::MemoryWriteInvalidate {
                prop_assert!(at % line == 0 && end % line == 0, "line-exact MWI with a partial line");
            }
            at = end;
        }
        prop_assert_eq!(at, addr + len);
        prop_assert_eq!(t.totals.bytes, len);
        if write {
            // Partial lines of the whole transfer: its two ends, unless they sit on line edges.
            let lines_touched = (addr + len - 1) / line - addr / line + 1;
            prop_assert!(t.totals.partial_lines <= 2 * t.totals.commands.min(lines_touched));
            let ends_partial = u64::from(addr % line != 0) + u64::from((addr + len) % line != 0);
            prop_assert!(t.totals.partial_lines >= ends_partial.min(lines_touched));
        } else {
            prop_assert_eq!(t.totals.partial_lines, 0);
        }
    }

    #[test]
    fn traces_are_deterministic(addr in 0u64..(1 << 20), len in 1u64..=4096) {
        let b = bus(128, 512, 64, WriteCommandPolicy::LineExactIfAligned);
        prop_assert_eq!(b.transfer(Direction::Read, BusAddr(addr), len).unwrap(), b.transfer(Direction::Read, BusAddr(addr), len).unwrap());
    }
}
