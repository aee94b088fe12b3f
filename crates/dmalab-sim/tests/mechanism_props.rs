//! The mechanisms of the device DMA model (`bench dma`) that must bind where they bind on real
//! machines, each checked where it must change a figure, not only where it may:
//! - the engine works on many transfers at once: a set-up far longer than the round trip does
//!   not cap the rate at one transfer per set-up when the engine keeps several contexts;
//! - small reads follow the outstanding requests over the whole round trip, the device's own
//!   side of it included (Little's law): where the tags bind, a longer device path lowers the
//!   rate and the rate never exceeds the tags over the round trip;
//! - the root complex serves a bounded rate of requests and lines, and a partial or
//!   line-crossing request costs it more than a whole line: where it limits, a 63- or 65-byte
//!   DMA and a 64-byte one at offset 1 each move fewer bytes a second than an aligned 64-byte
//!   one, reads and writes;
//! - remote memory and IOTLB misses lower read bandwidth where latency sets it (the tags), and
//!   write bandwidth where the root port's posted entries bind;
//! - an engine with a data port to memory of its own (a network processor's) moves each
//!   transfer's data through it whole: a lone transfer's latency grows by its size over the
//!   port's rate beside what the link takes, and large transfers never beat the port's rate;
//!   a port that moves whole beats aligned as the host address charges a transfer inside a
//!   beat less than one crossing into the next, and its fixed time once a transfer;
//!   a write's command completing after its data has left holds its context, so where the
//!   contexts bind small writes slow down and reads do not; a misaligned device offset costs
//!   its direction on the port; a write then a read of the same bytes takes the write to the
//!   link and then a warm read;
//! - and on every shipped modern host with its device, the same four shapes hold with the
//!   files' own values.
//!
//! Posted writes hold no tag and no flow-control credit is modelled, so remote memory and
//! IOTLB misses change a write's latency, not its bandwidth: those properties are for reads.

use dmalab_sim::bus::device::DeviceEngine;
use dmalab_sim::bus::memory::{Access, Cache, Home, MemoryPath};
use dmalab_sim::bus::trace::Direction;
use dmalab_sim::config::platform::{Picks, Platform};
use dmalab_sim::workload::devdma::{DeviceDma, DmaPoint, DmaRecord, IommuMode};
use proptest::prelude::*;
use proptest::sample::select;

#[path = "support/devdma.rs"]
mod devdma_support;
use devdma_support::{direction, link, measure, point};

fn memory() -> impl Strategy<Value = MemoryPath> {
    (0u64..=300, 10u64..=40, 40u64..=120, 50u64..=150).prop_map(|(rc, llc, dram_extra, socket)| {
        MemoryPath {
            line_bytes: 64,
            root_complex_ns: rc,
            line_ns: 0,
            request_ns: 0,
            partial_line_ns: 0,
            llc_ns: llc,
            dram_ns: llc + dram_extra,
            dram_bytes_per_us: 100_000,
            llc_bytes: 32 << 20,
            llc_io_bytes: 4 << 20,
            write_allocate: true,
            socket_link_ns: socket,
            socket_link_bytes_per_us: 100_000,
            posted_writes: 64,
        }
    })
}

/// An engine with no set-up, issue gap, descriptors or completions: only what a test sets.
fn bare_engine(contexts: u64, to_link: u64, from_link: u64) -> DeviceEngine {
    DeviceEngine {
        setup_ns: 0,
        issue_ns: 0,
        granularity_bytes: 4096,
        descriptor_bytes: 0,
        descriptors_per_fetch: 1,
        completion_bytes: 0,
        completions_per_write: 1,
        contexts,
        request_path_ns: to_link,
        completion_path_ns: from_link,
        data_bytes_per_us: None,
        data_ports: 1,
        data_beat_bytes: 1,
        data_transfer_ns: 0,
        data_beat_whole_pct: 100,
        write_hold_ns: 0,
        device_word_bytes: 1,
        misaligned_store_ns: 0,
        misaligned_fetch_ns: 0,
    }
}

fn bytes_per_s(r: &DmaRecord) -> f64 {
    r.transactions_per_s * r.point.size_bytes as f64
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Charged one after another, a set-up of S ns allows at most 1e9 / S transfers a second;
    /// with four or more contexts and a round trip shorter than the set-up, the engine must
    /// do at least half as much again.
    #[test]
    fn set_up_overlaps_other_transfers(
        m in memory(), setup in 1000u64..=5000, contexts in 4u64..=16,
        to_link in 0u64..=150, from_link in 0u64..=150, d in direction(),
    ) {
        let link = link(3, 8, 256);
        let e = DeviceEngine { setup_ns: setup, ..bare_engine(contexts, to_link, from_link) };
        let r = measure(&link, &m, &e, &point(d, 64, 0));
        let serial = 1e9 / setup as f64;
        prop_assert!(r.transactions_per_s > 1.5 * serial, "{} vs {serial}", r.transactions_per_s);
        // And never more than the contexts allow, each held at least its set-up.
        prop_assert!(r.transactions_per_s <= contexts as f64 * serial * 1.001);
        prop_assert_eq!(r.limit, "engine contexts");
    }

    /// Where the tags bind, the rate is at most the tags over the round trip, which includes
    /// the device's own paths to and from the link; lengthening the device's receive side by
    /// 100 ns lowers the rate, and a lone read's latency includes both paths.
    #[test]
    fn small_reads_follow_the_tags_over_the_whole_round_trip(
        m in memory(), tags in select(vec![2u64, 4, 8]),
        to_link in 0u64..=150, from_link in 0u64..=150,
    ) {
        // A root complex slow enough that 8 tags bind before the link's 64-byte completions
        // (about 11 ns each at Gen3 x8) do.
        let m = MemoryPath { root_complex_ns: m.root_complex_ns.max(100), ..m };
        let link = link(3, 8, tags);
        let e = bare_engine(64, to_link, from_link);
        let p = point(Direction::Read, 64, 0);
        let r = measure(&link, &m, &e, &p);
        prop_assert_eq!(r.limit, "tags");
        let floor_ns = (to_link + from_link + m.root_complex_ns + m.llc_ns) as f64;
        prop_assert!(r.latency_ns >= floor_ns, "{} < {floor_ns}", r.latency_ns);
        if floor_ns > 0.0 {
            prop_assert!(r.transactions_per_s <= tags as f64 * 1e9 / floor_ns * 1.001);
        }
        let slower = DeviceEngine { completion_path_ns: from_link + 100, ..e };
        let s = measure(&link, &m, &slower, &p);
        prop_assert!(s.transactions_per_s < r.transactions_per_s * 0.99);
        prop_assert!(s.latency_ns >= r.latency_ns + 100.0 - 1e-9);
    }

    /// A data port of R bytes a microsecond: a lone read of S bytes takes at least S / R
    /// longer than without it (its data crosses the port after the link, store and forward),
    /// 4 KiB transfers move at most R bytes a second, and without the port the same reads
    /// are faster. Fails if the port overlaps the link or is not shared.
    #[test]
    fn a_data_port_adds_size_over_rate_and_bounds_the_rate(
        m in memory(), rate in 2_000u64..=6_000, size in select(vec![512u64, 1024, 2048]),
        d in direction(),
    ) {
        let link = link(3, 8, 64);
        let plain = bare_engine(64, 50, 50);
        let ported = DeviceEngine { data_bytes_per_us: Some(rate), ..plain.clone() };
        // Two ports: a lone transfer's latency is the same, the rate bound twice as high.
        let two = DeviceEngine { data_ports: 2, ..ported.clone() };
        let big = point(d, 4096, 0);
        let r2 = measure(&link, &m, &two, &big);
        prop_assert!(bytes_per_s(&r2) <= 2.0 * rate as f64 * 1e6 * 1.001);
        let lone = point(Direction::Read, size, 0);
        let a = measure(&link, &m, &plain, &lone);
        let b = measure(&link, &m, &ported, &lone);
        let port_ns = size as f64 * 1e3 / rate as f64;
        prop_assert!(b.latency_ns >= a.latency_ns + port_ns - 1e-3, "{} vs {} + {port_ns}",
            b.latency_ns, a.latency_ns);
        prop_assert_eq!(measure(&link, &m, &two, &lone).latency_ns, b.latency_ns);
        let r = measure(&link, &m, &ported, &big);
        prop_assert!(bytes_per_s(&r2) > bytes_per_s(&r) * 1.2, "{} vs {}", bytes_per_s(&r2),
            bytes_per_s(&r));
        prop_assert!(bytes_per_s(&r) <= rate as f64 * 1e6 * 1.001, "{}", bytes_per_s(&r));
        prop_assert_eq!(r.limit, "device data port");
        prop_assert!(bytes_per_s(&measure(&link, &m, &plain, &big)) > bytes_per_s(&r));
    }

    /// A port moving whole beats of B bytes, aligned as the host address, with a fixed time T
    /// a transfer: where the port binds, a 64-byte transfer at a host offset inside a beat of
    /// 64 takes two beats and runs at most one per (T + 2 beats) while the aligned one runs
    /// near one per (T + 1 beat); without beats the offset costs the port nothing; and T adds
    /// exactly T to a lone transfer's latency. Fails if beats are counted on the device's side,
    /// on bytes, or if T is not charged once a transfer.
    #[test]
    fn a_port_moves_whole_host_aligned_beats_and_a_fixed_time_a_transfer(
        m in memory(), rate in 2_000u64..=4_000, fixed in 1u64..=20, offset in 1u64..=63,
        d in direction(),
    ) {
        let link = link(3, 8, 256);
        let bytes = DeviceEngine { data_bytes_per_us: Some(rate), ..bare_engine(64, 50, 50) };
        let beats = DeviceEngine { data_beat_bytes: 64, ..bytes.clone() };
        let timed = DeviceEngine { data_transfer_ns: fixed, ..beats.clone() };
        let aligned = point(d, 64, 0);
        let crossing = point(d, 64, offset);
        let beat_ns = 64.0 * 1e3 / rate as f64;
        let a = measure(&link, &m, &timed, &aligned);
        let c = measure(&link, &m, &timed, &crossing);
        prop_assert_eq!(a.limit, "device data port");
        prop_assert!(c.transactions_per_s <= 1e9 / (fixed as f64 + 2.0 * beat_ns) * 1.001,
            "{} per s", c.transactions_per_s);
        prop_assert!(a.transactions_per_s >= 1e9 / (fixed as f64 + beat_ns) * 0.95,
            "{} per s", a.transactions_per_s);
        prop_assert_eq!(
            measure(&link, &m, &bytes, &aligned).transactions_per_s,
            measure(&link, &m, &bytes, &crossing).transactions_per_s
        );
        let lone = measure(&link, &m, &timed, &aligned).latency_ns
            - measure(&link, &m, &beats, &aligned).latency_ns;
        prop_assert!((lone - fixed as f64).abs() < 1e-6, "{lone} vs {fixed}");
    }

    /// A beat costs `data_beat_whole_pct` percent of a whole beat's time whatever it carries:
    /// a 64-byte transfer across a beat boundary takes P% of a 64-byte beat longer on the port
    /// than with P = 0 (its bytes alone), and an aligned one, one full beat, the same either
    /// way. Fails if the share is charged to whole beats, or not at all.
    #[test]
    fn a_beat_costs_its_share_of_a_whole_beat_whatever_it_carries(
        m in memory(), rate in 2_000u64..=8_000, pct in 0u64..=100, offset in select(vec![8u64, 32, 56]),
        d in direction(),
    ) {
        let link = link(3, 8, 256);
        let bytes = DeviceEngine {
            data_bytes_per_us: Some(rate),
            data_beat_bytes: 64,
            data_beat_whole_pct: 0,
            ..bare_engine(64, 50, 50)
        };
        let share = DeviceEngine { data_beat_whole_pct: pct, ..bytes.clone() };
        let crossing = point(d, 64, offset);
        let extra = measure(&link, &m, &share, &crossing).latency_ns
            - measure(&link, &m, &bytes, &crossing).latency_ns;
        let want = 64.0 * pct as f64 / 100.0 * 1e3 / rate as f64;
        prop_assert!((extra - want).abs() < 2e-3, "{extra} vs {want}");
        let aligned = point(d, 64, 0);
        prop_assert_eq!(
            measure(&link, &m, &share, &aligned).latency_ns,
            measure(&link, &m, &bytes, &aligned).latency_ns
        );
    }

    /// A write's command completing H ns after its data has left holds its context: with C
    /// contexts small writes run at most C / H a second, while a lone write's latency and a
    /// write-then-read's do not change (nothing waits for the completion); reads keep their
    /// rate. Fails if the hold is charged to reads, to a latency, or does not hold the context.
    #[test]
    fn a_write_hold_holds_the_context_of_writes_only(
        m in memory(), hold in 300u64..=1000, contexts in select(vec![8u64, 16, 32]),
    ) {
        let link = link(3, 8, 256);
        let plain = bare_engine(contexts, 50, 50);
        let holding = DeviceEngine { write_hold_ns: hold, ..plain.clone() };
        let w = point(Direction::Write, 64, 0);
        let slow = measure(&link, &m, &holding, &w);
        prop_assert!(slow.transactions_per_s <= contexts as f64 * 1e9 / hold as f64 * 1.001);
        let fast = measure(&link, &m, &plain, &w);
        prop_assert!(slow.transactions_per_s < fast.transactions_per_s);
        prop_assert_eq!(slow.latency_ns, fast.latency_ns);
        let pair = DmaPoint { then_read: true, ..w };
        prop_assert_eq!(
            measure(&link, &m, &holding, &pair).latency_ns,
            measure(&link, &m, &plain, &pair).latency_ns
        );
        let r = point(Direction::Read, 64, 0);
        prop_assert_eq!(
            measure(&link, &m, &holding, &r).transactions_per_s,
            measure(&link, &m, &plain, &r).transactions_per_s
        );
    }

    /// A transfer at a device offset that is not a word multiple costs its direction's
    /// misalignment on the data port (a read's store, a write's fetch): its latency grows by
    /// that time, small transfers run at most one per port time plus it, and a word-aligned
    /// device offset costs nothing more. Fails if the cost is charged to aligned offsets, to
    /// the other direction's figure, or not on the port.
    #[test]
    fn a_misaligned_device_offset_costs_its_direction_on_the_port(
        m in memory(), store in 20u64..=60, fetch in 20u64..=60, offset in 1u64..8,
        d in direction(),
    ) {
        let link = link(3, 8, 256);
        let e = DeviceEngine {
            data_bytes_per_us: Some(6_000),
            device_word_bytes: 8,
            misaligned_store_ns: store,
            misaligned_fetch_ns: fetch,
            ..bare_engine(64, 50, 50)
        };
        let at = |dev: u64| DmaPoint { device_offset_bytes: dev, ..point(d, 64, 0) };
        let aligned = measure(&link, &m, &e, &at(8));
        prop_assert_eq!(&aligned, &DmaRecord { point: at(8), ..measure(&link, &m, &e, &at(0)) });
        let skewed = measure(&link, &m, &e, &at(offset));
        let cost = if d == Direction::Read { store } else { fetch };
        prop_assert!(skewed.latency_ns >= aligned.latency_ns + cost as f64 - 1e-3);
        let port_ns = 64.0 * 1e3 / 6_000.0 + cost as f64;
        prop_assert!(skewed.transactions_per_s <= 1e9 / port_ns * 1.001);
        // The other direction's cost does not reach this one.
        let other = if d == Direction::Read {
            DeviceEngine { misaligned_fetch_ns: 0, ..e.clone() }
        } else {
            DeviceEngine { misaligned_store_ns: 0, ..e.clone() }
        };
        prop_assert_eq!(measure(&link, &m, &other, &at(offset)), skewed);
    }

    /// A write then a read of the same bytes: the read starts only once the write's data has
    /// left the device, so the pair takes at least the write's time to the link plus a lone
    /// warm read; its parts (the write before it among them) add up to it; its bandwidth
    /// figures are the write's. Fails if the read overlaps the write or the parts lose time.
    #[test]
    fn a_write_then_read_takes_the_write_then_a_warm_read(
        m in memory(), size in select(vec![4u64, 64, 256, 1024]), setup in 0u64..=200,
        hold in 0u64..=500,
    ) {
        let link = link(3, 8, 64);
        let e = DeviceEngine {
            setup_ns: setup,
            write_hold_ns: hold,
            data_bytes_per_us: Some(6_000),
            ..bare_engine(32, 50, 50)
        };
        let write = point(Direction::Write, size, 0);
        let pair = DmaPoint { then_read: true, ..write };
        let read = DmaPoint { cache: Cache::Warm, ..point(Direction::Read, size, 0) };
        let w = measure(&link, &m, &e, &write);
        let wr = measure(&link, &m, &e, &pair);
        let r = measure(&link, &m, &e, &read);
        // The write's hold delays neither the pair nor its read.
        let sent_floor = (setup + 50) as f64 + size as f64 * 1e3 / 6_000.0;
        prop_assert!(wr.latency_ns >= r.latency_ns + sent_floor - 1e-3,
            "{} < {} + {sent_floor}", wr.latency_ns, r.latency_ns);
        let sum: f64 = wr.latency_parts.iter().map(|(_, ns)| ns).sum();
        prop_assert!((sum - wr.latency_ns).abs() < 1e-6, "{sum} vs {}", wr.latency_ns);
        prop_assert!(wr.latency_parts.iter().any(|(p, ns)| *p == "the write before it" && *ns > 0.0));
        prop_assert_eq!(wr.bandwidth_gbit_s, w.bandwidth_gbit_s);
    }

    /// Reads and writes in turn (pcie-bench's `BW_DMA_RW`): half the transfers are writes,
    /// so the run's TLPs per transfer are the mean of each direction's (reads split at the
    /// 512-byte read request size, writes at the 256-byte payload), and writes that hold their
    /// context long slow the mix below reads alone. Both fail if the mix ran reads only.
    #[test]
    fn reads_and_writes_in_turn_take_each_directions_share(
        m in memory(), size in select(vec![1024u64, 2048]), hold in 500u64..=2000,
    ) {
        let link = link(3, 8, 64);
        let e = DeviceEngine { write_hold_ns: hold, ..bare_engine(8, 50, 50) };
        let read = measure(&link, &m, &e, &point(Direction::Read, size, 0));
        let write = measure(&link, &m, &e, &point(Direction::Write, size, 0));
        let mixed = DmaPoint { mixed: true, ..point(Direction::Read, size, 0) };
        let mixed = measure(&link, &m, &e, &mixed);
        let mean = (read.tlps_per_transfer + write.tlps_per_transfer) / 2.0;
        prop_assert!((mixed.tlps_per_transfer - mean).abs() < 1e-9, "{} {}", mixed.tlps_per_transfer, mean);
        if write.transactions_per_s < 0.8 * read.transactions_per_s {
            prop_assert!(
                mixed.transactions_per_s < read.transactions_per_s,
                "{} {} {}", mixed.transactions_per_s, read.transactions_per_s, write.transactions_per_s
            );
        }
    }

    /// The read after a write finds the bytes the write just left: in the cache where writes
    /// allocate (write allocation on), whatever the window, so the pair
    /// takes as long over a window far beyond the LLC as over a small one; without write
    /// allocation the read goes to DRAM and takes longer. Fails if the read's hits follow the
    /// window's steady state instead of the write it follows.
    #[test]
    fn the_read_after_a_write_finds_the_written_lines(
        m in memory(), size in select(vec![4u64, 64, 256]), setup in 0u64..=200,
    ) {
        let link = link(3, 8, 64);
        let e = DeviceEngine { setup_ns: setup, ..bare_engine(32, 50, 50) };
        let pair = |window: u64| DmaPoint {
            then_read: true,
            window_bytes: window,
            access: Access::Random,
            ..point(Direction::Write, size, 0)
        };
        let small = measure(&link, &m, &e, &pair(1 << 16));
        let huge = measure(&link, &m, &e, &pair(1 << 30));
        prop_assert_eq!(small.latency_ns, huge.latency_ns);
        let plain = MemoryPath { write_allocate: false, ..m.clone() };
        prop_assert!(measure(&link, &plain, &e, &pair(1 << 16)).latency_ns > small.latency_ns);
    }

    /// Where the root complex limits, a 63- or 65-byte DMA and a 64-byte one at offset 1 move
    /// fewer bytes a second than an aligned 64-byte one, reads and writes.
    #[test]
    fn partial_and_crossing_requests_cost_the_root_complex_more(
        m in memory(), line_ns in 10u64..=20, header in 0u64..=10, partial in 1u64..=20,
        d in direction(),
    ) {
        let link = link(5, 16, 256);
        let m = MemoryPath {
            line_ns,
            request_ns: header.min(line_ns),
            partial_line_ns: partial,
            ..m
        };
        let e = bare_engine(1024, 50, 50);
        let whole = measure(&link, &m, &e, &point(d, 64, 0));
        prop_assert_eq!(whole.limit, "root complex");
        for (size, offset) in [(63, 0), (65, 0), (64, 1)] {
            let r = measure(&link, &m, &e, &point(d, size, offset));
            prop_assert!(
                bytes_per_s(&r) < bytes_per_s(&whole),
                "{size} B at {offset}: {} >= {}", bytes_per_s(&r), bytes_per_s(&whole)
            );
        }
    }

    /// Where the tags bind, a read of remote memory (its lines cross the socket link) moves
    /// fewer bytes a second than a local one.
    #[test]
    fn remote_reads_are_slower_where_tags_bind(
        m in memory(), tags in select(vec![1u64, 2, 4]), size in 1u64..=128, cold in any::<bool>(),
    ) {
        let link = link(3, 8, tags);
        let e = bare_engine(64, 60, 80);
        let local = DmaPoint {
            cache: if cold { Cache::Cold } else { Cache::Warm },
            ..point(Direction::Read, size, 0)
        };
        let remote = DmaPoint { memory: Home::Remote, ..local };
        let (l, r) = (measure(&link, &m, &e, &local), measure(&link, &m, &e, &remote));
        prop_assert_eq!(l.limit, "tags");
        prop_assert!(r.transactions_per_s < l.transactions_per_s * 0.99);
    }

    /// Where the root port's posted entries bind (each held from a write's arrival until its
    /// lines are committed), a write to remote memory, whose commit crosses the socket link,
    /// moves fewer bytes a second than a local one: posted writes hold no tag, but latency
    /// still sets their rate.
    #[test]
    fn remote_writes_are_slower_where_posted_entries_bind(
        m in memory(), entries in select(vec![1u64, 2, 4]), size in 1u64..=128, cold in any::<bool>(),
    ) {
        let m = MemoryPath {
            posted_writes: entries,
            root_complex_ns: m.root_complex_ns.max(100),
            ..m
        };
        let link = link(3, 8, 64);
        let e = bare_engine(64, 60, 80);
        let local = DmaPoint {
            cache: if cold { Cache::Cold } else { Cache::Warm },
            ..point(Direction::Write, size, 0)
        };
        let remote = DmaPoint { memory: Home::Remote, ..local };
        let (l, r) = (measure(&link, &m, &e, &local), measure(&link, &m, &e, &remote));
        prop_assert_eq!(l.limit, "posted entries");
        prop_assert!(r.transactions_per_s < l.transactions_per_s * 0.99);
        prop_assert!(r.latency_ns >= l.latency_ns);
    }
}

/// The shipped modern hosts with their devices.
fn hosts() -> Vec<Platform> {
    let hosts: Vec<Platform> = Platform::builtin_names()
        .into_iter()
        .filter_map(|n| Platform::builtin(n, &Picks::new()).ok())
        .filter(|p| p.device_dma_path().is_ok())
        .collect();
    assert!(hosts.len() >= 3);
    hosts
}

fn on(p: &Platform, point: &DmaPoint) -> DmaRecord {
    DeviceDma::new(p).unwrap().measure(point).unwrap()
}

/// With each host's own values: small and unaligned DMAs are never done at a higher rate than
/// an aligned 64-byte one, and where the root complex or the link limits that one they never
/// beat it in bandwidth (where latency sets the rate, a 65-byte read may move a byte more in
/// about the same time); the engine's set-up is not charged serially.
#[test]
fn on_every_host_small_and_unaligned_dmas_never_beat_an_aligned_line() {
    for p in hosts() {
        let setup_ns = p.device_dma.as_ref().unwrap().setup_ns as f64;
        for d in [Direction::Read, Direction::Write] {
            let whole = on(&p, &point(d, 64, 0));
            assert!(
                whole.transactions_per_s > 1.5e9 / setup_ns,
                "{}: {d:?} {} a second with a {setup_ns} ns set-up",
                p.name,
                whole.transactions_per_s
            );
            for (size, offset) in [(63, 0), (65, 0), (64, 1)] {
                let r = on(&p, &point(d, size, offset));
                assert!(
                    r.transactions_per_s <= whole.transactions_per_s * 1.001,
                    "{}: {d:?} {size} B at {offset} done more often than 64 B",
                    p.name
                );
                if ["root complex", "link"].contains(&whole.limit) {
                    assert!(
                        bytes_per_s(&r) <= bytes_per_s(&whole),
                        "{}: {d:?} {size} B at {offset} beats 64 B",
                        p.name
                    );
                }
            }
        }
    }
}

/// The most a slower variant of `base` may reach, as a share of `base`'s rate: 2% less where a
/// part held over the longer time limits `base` (latency sets its rate: for a read the
/// contexts or the tags, held until its data is back; for a write the posted entries, held
/// until it is committed, since its context and the link are free once its data has left the
/// device), never more otherwise (0.1% of slack for a finite run's phase).
fn most_against(base: &DmaRecord) -> f64 {
    let held = match base.point.direction {
        Direction::Read => ["engine contexts", "tags"].contains(&base.limit),
        Direction::Write => base.limit == "posted entries",
    };
    if held {
        0.98
    } else {
        1.001
    }
}

/// With each host's own values: remote memory and a random window far past the IOTLB's reach
/// never raise the bandwidth of 64-byte reads or writes, and where the contexts, the tags or
/// the posted entries limit the local DMA (they hold each over a longer round trip or commit)
/// they lower it, not only latency.
#[test]
fn on_every_host_remote_memory_and_iotlb_misses_cost_bandwidth() {
    for (p, direction) in hosts()
        .into_iter()
        .flat_map(|p| [(p.clone(), Direction::Read), (p, Direction::Write)])
    {
        let local = point(direction, 64, 0);
        let l = on(&p, &local);
        let remote = DmaPoint {
            memory: Home::Remote,
            ..local
        };
        if p.memory.as_ref().is_some_and(|m| m.socket_link_ns == 0) {
            // One socket: no remote memory to put a buffer in.
            let e = DeviceDma::new(&p).unwrap().measure(&remote).unwrap_err();
            assert!(e.to_string().contains("one socket"), "{e}");
        } else {
            let r = on(&p, &remote);
            assert!(
                r.transactions_per_s < l.transactions_per_s * most_against(&l),
                "{} {direction:?}: remote {} vs local {}",
                p.name,
                r.transactions_per_s,
                l.transactions_per_s
            );
        }
        if p.iommu_hw.is_none() {
            continue;
        }
        let mapped = |window: u64| DmaPoint {
            iommu: IommuMode::On,
            access: Access::Random,
            window_bytes: window,
            ..local
        };
        let near = on(&p, &mapped(64 << 10));
        let far = on(&p, &mapped(1 << 30));
        assert_eq!(near.iotlb_miss_rate, Some(0.0), "{}", p.name);
        assert!(far.iotlb_miss_rate.unwrap() > 0.9, "{}", p.name);
        assert!(
            far.transactions_per_s < near.transactions_per_s * most_against(&near),
            "{}: past the IOTLB's reach {} vs within {}",
            p.name,
            far.transactions_per_s,
            near.transactions_per_s
        );
    }
}
