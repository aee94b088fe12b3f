//! Property tests of the PCIe and PCI-X models: for any parameters in range and any transfer,
//! the commands cover the data exactly, obey the specifications' size and boundary rules, and
//! are timed consistently.

use dmalab_sim::bus::pcie::{PcieLink, PcieParams, TlpSplit};
use dmalab_sim::bus::pcix::{PciXBus, PciXParams};
use dmalab_sim::bus::trace::{Command, Direction, Trace, TraceEntry};
use dmalab_sim::units::BusAddr;
use proptest::prelude::*;
use proptest::sample::select;
use std::collections::BTreeMap;

const PAGE: u64 = 4096;

fn direction() -> impl Strategy<Value = Direction> {
    prop_oneof![Just(Direction::Read), Just(Direction::Write)]
}

fn pcie_params() -> impl Strategy<Value = PcieParams> {
    let sizes = vec![128u64, 256, 512, 1024, 2048, 4096];
    (
        1u64..=6,
        select(vec![1u64, 2, 4, 8, 12, 16, 32]),
        select(sizes.clone()),
        select(sizes),
        select(vec![64u64, 128]),
        select(vec![32u64, 64]),
        any::<bool>(),
        prop_oneof![Just(TlpSplit::Aligned), Just(TlpSplit::Largest)],
        0u64..=2_000,
        1u64..=64,
        (1u64..=16, 1u64..=16),
        select(vec![32u64, 64, 128, 256]),
    )
        .prop_map(
            |(generation, lanes, mps, mrrs, rcb, bits, ecrc, split, lat, tags, (ack, fc), line)| {
                PcieParams {
                    generation,
                    lanes,
                    max_payload_bytes: mps,
                    max_read_request_bytes: mrrs,
                    read_completion_boundary_bytes: rcb,
                    addressing_bits: bits,
                    ecrc,
                    tlp_split: split,
                    read_latency_ns: lat,
                    max_outstanding_read_requests: tags,
                    tlps_per_ack: ack,
                    tlps_per_fc_update: fc,
                    cache_line_bytes: line,
                    read_modify_write_ns: 100,
                }
            },
        )
}

fn pcix_params() -> impl Strategy<Value = PciXParams> {
    (
        select(vec![32u64, 64]),
        select(vec![66_666_667u64, 100_000_000, 133_333_333]),
        select(vec![1u64, 2, 4]),
        select(vec![512u64, 1024, 2048, 4096]),
        select(vec![1u64, 2, 3, 4, 8, 12, 16, 32]),
        0u64..=3_000,
        select(vec![128u64, 256, 512, 1024, 2048, 4096]),
        1u64..=8,
        select(vec![32u64, 64, 128]),
    )
        .prop_map(
            |(width, clock, tpc, mmrbc, tags, lat, boundary, overhead, line)| PciXParams {
                width_bits: width,
                clock_hz: clock,
                transfers_per_clock: tpc,
                max_memory_read_byte_count_bytes: mmrbc,
                max_outstanding_split_transactions: tags,
                split_completion_latency_ns: lat,
                split_completion_boundary_bytes: boundary,
                command_overhead_clocks: overhead,
                cache_line_bytes: line,
                read_modify_write_ns: 180,
            },
        )
}

fn end_of(e: &TraceEntry) -> u64 {
    e.addr.0 + e.bytes
}

fn within_one_block(e: &TraceEntry, block: u64) -> bool {
    e.bytes > 0 && e.addr.0 / block == (end_of(e) - 1) / block
}

/// Entries sorted by start, each starting no later than it ends.
fn check_times(t: &Trace) -> Result<(), TestCaseError> {
    for e in &t.entries {
        prop_assert!(e.start_ps <= e.end_ps, "{e:?}");
    }
    for pair in t.entries.windows(2) {
        prop_assert!(
            pair[0].start_ps <= pair[1].start_ps,
            "{:?} then {:?}",
            pair[0],
            pair[1]
        );
    }
    Ok(())
}

/// The entries of `command` tile `[addr, addr + len)` in order, without gaps or overlaps.
fn check_tiling(t: &Trace, command: Command, addr: u64, len: u64) -> Result<(), TestCaseError> {
    let mut at = addr;
    for e in t.entries.iter().filter(|e| e.command == command) {
        prop_assert_eq!(e.addr.0, at, "{:?} leaves a gap or overlaps", e);
        prop_assert!(e.bytes > 0);
        at = end_of(e);
    }
    prop_assert_eq!(at, addr + len);
    Ok(())
}

/// The requests as a map from start to end, each completion inside one of them.
fn requests_of(t: &Trace, command: Command) -> BTreeMap<u64, u64> {
    t.entries
        .iter()
        .filter(|e| e.command == command)
        .map(|e| (e.addr.0, end_of(e)))
        .collect()
}

fn check_pcie(p: &PcieParams, dir: Direction, addr: u64, len: u64) -> Result<(), TestCaseError> {
    let link = PcieLink::new(p.clone()).expect("parameters in range");
    let beyond = p.addressing_bits == 32 && addr + len > 1 << 32;
    let result = link.transfer(dir, BusAddr(addr), len);
    if beyond {
        prop_assert!(result.is_err());
        return Ok(());
    }
    let t = result.expect("a transfer in reach");
    check_times(&t)?;
    prop_assert_eq!(t.totals.bytes, len);
    for e in &t.entries {
        prop_assert!(within_one_block(e, PAGE), "{:?} crosses 4 KiB", e);
        match e.command {
            Command::MemWriteRequest | Command::CompletionWithData => {
                prop_assert!(e.bytes <= p.max_payload_bytes, "{:?} exceeds MPS", e)
            }
            Command::MemReadRequest => prop_assert!(e.bytes <= p.max_read_request_bytes, "{:?}", e),
            other => prop_assert!(false, "{other} on PCIe"),
        }
    }
    match dir {
        Direction::Write => check_tiling(&t, Command::MemWriteRequest, addr, len)?,
        Direction::Read => {
            check_tiling(&t, Command::MemReadRequest, addr, len)?;
            check_tiling(&t, Command::CompletionWithData, addr, len)?;
            let requests = requests_of(&t, Command::MemReadRequest);
            let rcb = p.read_completion_boundary_bytes;
            for c in t
                .entries
                .iter()
                .filter(|e| e.command == Command::CompletionWithData)
            {
                let (&start, &end) = requests.range(..=c.addr.0).next_back().expect("a request");
                prop_assert!(end_of(c) <= end, "{:?} outruns its request", c);
                prop_assert!(
                    c.addr.0 == start || c.addr.0 % rcb == 0,
                    "{:?} not RCB-aligned",
                    c
                );
            }
        }
    }
    let efficiency = link.efficiency(dir, BusAddr(addr), len).expect("in reach");
    prop_assert!(
        efficiency > 0.0 && efficiency <= 1.0,
        "efficiency {}",
        efficiency
    );
    let bandwidth = link
        .effective_bandwidth_bytes_per_s(dir, BusAddr(addr), len)
        .expect("in reach");
    prop_assert!(
        bandwidth > 0 && bandwidth <= link.raw_bytes_per_s(),
        "{} B/s",
        bandwidth
    );
    let latency = link.latency(dir, BusAddr(addr), len).expect("in reach");
    prop_assert_eq!(latency, t.totals.bus_time_ps);
    Ok(())
}

fn check_pcix(p: &PciXParams, dir: Direction, addr: u64, len: u64) -> Result<(), TestCaseError> {
    let bus = PciXBus::new(p.clone()).expect("parameters in range");
    let t = bus
        .transfer(dir, BusAddr(addr), len)
        .expect("a transfer in reach");
    check_times(&t)?;
    prop_assert_eq!(t.totals.bytes, len);
    // One shared bus: commands never overlap in time.
    for pair in t.entries.windows(2) {
        prop_assert!(
            pair[0].end_ps <= pair[1].start_ps,
            "{:?} overlaps {:?}",
            pair[0],
            pair[1]
        );
    }
    for e in &t.entries {
        prop_assert!(within_one_block(e, PAGE), "{:?} crosses 4 KiB", e);
        match e.command {
            Command::MemoryReadBlock => {
                prop_assert!(
                    e.bytes <= p.max_memory_read_byte_count_bytes,
                    "{:?} exceeds MMRBC",
                    e
                )
            }
            Command::SplitCompletion => {
                let boundary = p.split_completion_boundary_bytes;
                prop_assert!(
                    within_one_block(e, boundary),
                    "{:?} runs past a disconnect",
                    e
                )
            }
            Command::MemoryWriteBlock => {}
            other => prop_assert!(false, "{other} on PCI-X"),
        }
    }
    match dir {
        Direction::Write => check_tiling(&t, Command::MemoryWriteBlock, addr, len)?,
        Direction::Read => {
            check_tiling(&t, Command::MemoryReadBlock, addr, len)?;
            check_tiling(&t, Command::SplitCompletion, addr, len)?;
            let requests = requests_of(&t, Command::MemoryReadBlock);
            for c in t
                .entries
                .iter()
                .filter(|e| e.command == Command::SplitCompletion)
            {
                let (_, &end) = requests.range(..=c.addr.0).next_back().expect("a request");
                prop_assert!(end_of(c) <= end, "{:?} outruns its request", c);
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn pcie_transfers_obey_the_tlp_rules(
        p in pcie_params(),
        dir in direction(),
        addr in 0u64..1 << 40,
        len in 1u64..=65_536,
    ) {
        check_pcie(&p, dir, addr, len)?;
    }

    #[test]
    fn pcie_transfers_below_4g_obey_the_tlp_rules(
        p in pcie_params(),
        dir in direction(),
        addr in 0u64..1 << 32,
        len in 1u64..=65_536,
    ) {
        check_pcie(&p, dir, addr, len)?;
    }

    #[test]
    fn pcix_transfers_obey_the_sequence_rules(
        p in pcix_params(),
        dir in direction(),
        addr in 0u64..1 << 40,
        len in 1u64..=65_536,
    ) {
        check_pcix(&p, dir, addr, len)?;
    }
}
