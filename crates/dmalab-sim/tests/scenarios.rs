//! Scenarios: every built-in one parses and runs, runs are bit-identical, and bad fields are
//! refused with the file, the field and the valid range.

use dmalab_sim::config::scenario::{builtin_names, load, Scenario, BUILTIN};

fn small(text: &str) -> String {
    text.replace("ios = 1000000", "ios = 2000")
        .replace("transactions = 200000", "transactions = 2000")
}

#[test]
fn every_builtin_scenario_runs_deterministically() {
    for (name, text) in BUILTIN {
        let sc = Scenario::parse(name, &small(text)).unwrap();
        if builtin_names(true).contains(name) {
            let (_, a) = sc.trace().unwrap();
            assert_eq!(a, sc.trace().unwrap().1, "{name} is not deterministic");
            assert!(
                sc.run().is_err(),
                "{name}: a trace scenario has no workload"
            );
            continue;
        }
        let a = serde_json::to_string(&sc.run().unwrap()).unwrap();
        let b = serde_json::to_string(&sc.run().unwrap()).unwrap();
        assert_eq!(a, b, "{name} is not deterministic");
        assert!(load(name).is_ok());
    }
}

#[test]
fn a_run_does_not_depend_on_the_thread_it_runs_on() {
    // Threads alive at once hold different slots in the allocators' per-thread caches; where
    // a lone user's ranges land must not depend on which.
    let text = BUILTIN
        .iter()
        .find(|(n, _)| *n == "p3-segtree-deferred")
        .unwrap()
        .1;
    let sc = Scenario::parse("p3-segtree-deferred", &small(text)).unwrap();
    let here = serde_json::to_string(&sc.run().unwrap()).unwrap();
    let barrier = std::sync::Barrier::new(3);
    let runs: Vec<String> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..3)
            .map(|_| {
                s.spawn(|| {
                    barrier.wait();
                    let r = serde_json::to_string(&sc.run().unwrap()).unwrap();
                    barrier.wait();
                    r
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for r in runs {
        assert_eq!(r, here);
    }
}

#[test]
fn the_direct_window_scenario_leaves_all_memory_reachable_and_the_tce_one_does_not() {
    let run = |name: &str| {
        let text = BUILTIN.iter().find(|(n, _)| *n == name).unwrap().1;
        Scenario::parse(name, &small(text)).unwrap().run().unwrap()
    };
    let direct = run("p0-udp-rr-direct-window");
    let tce = run("p0-udp-rr-default-window");
    assert!(direct.mapper.all_memory_reachable && !tce.mapper.all_memory_reachable);
    assert!(direct.latency_mean_us < tce.latency_mean_us);
    assert!(tce.breakdown_us["server hypervisor calls"] > 0.0);
}

#[test]
fn bad_fields_name_file_field_and_range() {
    let base = "platform = \"intel-vtd-2008-server\"\n[mapping]\nallocator = \"rbtree\"\n[workload]\nkind = \"block\"\n";
    let err = Scenario::parse("x.toml", &format!("{base}queue_depth = 0\n"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("x.toml") && err.contains("workload.queue_depth") && err.contains("1..=65536"),
        "{err}"
    );
    let err = Scenario::parse("x.toml", &base.replace("rbtree", "splay"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("mapping.allocator") && err.contains("segtree"),
        "{err}"
    );
    let err = Scenario::parse("x.toml", "[mapping]\n")
        .unwrap_err()
        .to_string();
    assert!(err.contains("missing field `platform`"), "{err}");
    let err = load("no-such-scenario").unwrap_err().to_string();
    assert!(err.contains("p3-rbtree-deferred"), "{err}");
    // A platform without network costs cannot run a network workload.
    let net = base.replace("kind = \"block\"", "kind = \"udp-rr\"");
    let err = Scenario::parse("x.toml", &net)
        .unwrap()
        .run()
        .unwrap_err()
        .to_string();
    assert!(err.contains("network costs"), "{err}");
}

#[test]
fn a_scenario_may_set_the_mtu_of_a_network_workload() {
    let text = |mtu: &str| {
        format!(
            "platform = \"powerlinux-7r2\"\n[choices]\nslot = \"64bit\"\n[mapping]\n\
             translation = \"auto\"\n[workload]\nkind = \"udp-stream\"\ninstances = 1\n\
             message_bytes = 8000\nmessages = 2000\n{mtu}"
        )
    };
    let standard = Scenario::parse("a", &text("")).unwrap().run().unwrap();
    let jumbo = Scenario::parse("b", &text("mtu_bytes = 9000\n"))
        .unwrap()
        .run()
        .unwrap();
    // One 9000-byte frame instead of six 1500-byte ones per datagram: less per-frame work.
    assert!(jumbo.bits_per_s > standard.bits_per_s);
    let err = Scenario::parse("c", &text("mtu_bytes = 100000\n"))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("workload.mtu_bytes") && err.contains("576..=9000"),
        "{err}"
    );
}
