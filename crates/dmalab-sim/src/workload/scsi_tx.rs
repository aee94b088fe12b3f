//! A dual-channel SCSI controller writing to disks through a hinted PCI host bridge (seed 004
//! §8: `dd` to an MD RAID0 across both channels of an LSI 53c1010 on the HP ZX1, with the
//! bridge's hints changed one at a time, Table 6).
//!
//! dmalab's model:
//! - **A SCRIPTS engine per channel.** Each channel's SCRIPTS processor runs one command at a
//!   time: for each scatter-gather entry it reads the entry's control data from host memory (a
//!   consistent mapping: the table-indirect entry; the 53c1010's SCRIPTS themselves run from
//!   the chip's own RAM), then moves the entry's data (a streaming mapping) from host
//!   memory into its DMA FIFO; each command also reads its own control data (`[scsi_tx]
//!   command_reads` of `command_read_bytes`). Each read waits for the one before it, through
//!   the bridge ([`crate::bus::lba`]) under the hints in force, so the channel's PCI side is one
//!   serial path. The SCSI side drains the FIFO at the bus's rate beside it: a channel moves
//!   data at the slower of its PCI path and its SCSI bus.
//! - **Two channels, one PCI bus.** The channels' reads share the PCI bus: while one waits on a
//!   delayed read the other can use it, so the bus limits only by the time its data phases and
//!   commands occupy it.
//! - **The disks.** Whatever the bus and the chip allow, the disks behind them, written through
//!   MD's RAID0 and the buffer cache, take at most `array_mb_s`.
//! - The rate is the slowest of the channels together, the PCI bus and the array. Deterministic:
//!   no random draw. The driver's PIO writes (one doorbell per command) are left out, so the
//!   ordering hint has nothing to act on here.

use crate::bus::hints::{HintTable, Mapping, ReadCommand};
use crate::bus::lba::ReadContext;
use crate::bus::pci::PciBus;
use crate::bus::trace::{Direction, Trace};
use crate::bus::Bus;
use crate::config::platform::Platform;
use crate::error::{Result, SimError};
use crate::units::BusAddr;
use crate::workload::nic_tx::{single_changes, Safety};
use serde::Serialize;

pub use crate::bus::scsi_ctl::ScsiTxParams;

/// Where the model places the commands' control data (line-aligned) and their data (page-aligned).
const CONTROL_BASE: u64 = 0x10_0000;
const DATA_BASE: u64 = 0x100_0000;

/// The platform's PCI bus with its hinted bridge, and its SCSI controller's parameters, or an
/// error naming what it lacks.
pub fn parts(p: &Platform) -> Result<(&PciBus, HintTable, &ScsiTxParams)> {
    let missing = |what: &str| SimError::NotDescribed {
        platform: p.name.clone(),
        what: what.into(),
    };
    let Bus::Pci(bus) = &p.bus else {
        return Err(missing(
            "a conventional PCI bus for the SCSI controller ([bus.pci])",
        ));
    };
    let lba = p
        .hint_bridge
        .ok_or_else(|| missing("a PCI host bridge with DMA hints ([bus.pci.lba])"))?;
    let scsi = p
        .scsi_tx
        .as_ref()
        .ok_or_else(|| missing("a SCSI controller's write path ([scsi_tx])"))?;
    Ok((bus, lba.firmware_table(), scsi))
}

/// One write stream's rate and where a command's time goes.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ScsiTxRecord {
    /// The read command each kind of read goes as: a scatter-gather entry's control read, a
    /// command's other control reads (both on the consistent mapping) and a data burst (on the
    /// streaming mapping).
    pub entry_read: Option<ReadCommand>,
    /// See `entry_read`.
    pub command_read: Option<ReadCommand>,
    /// See `entry_read`.
    pub data_read: Option<ReadCommand>,
    /// Control reads per command, ns (consistent mapping, on the channel's serial path).
    pub control_ns: f64,
    /// Data reads per command, ns (streaming mapping, on the channel's serial path).
    pub data_ns: f64,
    /// The PCI bus's busy time per command, ns (data phases and commands).
    pub bus_busy_ns: f64,
    /// One channel's PCI path, MB/s.
    pub channel_pci_mb_s: f64,
    /// The channels together, each at the slower of its PCI path and its SCSI bus, MB/s.
    pub channels_mb_s: f64,
    /// The PCI bus's limit, MB/s.
    pub bus_mb_s: f64,
    /// The disks' limit, MB/s.
    pub array_mb_s: f64,
    /// What limits the stream: `pci path`, `scsi bus`, `pci bus` or `disks`.
    pub limit: &'static str,
    /// The stream's rate, MB/s (10^6 bytes a second, as `dd` and the seed report it).
    pub mb_s: f64,
}

/// The read command of a trace's first command.
fn first_read(t: &Trace) -> Option<ReadCommand> {
    t.entries.first().and_then(|e| ReadCommand::of(e.command))
}

/// The PCI bus's busy time in a trace, ns: each command's clocks from its address phase to its
/// last data phase, without the delayed reads' waits (the bus is free between retries).
fn busy_ns(bus: &PciBus, t: &Trace) -> f64 {
    let clock = bus.clock();
    let overhead = bus.params().command_overhead_clocks;
    t.entries
        .iter()
        .map(|e| {
            let phases = bus.data_phases(e.addr.0, e.bytes);
            clock.times(overhead + phases).as_ns_f64()
        })
        .sum()
}

/// The write stream through `bus` under the hints of `table`.
pub fn run(bus: &PciBus, params: &ScsiTxParams, table: &HintTable) -> Result<ScsiTxRecord> {
    let read = |mapping: Mapping, addr: u64, len: u64| {
        let ctx = ReadContext {
            mapping,
            hints: table,
            pio_writes: &[],
        };
        bus.transfer_with(Direction::Read, BusAddr(addr), len, Some(&ctx))
    };
    let entries = params.entries();
    let command = read(Mapping::Consistent, CONTROL_BASE, params.command_read_bytes)?;
    let entry = read(
        Mapping::Consistent,
        CONTROL_BASE,
        params.entry_control_bytes,
    )?;
    // An entry's data: reads of `burst_bytes` one after another; entries are page-aligned and
    // bursts a power of two, so no burst crosses a block and each is timed alike.
    let data = read(Mapping::Streaming, DATA_BASE, params.burst_bytes)?;
    let bursts = (entries * params.bursts()) as f64;
    let reads = params.command_reads as f64;
    let control_ns =
        reads * command.end_ps().as_ns_f64() + entries as f64 * entry.end_ps().as_ns_f64();
    let data_ns = bursts * data.end_ps().as_ns_f64();
    let bus_busy_ns = reads * busy_ns(bus, &command)
        + entries as f64 * busy_ns(bus, &entry)
        + bursts * busy_ns(bus, &data);
    let bytes = params.command_bytes as f64;
    // Bytes per ns are GB/s: a thousand times MB/s.
    let channel_pci_mb_s = bytes / (control_ns + data_ns) * 1000.0;
    let channel_mb_s = channel_pci_mb_s.min(params.scsi_mb_s as f64);
    let channels_mb_s = channel_mb_s * params.channels as f64;
    let bus_mb_s = bytes / bus_busy_ns * 1000.0;
    let array_mb_s = params.array_mb_s as f64;
    let channel_limit = if channel_pci_mb_s < params.scsi_mb_s as f64 {
        "pci path"
    } else {
        "scsi bus"
    };
    let (mut limit, mut mb_s) = (channel_limit, channels_mb_s);
    if bus_mb_s < mb_s {
        (limit, mb_s) = ("pci bus", bus_mb_s);
    }
    if array_mb_s < mb_s {
        (limit, mb_s) = ("disks", array_mb_s);
    }
    Ok(ScsiTxRecord {
        entry_read: first_read(&entry),
        command_read: first_read(&command),
        data_read: first_read(&data),
        control_ns,
        data_ns,
        bus_busy_ns,
        channel_pci_mb_s,
        channels_mb_s,
        bus_mb_s,
        array_mb_s,
        limit,
        mb_s,
    })
}

/// One hint changed for one (mapping, read command) and what it does to the write stream.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ScsiHintGain {
    /// The mapping whose hint changes.
    pub mapping: Mapping,
    /// The read command whose hint changes.
    pub command: ReadCommand,
    /// Which hint: `prefetch_lines`, `block_bytes`, `relaxed_ordering` or `read_current`.
    pub knob: &'static str,
    /// The hint as `NAME=VALUE`.
    pub hint: String,
    /// The stream's rate with it, MB/s.
    pub mb_s: f64,
    /// The change from the firmware's defaults, percent.
    pub gain_pct: f64,
    /// What limits the stream with it: `pci path`, `scsi bus`, `pci bus` or `disks`.
    pub limit: &'static str,
    /// Whether a driver may set it.
    pub safety: Safety,
    /// Why.
    pub why: &'static str,
}

/// The write stream under the firmware's hints and under each single change of them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ScsiHintReport {
    /// The bus the controller's reads cross.
    pub bus: String,
    /// The stream under the firmware's hints.
    pub firmware: ScsiTxRecord,
    /// Each hint value other than the firmware's, one (mapping, command) at a time.
    pub gains: Vec<ScsiHintGain>,
}

/// The write stream under `firmware`'s hints and under every single change of them (`dmalab
/// hints --workload scsi`): what each would gain or lose, what limits the stream with it and
/// whether a driver may set it.
pub fn hint_gains(
    bus: &PciBus,
    params: &ScsiTxParams,
    firmware: &HintTable,
) -> Result<ScsiHintReport> {
    let base = run(bus, params, firmware)?;
    let mut gains = Vec::new();
    for mapping in [Mapping::Consistent, Mapping::Streaming] {
        for command in ReadCommand::ALL {
            for (knob, hint, change, safety, why) in single_changes(firmware, mapping, command) {
                let mut table = *firmware;
                change.apply(&mut table, mapping)?;
                let r = run(bus, params, &table)?;
                gains.push(ScsiHintGain {
                    mapping,
                    command,
                    knob,
                    hint,
                    mb_s: r.mb_s,
                    gain_pct: (r.mb_s / base.mb_s - 1.0) * 100.0,
                    limit: r.limit,
                    safety,
                    why,
                });
            }
        }
    }
    Ok(ScsiHintReport {
        bus: bus.name(),
        firmware: base,
        gains,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bus::hints::{HintChange, ReadCommand};
    use crate::config::platform::Picks;

    fn zx1() -> Platform {
        Platform::builtin("hp-rx2600-zx1", &Picks::new()).unwrap()
    }

    fn with_mrm_depth(table: &HintTable, mapping: Mapping, depth: u64) -> HintTable {
        let mut t = *table;
        HintChange {
            commands: Some(vec![ReadCommand::Mrm]),
            prefetch_lines: Some(depth),
            ..HintChange::default()
        }
        .apply(&mut t, mapping)
        .unwrap();
        t
    }

    #[test]
    fn the_zx1_stream_is_bound_by_its_disks_and_splits_a_command_into_bursts() {
        let p = zx1();
        let (bus, fw, params) = parts(&p).unwrap();
        let r = run(bus, params, &fw).unwrap();
        assert_eq!(r.limit, "disks");
        assert_eq!(r.mb_s, params.array_mb_s as f64);
        // 64 KiB in 4 KiB entries of 512-byte bursts: 128 data reads a command.
        assert_eq!(params.entries() * params.bursts(), 128);
        // The channels' own limits lie above the disks', so no hint can raise the rate.
        assert!(r.channels_mb_s > r.mb_s && r.bus_mb_s > r.mb_s, "{r:?}");
    }

    #[test]
    fn short_control_reads_leave_the_consistent_mrm_hints_nothing_to_act_on() {
        let p = zx1();
        let (bus, fw, params) = parts(&p).unwrap();
        // Without the disks' limit the channels' PCI path shows every change of its reads.
        let open = ScsiTxParams {
            array_mb_s: 100_000,
            scsi_mb_s: 100_000,
            ..*params
        };
        let base = run(bus, &open, &fw).unwrap();
        for d in 0..=3 {
            let r = run(bus, &open, &with_mrm_depth(&fw, Mapping::Consistent, d)).unwrap();
            assert_eq!(r, base, "consistent MRM depth {d}");
        }
        // The data's bursts are streaming MRM reads: depth 0 slows them.
        let r = run(bus, &open, &with_mrm_depth(&fw, Mapping::Streaming, 0)).unwrap();
        assert!(
            r.data_ns > base.data_ns && r.mb_s < base.mb_s,
            "{r:?} {base:?}"
        );
        assert_eq!(r.control_ns, base.control_ns);
    }

    #[test]
    fn long_control_reads_lie_on_the_channels_serial_path() {
        let p = zx1();
        let (bus, fw, params) = parts(&p).unwrap();
        let long = ScsiTxParams {
            command_read_bytes: 1024,
            command_reads: 32,
            array_mb_s: 100_000,
            scsi_mb_s: 100_000,
            ..*params
        };
        let base = run(bus, &long, &fw).unwrap();
        let slow = run(bus, &long, &with_mrm_depth(&fw, Mapping::Consistent, 0)).unwrap();
        assert!(slow.control_ns > base.control_ns, "{slow:?}");
        assert_eq!(slow.data_ns, base.data_ns);
        assert!(slow.mb_s < base.mb_s);
    }

    #[test]
    fn a_bad_section_names_the_field_and_its_bound() {
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../platforms/hp-rx2600-zx1.toml"
        ))
        .unwrap();
        let dir = std::env::temp_dir().join(format!("dmalab-scsi-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let bad = dir.join("zx1-burst.toml");
        std::fs::write(
            &bad,
            text.replace(
                "burst_bytes = { value = 512,",
                "burst_bytes = { value = 8192,",
            )
            .replace("range = [256, 512]", "range = [256, 8192]"),
        )
        .unwrap();
        let err = Platform::load(bad.to_str().unwrap(), &Picks::new())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("scsi_tx.burst_bytes") && err.contains("at most sg_entry_bytes (4096)"),
            "{err}"
        );
        std::fs::remove_dir_all(&dir).ok();
    }
}

#[cfg(test)]
mod hint_tests {
    use super::*;
    use crate::config::platform::Picks;

    #[test]
    fn every_single_change_is_listed_and_the_disks_hide_them_all_on_the_zx1() {
        let p = Platform::builtin("hp-rx2600-zx1", &Picks::new()).unwrap();
        let (bus, fw, params) = parts(&p).unwrap();
        let report = hint_gains(bus, params, &fw).unwrap();
        // Per (mapping, command): 3 other depths, 3 other block sizes, ordering, read current.
        assert_eq!(report.gains.len(), 2 * 3 * 8);
        assert!(report
            .gains
            .iter()
            .all(|g| g.limit == "disks" && g.gain_pct == 0.0));
        // With the disks and the SCSI buses out of the way, the data's streaming MRM depth 0
        // loses and the consistent mapping's MRM changes reach nothing.
        let open = ScsiTxParams {
            array_mb_s: 100_000,
            scsi_mb_s: 100_000,
            ..*params
        };
        let report = hint_gains(bus, &open, &fw).unwrap();
        let gain = |m: Mapping, hint: &str| {
            report
                .gains
                .iter()
                .find(|g| g.mapping == m && g.command == ReadCommand::Mrm && g.hint == hint)
                .map(|g| g.gain_pct)
                .unwrap()
        };
        assert!(gain(Mapping::Streaming, "prefetch_lines=0") < -1.0);
        assert_eq!(gain(Mapping::Consistent, "prefetch_lines=0"), 0.0);
    }
}
