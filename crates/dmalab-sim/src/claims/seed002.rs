//! Seed 002's claims (P2-*): where a CBDMA copy engine starts to beat the CPU, locally and across
//! NUMA nodes; that short copies stay on the CPU; and the vhost backend's gains by placement and
//! mbuf size.

use super::spec::{ClaimSpec, Measured};
use super::unknown;
use crate::config::costs::{CpuCopyCosts, EngineCosts, VhostCosts};
use crate::error::Result;
use crate::workload::copy::{crossover, curve, Placement};
use crate::workload::vhost::{run, CopyPolicy, VhostScenario, SEED_THRESHOLD};
use serde::Deserialize;
use serde_json::{json, Value};

/// What seed 002's claims read from their `setup`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CopySetup {
    /// One placement (a crossover) ...
    placement: Option<String>,
    /// ... or several (a claim over every placement).
    #[serde(default)]
    placements: Vec<String>,
    /// Copy lengths swept, in steps of this many bytes ...
    step_bytes: u64,
    /// ... up to this many.
    max_bytes: u64,
}

/// What the vhost claims read from their `setup`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct VhostSetup {
    /// The mbuf sizes (each a gain to check) ...
    mbuf_bytes: Vec<u64>,
    /// ... and packet sizes (several: the peak gain is checked).
    packet_bytes: Vec<u64>,
    /// Packets per run.
    packets: u64,
    /// The placements compared against everything in the core's node (engine-only copies);
    /// none: the seed's adaptive policy against CPU copies, all local.
    #[serde(default)]
    against: Vec<String>,
}

/// A placement's name as the breakdown prints it.
fn shown(name: &str) -> String {
    name.replace('-', " ")
}

/// Measure one of seed 002's claims.
pub(super) fn measure(c: &ClaimSpec) -> Result<Measured> {
    let p = c.platform()?;
    let (cpu, engine) = p.copy_costs()?;
    let (modelled, values, holds, breakdown) = match c.id.as_str() {
        "P2-XOVER-LOCAL" | "P2-XOVER-REMOTE" => crossover_claim(c, cpu, engine)?,
        "P2-SMALL" => small_claim(c, cpu, engine)?,
        "P2-NUMA-MEM" | "P2-NUMA-CPU" | "P2-MBUF4K" | "P2-MBUF8K" => {
            vhost_claim(c, cpu, engine, p.vhost()?)?
        }
        _ => return Err(unknown(c)),
    };
    Ok(Measured {
        modelled,
        values,
        holds,
        breakdown,
        fits: p,
    })
}

/// What a claim found before its platform is attached: the modelled value, the values to
/// check, whether the qualitative part holds, and the breakdown.
type Found = (Value, Vec<f64>, bool, String);

/// The per-copy times the copy claims show, up to 16 KiB.
fn copy_table(cpu: &CpuCopyCosts, engine: &EngineCosts) -> String {
    let mut text =
        String::from("per-copy time, ns (CPU copy; engine stream = max(core share, engine)):\n");
    text.push_str("  length   cpu local  cpu remote  engine local  engine remote\n");
    for c in curve(cpu, engine, 16_384) {
        text.push_str(&format!(
            "  {:>6} {:>11.0} {:>11.0} {:>13.0} {:>14.0}\n",
            c.len_bytes, c.cpu_local_ns, c.cpu_remote_ns, c.engine_local_ns, c.engine_remote_ns
        ));
    }
    text
}

fn crossover_claim(c: &ClaimSpec, cpu: &CpuCopyCosts, engine: &EngineCosts) -> Result<Found> {
    let s: CopySetup = c.setup()?;
    let at = Placement::named(s.placement.as_deref().unwrap_or(""))?;
    let x = crossover(cpu, engine, at, s.step_bytes, s.max_bytes)?;
    let modelled = x.map_or(json!("never"), |x| json!(x));
    let values = x.map(|x| vec![x as f64]).unwrap_or_default();
    Ok((modelled, values, true, copy_table(cpu, engine)))
}

fn small_claim(c: &ClaimSpec, cpu: &CpuCopyCosts, engine: &EngineCosts) -> Result<Found> {
    let s: CopySetup = c.setup()?;
    let mut losers = Vec::new();
    for name in &s.placements {
        let at = Placement::named(name)?;
        for len in (s.step_bytes..=s.max_bytes).step_by(s.step_bytes.max(1) as usize) {
            if engine.stream_ps(len, at) < cpu.copy_ps(len, at) {
                losers.push(format!("{} at {len} B", shown(name)));
            }
        }
    }
    let modelled = if losers.is_empty() {
        json!("CPU faster at every length and placement")
    } else {
        json!(format!("engine faster: {}", losers.join(", ")))
    };
    let holds = losers.is_empty();
    Ok((modelled, Vec::new(), holds, copy_table(cpu, engine)))
}

/// The vhost claims: gains of an engine placement or of the seed's adaptive policy.
fn vhost_claim(
    c: &ClaimSpec,
    cpu: &CpuCopyCosts,
    engine: &EngineCosts,
    v: &VhostCosts,
) -> Result<Found> {
    let s: VhostSetup = c.setup()?;
    let gbps = |at: Placement, mbuf: u64, packet: u64, policy: CopyPolicy| -> Result<f64> {
        let sc = VhostScenario {
            packet_bytes: packet,
            mbuf_bytes: mbuf,
            placement: at,
            second_engine: false,
            policy,
            packets: s.packets,
        };
        Ok(run(cpu, engine, v, sc)?.gbit_per_s)
    };
    let (mbufs, packets) = (&s.mbuf_bytes, &s.packet_bytes);
    let mut text = String::new();
    let mut gains = Vec::new();
    let threshold = match SEED_THRESHOLD {
        CopyPolicy::Threshold {
            local_bytes,
            remote_bytes,
        } => format!("{local_bytes}/{remote_bytes} B"),
        other => format!("{other:?}"),
    };
    if s.against.is_empty() {
        // The adaptive pipeline against CPU copies: the peak gain over packet sizes.
        for &mbuf in mbufs {
            text.push_str(&format!(
                "adaptive pipeline ({threshold}) against CPU copies, {mbuf}-byte mbufs, local:\n"
            ));
            for &packet in packets {
                let cpu_only = gbps(Placement::LOCAL, mbuf, packet, CopyPolicy::CpuOnly)?;
                let t = gbps(Placement::LOCAL, mbuf, packet, SEED_THRESHOLD)?;
                text.push_str(&format!(
                    "  {packet:>6} B packets: {cpu_only:6.1} -> {t:6.1} Gbit/s ({:+.1}%)\n",
                    (t / cpu_only - 1.0) * 100.0
                ));
                gains.push(t / cpu_only - 1.0);
            }
        }
        let peak = gains.iter().copied().fold(f64::MIN, f64::max);
        gains = vec![peak];
    } else {
        text.push_str(
            "CBDMA copies; everything in the core's node against the placements named:\n",
        );
        for &mbuf in mbufs {
            for &packet in packets {
                let local = gbps(Placement::LOCAL, mbuf, packet, CopyPolicy::EngineOnly)?;
                for name in &s.against {
                    let r = gbps(
                        Placement::named(name)?,
                        mbuf,
                        packet,
                        CopyPolicy::EngineOnly,
                    )?;
                    text.push_str(&format!(
                        "  {mbuf} B mbufs, {packet} B packets: local {local:.1} against {} {r:.1} Gbit/s ({:+.1}%)\n",
                        shown(name),
                        (local / r - 1.0) * 100.0
                    ));
                    gains.push(local / r - 1.0);
                }
            }
        }
    }
    let shown: Vec<String> = gains
        .iter()
        .map(|g| format!("{:+.1}%", g * 100.0))
        .collect();
    let values = gains.iter().map(|g| g * 100.0).collect();
    Ok((json!(shown.join(", ")), values, true, text))
}
