//! Property tests of the DMA hints on a hinted PCI host bridge (seed 004's ZX1 model): for any
//! bus, line fetch time, transfer and PIO writes in range, no hint ever works against itself:
//! depth 0 is never faster than depth 1, relaxed ordering never slower than ordering, block size
//! changes nothing inside one block, read current never adds time. That each mechanism does act
//! (a stall or a disconnect per line, a refetch after an ordered PIO write, a disconnect at a
//! block boundary, a slower fetch with ownership) is checked by the unit tests of
//! `dmalab_sim::bus::lba`, which fail without it. Every transfer's commands must cover it
//! exactly, disconnects included.
//!
//! Depth and read current are compared without PIO writes: under enforced ordering a write
//! arrives at a fixed time, and a slower transfer may meet it at a cheaper moment (still waiting
//! for its first line rather than mid-burst), so with writes the two only compare on average.
//! Relaxed ordering acts only on PIO writes: with one write it is never slower; with several,
//! the ordered transfer's stop moves the rest of it to another phase of the later writes and
//! the delayed read's retry interval, which can favour it by a command's overhead (a 1304-byte
//! read at depth 0 met four writes 120 ns sooner ordered than relaxed), so with several writes
//! the two are compared over many transfers.

use dmalab_sim::bus::hints::{DmaHints, HintTable, Mapping};
use dmalab_sim::bus::lba::{LbaParams, ReadContext};
use dmalab_sim::bus::pci::{PciBus, PciParams, WriteCommandPolicy};
use dmalab_sim::bus::trace::{Direction, Trace};
use dmalab_sim::units::{BusAddr, Ps};
use proptest::prelude::*;
use proptest::sample::select;

fn bus() -> impl Strategy<Value = PciBus> {
    (
        select(vec![33_333_333u64, 66_666_667]),
        select(vec![32u64, 64]),
        select(vec![64u64, 128]),
        0u64..=400,
        50u64..=200,
        0u64..=200,
        1u64..=8,
    )
        .prop_map(|(clock_hz, width_bits, line, rope, ioc, own, retry)| {
            PciBus::new(PciParams {
                width_bits,
                clock_hz,
                cache_line_bytes: line,
                prefetch_boundary_bytes: 4096,
                command_overhead_clocks: 4,
                write_latency_clocks: 2,
                read_fetch_latency_ns: 0,
                retry_interval_clocks: retry,
                read_modify_write_ns: 100,
                write_policy: WriteCommandPolicy::LineExact,
                lba: Some(LbaParams {
                    ioc_line_ns: ioc,
                    rope_ns: rope,
                    ownership_ns: own,
                    firmware_hints: hints(3, 4096, false, true),
                }),
            })
        })
}

fn hints(prefetch_lines: u64, block_bytes: u64, ro: bool, rc: bool) -> DmaHints {
    DmaHints {
        prefetch_lines,
        block_bytes,
        relaxed_ordering: ro,
        read_current: rc,
    }
}

fn any_hints() -> impl Strategy<Value = DmaHints> {
    (
        0u64..=3,
        select(vec![512u64, 1024, 2048, 4096]),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(d, b, ro, rc)| hints(d, b, ro, rc))
}

/// PIO writes at up to 6 ascending times within the first 20 us.
fn pio() -> impl Strategy<Value = Vec<u64>> {
    prop::collection::vec(0u64..20_000, 0..6).prop_map(|mut v| {
        v.sort_unstable();
        v
    })
}

fn span(bus: &PciBus, h: DmaHints, addr: u64, len: u64, pio_ns: &[u64]) -> Ps {
    let table = HintTable::uniform(h);
    let pio: Vec<Ps> = pio_ns.iter().map(|&n| Ps::from_ns(n)).collect();
    let ctx = ReadContext {
        mapping: Mapping::Streaming,
        hints: &table,
        pio_writes: &pio,
    };
    let t: Trace = bus
        .transfer_with(Direction::Read, BusAddr(addr), len, Some(&ctx))
        .unwrap();
    let covered: u64 = t.entries.iter().map(|e| e.bytes).sum();
    assert_eq!(covered, len, "the commands cover the transfer");
    t.end_ps()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    #[test]
    fn depth_zero_is_never_faster_than_depth_one(
        bus in bus(), h in any_hints(), addr in 0u64..4096, len in 1u64..=4096,
    ) {
        let zero = span(&bus, DmaHints { prefetch_lines: 0, ..h }, addr, len, &[]);
        let one = span(&bus, DmaHints { prefetch_lines: 1, ..h }, addr, len, &[]);
        prop_assert!(zero >= one, "depth 0 {zero:?} < depth 1 {one:?}");
    }

    #[test]
    fn relaxed_ordering_never_slows_a_transfer_past_one_pio_write(
        bus in bus(), h in any_hints(), addr in 0u64..4096, len in 1u64..=4096,
        pio in prop::collection::vec(0u64..20_000, 0..=1),
    ) {
        let ordered = span(&bus, DmaHints { relaxed_ordering: false, ..h }, addr, len, &pio);
        let relaxed = span(&bus, DmaHints { relaxed_ordering: true, ..h }, addr, len, &pio);
        prop_assert!(relaxed <= ordered, "relaxed {relaxed:?} > ordered {ordered:?}");
    }

    #[test]
    fn block_size_changes_nothing_within_one_block(
        bus in bus(), h in any_hints(), offset in 0u64..512, len in 1u64..=512, pio in pio(),
    ) {
        // A transfer inside the first 512 bytes of a 4 KiB page fits every block size.
        let len = len.min(512 - offset);
        let base = 0x4000 + offset;
        let spans: Vec<Ps> = [512u64, 1024, 2048, 4096]
            .iter()
            .map(|&b| span(&bus, DmaHints { block_bytes: b, ..h }, base, len, &pio))
            .collect();
        prop_assert!(spans.iter().all(|s| *s == spans[0]), "{spans:?}");
    }

    #[test]
    fn read_current_never_adds_bus_time(
        bus in bus(), h in any_hints(), addr in 0u64..4096, len in 1u64..=4096,
    ) {
        let current = span(&bus, DmaHints { read_current: true, ..h }, addr, len, &[]);
        let owned = span(&bus, DmaHints { read_current: false, ..h }, addr, len, &[]);
        prop_assert!(current <= owned, "read current {current:?} > owned {owned:?}");
    }
}

#[test]
fn relaxed_ordering_is_faster_on_average_with_several_pio_writes() {
    // 400 transfers drawn from the same ranges as the properties, each with up to six PIO
    // writes: the total time relaxed is below the total ordered.
    use proptest::strategy::ValueTree;
    use proptest::test_runner::{Config, RngSeed, TestRunner};
    let mut runner = TestRunner::new(Config {
        rng_seed: RngSeed::Fixed(4),
        ..Config::default()
    });
    let cases = (bus(), any_hints(), 0u64..4096, 1u64..=4096, pio());
    let (mut ordered, mut relaxed, mut slower) = (0u64, 0u64, 0);
    for _ in 0..400 {
        let (bus, h, addr, len, pio) = cases.new_tree(&mut runner).unwrap().current();
        let o = span(
            &bus,
            DmaHints {
                relaxed_ordering: false,
                ..h
            },
            addr,
            len,
            &pio,
        );
        let r = span(
            &bus,
            DmaHints {
                relaxed_ordering: true,
                ..h
            },
            addr,
            len,
            &pio,
        );
        ordered += o.0;
        relaxed += r.0;
        slower += u32::from(r > o);
    }
    assert!(
        relaxed < ordered,
        "relaxed {relaxed} ps against ordered {ordered} ps"
    );
    assert!(slower < 40, "{slower} of 400 transfers slower relaxed");
}
