//! Seed 002's claims (P2-*): where a CBDMA copy engine starts to beat the CPU, locally and across
//! NUMA nodes; that short copies stay on the CPU; and the vhost backend's gains by placement and
//! mbuf size.

use super::{fitted_to, ClaimResult};
use crate::config::platform::{Picks, Platform};
use crate::error::{Result, SimError};
use crate::workload::copy::{crossover, curve, Placement};
use serde_json::json;

const XEON: &str = "xeon-8180-cbdma";

/// The ids of this seed's claims, in `docs/CLAIMS.md` order.
pub(super) const IDS: &[&str] = &[
    "P2-XOVER-LOCAL",
    "P2-XOVER-REMOTE",
    "P2-SMALL",
    "P2-NUMA-MEM",
    "P2-NUMA-CPU",
    "P2-MBUF4K",
    "P2-MBUF8K",
];

/// Copy lengths are swept in cache-line steps up to 64 KiB (the seed's TSO packets).
const STEP: u64 = 64;
const MAX_LEN: u64 = 65_536;

pub(super) fn run_claim(id: &'static str) -> Result<Vec<ClaimResult>> {
    if matches!(
        id,
        "P2-NUMA-MEM" | "P2-NUMA-CPU" | "P2-MBUF4K" | "P2-MBUF8K"
    ) {
        return vhost_claim(id);
    }
    let p = Platform::builtin(XEON, &Picks::new())?;
    let (cpu, engine) = p.copy_costs()?;
    let mut text =
        String::from("per-copy time, ns (CPU copy; engine stream = max(core share, engine)):\n");
    text.push_str("  length   cpu local  cpu remote  engine local  engine remote\n");
    for c in curve(cpu, engine, 16_384) {
        text.push_str(&format!(
            "  {:>6} {:>11.0} {:>11.0} {:>13.0} {:>14.0}\n",
            c.len_bytes, c.cpu_local_ns, c.cpu_remote_ns, c.engine_local_ns, c.engine_remote_ns
        ));
    }
    let row = |case, published, modelled, unit, passed, error| ClaimResult {
        id,
        case,
        platform: XEON,
        published,
        modelled,
        unit,
        error,
        tolerance: match id {
            "P2-XOVER-LOCAL" => "in [1024, 2048] B",
            "P2-XOVER-REMOTE" => "in [2048, 3072] B",
            _ => "holds for 64..1024 B",
        },
        passed,
        fitted_here: fitted_to(&p, id, ""),
        breakdown: text.clone(),
    };
    match id {
        "P2-XOVER-LOCAL" | "P2-XOVER-REMOTE" => {
            let (at, lo, hi, case) = if id == "P2-XOVER-LOCAL" {
                (Placement::LOCAL, 1024, 2048, "engine in the core's node")
            } else {
                (
                    Placement::ENGINE_REMOTE,
                    2048,
                    3072,
                    "engine in the other node",
                )
            };
            let x = crossover(cpu, engine, at, STEP, MAX_LEN)?;
            let passed = x.is_some_and(|x| (lo..=hi).contains(&x));
            let modelled = x.map_or(json!("never"), |x| json!(x));
            Ok(vec![row(
                case,
                json!(format!("{lo} to {hi}")),
                modelled,
                "bytes",
                passed,
                None,
            )])
        }
        "P2-SMALL" => {
            let placements = [
                ("local", Placement::LOCAL),
                ("engine remote", Placement::ENGINE_REMOTE),
                ("min remote", Placement::MIN_REMOTE),
                ("max remote", Placement::MAX_REMOTE),
            ];
            let mut losers = Vec::new();
            for (name, at) in placements {
                for len in (STEP..=1024).step_by(STEP as usize) {
                    if engine.stream_ps(len, at) < cpu.copy_ps(len, at) {
                        losers.push(format!("{name} at {len} B"));
                    }
                }
            }
            let modelled = if losers.is_empty() {
                json!("CPU faster at every length and placement")
            } else {
                json!(format!("engine faster: {}", losers.join(", ")))
            };
            let published = json!("CPU faster below 1024 B");
            Ok(vec![row(
                "every placement",
                published,
                modelled,
                "answer",
                losers.is_empty(),
                None,
            )])
        }
        _ => Err(SimError::UnknownClaim {
            id: id.to_string(),
            known: IDS.join(", "),
        }),
    }
}

/// The vhost claims: gains of the seed's policies at 64 KB packets.
pub(super) fn vhost_claim(id: &'static str) -> Result<Vec<ClaimResult>> {
    use crate::workload::vhost::{run, CopyPolicy, VhostScenario, SEED_THRESHOLD};
    let p = Platform::builtin(XEON, &Picks::new())?;
    let (cpu, engine) = p.copy_costs()?;
    let v = p.vhost()?;
    let gbps = |at: Placement, mbuf: u64, packet: u64, policy: CopyPolicy| -> Result<f64> {
        let sc = VhostScenario {
            packet_bytes: packet,
            mbuf_bytes: mbuf,
            placement: at,
            second_engine: false,
            policy,
            packets: 20_000,
        };
        Ok(run(cpu, engine, v, sc)?.gbit_per_s)
    };
    let mut text = String::new();
    let (case, published, lo, hi, gains): (&'static str, &str, f64, f64, Vec<f64>) = match id {
        "P2-MBUF4K" | "P2-MBUF8K" => {
            let mbuf = if id == "P2-MBUF4K" { 4096 } else { 8192 };
            text.push_str(&format!(
                "adaptive pipeline (2048/3072 B) against CPU copies, {mbuf}-byte mbufs, local:\n"
            ));
            let mut gains = Vec::new();
            for shift in 10..=16 {
                let packet = 1u64 << shift;
                let c = gbps(Placement::LOCAL, mbuf, packet, CopyPolicy::CpuOnly)?;
                let t = gbps(Placement::LOCAL, mbuf, packet, SEED_THRESHOLD)?;
                text.push_str(&format!(
                    "  {packet:>6} B packets: {c:6.1} -> {t:6.1} Gbit/s ({:+.1}%)\n",
                    (t / c - 1.0) * 100.0
                ));
                gains.push(t / c - 1.0);
            }
            let peak = gains.iter().copied().fold(f64::MIN, f64::max);
            let (published, lo, hi) = if mbuf == 4096 {
                ("up to +30%", 0.26, 0.34)
            } else {
                ("up to +37%", 0.33, 0.41)
            };
            ("peak gain over packet sizes", published, lo, hi, vec![peak])
        }
        "P2-NUMA-MEM" => {
            text.push_str("CBDMA copies, core and engine in node 0, 64 KB packets; memory local against remote:\n");
            let mut gains = Vec::new();
            for mbuf in [2048, 4096, 8192] {
                let local = gbps(Placement::LOCAL, mbuf, 65_536, CopyPolicy::EngineOnly)?;
                for (name, at) in [
                    ("min remote", Placement::MIN_REMOTE),
                    ("max remote", Placement::MAX_REMOTE),
                ] {
                    let r = gbps(at, mbuf, 65_536, CopyPolicy::EngineOnly)?;
                    text.push_str(&format!("  {mbuf} B mbufs: local {local:.1} against {name} {r:.1} Gbit/s ({:+.1}%)\n", (local / r - 1.0) * 100.0));
                    gains.push(local / r - 1.0);
                }
            }
            (
                "engine and memory in one node",
                "+4% to +13%",
                0.03,
                0.15,
                gains,
            )
        }
        _ => {
            text.push_str("CBDMA copies, engine and memory in one node, 64 KB packets; core local against remote:\n");
            let mut gains = Vec::new();
            for mbuf in [2048, 4096, 8192] {
                let local = gbps(Placement::LOCAL, mbuf, 65_536, CopyPolicy::EngineOnly)?;
                let r = gbps(
                    Placement::ENGINE_REMOTE,
                    mbuf,
                    65_536,
                    CopyPolicy::EngineOnly,
                )?;
                text.push_str(&format!(
                    "  {mbuf} B mbufs: {local:.1} against {r:.1} Gbit/s ({:+.1}%)\n",
                    (local / r - 1.0) * 100.0
                ));
                gains.push(local / r - 1.0);
            }
            (
                "core and engine in one node",
                "+16% to +66%",
                0.14,
                0.70,
                gains,
            )
        }
    };
    let passed = gains.iter().all(|g| (lo..=hi).contains(g));
    let shown: Vec<String> = gains
        .iter()
        .map(|g| format!("{:+.1}%", g * 100.0))
        .collect();
    Ok(vec![ClaimResult {
        id,
        case,
        platform: XEON,
        published: json!(published),
        modelled: json!(shown.join(", ")),
        unit: "% throughput",
        error: None,
        tolerance: match id {
            "P2-MBUF4K" => "peak gain 26% to 34%",
            "P2-MBUF8K" => "peak gain 33% to 41%",
            "P2-NUMA-MEM" => "every gain in [3%, 15%]",
            _ => "every gain in [14%, 70%]",
        },
        passed,
        fitted_here: fitted_to(&p, id, ""),
        breakdown: text,
    }])
}
