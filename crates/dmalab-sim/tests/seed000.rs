//! Seed 000 on the PowerLinux 7R2 pair: the window choice, the latency claim, the no-benefit
//! claims, and the network model's invariants (line rate, determinism, ACKs, window, lock).

use dmalab_sim::claims::{reproduce, seed000_mapper};
use dmalab_sim::config::platform::{Picks, Platform};
use dmalab_sim::config::workload::NetWorkload;
use dmalab_sim::iommu::Translation;
use dmalab_sim::progress::Progress;
use dmalab_sim::workload::net::run;

fn p7r2(picks: &[(&str, &str)]) -> Platform {
    let picks: Picks = picks
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Platform::builtin("powerlinux-7r2", &picks).unwrap()
}

#[test]
fn the_window_follows_slot_driver_and_partition_memory() {
    let t = |picks: &[(&str, &str)]| seed000_mapper(&p7r2(picks)).unwrap().0.translation();
    assert_eq!(t(&[]), Translation::Tce);
    assert_eq!(t(&[("slot", "64bit")]), Translation::DirectWindow);
    assert_eq!(
        t(&[("slot", "64bit"), ("partition", "3t")]),
        Translation::Tce
    );
    assert_eq!(
        t(&[("slot", "64bit"), ("driver", "no-64bit")]),
        Translation::Tce
    );
}

#[test]
fn every_seed_000_claim_passes() {
    for r in reproduce(&["P0-LAT", "P0-TPUT", "P0-2TB", "P0-DRV"]).unwrap() {
        assert!(
            r.passed,
            "{} {}: modelled {}\n{}",
            r.id, r.case, r.modelled, r.breakdown
        );
    }
}

#[test]
fn a_stream_never_beats_the_line_rate_and_runs_are_identical() {
    let p = p7r2(&[("slot", "64bit")]);
    let once = || {
        let (mut a, _) = seed000_mapper(&p).unwrap();
        let (mut b, _) = seed000_mapper(&p).unwrap();
        let w = NetWorkload::TcpStream {
            instances: 8,
            message_bytes: 65536,
            messages: 800,
        };
        run(p.net().unwrap(), &mut a, &mut b, w, &Progress::new()).unwrap()
    };
    let r = once();
    assert!(r.bits_per_s < 10e9, "{}", r.bits_per_s);
    assert!(r.bits_per_s > 9e9, "{}", r.bits_per_s);
    assert_eq!(
        serde_json::to_string(&r).unwrap(),
        serde_json::to_string(&once()).unwrap()
    );
}

#[test]
fn one_request_response_costs_the_sum_of_its_stages() {
    let p = p7r2(&[("slot", "64bit")]);
    let (mut a, _) = seed000_mapper(&p).unwrap();
    let (mut b, _) = seed000_mapper(&p).unwrap();
    let w = NetWorkload::UdpRr {
        instances: 1,
        message_bytes: 1,
        transactions: 1,
    };
    let r = run(p.net().unwrap(), &mut a, &mut b, w, &Progress::new()).unwrap();
    let c = p.net().unwrap();
    // Two one-way trips: send CPU, NIC, wire, switch, NIC, receive CPU; plus the server's turn.
    let wire_ps = (1 + 28 + c.frame_overhead_bytes) * 8 * 1_000_000_000_000 / c.link_bits_per_s;
    let one_way_ns = c.send_per_message_ns
        + c.send_per_frame_ns
        + 2 * c.nic_latency_ns
        + c.switch_latency_ns
        + c.receive_per_frame_ns
        + c.receive_per_message_ns;
    let expected = 2 * (one_way_ns * 1000 + wire_ps) + c.server_app_ns * 1000;
    assert_eq!(r.latency.mean_ps.0, expected);
    // The breakdown splits each host's CPU into its stack and driver parts.
    let client = r.client_stack_ps.0 + r.client_driver_ps.0;
    let each_side = c.send_per_message_ns
        + c.send_per_frame_ns
        + c.receive_per_frame_ns
        + c.receive_per_message_ns;
    assert_eq!(client, each_side * 1000);
    assert_eq!(r.server_stack_ps.0 + r.server_driver_ps.0, each_side * 1000);
    assert_eq!(
        r.client_stack_ps.0,
        (c.send_per_message_ns + c.receive_per_message_ns) * 1000
    );
}

#[test]
fn tso_makes_large_tcp_requests_cheaper_than_udp_and_udp_streams_stay_under_line_rate() {
    let p = p7r2(&[("slot", "64bit")]);
    let run_one = |w: NetWorkload| {
        let (mut a, _) = seed000_mapper(&p).unwrap();
        let (mut b, _) = seed000_mapper(&p).unwrap();
        run(p.net().unwrap(), &mut a, &mut b, w, &Progress::new()).unwrap()
    };
    let udp = run_one(NetWorkload::UdpRr {
        instances: 1,
        message_bytes: 16384,
        transactions: 200,
    });
    let tcp = run_one(NetWorkload::TcpRr {
        instances: 1,
        message_bytes: 16384,
        transactions: 200,
    });
    assert!(tcp.latency.mean_ps < udp.latency.mean_ps);
    let s = run_one(NetWorkload::UdpStream {
        instances: 4,
        message_bytes: 1472,
        messages: 20_000,
    });
    assert!(
        s.bits_per_s < 10e9 && s.bits_per_s > 1e9,
        "{}",
        s.bits_per_s
    );
}

fn run_on(
    p: &Platform,
    net: &dmalab_sim::config::costs::NetCosts,
    w: NetWorkload,
) -> dmalab_sim::workload::net::NetResult {
    let (mut a, _) = seed000_mapper(p).unwrap();
    let (mut b, _) = seed000_mapper(p).unwrap();
    run(net, &mut a, &mut b, w, &Progress::new()).unwrap()
}

#[test]
fn a_table_lock_makes_cores_queue_for_tce_maps_but_not_for_a_direct_window() {
    let w = NetWorkload::UdpRr {
        instances: 50,
        message_bytes: 64,
        transactions: 2000,
    };
    let pools = p7r2(&[]);
    let locked = p7r2(&[("tce_lock", "table-lock")]);
    let free = run_on(&pools, pools.net().unwrap(), w);
    let queued = run_on(&locked, locked.net().unwrap(), w);
    assert_eq!(free.server_lock_wait_ps.0, 0);
    assert!(queued.server_lock_wait_ps.0 > 0);
    assert!(queued.latency.mean_ps > free.latency.mean_ps);
    let direct = p7r2(&[("tce_lock", "table-lock"), ("slot", "64bit")]);
    let d = run_on(&direct, direct.net().unwrap(), w);
    assert_eq!(d.client_lock_wait_ps.0 + d.server_lock_wait_ps.0, 0);
}

#[test]
fn a_tcp_receiver_acks_every_second_frame_and_a_small_window_slows_the_stream() {
    let p = p7r2(&[("slot", "64bit")]);
    let net = p.net().unwrap();
    let w = NetWorkload::TcpStream {
        instances: 1,
        message_bytes: 65536,
        messages: 100,
    };
    let r = run_on(&p, net, w);
    // A TCP frame carries the MTU less 52 header bytes (IPv4 20, TCP 20, timestamps 12): 1448
    // bytes of 1500, so 46 frames and 23 ACKs per 64 KiB message.
    let payload = net.mtu_bytes - 52;
    assert_eq!(
        r.acks,
        100 * 65536_u64.div_ceil(payload) / net.ack_every_frames
    );
    let mut one = net.clone();
    one.tcp_window_bytes = 65536;
    let slow = run_on(&p, &one, w);
    assert!(
        slow.bits_per_s < r.bits_per_s * 0.9,
        "{} vs {}",
        slow.bits_per_s,
        r.bits_per_s
    );
}

#[test]
fn frames_under_the_inline_threshold_are_sent_without_a_mapping() {
    let p = p7r2(&[]);
    let hcall = p.iommu().unwrap().hcall_map_ns;
    let per_transaction = |bytes: u64| {
        let w = NetWorkload::UdpRr {
            instances: 1,
            message_bytes: bytes,
            transactions: 10,
        };
        run_on(&p, p.net().unwrap(), w).client_mapping.hcall_ps.0 / 10 / 1000 / hcall
    };
    // A 1-byte request is inlined: the client only replaces the receive buffer the response
    // filled (a map and an unmap). A 64-byte request (120-byte frame) is mapped and unmapped too.
    assert_eq!(per_transaction(1), 2);
    assert_eq!(per_transaction(64), 4);
}

#[test]
fn each_nic_moves_descriptors_frames_and_completions_over_its_link() {
    let p = p7r2(&[("slot", "64bit")]);
    let net = p.net().unwrap();
    let w = NetWorkload::UdpRr {
        instances: 1,
        message_bytes: 1024,
        transactions: 100,
    };
    let (mut a, _) = seed000_mapper(&p).unwrap();
    let (mut b, _) = seed000_mapper(&p).unwrap();
    let timed = dmalab_sim::workload::net::run_on_bus(
        net,
        &mut a,
        &mut b,
        w,
        Some(&p.bus),
        &Progress::new(),
    )
    .unwrap();
    let untimed = run_on(&p, net, w);
    assert!(timed.client_bus_ps.0 > 0 && timed.server_bus_ps.0 > 0);
    assert_eq!(untimed.client_bus_ps.0, 0);
    // Each one-way trip waits for a descriptor read, a frame read and a frame write.
    assert!(timed.latency.mean_ps > untimed.latency.mean_ps);
    // The rings and completion queues stay mapped (coherent) for the whole run.
    let rings = net.ring_entries
        * (net.tx_descriptor_bytes + net.rx_descriptor_bytes + 2 * net.completion_bytes);
    assert_eq!(a.stats().coherent_bytes, rings);
}
