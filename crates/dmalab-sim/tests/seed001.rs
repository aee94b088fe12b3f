//! Seed 001 on the IBM p660 platform: the four published bus traces exactly, their totals, the
//! stream claims, and bit-identical results from run to run.

use dmalab_sim::bus::trace::Direction;
use dmalab_sim::claims::{costs_add_up, ids, reproduce};
use dmalab_sim::config::platform::{parse_picks, Picks, Platform, BUILTIN};
use dmalab_sim::units::BusAddr;
use dmalab_sim::workload::stream::{run, StreamScenario};

fn p660() -> Platform {
    Platform::builtin("ibm-p660-m2plus", &Picks::new()).unwrap()
}

/// The four traces of seed 001 and their golden files: what `dmalab trace` prints, totals
/// included. Set `DMALAB_BLESS=1` to rewrite the files after a deliberate model change.
const GOLDEN: [(&str, Direction, u64); 4] = [
    ("p1-tx-unaligned", Direction::Read, 0x420A8),
    ("p1-tx-aligned", Direction::Read, 0x4800),
    ("p1-rx-unaligned", Direction::Write, 0x2012),
    ("p1-rx-aligned", Direction::Write, 0xE800),
];

#[test]
fn the_four_traces_match_their_golden_files() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    for (name, direction, addr) in GOLDEN {
        let text = p660()
            .trace(direction, BusAddr(addr), 1514)
            .unwrap()
            .to_string();
        let path = dir.join(format!("{name}.txt"));
        if std::env::var_os("DMALAB_BLESS").is_some() {
            std::fs::write(&path, &text).unwrap();
        }
        let golden = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text, golden, "{name} differs from {}", path.display());
    }
}

#[test]
fn the_published_command_lists_and_totals_hold() {
    let t = p660()
        .trace(Direction::Read, BusAddr(0x420A8), 1514)
        .unwrap();
    assert_eq!(
        t.commands(),
        [
            ("MRM", 344, 0x420A8),
            ("MRM", 512, 0x42200),
            ("MRM", 512, 0x42400),
            ("MRL", 128, 0x42600),
            ("MR", 18, 0x42680)
        ]
    );
    let t = p660()
        .trace(Direction::Read, BusAddr(0x4800), 1514)
        .unwrap();
    assert_eq!(
        t.commands(),
        [
            ("MRM", 512, 0x4800),
            ("MRM", 512, 0x4A00),
            ("MRM", 490, 0x4C00)
        ]
    );
    assert_eq!(t.totals.bus_time_ps.0, 10_740_000);
    let t = p660()
        .trace(Direction::Write, BusAddr(0x2012), 1514)
        .unwrap();
    assert_eq!(
        t.commands(),
        [
            ("MWI", 494, 0x2012),
            ("MWI", 512, 0x2200),
            ("MWI", 508, 0x2400)
        ]
    );
    assert_eq!(
        (t.totals.partial_lines, t.totals.read_modify_writes),
        (2, 2)
    );
    assert_eq!(t.totals.bus_time_ps.0, 6_510_000);
    let t = p660()
        .trace(Direction::Write, BusAddr(0xE800), 1514)
        .unwrap();
    assert_eq!(
        t.commands(),
        [
            ("MWI", 512, 0xE800),
            ("MWI", 512, 0xEA00),
            ("MWI", 384, 0xEC00),
            ("MW", 106, 0xED80)
        ]
    );
    assert_eq!((t.totals.partial_lines, t.totals.bytes), (1, 1514));
}

#[test]
fn every_seed_001_claim_passes_and_says_what_was_fitted() {
    let all = ids().unwrap();
    let p1: Vec<&str> = all
        .iter()
        .map(String::as_str)
        .filter(|id| id.starts_with("P1-"))
        .collect();
    let results = reproduce(&p1).unwrap();
    for r in &results {
        assert!(
            r.passed,
            "{} {} failed: published {} modelled {}\n{}",
            r.id, r.case, r.published, r.modelled, r.breakdown
        );
    }
    let ran: Vec<&str> = results.iter().map(|r| r.id.as_str()).collect();
    for id in p1 {
        assert!(ran.contains(&id), "{id} not run");
    }
    let fitted = |id: &str, case: &str| {
        results
            .iter()
            .find(|r| r.id == id && r.case.starts_with(case))
            .unwrap()
            .fitted_here
            .clone()
    };
    assert_eq!(
        fitted("P1-TX-UNALIGNED", ""),
        ["bus.pci.read_fetch_latency_ns"]
    );
    assert_eq!(fitted("P1-TPUT", "aligned"), ["stream.host_per_send_ns"]);
    assert!(fitted("P1-TPUT", "unaligned").is_empty());
    assert!(fitted("P1-TSO", "").is_empty() && fitted("P1-FW", "").is_empty());
}

#[test]
fn the_throughput_claims_hold_for_the_seeds_reasons() {
    let p = p660();
    let linux = run(&p.bus, p.stream().unwrap(), StreamScenario::LINUX).unwrap();
    let aix = run(&p.bus, p.stream().unwrap(), StreamScenario::AIX).unwrap();
    let tso = run(
        &p.bus,
        p.stream().unwrap(),
        StreamScenario {
            tso: true,
            ..StreamScenario::AIX
        },
    )
    .unwrap();
    // Linux is held back by its five bus commands per frame; AIX by the CPU; large send by
    // the wire.
    assert_eq!(
        (linux.bottleneck, linux.data_commands_per_frame),
        ("bus", 5.0)
    );
    assert_eq!((aix.bottleneck, aix.data_commands_per_frame), ("host", 3.0));
    assert_eq!(tso.bottleneck, "wire");
    for r in [&linux, &aix, &tso] {
        assert!(costs_add_up(r));
    }
    let old =
        Platform::builtin("ibm-p660-m2plus", &parse_picks(["firmware=2001"]).unwrap()).unwrap();
    let aix_old = run(&old.bus, old.stream().unwrap(), StreamScenario::AIX).unwrap();
    assert_eq!(
        (aix_old.bottleneck, aix_old.data_commands_per_frame),
        ("bus", 7.0)
    );
}

#[test]
fn a_large_sends_descriptors_come_one_per_platform_page() {
    let tso = StreamScenario {
        tso: true,
        ..StreamScenario::AIX
    };
    let descriptor_fetches = |p: &Platform| {
        let r = run(&p.bus, p.stream().unwrap(), tso).unwrap();
        let costs = r.stages.into_iter().flat_map(|s| s.costs);
        costs
            .map(|c| c.what)
            .find(|w| w.starts_with("transmit descriptor fetches"))
            .unwrap()
    };
    // 44 frames of 1460 bytes: 16 pages of 4 KiB, or one of 64 KiB, plus two descriptors.
    assert!(descriptor_fetches(&p660()).contains("(18 per send"));
    let text = BUILTIN[0].1.replace(
        "page_bytes = { value = 4096,",
        "page_bytes = { value = 65536,",
    );
    let big_pages = Platform::parse("64k.toml", &text, &Picks::new()).unwrap();
    assert!(descriptor_fetches(&big_pages).contains("(3 per send"));
}

#[test]
fn reproduce_is_bit_identical_and_refuses_unknown_ids() {
    let a = serde_json::to_string(&reproduce(&[]).unwrap()).unwrap();
    let b = serde_json::to_string(&reproduce(&[]).unwrap()).unwrap();
    assert!(a.contains("P0-TPUT") && a.contains("P3-IOPS"));
    assert_eq!(a, b);
    let err = reproduce(&["P9-NOTHING"]).unwrap_err();
    assert!(err.to_string().contains("P1-TX-UNALIGNED"), "{err}");
}
