//! Devices apart from hosts: every built-in device on every modern host (`HOST+DEVICE`), the
//! link trained to the lower end, a host's default device the same as naming it, and bad
//! combinations refused with the file and the reason.

use dmalab_sim::bus::memory::{Access, Cache, Home};
use dmalab_sim::bus::trace::Direction;
use dmalab_sim::bus::Bus;
use dmalab_sim::config::device::builtin_device_names;
use dmalab_sim::config::platform::{Picks, Platform};
use dmalab_sim::workload::devdma::{DeviceDma, DmaPoint, IommuMode};

/// The built-in hosts that take a device in a PCIe slot (those naming a default device).
fn hosts() -> Vec<&'static str> {
    let hosts: Vec<&str> = Platform::builtin_names()
        .into_iter()
        .filter(|n| {
            // A host with a device in its slot: its device came from a device file.
            let p = Platform::builtin(n, &Picks::new()).unwrap();
            p.device_link.is_some()
        })
        .collect();
    assert!(hosts.len() >= 3, "{hosts:?}");
    hosts
}

fn point(direction: Direction, size: u64) -> DmaPoint {
    DmaPoint {
        direction,
        size_bytes: size,
        offset_bytes: 0,
        window_bytes: 1 << 20,
        access: Access::Seq,
        memory: Home::Local,
        cache: Cache::Warm,
        iommu: IommuMode::Off,
        page_bytes: 4096,
        device_offset_bytes: 0,
        then_read: false,
        mixed: false,
    }
}

fn link_of(p: &Platform) -> (u64, u64, u64) {
    let Bus::Pcie(link) = &p.bus else {
        panic!("{} is not on PCIe", p.name)
    };
    let l = link.params();
    (l.generation, l.lanes, l.max_payload_bytes)
}

#[test]
fn every_device_runs_on_every_modern_host() {
    assert!(builtin_device_names().len() >= 4);
    for host in hosts() {
        let alone = Platform::builtin(host, &Picks::new()).unwrap();
        let (host_gen, host_lanes, host_mps) = {
            let root: toml::Table = Platform::builtin_text(host).unwrap().parse().unwrap();
            let pcie = &root["bus"]["pcie"];
            let v = |k: &str| pcie[k]["value"].as_integer().unwrap() as u64;
            (v("generation"), v("lanes"), v("max_payload_bytes"))
        };
        for dev in builtin_device_names() {
            let p = Platform::load(&format!("{host}+{dev}"), &Picks::new()).unwrap();
            assert_eq!(p.name, format!("{}+{dev}", alone.name));
            let (generation, lanes, mps) = link_of(&p);
            assert!(generation <= host_gen && lanes <= host_lanes && mps <= host_mps);
            let model = DeviceDma::new(&p).unwrap();
            for d in [Direction::Read, Direction::Write] {
                for size in [64, 4096] {
                    let r = model.measure(&point(d, size)).unwrap();
                    assert!(r.bandwidth_gbit_s > 0.0 && r.latency_ns > 0.0, "{}", p.name);
                    let raw = match &p.bus {
                        Bus::Pcie(l) => l.raw_bytes_per_s() as f64 * 8.0 / 1e9,
                        _ => unreachable!(),
                    };
                    assert!(r.bandwidth_gbit_s <= raw, "{}: {r:?}", p.name);
                }
            }
        }
    }
}

#[test]
fn a_hosts_default_device_is_the_same_as_naming_it() {
    for host in hosts() {
        let text = Platform::builtin_text(host).unwrap();
        let root: toml::Table = text.parse().unwrap();
        let dev = root["default_device"].as_str().unwrap();
        let alone = Platform::builtin(host, &Picks::new()).unwrap();
        let named = Platform::load(&format!("{host}+{dev}"), &Picks::new()).unwrap();
        assert_eq!(alone.params, named.params, "{host}");
        let p = point(Direction::Read, 256);
        let a = DeviceDma::new(&alone).unwrap().measure(&p).unwrap();
        let b = DeviceDma::new(&named).unwrap().measure(&p).unwrap();
        assert_eq!(a.bandwidth_gbit_s, b.bandwidth_gbit_s);
        assert_eq!(a.latency_ns, b.latency_ns);
    }
}

#[test]
fn a_narrow_old_root_port_trains_a_wide_new_device_down() {
    // The XL710 host's root port is Gen3 with a 256-byte MPS: a Gen4 x16 NIC runs at Gen3.
    let p = Platform::load("xeon-broadwell-2s+connectx-6dx", &Picks::new()).unwrap();
    assert_eq!(link_of(&p), (3, 16, 256));
    let on_rome = Platform::load("epyc-rome-2s+connectx-6dx", &Picks::new()).unwrap();
    assert_eq!(link_of(&on_rome), (4, 16, 512));
    // A device file from disk works as a built-in one does.
    let file = std::env::temp_dir().join("dmalab-devices-test-xl710.toml");
    std::fs::write(
        &file,
        dmalab_sim::config::device::builtin_device_text("intel-xl710").unwrap(),
    )
    .unwrap();
    let from_file = Platform::load(
        &format!("grace-2s+{}", file.to_str().unwrap()),
        &Picks::new(),
    )
    .unwrap();
    assert_eq!(link_of(&from_file), (3, 8, 256));
    assert_eq!(from_file.name, "grace-2s+intel-xl710");
}

#[test]
fn bad_combinations_name_what_is_wrong() {
    let cases = [
        (
            "xeon-broadwell-2s+no-such-device",
            "unknown device `no-such-device`",
        ),
        ("no-such-host+intel-xl710", "unknown platform"),
        ("ibm-p660-m2plus+intel-xl710", "PCIe root port"),
    ];
    for (name, needle) in cases {
        let err = Platform::load(name, &Picks::new()).unwrap_err().to_string();
        assert!(err.contains(needle), "{name}: {err}");
    }
}

#[test]
fn every_shipped_device_passes_the_datasheet_check_on_every_modern_host() {
    use dmalab_sim::workload::ratecheck::{check, Verdict};
    for host in hosts() {
        for dev in builtin_device_names() {
            let p = Platform::load(&format!("{host}+{dev}"), &Picks::new()).unwrap();
            let lines = check(&p).unwrap();
            assert!(!lines.is_empty());
            for l in &lines {
                eprintln!(
                    "{} {} {} B: need {:.2e}/s, model {:.2e}/s, {:?} ({})",
                    l.platform,
                    l.what,
                    l.size_bytes,
                    l.needed_per_s,
                    l.modelled_per_s,
                    l.verdict,
                    l.reason
                );
                assert_ne!(l.verdict, Verdict::Fail, "{l:?}");
            }
        }
    }
}

#[test]
fn a_device_without_a_rating_gets_a_note_and_a_host_without_a_device_an_error() {
    use dmalab_sim::workload::ratecheck::{check, Verdict};
    // The pcie-bench NFP-6000 states no rating: one note, no pass and no failure.
    let p = Platform::load("xeon-broadwell-2s+netronome-nfp6000", &Picks::new()).unwrap();
    let lines = check(&p).unwrap();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert_eq!(lines[0].verdict, Verdict::Unrated);
    assert_eq!(lines[0].what, "rating");
    // A host with no device at all is still refused.
    let bare = Platform::builtin("ibm-p660-m2plus", &Picks::new()).unwrap();
    let err = check(&bare).unwrap_err().to_string();
    assert!(err.contains("device rating"), "{err}");
}

#[test]
fn the_check_fails_an_engine_charged_serially() {
    use dmalab_sim::workload::ratecheck::{check, Verdict};
    // The XL710 as it was modelled before its contexts: one transfer at a time.
    let mut p = Platform::builtin("xeon-broadwell-2s", &Picks::new()).unwrap();
    let engine = p.device_dma.as_mut().unwrap();
    engine.contexts = 1;
    let lines = check(&p).unwrap();
    assert!(
        lines.iter().any(|l| l.verdict == Verdict::Fail),
        "{lines:?}"
    );
}

/// The built-in copy engines.
fn engines() -> Vec<&'static str> {
    use dmalab_sim::config::device::{builtin_device_text, device_kind, DeviceKind};
    let engines: Vec<&str> = builtin_device_names()
        .into_iter()
        .filter(|d| {
            let table: toml::Table = builtin_device_text(d).unwrap().parse().unwrap();
            device_kind(&table) == DeviceKind::CopyEngine
        })
        .collect();
    assert!(engines.len() >= 2, "{engines:?}");
    engines
}

#[test]
fn every_copy_engine_copies_on_every_modern_host() {
    use dmalab_sim::workload::synccopy::SyncCopy;
    let mut hosts = hosts();
    hosts.extend(["xeon-8180-cbdma", "xeon-spr-dsa"]);
    for host in hosts {
        for engine in engines() {
            let p = Platform::load(&format!("{host}+{engine}"), &Picks::new()).unwrap();
            assert!(p.name.ends_with(&format!("+{engine}")), "{}", p.name);
            let model = SyncCopy::new(&p).unwrap();
            let mut last = 0.0;
            for size in [64, 4096, 1 << 20] {
                let local = model.measure(size, "local").unwrap();
                let far = model.measure(size, "max-remote").unwrap();
                assert!(local.engine_ns > last, "{}: {local:?}", p.name);
                assert!(far.engine_ns >= local.engine_ns, "{}: {far:?}", p.name);
                last = local.engine_ns;
            }
        }
    }
}

#[test]
fn a_hosts_default_copy_engine_is_the_same_as_naming_it() {
    let mut seen = 0;
    for host in Platform::builtin_names() {
        let root: toml::Table = Platform::builtin_text(host).unwrap().parse().unwrap();
        let Some(engine) = root.get("default_copy_engine").and_then(|v| v.as_str()) else {
            continue;
        };
        seen += 1;
        let alone = Platform::builtin(host, &Picks::new()).unwrap();
        let named = Platform::load(&format!("{host}+{engine}"), &Picks::new()).unwrap();
        assert_eq!(alone.params, named.params, "{host}");
        assert_eq!(alone.dma_engine, named.dma_engine, "{host}");
    }
    assert!(seen >= 3);
}

#[test]
fn a_host_takes_a_device_and_an_engine_at_once_but_not_two_of_a_kind() {
    let p = Platform::load(
        "xeon-broadwell-2s+connectx-6dx+intel-dsa-spr",
        &Picks::new(),
    )
    .unwrap();
    assert_eq!(p.name, "xeon-broadwell-2s+connectx-6dx+intel-dsa-spr");
    assert_eq!(link_of(&p), (3, 16, 256));
    assert_eq!(p.dma_engine.as_ref().unwrap().channels, 4);
    // An engine alone leaves the host's own NIC in its PCIe slot.
    let q = Platform::load("xeon-broadwell-2s+intel-dsa-spr", &Picks::new()).unwrap();
    assert_eq!(link_of(&q), (3, 8, 256));
    let cases = [
        (
            "xeon-broadwell-2s+intel-cbdma-bdx+intel-dsa-spr",
            "a second copy-engine slot",
        ),
        (
            "xeon-broadwell-2s+intel-xl710+connectx-6dx",
            "a second pcie slot",
        ),
        (
            "pcie-gen3-x8-server+intel-dsa-spr",
            "the core's side of a copy engine",
        ),
    ];
    for (name, needle) in cases {
        let err = Platform::load(name, &Picks::new()).unwrap_err().to_string();
        assert!(err.contains(needle), "{name}: {err}");
    }
    // A host that states only the core's side has no engine until one is named.
    let rome = Platform::builtin("epyc-rome-2s", &Picks::new()).unwrap();
    let err = rome.copy_costs().unwrap_err().to_string();
    assert!(err.contains("copy engine"), "{err}");
    // An engine's file holds no link and only the engine's own keys.
    let text = dmalab_sim::config::device::builtin_device_text("intel-dsa-spr").unwrap();
    let with_link = format!("{text}\n[link]\nlanes = 8\n");
    let err = dmalab_sim::config::device::parse_device("d.toml", &with_link).unwrap_err();
    assert!(err.to_string().contains("`link`"), "{err}");
    let host_key = text.replace("[copy_engine]\n", "[copy_engine]\nremote_cpu_ns = 5\n");
    let err = dmalab_sim::config::device::parse_device("d.toml", &host_key).unwrap_err();
    assert!(
        err.to_string().contains("copy_engine.remote_cpu_ns"),
        "{err}"
    );
}

#[test]
fn the_check_fails_a_copy_engine_short_of_its_rating() {
    use dmalab_sim::workload::ratecheck::{check, Verdict};
    let mut p = Platform::load("xeon-spr-dsa+intel-dsa-spr", &Picks::new()).unwrap();
    let ok = check(&p).unwrap();
    assert!(
        ok.iter()
            .any(|l| l.what == "copy" && l.verdict == Verdict::Pass),
        "{ok:?}"
    );
    p.dma_engine.as_mut().unwrap().channels = 2;
    let lines = check(&p).unwrap();
    let copy = lines.iter().find(|l| l.what == "copy").unwrap();
    assert_eq!(copy.verdict, Verdict::Fail, "{copy:?}");
    assert_eq!(copy.limit, "engine channels");
}

/// The ConnectX-6 Dx's file with `extra` after its read-tag line, written to disk.
fn nic_with(name: &str, extra: &str) -> String {
    let text = dmalab_sim::config::device::builtin_device_text("connectx-6dx").unwrap();
    let mut out = String::new();
    for line in text.lines() {
        out.push_str(line);
        out.push('\n');
        if line.starts_with("max_outstanding_read_requests") {
            out.push_str(extra);
            out.push('\n');
        }
    }
    let file = std::env::temp_dir().join(format!("dmalab-devices-test-{name}.toml"));
    std::fs::write(&file, out).unwrap();
    file.to_str().unwrap().to_string()
}

#[test]
fn ten_bit_tags_need_a_requester_and_a_completer() {
    let reads = r#"ten_bit_tag_reads = { value = 768, source = "a test device", exact = true }"#;
    let able = nic_with("ten-bit", reads);
    // Rome's PCIe 4.0 root port completes 10-bit tags; Broadwell's PCIe 3.0 one states none.
    let rome = Platform::load(&format!("epyc-rome-2s+{able}"), &Picks::new()).unwrap();
    assert!(rome.ten_bit_tags.completer);
    assert_eq!(rome.ten_bit_tags.usable_reads(), Some(768));
    let bdw = Platform::load(&format!("xeon-broadwell-2s+{able}"), &Picks::new()).unwrap();
    assert_eq!(bdw.ten_bit_tags.requester_reads, Some(768));
    assert_eq!(bdw.ten_bit_tags.usable_reads(), None);
    // The shipped NIC states no 10-Bit Tag Requester, so no host gives it 10-bit tags.
    let shipped = Platform::load("epyc-rome-2s+connectx-6dx", &Picks::new()).unwrap();
    assert_eq!(shipped.ten_bit_tags.usable_reads(), None);
    // More than a 10-bit Tag field allows is refused, naming the key.
    let too_many = nic_with(
        "ten-bit-769",
        r#"ten_bit_tag_reads = { value = 769, source = "a test device", exact = true }"#,
    );
    let err = Platform::load(&format!("epyc-rome-2s+{too_many}"), &Picks::new())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("ten_bit_tag_reads") && err.contains("768"),
        "{err}"
    );
}
