//! Seed 004's claims (P4-*): the ZX1's DMA hints under netperf through the BCM5701 on PCI, and
//! through a BCM5704S port on PCI-X (the platform's `slot` choice).

use super::rounded;
use super::spec::{ClaimSpec, Measured};
use crate::bus::hints::{HintChange, HintTable, Mapping, ReadCommand};
use crate::error::{Result, SimError};
use crate::workload::nic_tx::{
    hint_gains, parts, run, HintGain, NicBus, NicTxParams, NicTxRecord, NicTxScenario,
};
use serde::Deserialize;

/// What seed 004's claims read from their `setup`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Setup {
    /// The stream netperf sends.
    stream: NicTxScenario,
    /// The mapping whose hints change ...
    mapping: Option<Mapping>,
    /// ... and its read commands given relaxed ordering (none: the firmware's defaults).
    #[serde(default)]
    relaxed: Vec<ReadCommand>,
    /// Sweep hints against the firmware's defaults and report the largest change.
    sweep: Option<Sweep>,
}

/// Which hints a sweep changes, one at a time.
#[derive(Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
enum Sweep {
    /// Every prefetch depth and block size.
    Prefetch,
    /// Every hint that applies on the bus.
    All,
}

/// Measure one of seed 004's claims.
pub(super) fn measure(c: &ClaimSpec) -> Result<Measured> {
    let setup: Setup = c.setup()?;
    let p = c.platform()?;
    let (bus, firmware, nic) = parts(&p)?;
    if setup.sweep.is_some() && (setup.mapping.is_some() || !setup.relaxed.is_empty()) {
        return Err(SimError::ScenarioSchema {
            file: c.file.to_string(),
            key: format!("{} setup.sweep", c.id),
            reason: "a sweep changes every mapping's hints: drop `mapping` and `relaxed`".into(),
        });
    }
    let (modelled, values, breakdown) = if let Some(kind) = setup.sweep {
        sweep(bus, nic, &firmware, &setup.stream, kind)?
    } else {
        let mapping = setup.mapping.ok_or_else(|| SimError::ScenarioSchema {
            file: c.file.to_string(),
            key: format!("{} setup.mapping", c.id),
            reason: "a row without `sweep` names the mapping whose hints change".into(),
        })?;
        let mut table = firmware;
        if !setup.relaxed.is_empty() {
            let change = HintChange {
                commands: Some(setup.relaxed.clone()),
                relaxed_ordering: Some(true),
                ..HintChange::default()
            };
            change.apply(&mut table, mapping)?;
        }
        let base = run(bus, nic, &firmware, &setup.stream)?;
        let r = run(bus, nic, &table, &setup.stream)?;
        let mut text = String::from("per frame (ns), averaged over the mailbox write's phase:\n");
        text.push_str(&line("firmware defaults", &base));
        text.push_str(&line(&format!("this row ({})", c.case), &r));
        (rounded(r.mbit_s, 2), vec![r.mbit_s], text)
    };
    Ok(Measured {
        modelled,
        values,
        holds: true,
        breakdown,
        fits: p,
    })
}

fn line(name: &str, r: &NicTxRecord) -> String {
    let nic = if r.card_frames >= 2 {
        format!(
            "reads ahead into the card ({} frames): NIC {:.0} (the slower of its own work and \
             its reads)",
            r.card_frames, r.nic_ns
        )
    } else {
        format!("+ NIC's own -> NIC {:.0}", r.nic_ns)
    };
    let sender = r
        .sender_ns
        .map(|s| format!("; sender {s:.0}"))
        .unwrap_or_default();
    format!(
        "  {name:<32} {:>7.2} Mbit/s  descriptor {:.0} + frame read {:.0} (quiet {:.0}, \
         {:.2} more commands for PIO writes) {nic}; wire {:.0}{sender}; limit {}\n",
        r.mbit_s,
        r.descriptor_ns,
        r.frame_read_ns,
        r.frame_read_quiet_ns,
        r.extra_commands_per_frame,
        r.wire_ns,
        r.limit,
    )
}

/// The hints of `kind` for each mapping's read commands, one at a time: the largest change from
/// the firmware's defaults, percent.
fn sweep(
    bus: NicBus<'_>,
    nic: &NicTxParams,
    firmware: &HintTable,
    sc: &NicTxScenario,
    kind: Sweep,
) -> Result<(serde_json::Value, Vec<f64>, String)> {
    let report = hint_gains(bus, nic, firmware, sc)?;
    let mut text = format!(
        "Mbit/s by hint on {}, one (mapping, command) changed at a time:\n",
        report.bus
    );
    text.push_str(&line("firmware defaults", &report.firmware));
    let mut worst: Option<&HintGain> = None;
    let mut row = String::new();
    let mut last = None;
    for g in report
        .gains
        .iter()
        .filter(|g| kind == Sweep::All || matches!(g.knob, "prefetch_lines" | "block_bytes"))
    {
        if last != Some((g.mapping, g.command)) {
            if !row.is_empty() {
                text.push_str(&row);
                text.push('\n');
            }
            row = format!("  {} {}:", g.mapping.name(), g.command.name());
            last = Some((g.mapping, g.command));
        }
        row.push_str(&format!(" {} {:.1}", g.hint, g.mbit_s));
        if worst.is_none_or(|w| g.gain_pct.abs() > w.gain_pct.abs()) {
            worst = Some(g);
        }
    }
    text.push_str(&row);
    text.push('\n');
    let Some(w) = worst else {
        return Err(SimError::NotDescribed {
            platform: format!("the NIC's bus ({})", report.bus),
            what: "a hint this sweep changes".into(),
        });
    };
    let value = w.gain_pct.abs();
    {
        text.push_str(&format!(
            "  largest change: {:+.2}% ({} {} {})\n",
            w.gain_pct,
            w.mapping.name(),
            w.command.name(),
            w.hint
        ));
    }
    Ok((rounded(value, 2), vec![value], text))
}
