//! Seed 002's claims (P2-*) that dmalab models so far: where a CBDMA copy engine starts to beat
//! the CPU, locally and across NUMA nodes, and that short copies stay on the CPU.

use super::{fitted_to, ClaimResult};
use crate::copy::{crossover, curve, Placement};
use crate::error::{Result, SimError};
use crate::platform::{Picks, Platform};
use serde_json::json;

const XEON: &str = "xeon-8180-cbdma";

/// The ids of this seed's claims dmalab reproduces so far, in `CLAIMS.md` order.
pub(super) const IDS: &[&str] = &["P2-XOVER-LOCAL", "P2-XOVER-REMOTE", "P2-SMALL"];

/// Copy lengths are swept in cache-line steps up to 64 KiB (the seed's TSO packets).
const STEP: u64 = 64;
const MAX_LEN: u64 = 65_536;

pub(super) fn run_claim(id: &'static str) -> Result<Vec<ClaimResult>> {
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
