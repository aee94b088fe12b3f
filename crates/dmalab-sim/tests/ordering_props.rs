//! Property tests of the PCIe TLP attributes at the root complex (`dmalab_sim::bus::ordering`):
//! for any sequence of writes and reads from a few requesters, any memory path and either way
//! of ordering writes, setting Relaxed Ordering, No Snoop or ID-based Ordering on one TLP never
//! makes any TLP start, arrive or finish later. A write without Relaxed Ordering is never visible
//! before an earlier write (of its requester, under IDO), and a read's data never comes before
//! the earlier writes it may not pass are visible. That each attribute does act is checked by
//! the module's unit tests, which fail without it.

use dmalab_sim::bus::memory::MemoryPath;
use dmalab_sim::bus::ordering::{
    Attributes, InboundTlp, Kind, OrderedWrites, OrderingParams, RootComplex, TlpTiming,
};
use proptest::prelude::*;
use proptest::sample::select;

fn root_complex() -> impl Strategy<Value = RootComplex> {
    (
        1u64..=16,
        select(vec![OrderedWrites::Pipelined, OrderedWrites::Serialized]),
        0u64..=50,
        0u64..=300,
        (0u64..=400, 0u64..=4, 0u64..=60, 60u64..=200, any::<bool>()),
    )
        .prop_map(
            |(trackers, ordered, snoop, owned, (rc, line, llc, dram, allocate))| {
                let memory = MemoryPath {
                    line_bytes: 64,
                    root_complex_ns: rc,
                    line_ns: line,
                    request_ns: 0,
                    partial_line_ns: 0,
                    llc_ns: llc,
                    dram_ns: dram,
                    dram_bytes_per_us: 76_800,
                    llc_bytes: 1 << 25,
                    llc_io_bytes: 1 << 22,
                    write_allocate: allocate,
                    socket_link_ns: 50,
                    socket_link_bytes_per_us: 38_400,
                    posted_writes: 64,
                };
                let params = OrderingParams {
                    write_trackers: trackers,
                    ordered_writes: ordered,
                    snoop_ns: snoop,
                    cpu_owned_ns: owned,
                };
                RootComplex::new(params, &memory).expect("parameters in range")
            },
        )
}

fn tlp() -> impl Strategy<Value = InboundTlp> {
    (
        prop_oneof![4 => Just(Kind::Write), 1 => Just(Kind::Read)],
        0u32..3,
        (any::<bool>(), any::<bool>(), any::<bool>()),
        1_000u64..=80_000,
        1u64..=8,
        any::<bool>(),
    )
        .prop_map(
            |(kind, requester, (ro, ns, ido), wire_ps, lines, owned)| InboundTlp {
                kind,
                requester,
                attrs: Attributes {
                    relaxed_ordering: ro,
                    no_snoop: ns,
                    id_based_ordering: ido,
                },
                wire_ps,
                lines,
                cpu_owned: owned,
            },
        )
}

fn never_later(relaxed: &[TlpTiming], strict: &[TlpTiming]) -> Result<(), TestCaseError> {
    for (i, (r, s)) in relaxed.iter().zip(strict).enumerate() {
        prop_assert!(
            r.start_ps <= s.start_ps,
            "TLP {i} starts later: {r:?} vs {s:?}"
        );
        prop_assert!(r.arrive_ps <= s.arrive_ps, "TLP {i} arrives later");
        prop_assert!(r.done_ps <= s.done_ps, "TLP {i} done later: {r:?} vs {s:?}");
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn relaxing_one_tlp_never_delays_any(
        rc in root_complex(),
        tlps in prop::collection::vec(tlp(), 1..40),
        which in any::<prop::sample::Index>(),
        attribute in 0usize..3,
    ) {
        let i = which.index(tlps.len());
        let mut strict = tlps.clone();
        let mut relaxed = tlps;
        let (s, r) = (&mut strict[i].attrs, &mut relaxed[i].attrs);
        match attribute {
            0 => (s.relaxed_ordering, r.relaxed_ordering) = (false, true),
            1 => (s.no_snoop, r.no_snoop) = (false, true),
            _ => (s.id_based_ordering, r.id_based_ordering) = (false, true),
        }
        never_later(&rc.run(&relaxed), &rc.run(&strict))?;
    }

    #[test]
    fn ordered_tlps_wait_for_the_writes_they_may_not_pass(
        rc in root_complex(),
        tlps in prop::collection::vec(tlp(), 1..40),
    ) {
        let t = rc.run(&tlps);
        for (j, later) in tlps.iter().enumerate() {
            let free = later.kind == Kind::Write && later.attrs.relaxed_ordering;
            for (i, earlier) in tlps[..j].iter().enumerate() {
                let other = later.attrs.id_based_ordering && later.requester != earlier.requester;
                if earlier.kind != Kind::Write || free || other {
                    continue;
                }
                prop_assert!(
                    t[j].done_ps >= t[i].done_ps,
                    "TLP {j} done at {} before the write {i} it may not pass ({})",
                    t[j].done_ps,
                    t[i].done_ps
                );
            }
        }
    }
}
