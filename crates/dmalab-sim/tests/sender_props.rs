//! Property tests of the sending host's CPUs in seed 004's netperf model (`nic_tx` with
//! `[nic_tx.sender]`): for any costs in range, any stream and any hints, netperf on a CPU of
//! its own is never slower than netperf sharing the interrupt CPU, and it is faster exactly
//! when the shared CPU is the slowest stage.

use dmalab_sim::bus::hints::HintTable;
use dmalab_sim::config::platform::{Picks, Platform};
use dmalab_sim::workload::nic_tx::{
    parts, run, NicBus, NicTxParams, NicTxScenario, Protocol, SenderCpu,
};
use proptest::prelude::*;

fn zx1() -> (Platform, NicTxParams, HintTable) {
    let p = Platform::builtin("hp-rx2600-zx1", &Picks::new()).unwrap();
    let (_, table, nic) = parts(&p).unwrap();
    let nic = *nic;
    (p, nic, table)
}

fn stream() -> impl Strategy<Value = NicTxScenario> {
    (any::<bool>(), 64u64..=1400, 576u64..=1500).prop_map(|(tcp, message, mtu)| NicTxScenario {
        protocol: if tcp { Protocol::Tcp } else { Protocol::Udp },
        message_bytes: message.min(mtu - 28),
        mtu_bytes: mtu,
    })
}

fn sender() -> impl Strategy<Value = SenderCpu> {
    (
        0u64..=10_000,
        0u64..=10_000,
        0u64..=3_000,
        0u64..=20_000,
        0u64..=20_000,
    )
        .prop_map(|(call, frame, copy, tcp, completion)| SenderCpu {
            send_call_ns: call,
            stack_frame_ns: frame,
            driver_frame_ns: 0,
            copy_ps_per_byte: copy,
            tcp_segment_ns: tcp,
            completion_frame_ns: completion,
            shares_interrupt_cpu: false,
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn two_cpus_are_never_slower_than_one(sc in stream(), cpu in sender()) {
        let (p, mut nic, table) = zx1();
        let (bus, _, _) = parts(&p).unwrap();
        let NicBus::Pci(pci) = bus else { panic!("the ZX1's default slot is PCI") };
        nic.sender = Some(cpu);
        let apart = run(NicBus::Pci(pci), &nic, &table, &sc).unwrap();
        nic.sender = Some(SenderCpu { shares_interrupt_cpu: true, ..cpu });
        let shared = run(NicBus::Pci(pci), &nic, &table, &sc).unwrap();
        prop_assert!(apart.mbit_s >= shared.mbit_s, "{apart:?} vs {shared:?}");
        // Sharing costs exactly when it makes the host the slowest stage with the interrupt
        // work added: then the rate falls.
        if shared.limit == "sender" && cpu.completion_frame_ns > 0 {
            let stage = shared.sender_ns.unwrap();
            let others = shared.nic_ns.max(shared.wire_ns);
            let alone = apart.sender_ns.unwrap();
            prop_assert!(stage > others.max(alone) - 1e-9);
            prop_assert!(apart.mbit_s > shared.mbit_s);
        }
    }
}
