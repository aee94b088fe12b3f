//! Seed 004's claims (P4-*): the ZX1's DMA hints under netperf through the BCM5701 on PCI.

use super::spec::{ClaimSpec, Measured};
use super::{rounded, unknown};
use crate::bus::hints::{HintChange, HintTable, Mapping, ReadCommand, MAX_PREFETCH_LINES};
use crate::bus::lba::LbaParams;
use crate::bus::pci::PciBus;
use crate::bus::Bus;
use crate::config::platform::Platform;
use crate::error::{Result, SimError};
use crate::workload::nic_tx::{run, NicTxParams, NicTxRecord, NicTxScenario};
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
    /// Sweep every prefetch depth and block size against the firmware's defaults.
    #[serde(default)]
    sweep: bool,
}

/// The platform's hinted bus, bridge and NIC, or an error naming what it lacks.
fn parts(p: &Platform) -> Result<(&PciBus, LbaParams, &NicTxParams)> {
    let missing = |what: &str| SimError::NotDescribed {
        platform: p.name.clone(),
        what: what.into(),
    };
    let Bus::Pci(bus) = &p.bus else {
        return Err(missing("a PCI bus"));
    };
    let lba = bus
        .params()
        .lba
        .ok_or_else(|| missing("a PCI host bridge with DMA hints ([bus.pci.lba])"))?;
    let nic = p
        .nic_tx
        .as_ref()
        .ok_or_else(|| missing("a NIC's send path ([nic_tx])"))?;
    Ok((bus, lba, nic))
}

/// Measure one of seed 004's claims.
pub(super) fn measure(c: &ClaimSpec) -> Result<Measured> {
    let setup: Setup = c.setup()?;
    let p = c.platform()?;
    let (bus, lba, nic) = parts(&p)?;
    let firmware = lba.firmware_table();
    let (modelled, values, breakdown) = if setup.sweep {
        sweep(bus, nic, &firmware, &setup.stream)?
    } else {
        let mapping = setup.mapping.ok_or_else(|| unknown(c))?;
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
    format!(
        "  {name:<32} {:>7.2} Mbit/s  descriptor {:.0} + frame read {:.0} (quiet {:.0}, \
         {:.2} bursts stopped by PIO) + NIC's own -> NIC {:.0}; wire {:.0}; limit {}\n",
        r.mbit_s,
        r.descriptor_ns,
        r.frame_read_ns,
        r.frame_read_quiet_ns,
        r.stops_per_frame,
        r.nic_ns,
        r.wire_ns,
        r.limit,
    )
}

/// Every prefetch depth and block size of each mapping's read commands, one at a time: the
/// largest change from the firmware's defaults, percent.
fn sweep(
    bus: &PciBus,
    nic: &NicTxParams,
    firmware: &HintTable,
    sc: &NicTxScenario,
) -> Result<(serde_json::Value, Vec<f64>, String)> {
    let base = run(bus, nic, firmware, sc)?;
    let mut text = String::from("Mbit/s by hint, one (mapping, command) changed at a time:\n");
    text.push_str(&line("firmware defaults", &base));
    let mut worst: (f64, String) = (0.0, "none".into());
    for mapping in [Mapping::Consistent, Mapping::Streaming] {
        for command in ReadCommand::ALL {
            let mut changes: Vec<(String, HintChange)> = (0..=MAX_PREFETCH_LINES)
                .map(|d| {
                    let change = HintChange {
                        prefetch_lines: Some(d),
                        ..HintChange::default()
                    };
                    (format!("prefetch {d}"), change)
                })
                .collect();
            changes.extend([512, 1024, 2048, 4096].map(|b| {
                let change = HintChange {
                    block_bytes: Some(b),
                    ..HintChange::default()
                };
                (format!("block {b}"), change)
            }));
            let mut row = format!("  {mapping:?} {command:?}:");
            for (name, mut change) in changes {
                change.commands = Some(vec![command]);
                let mut table = *firmware;
                change.apply(&mut table, mapping)?;
                let r = run(bus, nic, &table, sc)?;
                let pct = (r.mbit_s / base.mbit_s - 1.0) * 100.0;
                row.push_str(&format!(" {name} {:.1}", r.mbit_s));
                if pct.abs() > worst.0.abs() {
                    worst = (pct, format!("{mapping:?} {command:?} {name}"));
                }
            }
            text.push_str(&row);
            text.push('\n');
        }
    }
    text.push_str(&format!(
        "  largest change: {:+.2}% ({})\n",
        worst.0, worst.1
    ));
    let value = worst.0.abs();
    Ok((rounded(value, 2), vec![value], text))
}
