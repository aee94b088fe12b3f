//! Seed 002's copy crossovers on the Xeon 8180 platform.

use dmalab_sim::claims::reproduce;

#[test]
fn the_crossover_claims_pass_and_name_their_fits() {
    let rows = reproduce(&["P2-XOVER-LOCAL", "P2-XOVER-REMOTE", "P2-SMALL"]).unwrap();
    assert_eq!(rows.len(), 3);
    for r in &rows {
        assert!(r.passed, "{}: {}\n{}", r.id, r.modelled, r.breakdown);
    }
    assert_eq!(rows[0].fitted_here, ["dma_engine.submit_ns"]);
    assert_eq!(rows[1].fitted_here, ["dma_engine.remote_cpu_ns"]);
    // P2-SMALL follows from the two fits; nothing is fitted to it.
    assert!(rows[2].fitted_here.is_empty());
}

#[test]
fn the_dsa_preset_has_a_crossover_and_streams_long_copies_faster() {
    use dmalab_sim::config::platform::{Picks, Platform};
    use dmalab_sim::workload::copy::{crossover, Placement};
    let p = Platform::builtin("xeon-spr-dsa", &Picks::new()).unwrap();
    let (cpu, engine) = p.copy_costs().unwrap();
    let x = crossover(cpu, engine, Placement::LOCAL, 64, 65536).unwrap();
    assert!(x.is_some_and(|x| x <= 8192), "{x:?}");
    // At 64 KiB the engine's stream is limited by its rate, three times the core's.
    let len = 65536;
    assert!(2 * engine.stream_ps(len, Placement::LOCAL) < cpu.copy_ps(len, Placement::LOCAL));
}
