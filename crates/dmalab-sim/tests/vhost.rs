//! The vhost backend and its copy policies on the Xeon 8180 platform.

use dmalab_sim::claims::reproduce;
use dmalab_sim::config::platform::{Picks, Platform};
use dmalab_sim::progress::Progress;
use dmalab_sim::workload::copy::Placement;
use dmalab_sim::workload::vhost::{run, run_with, sweep, CopyPolicy, VhostScenario};
use dmalab_sim::SimError;

fn xeon() -> Platform {
    Platform::builtin("xeon-8180-cbdma", &Picks::new()).unwrap()
}

#[test]
fn the_planner_is_never_worse_than_the_better_of_cpu_only_and_the_threshold_by_1_percent() {
    let p = xeon();
    let (cpu, engine) = p.copy_costs().unwrap();
    let rows = sweep(cpu, engine, p.vhost().unwrap(), 2_000, &Progress::new()).unwrap();
    assert_eq!(rows.len(), 4 * 3 * 7);
    for r in &rows {
        assert!(r.planner_gain() >= -0.01, "{r:?}");
    }
    // And it beats the fixed thresholds somewhere (the engine in the other node, for one).
    assert!(rows.iter().any(|r| r.planner_gain() > 0.10));
}

#[test]
fn tiny_packets_stay_faster_on_the_cpu_and_runs_are_deterministic() {
    let p = xeon();
    let (cpu, engine) = p.copy_costs().unwrap();
    let v = p.vhost().unwrap();
    let sc = |policy| VhostScenario {
        packet_bytes: 1024,
        mbuf_bytes: 2048,
        placement: Placement::ENGINE_REMOTE,
        second_engine: false,
        policy,
        packets: 5_000,
    };
    let c = run(cpu, engine, v, sc(CopyPolicy::CpuOnly)).unwrap();
    let e = run(cpu, engine, v, sc(CopyPolicy::EngineOnly)).unwrap();
    assert!(c.gbit_per_s > e.gbit_per_s);
    assert_eq!(
        run(cpu, engine, v, sc(CopyPolicy::Planner)).unwrap(),
        run(cpu, engine, v, sc(CopyPolicy::Planner)).unwrap()
    );
    assert!(run(
        cpu,
        engine,
        v,
        VhostScenario {
            packets: 0,
            ..sc(CopyPolicy::CpuOnly)
        }
    )
    .is_err());
}

#[test]
fn the_mbuf_and_numa_claims_pass_and_name_their_fits() {
    let rows = reproduce(&["P2-NUMA-MEM", "P2-NUMA-CPU", "P2-MBUF4K", "P2-MBUF8K"]).unwrap();
    let get = |id: &str| rows.iter().find(|r| r.id == id).unwrap();
    assert!(get("P2-MBUF4K").passed && get("P2-MBUF8K").passed);
    assert_eq!(get("P2-MBUF4K").fitted_here, ["vhost.per_packet_ns"]);
    assert_eq!(get("P2-MBUF8K").fitted_here, ["vhost.per_packet_ns"]);
    // The guest-memory share of the per-packet work is fitted to P2-NUMA-MEM; P2-NUMA-CPU
    // then follows from the same mechanism and the fitted engine costs.
    assert!(get("P2-NUMA-MEM").passed && get("P2-NUMA-CPU").passed);
    assert_eq!(
        get("P2-NUMA-MEM").fitted_here,
        ["vhost.guest_memory_share_pct"]
    );
    assert!(get("P2-NUMA-CPU").fitted_here.is_empty());
}

#[test]
fn a_cancelled_run_stops_with_interrupted_and_a_sweep_counts_its_runs() {
    let p = xeon();
    let (cpu, engine) = p.copy_costs().unwrap();
    let sc = VhostScenario {
        packet_bytes: 4096,
        mbuf_bytes: 2048,
        placement: Placement::named("local").unwrap(),
        second_engine: true,
        policy: CopyPolicy::CpuOnly,
        packets: 1 << 20,
    };
    let progress = Progress::new();
    assert!(run_with(
        p.cpu_copy().unwrap(),
        Some(engine),
        p.vhost().unwrap(),
        sc,
        &progress
    )
    .is_ok());
    progress.cancel();
    let stopped = run_with(
        p.cpu_copy().unwrap(),
        Some(engine),
        p.vhost().unwrap(),
        sc,
        &progress,
    );
    assert!(
        matches!(stopped, Err(SimError::Interrupted { .. })),
        "{stopped:?}"
    );
    let counted = Progress::new();
    sweep(cpu, engine, p.vhost().unwrap(), 100, &counted).unwrap();
    let (done, total) = counted.get();
    assert_eq!((done, total), (total, 4 * 3 * 7 * 4));
    assert!(matches!(
        sweep(cpu, engine, p.vhost().unwrap(), 100, &progress),
        Err(SimError::Interrupted { .. })
    ));
}
