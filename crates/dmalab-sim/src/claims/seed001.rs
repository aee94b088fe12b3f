//! Seed 001's claims (P1-*): the IBM p660's bus traces, TCP streams, firmware and copy-break.

use super::{fitted_to, round1, round3, ClaimResult};
use crate::bus::trace::{Direction, Trace};
use crate::config::platform::{parse_picks, Picks, Platform};
use crate::error::{Result, SimError};
use crate::units::BusAddr;
use crate::workload::copybreak;
use crate::workload::stream::{run, StreamResult, StreamScenario};
use serde_json::json;

pub(super) const P660: &str = "ibm-p660-m2plus";

/// The ids of this seed's claims, in `docs/CLAIMS.md` order.
pub(super) const IDS: &[&str] = &[
    "P1-TX-UNALIGNED",
    "P1-TX-ALIGNED",
    "P1-RX-UNALIGNED",
    "P1-RX-ALIGNED",
    "P1-TPUT",
    "P1-TSO",
    "P1-FW",
    "P1-COPYBREAK",
];

pub(super) fn firmware_2001() -> Picks {
    parse_picks(["firmware=2001"]).unwrap_or_default()
}

pub(super) fn run_claim(id: &'static str) -> Result<Vec<ClaimResult>> {
    let p660 = Platform::builtin(P660, &Picks::new())?;
    Ok(match id {
        "P1-TX-UNALIGNED" => vec![trace_claim(
            &p660,
            id,
            (Direction::Read, 0x420A8),
            &[
                ("MRM", 344, 0x420A8),
                ("MRM", 512, 0x42200),
                ("MRM", 512, 0x42400),
                ("MRL", 128, 0x42600),
                ("MR", 18, 0x42680),
            ],
            Some(14.108),
            None,
        )?],
        "P1-TX-ALIGNED" => vec![trace_claim(
            &p660,
            id,
            (Direction::Read, 0x4800),
            &[
                ("MRM", 512, 0x4800),
                ("MRM", 512, 0x4A00),
                ("MRM", 490, 0x4C00),
            ],
            None,
            None,
        )?],
        "P1-RX-UNALIGNED" => vec![trace_claim(
            &p660,
            id,
            (Direction::Write, 0x2012),
            &[
                ("MWI", 494, 0x2012),
                ("MWI", 512, 0x2200),
                ("MWI", 508, 0x2400),
            ],
            Some(6.496),
            Some(2),
        )?],
        "P1-RX-ALIGNED" => vec![trace_claim(
            &p660,
            id,
            (Direction::Write, 0xE800),
            &[
                ("MWI", 512, 0xE800),
                ("MWI", 512, 0xEA00),
                ("MWI", 384, 0xEC00),
                ("MW", 106, 0xED80),
            ],
            None,
            Some(1),
        )?],
        "P1-TPUT" => vec![
            stream_claim(&p660, id, "unaligned (Linux)", StreamScenario::LINUX, 777.0)?,
            stream_claim(&p660, id, "aligned (AIX)", StreamScenario::AIX, 859.0)?,
        ],
        "P1-TSO" => vec![stream_claim(
            &p660,
            id,
            "aligned, large send on",
            StreamScenario {
                tso: true,
                ..StreamScenario::AIX
            },
            943.0,
        )?],
        "P1-FW" => vec![firmware_claim(&p660)?],
        "P1-COPYBREAK" => vec![copybreak_claim(&p660)?],
        _ => {
            return Err(SimError::UnknownClaim {
                id: id.to_string(),
                known: IDS.join(", "),
            })
        }
    })
}

fn command_list(commands: &[(&str, u64, u64)]) -> String {
    commands
        .iter()
        .map(|(c, b, a)| format!("{c} {b} @0x{a:X}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn trace_claim(
    platform: &Platform,
    id: &'static str,
    (direction, addr): (Direction, u64),
    published: &[(&str, u64, u64)],
    published_us: Option<f64>,
    published_partial: Option<u64>,
) -> Result<ClaimResult> {
    let trace: Trace = platform.trace(direction, BusAddr(addr), 1514)?;
    let modelled_commands = trace.commands();
    let commands_exact = modelled_commands == published;
    let partial_ok = published_partial.is_none_or(|n| n == trace.totals.partial_lines);
    let modelled_us = trace.totals.bus_time_ps.as_us_f64();
    let (published_v, modelled_v, unit, error, time_ok, tolerance) = match published_us {
        Some(us) => {
            let err = (modelled_us - us) / us;
            (
                json!(us),
                json!(round3(modelled_us)),
                "us",
                Some(err),
                err.abs() <= 0.10,
                "commands exact; time within 10%",
            )
        }
        None => (
            json!(command_list(published)),
            json!(command_list(&modelled_commands)),
            "commands",
            None,
            true,
            "commands exact",
        ),
    };
    let mut breakdown = trace.to_string();
    if published_us.is_some() {
        breakdown.push_str(&format!(
            "published commands: {}\n",
            command_list(published)
        ));
    }
    if let Some(n) = published_partial {
        breakdown.push_str(&format!(
            "published partial lines: {n}, modelled: {}\n",
            trace.totals.partial_lines
        ));
    }
    Ok(ClaimResult {
        id,
        case: if published_us.is_some() {
            "commands and time"
        } else {
            "commands"
        },
        platform: P660,
        published: published_v,
        modelled: modelled_v,
        unit,
        error,
        tolerance,
        passed: commands_exact && partial_ok && time_ok,
        fitted_here: fitted_to(platform, id, ""),
        breakdown,
    })
}

fn stream_claim(
    platform: &Platform,
    id: &'static str,
    case: &'static str,
    scenario: StreamScenario,
    published: f64,
) -> Result<ClaimResult> {
    let r = run(&platform.bus, platform.stream()?, scenario)?;
    let modelled = r.mbit_per_s();
    let err = (modelled - published) / published;
    Ok(ClaimResult {
        id,
        case,
        platform: P660,
        published: json!(published),
        modelled: json!(round1(modelled)),
        unit: "Mbit/s",
        error: Some(err),
        tolerance: "within 3%",
        passed: err.abs() <= 0.03,
        fitted_here: fitted_to(platform, id, case),
        breakdown: stream_breakdown(&r),
    })
}

fn firmware_claim(platform: &Platform) -> Result<ClaimResult> {
    let old = Platform::builtin(P660, &firmware_2001())?;
    let new_r = run(&platform.bus, platform.stream()?, StreamScenario::AIX)?;
    let old_r = run(&old.bus, old.stream()?, StreamScenario::AIX)?;
    let drop = new_r.mbit_per_s() - old_r.mbit_per_s();
    let breakdown = format!(
        "firmware 020910 (512-byte prefetch):\n{}firmware 2001 (256-byte prefetch):\n{}",
        stream_breakdown(&new_r),
        stream_breakdown(&old_r)
    );
    Ok(ClaimResult {
        id: "P1-FW",
        case: "aligned sender, old firmware",
        platform: P660,
        published: json!(200.0),
        modelled: json!(round1(drop)),
        unit: "Mbit/s slower",
        error: Some((drop - 200.0) / 200.0),
        tolerance: "150 to 250 Mbit/s",
        passed: (150.0..=250.0).contains(&drop),
        fitted_here: fitted_to(platform, "P1-FW", ""),
        breakdown,
    })
}

fn copybreak_claim(platform: &Platform) -> Result<ClaimResult> {
    let a = copybreak::answer(platform)?;
    let full = &a.full_frame;
    let adds_up = [&full.map, &full.copy].iter().all(|r| costs_add_up(r));
    let winner = full.winner;
    let breakdown = format!(
        "map in place (unaligned DMA + TCE map/unmap):\n{}copy into a pre-mapped aligned buffer:\n{}\
         copy wins for frames of {} to {} bytes{}; a copy costs the CPU less than a TCE map+unmap up to {} bytes\n",
        stream_breakdown(&full.map),
        stream_breakdown(&full.copy),
        a.copy_wins_bytes.0,
        a.copy_wins_bytes.1,
        if a.copy_wins_everywhere { " (every size up to the MTU)" } else { "" },
        a.cpu_crossover_bytes,
    );
    let modelled = format!(
        "{winner} wins at {} B: map {:.1} Mbit/s ({:.3} us/frame, {}-bound), copy {:.1} Mbit/s ({:.3} us/frame, {}-bound)",
        full.frame_bytes,
        full.map.mbit_per_s(),
        full.map.per_send_ps.as_us_f64(),
        full.map.bottleneck,
        full.copy.mbit_per_s(),
        full.copy.per_send_ps.as_us_f64(),
        full.copy.bottleneck
    );
    Ok(ClaimResult {
        id: "P1-COPYBREAK",
        case: "frames of 2 KB or less",
        platform: P660,
        published: json!("open question: copy or map?"),
        modelled: json!(modelled),
        unit: "answer",
        error: None,
        tolerance: "the costs add up to the modelled throughput",
        passed: adds_up,
        fitted_here: fitted_to(platform, "P1-COPYBREAK", ""),
        breakdown,
    })
}

/// Whether a stream result's bottleneck stage is the sum of its costs and the throughput is
/// the payload over that time.
pub fn costs_add_up(r: &StreamResult) -> bool {
    let Some(stage) = r.stages.iter().find(|s| s.name == r.bottleneck) else {
        return false;
    };
    let sum: u64 = stage.costs.iter().map(|c| c.per_send_ps.0).sum();
    let tput = (r.payload_bytes_per_send * 8) as f64 * 1e12 / sum as f64;
    sum == r.per_send_ps.0 && (tput - r.throughput_bits_per_s).abs() <= 1e-9 * tput
}

fn stream_breakdown(r: &StreamResult) -> String {
    let mut s = format!(
        "  {:.1} Mbit/s: {} bytes of payload per send every {:.3} us, set by the {} stage\n",
        r.mbit_per_s(),
        r.payload_bytes_per_send,
        r.per_send_ps.as_us_f64(),
        r.bottleneck
    );
    for stage in &r.stages {
        let mark = if stage.name == r.bottleneck {
            " <- bottleneck"
        } else {
            ""
        };
        s.push_str(&format!(
            "  {:<5} {:>9.3} us per send{mark}\n",
            stage.name,
            stage.per_send_ps.as_us_f64()
        ));
        for c in &stage.costs {
            s.push_str(&format!(
                "        {:>9.3} us  {}\n",
                c.per_send_ps.as_us_f64(),
                c.what
            ));
        }
    }
    s
}
