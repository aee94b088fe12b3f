//! Seed 004's claims (P4-*): the ZX1's DMA hints under netperf through the BCM5701 on PCI, and
//! through a BCM5704S port on PCI-X (the platform's `slot` choice); and under `dd` through the
//! 53c1010 SCSI controller on PCI (P4-PF-SCSI).

use super::rounded;
use super::spec::{ClaimSpec, Measured};
use crate::bus::hints::{
    HintChange, HintTable, Mapping, ReadCommand, BLOCK_SIZES, MAX_PREFETCH_LINES,
};
use crate::bus::pci::PciBus;
use crate::config::platform::Platform;
use crate::error::{Result, SimError};
use crate::workload::nic_tx::{
    hint_gains, parts, run, HintGain, NicBus, NicTxParams, NicTxRecord, NicTxScenario,
};
use crate::workload::scsi_tx::{self, ScsiTxParams, ScsiTxRecord};
use serde::Deserialize;

/// What seed 004's claims read from their `setup`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Setup {
    /// The stream netperf sends (a NIC row).
    stream: Option<NicTxScenario>,
    /// The SCSI write stream's hints (a SCSI row, in place of `stream`).
    scsi: Option<ScsiSetup>,
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

/// What a SCSI row changes: one hint of one mapping, or every cell of the seed's table but the
/// consistent mapping's MRM prefetch depths.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScsiSetup {
    /// The mapping whose hints `change` changes.
    mapping: Option<Mapping>,
    /// The change, on top of the firmware's defaults.
    change: Option<HintChange>,
    /// Every other cell of Table 6, each changed alone (`"others"`).
    sweep: Option<ScsiSweep>,
}

/// The SCSI sweeps: the cells of one of the seed's tables, each changed alone.
#[derive(Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
enum ScsiSweep {
    /// Table 6: every prefetch depth and block size of every (mapping, read command), but the
    /// consistent mapping's MRM prefetch depths.
    Others,
    /// Table 5's ordering columns: relaxed ordering for each read command alone and for all
    /// three, on either mapping.
    Ordering,
}

/// Measure one of seed 004's claims.
pub(super) fn measure(c: &ClaimSpec) -> Result<Measured> {
    let setup: Setup = c.setup()?;
    let schema = |reason: &str| SimError::ScenarioSchema {
        file: c.file.to_string(),
        key: format!("{} setup", c.id),
        reason: reason.into(),
    };
    let p = c.platform()?;
    let stream = match (setup.stream, setup.scsi) {
        (Some(s), None) => s,
        (None, Some(scsi)) => {
            if setup.mapping.is_some() || !setup.relaxed.is_empty() || setup.sweep.is_some() {
                return Err(schema(
                    "a SCSI row states its hints under `scsi`: drop `mapping`, `relaxed` and `sweep`",
                ));
            }
            return measure_scsi(c, p, &scsi);
        }
        _ => return Err(schema("a row has either `stream` (a NIC row) or `scsi`")),
    };
    let (bus, firmware, nic) = parts(&p)?;
    if setup.sweep.is_some() && (setup.mapping.is_some() || !setup.relaxed.is_empty()) {
        return Err(SimError::ScenarioSchema {
            file: c.file.to_string(),
            key: format!("{} setup.sweep", c.id),
            reason: "a sweep changes every mapping's hints: drop `mapping` and `relaxed`".into(),
        });
    }
    let (modelled, values, breakdown) = if let Some(kind) = setup.sweep {
        sweep(bus, nic, &firmware, &stream, kind)?
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
        let base = run(bus, nic, &firmware, &stream)?;
        let r = run(bus, nic, &table, &stream)?;
        let mut text = String::from("per frame (ns), averaged over the mailbox write's phase:\n");
        text.push_str(&line("firmware defaults", &base));
        text.push_str(&line(&format!("this row ({})", c.case), &r));
        if let Some(published) = c.published.as_f64().filter(|&p| p > 0.0) {
            text.push_str(&needs(published, &base, &r));
        }
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

/// What the published rate asks of the stream's slowest stage, against what each stage takes
/// in this row: why the row meets its number or not.
fn needs(published: f64, base: &NicTxRecord, r: &NicTxRecord) -> String {
    let need = (r.payload_bytes * 8) as f64 * 1000.0 / published;
    let cycle = (r.payload_bytes * 8) as f64 * 1000.0 / r.mbit_s;
    let sender = r
        .sender_ns
        .map(|s| format!(", sender {s:.0}"))
        .unwrap_or_default();
    format!(
        "  the published {published} Mbit/s needs every stage within {need:.0} ns a frame; here \
         the {} binds at {cycle:.0} (NIC {:.0}, wire {:.0}{sender}), and the row's change \
         moves the NIC from {:.0} to {:.0} ns\n",
        r.limit, r.nic_ns, r.wire_ns, base.nic_ns, r.nic_ns,
    )
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

/// A SCSI row: the 53c1010's write stream under the firmware's hints with the row's change, or
/// every other cell of Table 6.
fn measure_scsi(c: &ClaimSpec, p: Platform, setup: &ScsiSetup) -> Result<Measured> {
    let (bus, firmware, params) = scsi_tx::parts(&p)?;
    let base = scsi_tx::run(bus, params, &firmware)?;
    let mut text = format!(
        "per {} KiB command on one channel (ns), and the limits (MB/s):\n",
        params.command_bytes / 1024
    );
    text.push_str(&scsi_line("firmware defaults", &base));
    let (modelled, values) = match (setup.sweep, setup.mapping, &setup.change) {
        (Some(kind), None, None) => {
            let mut values = Vec::new();
            let mut group = None;
            for (mapping, name, hint, change) in scsi_cells(kind) {
                if group.as_ref() != Some(&(mapping, name.clone())) {
                    if group.is_some() {
                        text.push('\n');
                    }
                    text.push_str(&format!("  {} {name}:", mapping.name()));
                    group = Some((mapping, name));
                }
                let mut table = firmware;
                change.apply(&mut table, mapping)?;
                let r = scsi_tx::run(bus, params, &table)?;
                text.push_str(&format!(" {hint} {:.1}", r.mb_s));
                values.push(r.mb_s);
            }
            let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            text.push_str(&format!(
                "\n  {} cells, {lo:.1} to {hi:.1} MB/s\n",
                values.len()
            ));
            (serde_json::json!(format!("{lo:.1} to {hi:.1}")), values)
        }
        (None, Some(mapping), Some(change)) => {
            let mut table = firmware;
            change.apply(&mut table, mapping)?;
            let r = scsi_tx::run(bus, params, &table)?;
            text.push_str(&scsi_line(&format!("this row ({})", c.case), &r));
            text.push_str(&scsi_bound(bus, params, &firmware, &base, mapping, change)?);
            (rounded(r.mb_s, 1), vec![r.mb_s])
        }
        _ => {
            return Err(SimError::ScenarioSchema {
                file: c.file.to_string(),
                key: format!("{} setup.scsi", c.id),
                reason: "give `mapping` and `change`, or `sweep` (\"others\" or \"ordering\") \
                         alone"
                    .into(),
            })
        }
    };
    Ok(Measured {
        modelled,
        values,
        holds: true,
        breakdown: text,
        fits: p,
    })
}

fn scsi_line(name: &str, r: &ScsiTxRecord) -> String {
    format!(
        "  {name:<32} {:>6.1} MB/s  control reads {:.0} + data reads {:.0} -> channel's PCI \
         path {:.1}; channels {:.1}, PCI bus {:.1} (busy {:.0}), disks {:.1}; limit {}\n",
        r.mb_s,
        r.control_ns,
        r.data_ns,
        r.channel_pci_mb_s,
        r.channels_mb_s,
        r.bus_mb_s,
        r.bus_busy_ns,
        r.array_mb_s,
        r.limit,
    )
}

/// Which of the controller's reads (`row`: the stream under the firmware's hints) a SCSI row's
/// change reaches, and the least rate it could give: the change made on both mappings (the data's bursts under it too), with the two
/// channels' reads one after another on one path, the most the bridge could make of it.
fn scsi_bound(
    bus: &PciBus,
    params: &ScsiTxParams,
    firmware: &HintTable,
    row: &ScsiTxRecord,
    mapping: Mapping,
    change: &HintChange,
) -> Result<String> {
    let name = |r: Option<ReadCommand>| r.map_or("none", ReadCommand::name);
    let mut text = format!(
        "  per command: {} control reads of {} bytes as {} and {} table entries of {} bytes as \
         {} (consistent), {} data bursts of {} bytes as {} (streaming)\n",
        params.command_reads,
        params.command_read_bytes,
        name(row.command_read),
        params.entries(),
        params.entry_control_bytes,
        name(row.entry_read),
        params.entries() * params.bursts(),
        params.burst_bytes,
        name(row.data_read),
    );
    let used = [
        (Mapping::Consistent, row.command_read),
        (Mapping::Consistent, row.entry_read),
        (Mapping::Streaming, row.data_read),
    ];
    let changed = change.commands.as_deref().unwrap_or(&ReadCommand::ALL);
    let acts = used
        .iter()
        .any(|&(m, r)| m == mapping && r.is_some_and(|r| changed.contains(&r)));
    if !acts {
        text.push_str(&format!(
            "  this row's change ({} {}) reaches none of them\n",
            mapping.name(),
            changed
                .iter()
                .map(|c| c.name())
                .collect::<Vec<_>>()
                .join(", "),
        ));
    }
    let mut both = *firmware;
    change.apply(&mut both, Mapping::Consistent)?;
    change.apply(&mut both, Mapping::Streaming)?;
    let worst = scsi_tx::run(bus, params, &both)?;
    let serial = worst.channel_pci_mb_s.min(worst.array_mb_s);
    text.push_str(&format!(
        "  least this change could give: {serial:.1} MB/s, made on both mappings ({:.0} ns of \
         data reads a command) with both channels' reads on one serial path\n",
        worst.data_ns,
    ));
    Ok(text)
}

/// The cells of a SCSI sweep: (mapping, the row's name, the cell's name, the change).
fn scsi_cells(kind: ScsiSweep) -> Vec<(Mapping, String, String, HintChange)> {
    let mut cells = Vec::new();
    for mapping in [Mapping::Consistent, Mapping::Streaming] {
        match kind {
            ScsiSweep::Others => {
                for command in ReadCommand::ALL {
                    let skip_depths = mapping == Mapping::Consistent && command == ReadCommand::Mrm;
                    let depths = (0..=MAX_PREFETCH_LINES)
                        .filter(|_| !skip_depths)
                        .map(|d| (format!("depth {d}"), Some(d), None));
                    let blocks = BLOCK_SIZES
                        .iter()
                        .map(|&b| (format!("block {b}"), None, Some(b)));
                    for (hint, prefetch_lines, block_bytes) in depths.chain(blocks) {
                        let change = HintChange {
                            commands: Some(vec![command]),
                            prefetch_lines,
                            block_bytes,
                            ..HintChange::default()
                        };
                        cells.push((mapping, command.name().to_string(), hint, change));
                    }
                }
            }
            ScsiSweep::Ordering => {
                let each = ReadCommand::ALL.map(|c| (c.name().to_string(), Some(vec![c])));
                for (hint, commands) in each.into_iter().chain([("all".to_string(), None)]) {
                    let change = HintChange {
                        commands,
                        relaxed_ordering: Some(true),
                        ..HintChange::default()
                    };
                    cells.push((mapping, "relaxed ordering".to_string(), hint, change));
                }
            }
        }
    }
    cells
}
