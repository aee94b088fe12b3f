//! Property tests of the doorbell paced by completions in seed 004's netperf model (`nic_tx`):
//! where the send ring is full, the driver's doorbell follows a completion by the host's
//! reaction, so it reaches the bridge at one phase of the NIC's cycle and splits every frame's
//! read or none; where it lands in the read, it meets the frame's burst more often than a
//! doorbell at a uniform phase, which splits only the share of frames whose phase falls there.

use dmalab_sim::bus::hints::HintTable;
use dmalab_sim::config::platform::{Picks, Platform};
use dmalab_sim::workload::nic_tx::{
    parts, run, run_with, Doorbell, NicBus, NicTxParams, NicTxScenario, Protocol, SenderCpu,
};
use proptest::prelude::*;

fn zx1() -> Platform {
    Platform::builtin("hp-rx2600-zx1", &Picks::new()).unwrap()
}

/// The BCM5701 with its reads on its serial path (no buffer on the card), so that its reads
/// and the doorbell share its cycle, and the sending host `sender`.
fn serial_card(nic: &NicTxParams, sender: SenderCpu) -> NicTxParams {
    NicTxParams {
        card_buffer_bytes: 0,
        sender: Some(sender),
        ..*nic
    }
}

fn host(send_call: u64, stack: u64, copy: u64, completion: u64) -> SenderCpu {
    SenderCpu {
        send_call_ns: send_call,
        stack_frame_ns: stack,
        driver_frame_ns: 0,
        copy_ps_per_byte: copy,
        tcp_segment_ns: 0,
        completion_frame_ns: completion,
        shares_interrupt_cpu: false,
    }
}

fn udp(message: u64) -> NicTxScenario {
    NicTxScenario {
        protocol: Protocol::Udp,
        message_bytes: message,
        mtu_bytes: 1500,
    }
}

fn both(
    bus: NicBus<'_>,
    nic: &NicTxParams,
    fw: &HintTable,
    sc: &NicTxScenario,
) -> (f64, f64, &'static str) {
    let paced = run(bus, nic, fw, sc).unwrap();
    let uniform = run_with(bus, nic, fw, sc, Doorbell::Uniform).unwrap();
    assert_eq!(uniform.doorbell, "uniform");
    (paced.stopped_share, uniform.stopped_share, paced.doorbell)
}

#[test]
fn a_doorbell_paced_into_the_read_splits_every_frame_and_a_uniform_one_only_some() {
    let p = zx1();
    let (bus, fw, nic) = parts(&p).unwrap();
    let sc = udp(1024);
    // Time the card's cycle, then give the host the reaction that lands mid-read.
    let probe = run_with(
        bus,
        &serial_card(nic, host(0, 0, 0, 0)),
        &fw,
        &sc,
        Doorbell::Uniform,
    )
    .unwrap();
    let mid_read = nic.frame_ns as f64 + probe.descriptor_ns + probe.frame_read_quiet_ns / 2.0;
    let card = serial_card(nic, host(0, mid_read.round() as u64, 0, 0));
    let (paced, uniform, doorbell) = both(bus, &card, &fw, &sc);
    assert_eq!(doorbell, "paced");
    assert_eq!(paced, 1.0);
    assert!(uniform > 0.0 && uniform < 1.0, "{uniform}");
    // A reaction that lands in the NIC's own work, before the reads, splits none.
    let early = serial_card(nic, host(0, nic.frame_ns / 2, 0, 0));
    assert_eq!(both(bus, &early, &fw, &sc).0, 0.0);
}

#[test]
fn where_the_host_binds_the_ring_does_not_fill_and_the_phase_stays_uniform() {
    let p = zx1();
    let (bus, fw, nic) = parts(&p).unwrap();
    // The file's host (about 10.8 us a 1 KB datagram) is slower than the card and the wire.
    let r = run(bus, nic, &fw, &udp(1024)).unwrap();
    assert_eq!((r.limit, r.doorbell), ("sender", "uniform"));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    #[test]
    fn a_paced_doorbell_meets_every_burst_or_none_and_more_often_than_a_uniform_one(
        message in 64u64..=1472,
        (send_call, stack, copy, completion) in (0u64..=3_000, 0u64..=3_000, 0u64..=1_000, 0u64..=3_000),
    ) {
        let p = zx1();
        let (bus, fw, nic) = parts(&p).unwrap();
        let card = serial_card(nic, host(send_call, stack, copy, completion));
        let (paced, uniform, doorbell) = both(bus, &card, &fw, &udp(message));
        prop_assume!(doorbell == "paced");
        prop_assert!(paced == 0.0 || paced == 1.0, "paced share {paced}");
        // The NIC's own work and its descriptor read come before the frame's read in every
        // cycle, so a uniform doorbell misses some frames' bursts.
        prop_assert!(uniform < 1.0, "uniform share {uniform}");
        if paced == 1.0 {
            prop_assert!(paced > uniform);
        }
    }
}
