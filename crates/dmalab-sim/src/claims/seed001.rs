//! Seed 001's claims (P1-*): the IBM p660's bus traces, TCP streams, firmware and copy-break.

use super::spec::{ClaimSpec, Measured};
use super::{rounded, unknown};
use crate::bus::trace::Trace;
use crate::config::platform::{Picks, Platform};
use crate::error::Result;
use crate::workload::copybreak;
use crate::workload::stream::{run, StreamResult, StreamScenario};
use serde::Deserialize;
use serde_json::{json, Value};

/// What seed 001's claims read from their `setup`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Setup {
    /// A timed trace's published commands (an exact trace claim publishes them as its value).
    commands: Option<String>,
    /// Partial cache lines the publication counts in a trace.
    partial_lines: Option<u64>,
    /// The stream's policies.
    stream: Option<StreamScenario>,
}

/// Measure one of seed 001's claims.
pub(super) fn measure(c: &ClaimSpec) -> Result<Measured> {
    let setup: Setup = c.setup()?;
    if !c.scenarios.is_empty() {
        return trace_claim(c, &setup);
    }
    match (c.id.as_str(), setup.stream) {
        ("P1-FW", Some(s)) => firmware_claim(c, s),
        ("P1-COPYBREAK", None) => copybreak_claim(c),
        (_, Some(s)) => stream_claim(c, s),
        _ => Err(unknown(c)),
    }
}

fn command_list(commands: &[(&'static str, u64, u64)]) -> String {
    commands
        .iter()
        .map(|(c, b, a)| format!("{c} {b} @0x{a:X}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A trace claim: the commands exact, and where the publication timed the transfer, its time
/// within the check.
fn trace_claim(c: &ClaimSpec, setup: &Setup) -> Result<Measured> {
    let sc = c.scenario(0)?;
    let platform = Platform::load(&sc.platform, &sc.choices)?;
    let t = sc.trace_task()?;
    let trace: Trace = platform.trace(t.direction, t.address, t.length_bytes)?;
    let modelled_commands = command_list(&trace.commands());
    let published_commands = match (&setup.commands, &c.published) {
        (Some(commands), _) => commands.clone(),
        (None, Value::String(commands)) => commands.clone(),
        _ => return Err(unknown(c)),
    };
    let partial_ok = setup
        .partial_lines
        .is_none_or(|n| n == trace.totals.partial_lines);
    let holds = modelled_commands == published_commands && partial_ok;
    let mut breakdown = trace.to_string();
    let (modelled, values) = if setup.commands.is_some() {
        breakdown.push_str(&format!("published commands: {published_commands}\n"));
        let us = trace.totals.bus_time_ps.as_us_f64();
        (rounded(us, 3), vec![us])
    } else {
        (json!(modelled_commands), Vec::new())
    };
    if let Some(n) = setup.partial_lines {
        breakdown.push_str(&format!(
            "published partial lines: {n}, modelled: {}\n",
            trace.totals.partial_lines
        ));
    }
    Ok(Measured {
        modelled,
        values,
        holds,
        breakdown,
        fits: platform,
    })
}

fn stream_claim(c: &ClaimSpec, scenario: StreamScenario) -> Result<Measured> {
    let platform = c.platform()?;
    let r = run(&platform.bus, platform.stream()?, scenario)?;
    let modelled = r.mbit_per_s();
    Ok(Measured {
        modelled: rounded(modelled, 1),
        values: vec![modelled],
        holds: true,
        breakdown: stream_breakdown(&r),
        fits: platform,
    })
}

/// The aligned sender's throughput on the platform as shipped against the claim's `choices`
/// (the old firmware).
fn firmware_claim(c: &ClaimSpec, scenario: StreamScenario) -> Result<Measured> {
    let platform = Platform::builtin(&c.platform, &Picks::new())?;
    let old = c.platform()?;
    let new_r = run(&platform.bus, platform.stream()?, scenario)?;
    let old_r = run(&old.bus, old.stream()?, scenario)?;
    let drop = new_r.mbit_per_s() - old_r.mbit_per_s();
    let breakdown = format!(
        "firmware 020910 (512-byte prefetch):\n{}firmware 2001 (256-byte prefetch):\n{}",
        stream_breakdown(&new_r),
        stream_breakdown(&old_r)
    );
    Ok(Measured {
        modelled: rounded(drop, 1),
        values: vec![drop],
        holds: true,
        breakdown,
        fits: platform,
    })
}

fn copybreak_claim(c: &ClaimSpec) -> Result<Measured> {
    let platform = c.platform()?;
    let a = copybreak::answer(&platform)?;
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
    Ok(Measured {
        modelled: json!(modelled),
        values: Vec::new(),
        holds: adds_up,
        breakdown,
        fits: platform,
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
