//! Property tests of the device DMA model (`bench dma`): for any link, memory path and engine
//! in range, each mechanism shows where it must. Every property would fail without its
//! mechanism: without lines, 65 bytes cost what 64 do and offset 1 touches no more lines;
//! without the socket link or the cache, remote and cold cost what local and warm do; without
//! resource accounting, a part could be more than fully busy.

use dmalab_sim::bus::device::DeviceEngine;
use dmalab_sim::bus::memory::{Access, Cache, Home, MemoryPath};
use dmalab_sim::bus::pcie::{PcieLink, PcieParams, TlpSplit};
use dmalab_sim::bus::trace::Direction;
use dmalab_sim::config::platform::{Picks, Platform};
use dmalab_sim::workload::devdma::{DeviceDma, DmaPoint, DmaRecord, IommuMode};
use proptest::prelude::*;
use proptest::sample::select;

#[path = "support/devdma.rs"]
mod devdma_support;
use devdma_support::{direction, link, measure, point};

fn link_params() -> impl Strategy<Value = PcieParams> {
    (
        3u64..=5,
        select(vec![4u64, 8, 16]),
        select(vec![128u64, 256, 512]),
        select(vec![256u64, 512, 1024]),
        select(vec![64u64, 128]),
        prop_oneof![Just(TlpSplit::Aligned), Just(TlpSplit::Largest)],
        select(vec![8u64, 32, 64, 256]),
        50u64..=200,
    )
        .prop_map(
            |(generation, lanes, mps, mrrs, rcb, split, tags, rmw)| PcieParams {
                generation,
                lanes,
                max_payload_bytes: mps,
                max_read_request_bytes: mrrs,
                read_completion_boundary_bytes: rcb,
                addressing_bits: 64,
                ecrc: false,
                tlp_split: split,
                read_latency_ns: 0,
                max_outstanding_read_requests: tags,
                tlps_per_ack: 4,
                tlps_per_fc_update: 4,
                cache_line_bytes: 64,
                read_modify_write_ns: rmw,
            },
        )
}

fn memory() -> impl Strategy<Value = MemoryPath> {
    (
        0u64..=300,
        0u64..=5,
        10u64..=60,
        60u64..=150,
        10_000u64..=100_000,
        select(vec![1u64 << 20, 8 << 20, 32 << 20]),
        any::<bool>(),
        50u64..=200,
        5_000u64..=40_000,
    )
        .prop_map(
            |(rc, line, llc, dram_extra, dram_bw, llc_bytes, alloc, socket, socket_bw)| {
                MemoryPath {
                    line_bytes: 64,
                    root_complex_ns: rc,
                    line_ns: line,
                    request_ns: line,
                    partial_line_ns: line,
                    llc_ns: llc,
                    dram_ns: llc + dram_extra,
                    dram_bytes_per_us: dram_bw,
                    llc_bytes,
                    llc_io_bytes: llc_bytes / 10,
                    write_allocate: alloc,
                    socket_link_ns: socket,
                    socket_link_bytes_per_us: socket_bw,
                    posted_writes: 64,
                }
            },
        )
}

fn engine() -> impl Strategy<Value = DeviceEngine> {
    (
        0u64..=200,
        0u64..=10,
        select(vec![64u64, 128, 256, 4096]),
        select(vec![0u64, 16, 32]),
        select(vec![1u64, 4, 8]),
        select(vec![0u64, 16]),
        select(vec![1u64, 8]),
        select(vec![1u64, 2, 8, 64]),
        0u64..=150,
        0u64..=150,
    )
        .prop_map(
            |(setup, issue, gran, desc, dpf, comp, cpw, contexts, to_link, from_link)| {
                DeviceEngine {
                    setup_ns: setup,
                    issue_ns: issue,
                    granularity_bytes: gran,
                    descriptor_bytes: desc,
                    descriptors_per_fetch: dpf,
                    completion_bytes: comp,
                    completions_per_write: cpw,
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
            },
        )
}

/// `a` is no faster than `b`: no lower latency, no more transfers per second (0.1% of slack
/// for the rate, which is measured over a finite run and so depends a little on its phase).
fn no_faster(a: &DmaRecord, b: &DmaRecord) -> Result<(), TestCaseError> {
    prop_assert!(
        a.latency_ns >= b.latency_ns,
        "latency {} < {}",
        a.latency_ns,
        b.latency_ns
    );
    prop_assert!(
        a.transactions_per_s <= b.transactions_per_s * 1.001,
        "rate {} > {}",
        a.transactions_per_s,
        b.transactions_per_s
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// At offset 63 the 65-byte read ends on a line boundary and the 64-byte one does not:
    /// the 64-byte read then has two partial lines to the other's one, and may cost the root
    /// complex more. Every other offset is checked.
    #[test]
    fn a_65_byte_read_never_beats_a_64_byte_read(
        lp in link_params(), m in memory(), e in engine(), offset in 0u64..63,
    ) {
        let link = PcieLink::new(lp).unwrap();
        let r64 = measure(&link, &m, &e, &point(Direction::Read, 64, offset));
        let r65 = measure(&link, &m, &e, &point(Direction::Read, 65, offset));
        no_faster(&r65, &r64)?;
    }

    /// With TLPs cut at aligned multiples of their limit (a line multiple), no line is split
    /// between two requests; a `largest` split can cut a line in two, and then both requests
    /// touch it.
    #[test]
    fn offset_one_touches_one_more_line(
        lp in link_params(), m in memory(), e in engine(), d in direction(), lines in 1u64..=64,
    ) {
        let link = PcieLink::new(PcieParams { tlp_split: TlpSplit::Aligned, ..lp }).unwrap();
        let size = lines * 64;
        let at0 = measure(&link, &m, &e, &point(d, size, 0));
        let at1 = measure(&link, &m, &e, &point(d, size, 1));
        prop_assert_eq!(at0.lines_per_transfer, lines as f64);
        prop_assert_eq!(at1.lines_per_transfer, lines as f64 + 1.0);
        no_faster(&at1, &at0)?;
    }

    #[test]
    fn no_part_is_more_than_fully_busy(
        lp in link_params(), m in memory(), e in engine(), d in direction(),
        size in 1u64..=8192, offset in 0u64..64,
    ) {
        let link = PcieLink::new(lp).unwrap();
        let r = measure(&link, &m, &e, &point(d, size, offset));
        for (part, u) in &r.utilisation {
            prop_assert!(*u <= 1.0 + 1e-9, "{part} busy {u}");
        }
        // Nor is the payload faster than the link's raw rate.
        let raw_gbit = link.raw_bytes_per_s() as f64 * 8.0 / 1e9;
        prop_assert!(r.bandwidth_gbit_s <= raw_gbit, "{} > {raw_gbit}", r.bandwidth_gbit_s);
        // Nor are transfers started faster than the engine's contexts allow (each is held at
        // least its set-up), nor their requests faster than its issue port puts them out.
        if e.setup_ns > 0 {
            let most = e.contexts as f64 * 1e9 / e.setup_ns as f64;
            prop_assert!(r.transactions_per_s <= most * 1.001);
        }
        if e.issue_ns > 0 {
            let tlps_per_s = r.transactions_per_s * r.tlps_per_transfer;
            prop_assert!(tlps_per_s <= 1e9 / e.issue_ns as f64 * 1.001);
        }
        // Nor are requests and lines served faster than the root complex serves them.
        let rc_ns = m.request_ns as f64 * r.tlps_per_transfer + m.line_ns as f64 * r.lines_per_transfer;
        if rc_ns > 0.0 {
            prop_assert!(r.transactions_per_s <= 1e9 / rc_ns * 1.001);
        }
    }

    #[test]
    fn remote_memory_is_never_faster_than_local(
        lp in link_params(), m in memory(), e in engine(), d in direction(),
        size in 1u64..=8192, offset in 0u64..64, warm in any::<bool>(),
    ) {
        let link = PcieLink::new(lp).unwrap();
        let mut local = point(d, size, offset);
        local.cache = if warm { Cache::Warm } else { Cache::Cold };
        let remote = DmaPoint { memory: Home::Remote, ..local };
        no_faster(&measure(&link, &m, &e, &remote), &measure(&link, &m, &e, &local))?;
    }

    #[test]
    fn a_cold_buffer_is_never_faster_than_a_warm_one(
        lp in link_params(), m in memory(), e in engine(), d in direction(),
        size in 1u64..=8192, offset in 0u64..64, window_shift in 12u32..=28,
        random in any::<bool>(), remote in any::<bool>(),
    ) {
        let link = PcieLink::new(lp).unwrap();
        let warm = DmaPoint {
            window_bytes: (1u64 << window_shift).max(size + offset),
            access: if random { Access::Random } else { Access::Seq },
            memory: if remote { Home::Remote } else { Home::Local },
            ..point(d, size, offset)
        };
        let cold = DmaPoint { cache: Cache::Cold, ..warm };
        no_faster(&measure(&link, &m, &e, &cold), &measure(&link, &m, &e, &warm))?;
    }
}

#[test]
fn the_same_point_gives_bit_identical_records() {
    for name in Platform::builtin_names() {
        let p = Platform::builtin(name, &Picks::new()).unwrap();
        let Ok(model) = DeviceDma::new(&p) else {
            continue;
        };
        let point = DmaPoint {
            access: Access::Random,
            cache: Cache::Warm,
            window_bytes: 1 << 30,
            ..point(Direction::Read, 1500, 3)
        };
        assert_eq!(
            model.measure(&point).unwrap(),
            model.measure(&point).unwrap()
        );
    }
}

#[test]
fn bad_points_name_the_field_and_range() {
    let link = link(3, 8, 32);
    let m = MemoryPath {
        line_bytes: 64,
        root_complex_ns: 100,
        line_ns: 1,
        request_ns: 1,
        partial_line_ns: 1,
        llc_ns: 20,
        dram_ns: 80,
        dram_bytes_per_us: 60_000,
        llc_bytes: 1 << 25,
        llc_io_bytes: 1 << 22,
        write_allocate: true,
        socket_link_ns: 100,
        socket_link_bytes_per_us: 20_000,
        posted_writes: 64,
    };
    let e = DeviceEngine {
        setup_ns: 10,
        issue_ns: 2,
        granularity_bytes: 256,
        descriptor_bytes: 16,
        descriptors_per_fetch: 4,
        completion_bytes: 16,
        completions_per_write: 4,
        contexts: 4,
        request_path_ns: 50,
        completion_path_ns: 50,
        data_bytes_per_us: None,
        data_ports: 1,
        data_beat_bytes: 1,
        data_transfer_ns: 0,
        data_beat_whole_pct: 100,
        write_hold_ns: 0,
        device_word_bytes: 1,
        misaligned_store_ns: 0,
        misaligned_fetch_ns: 0,
    };
    let model = DeviceDma::from_parts("t", &link, &m, &e);
    let cases = [
        (point(Direction::Read, 0, 0), "size_bytes"),
        (point(Direction::Read, 1 << 25, 0), "size_bytes"),
        (point(Direction::Read, 64, 4096), "offset_bytes"),
        (
            DmaPoint {
                window_bytes: 64,
                ..point(Direction::Read, 64, 1)
            },
            "window_bytes",
        ),
        (
            DmaPoint {
                page_bytes: 8192,
                ..point(Direction::Read, 64, 0)
            },
            "page_bytes",
        ),
        (
            DmaPoint {
                iommu: IommuMode::On,
                ..point(Direction::Read, 64, 0)
            },
            "iommu_hw",
        ),
        (
            DmaPoint {
                device_offset_bytes: 4096,
                ..point(Direction::Read, 64, 0)
            },
            "device_offset_bytes",
        ),
        (
            DmaPoint {
                then_read: true,
                ..point(Direction::Read, 64, 0)
            },
            "then_read",
        ),
        (
            DmaPoint {
                mixed: true,
                ..point(Direction::Write, 64, 0)
            },
            "mixed",
        ),
    ];
    for (p, field) in cases {
        let msg = model.measure(&p).unwrap_err().to_string();
        assert!(msg.contains(field), "{msg}");
    }
}
