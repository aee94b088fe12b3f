//! A NIC sending a stream of frames through a hinted PCI host bridge (seed 004's netperf
//! `UDP_STREAM` and `TCP_STREAM` through a BCM5701 on the HP ZX1): per frame the NIC fetches the
//! send descriptor (a consistent mapping) and the frame (a streaming mapping) through the bridge,
//! under the hints in force, while the driver's programmed-I/O writes (the send mailbox) reach
//! the bridge at some point of the NIC's cycle.
//!
//! dmalab's model:
//! - **Stages.** The NIC's serial path per frame is its own work (`frame_ns`: everything the
//!   NIC does per frame besides its two DMA reads) plus the descriptor read plus the frame read;
//!   the wire carries the frame with its preamble, FCS and gap; where the platform describes
//!   it, the sending host's CPU spends its send calls, its stack's and driver's work per frame,
//!   the copy and checksum of the payload and, for TCP, TCP's own work per segment
//!   ([`crate::bus::nic_send::SenderCpu`]). The slowest stage sets the rate. Seed 004 §5 chose
//!   `UDP_STREAM` because Linux's stack sends only what the NIC can consume, so with UDP the
//!   NIC binds; its TCP stream runs at the UDP rate, which the NIC's path and the wire (faster
//!   with full-sized segments) cannot explain and the sender's CPU can. The interrupt CPU's
//!   work runs beside the sending CPU's, or adds to it where netperf shares that CPU.
//! - **PIO writes at every phase.** Nothing ties the driver's mailbox writes to the NIC's cycle,
//!   so the model takes `PHASES` evenly spaced phases of the first write within the cycle (the
//!   others follow at equal spacing) and averages the frame read's time over them: a write that
//!   reaches the bridge while the frame's burst streams stops it when ordering is enforced and
//!   the lines fetched are fetched again ([`crate::bus::lba`]); with relaxed ordering it waits.
//!   Deterministic: no random draw.
//! - **Frames.** UDP: one datagram per message (Ethernet, IPv4 and UDP headers). TCP: the stack
//!   coalesces the stream into full-sized segments (Ethernet, IPv4, TCP with timestamps);
//!   the rate is of the payload, as netperf reports it.

use crate::bus::hints::{
    HintChange, HintTable, Mapping, ReadCommand, BLOCK_SIZES, MAX_PREFETCH_LINES,
};
use crate::bus::lba::ReadContext;
use crate::bus::pci::PciBus;
use crate::bus::pcix::{PciXBus, ALLOWABLE_DISCONNECT_BOUNDARY_BYTES as ADB};
use crate::bus::trace::{Command, Direction, Trace};
use crate::bus::Bus;
use crate::config::platform::Platform;
use crate::config::proto::{
    ETHERNET_HEADER_BYTES, IPV4_TCP_TIMESTAMP_HEADER_BYTES, IPV4_UDP_HEADER_BYTES,
};
use crate::error::{invalid_arg, Result, SimError};
use crate::units::{BusAddr, Ps};
use serde::{Deserialize, Serialize};

/// Phases of the PIO writes within the NIC's cycle that a rate is averaged over.
pub const PHASES: u64 = 64;

/// Where the model places the send ring (line-aligned) and the frames' buffers.
const RING_BASE: u64 = 0x10_0000;
const FRAME_BASE: u64 = 0x20_0000;

pub use crate::bus::nic_send::{NicTxParams, SenderCpu};

/// The transport of a stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Protocol {
    /// One datagram per message.
    Udp,
    /// The stream cut into full-sized segments.
    Tcp,
}

/// What a stream varies: the transport, the message size and the MTU.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NicTxScenario {
    /// UDP or TCP.
    pub protocol: Protocol,
    /// Bytes per send call. For TCP only range-checked: the stack cuts the stream into
    /// full-sized segments whatever the send size.
    pub message_bytes: u64,
    /// The IP MTU.
    pub mtu_bytes: u64,
}

impl NicTxScenario {
    /// Payload bytes per frame and the frame's bytes as the NIC reads it.
    pub fn frame(&self) -> Result<(u64, u64)> {
        if !(576..=9000).contains(&self.mtu_bytes) {
            return Err(invalid_arg(
                "mtu_bytes",
                self.mtu_bytes.to_string(),
                "576..=9000",
            ));
        }
        match self.protocol {
            Protocol::Udp => {
                let max = self.mtu_bytes - IPV4_UDP_HEADER_BYTES;
                if !(1..=max).contains(&self.message_bytes) {
                    return Err(invalid_arg(
                        "message_bytes",
                        self.message_bytes.to_string(),
                        format!(
                            "1..={max} (one UDP datagram per frame at MTU {})",
                            self.mtu_bytes
                        ),
                    ));
                }
                let payload = self.message_bytes;
                Ok((
                    payload,
                    payload + IPV4_UDP_HEADER_BYTES + ETHERNET_HEADER_BYTES,
                ))
            }
            Protocol::Tcp => {
                if !(1..=1 << 20).contains(&self.message_bytes) {
                    return Err(invalid_arg(
                        "message_bytes",
                        self.message_bytes.to_string(),
                        "1..=1048576",
                    ));
                }
                let mss = self.mtu_bytes - IPV4_TCP_TIMESTAMP_HEADER_BYTES;
                Ok((mss, self.mtu_bytes + ETHERNET_HEADER_BYTES))
            }
        }
    }
}

/// One stream's rate and where each frame's time goes.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NicTxRecord {
    /// Payload bytes per frame.
    pub payload_bytes: u64,
    /// Bytes the NIC reads per frame.
    pub frame_bytes: u64,
    /// The descriptor's read, ns.
    pub descriptor_ns: f64,
    /// The frame's read with no PIO write in its way, ns.
    pub frame_read_quiet_ns: f64,
    /// The frame's read averaged over the PIO writes' phases, ns.
    pub frame_read_ns: f64,
    /// Commands per frame beyond the quiet read's (averaged over the phases): the bursts the
    /// PIO writes split. A stop where the read would have disconnected anyway adds none.
    pub extra_commands_per_frame: f64,
    /// The NIC's serial time per frame, ns.
    pub nic_ns: f64,
    /// The frame's time on the wire, ns.
    pub wire_ns: f64,
    /// The sending host's CPU time per frame, ns, where the platform describes it.
    pub sender_ns: Option<f64>,
    /// `nic`, `wire` or `sender`: the slowest stage.
    pub limit: &'static str,
    /// Payload rate, Mbit/s.
    pub mbit_s: f64,
}

/// The bus a NIC's reads cross: PCI through the hinted bridge, or PCI-X, where the device's
/// split transactions carry byte counts and only the bridge's ordering hint acts.
#[derive(Clone, Copy, Debug)]
pub enum NicBus<'a> {
    /// Conventional PCI behind the hinted bridge.
    Pci(&'a PciBus),
    /// PCI-X with split transactions.
    PciX(&'a PciXBus),
}

/// A platform's NIC bus, its hinted bridge's firmware table and its NIC's send path, or an
/// error naming what it lacks.
pub fn parts(p: &Platform) -> Result<(NicBus<'_>, HintTable, &NicTxParams)> {
    let missing = |what: &str| SimError::NotDescribed {
        platform: p.name.clone(),
        what: what.into(),
    };
    let bus = match &p.bus {
        Bus::Pci(b) => NicBus::Pci(b),
        Bus::PciX(b) => NicBus::PciX(b),
        Bus::Pcie(_) => {
            return Err(missing(
                "a PCI bus with a hinted host bridge ([bus.pci.lba])",
            ))
        }
    };
    let lba = p
        .hint_bridge
        .ok_or_else(|| missing("a PCI host bridge with DMA hints ([bus.pci.lba])"))?;
    let nic = p
        .nic_tx
        .as_ref()
        .ok_or_else(|| missing("a NIC's send path ([nic_tx])"))?;
    Ok((bus, lba.firmware_table(), nic))
}

fn span_ns(t: &Trace) -> f64 {
    t.end_ps().0 as f64 / 1000.0
}

/// The stream `sc` through `bus` under the hints of `table`.
pub fn run(
    bus: NicBus<'_>,
    params: &NicTxParams,
    table: &HintTable,
    sc: &NicTxScenario,
) -> Result<NicTxRecord> {
    let (payload, frame) = sc.frame()?;
    let reads = match bus {
        NicBus::Pci(b) => reads_pci(b, params, table, frame)?,
        NicBus::PciX(b) => reads_pcix(b, params, table, frame)?,
    };
    let nic_ns = params.frame_ns as f64 + reads.descriptor_ns + reads.frame_read_ns;
    let wire_ns = wire_ns(params, frame);
    let sender_ns = params.sender.map(|s| {
        let tcp = sc.protocol == Protocol::Tcp;
        let calls = if tcp {
            payload as f64 / sc.message_bytes as f64
        } else {
            1.0
        };
        s.frame_ns(payload, calls, tcp)
    });
    let (mut limit, mut cycle) = if nic_ns >= wire_ns {
        ("nic", nic_ns)
    } else {
        ("wire", wire_ns)
    };
    if let Some(cpu) = sender_ns.filter(|&cpu| cpu > cycle) {
        (limit, cycle) = ("sender", cpu);
    }
    Ok(NicTxRecord {
        payload_bytes: payload,
        frame_bytes: frame,
        descriptor_ns: reads.descriptor_ns,
        frame_read_quiet_ns: reads.quiet_ns,
        frame_read_ns: reads.frame_read_ns,
        extra_commands_per_frame: reads.extra_commands,
        nic_ns,
        wire_ns,
        sender_ns,
        limit,
        mbit_s: (payload * 8) as f64 * 1000.0 / cycle,
    })
}

/// A frame's two reads on the NIC's serial path, ns, averaged over the PIO writes' phase.
struct Reads {
    descriptor_ns: f64,
    /// The frame's read with no PIO write in its way.
    quiet_ns: f64,
    frame_read_ns: f64,
    /// Commands the PIO writes add per frame.
    extra_commands: f64,
}

/// On PCI: reads go through the bus's hinted bridge when it has one.
fn reads_pci(bus: &PciBus, params: &NicTxParams, table: &HintTable, frame: u64) -> Result<Reads> {
    let read = |mapping: Mapping, addr: u64, len: u64, pio: &[Ps]| {
        let ctx = ReadContext {
            mapping,
            hints: table,
            pio_writes: pio,
        };
        bus.transfer_with(Direction::Read, BusAddr(addr), len, Some(&ctx))
    };
    let descriptor_ns = span_ns(&read(
        Mapping::Consistent,
        RING_BASE,
        params.descriptor_bytes,
        &[],
    )?);
    let frame_addr = FRAME_BASE + params.frame_offset_bytes;
    let quiet = read(Mapping::Streaming, frame_addr, frame, &[])?;
    let quiet_ns = span_ns(&quiet);
    let own_ns = params.frame_ns as f64 + descriptor_ns;
    let cycle_ps = ((own_ns + quiet_ns) * 1000.0).round() as u64;
    // The phases are spread over the cycle without stops (the stops lengthen it by about 1% on
    // the ZX1). The frame's read starts `own` into the cycle; a write arriving before that goes
    // on the bus between the NIC's reads and costs them nothing.
    let read_start_ps = (own_ns * 1000.0).round() as u64;
    let (mut total_ns, mut extra) = (0.0, 0.0);
    let n = params.pio_writes_per_frame;
    for phase in 0..PHASES {
        let mut pio: Vec<Ps> = (0..n)
            .map(|k| (cycle_ps * phase / PHASES + cycle_ps * k / n.max(1)) % cycle_ps.max(1))
            .filter(|&t| t >= read_start_ps)
            .map(|t| Ps(t - read_start_ps))
            .collect();
        pio.sort();
        let t = read(Mapping::Streaming, frame_addr, frame, &pio)?;
        total_ns += span_ns(&t);
        extra += t.entries.len().saturating_sub(quiet.entries.len()) as f64;
    }
    Ok(Reads {
        descriptor_ns,
        quiet_ns,
        frame_read_ns: total_ns / PHASES as f64,
        extra_commands: extra / PHASES as f64,
    })
}

/// On PCI-X the device's Memory Read Block requests carry their byte count, so the bridge
/// fetches what is asked and its prefetch depth and block size have nothing to act on (seed 004
/// §4.3, §4.4); the ZX1's hint for the burst read command (MRM's entry, which the model applies
/// to MRB, PCI-X's replacement for MRL and MRM, seed 004 §2.3.3) still orders PIO writes
/// against DMA read returns. With ordering enforced, a PIO write reaching the bridge while a
/// split completion streams before its last ADB cuts it at the next ADB: the write takes the
/// bus (its command and one data phase) and the completion resumes as a new split completion,
/// paying one more command's overhead. Nothing is fetched again: the data waits in the bridge.
/// A write arrives at a uniform phase of the frame's period (the slower of the NIC's path and
/// the wire, before cuts), so it cuts with probability the cuttable time's share of it. The
/// device's reads are all Memory Read Blocks, so only MRM's entry acts. Read current is not
/// modelled on PCI-X: seed 004 gives no fetch time for the PCI-X path to scale.
fn reads_pcix(bus: &PciXBus, params: &NicTxParams, table: &HintTable, frame: u64) -> Result<Reads> {
    let read = |addr: u64, len: u64| bus.transfer(Direction::Read, BusAddr(addr), len);
    let descriptor = read(RING_BASE, params.descriptor_bytes)?;
    let quiet = read(FRAME_BASE + params.frame_offset_bytes, frame)?;
    let (descriptor_ns, quiet_ns) = (span_ns(&descriptor), span_ns(&quiet));
    // The frame's period before any cut: the slower of the NIC's serial path and the wire.
    let period_ns = (params.frame_ns as f64 + descriptor_ns + quiet_ns).max(wire_ns(params, frame));
    let clocks = |n: u64| bus.clock().times(n).as_ns_f64();
    let overhead = bus.params().command_overhead_clocks;
    // A cut puts the PIO write (its command and one data phase) and the resumed completion's
    // command between the completion's pieces.
    let cut_ns = clocks(overhead + 1) + clocks(overhead);
    // The time within a read's split completions at which a write would cut one: their data
    // phases before the last ADB they cross (a write arriving after it lets the completion
    // finish first), and how many cuts they allow at most.
    let cuttable = |t: &Trace| -> (f64, f64) {
        let (mut ns, mut boundaries) = (0.0, 0.0);
        for e in t
            .entries
            .iter()
            .filter(|e| e.command == Command::SplitCompletion)
        {
            let (at, upto) = (e.addr.0, e.addr.0 + e.bytes);
            let last = (upto - 1) / ADB * ADB;
            if last > at {
                let data_ns = (e.end_ps.0 - e.start_ps.0) as f64 / 1000.0 - clocks(overhead);
                ns += data_ns.max(0.0) * (last - at) as f64 / e.bytes as f64;
                boundaries += ((last - at).div_ceil(ADB)) as f64;
            }
        }
        (ns, boundaries)
    };
    let writes = params.pio_writes_per_frame as f64;
    // Expected cuts of a read under `mapping`'s hint for the burst command, MRM's entry.
    let cuts = |mapping, t: &Trace| {
        if table.get(mapping, ReadCommand::Mrm).relaxed_ordering {
            0.0
        } else {
            let (ns, boundaries) = cuttable(t);
            (writes * ns / period_ns).min(boundaries)
        }
    };
    let descriptor_cuts = cuts(Mapping::Consistent, &descriptor);
    let frame_cuts = cuts(Mapping::Streaming, &quiet);
    Ok(Reads {
        descriptor_ns: descriptor_ns + descriptor_cuts * cut_ns,
        quiet_ns,
        frame_read_ns: quiet_ns + frame_cuts * cut_ns,
        extra_commands: descriptor_cuts + frame_cuts,
    })
}

/// A frame's time on the wire with its preamble, FCS and gap, ns.
fn wire_ns(params: &NicTxParams, frame: u64) -> f64 {
    ((frame + params.wire_overhead_bytes) * 8) as f64 * 1e9 / params.link_bits_per_s as f64
}

/// Whether a driver may set a hint.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Safety {
    /// It changes only performance.
    Safe,
    /// Correct only if the driver and device do not depend on what it relaxes: the driver
    /// knows, the firmware cannot (seed 004 §4).
    DriverDecides,
    /// Known to break the machine.
    Unsafe,
}

/// One hint changed for one (mapping, read command) and what it does to a stream.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HintGain {
    /// The mapping whose hint changes.
    pub mapping: Mapping,
    /// The read command whose hint changes.
    pub command: ReadCommand,
    /// Which hint: `prefetch_lines`, `block_bytes`, `relaxed_ordering` or `read_current`.
    pub knob: &'static str,
    /// The hint as `NAME=VALUE`, as `dmalab trace --hint` takes it.
    pub hint: String,
    /// The stream's rate with it, Mbit/s.
    pub mbit_s: f64,
    /// The change from the firmware's defaults, percent.
    pub gain_pct: f64,
    /// The stage that limits the stream with it: `nic`, `wire` or `sender`.
    pub limit: &'static str,
    /// Whether a driver may set it.
    pub safety: Safety,
    /// Why.
    pub why: &'static str,
}

/// A stream under the firmware's hints and under each single change of them.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HintReport {
    /// The bus the NIC's reads cross.
    pub bus: String,
    /// The stream under the firmware's hints.
    pub firmware: NicTxRecord,
    /// Each hint value other than the firmware's, one (mapping, command) at a time.
    pub gains: Vec<HintGain>,
}

/// The single changes of `firmware`'s hints for (mapping, command), with their safety.
fn single_changes(
    firmware: &HintTable,
    mapping: Mapping,
    command: ReadCommand,
) -> Vec<(&'static str, String, HintChange, Safety, &'static str)> {
    let h = firmware.get(mapping, command);
    let perf = "changes only how the bridge fetches";
    let mut out = Vec::new();
    let base = HintChange {
        commands: Some(vec![command]),
        ..HintChange::default()
    };
    for d in (0..=MAX_PREFETCH_LINES).filter(|&d| d != h.prefetch_lines) {
        let change = HintChange {
            prefetch_lines: Some(d),
            ..base.clone()
        };
        out.push((
            "prefetch_lines",
            format!("prefetch_lines={d}"),
            change,
            Safety::Safe,
            perf,
        ));
    }
    for b in BLOCK_SIZES.into_iter().filter(|&b| b != h.block_bytes) {
        let change = HintChange {
            block_bytes: Some(b),
            ..base.clone()
        };
        out.push((
            "block_bytes",
            format!("block_bytes={b}"),
            change,
            Safety::Safe,
            perf,
        ));
    }
    let ro = !h.relaxed_ordering;
    let (safety, why) = if ro {
        (
            Safety::DriverDecides,
            "DMA read data may pass the CPU's PIO writes: safe only if the device never relies \
             on a register write reaching it before the data it reads after (seed 004 4.1)",
        )
    } else {
        (Safety::Safe, "the PCI ordering rules")
    };
    let change = HintChange {
        relaxed_ordering: Some(ro),
        ..base.clone()
    };
    out.push((
        "relaxed_ordering",
        format!("relaxed_ordering={}", on_off(ro)),
        change,
        safety,
        why,
    ));
    let rc = !h.read_current;
    let (safety, why) = match (rc, mapping) {
        (false, Mapping::Consistent) => (
            Safety::Unsafe,
            "read current off on consistent mappings crashed the ZX1 (seed 004 5.4)",
        ),
        (false, Mapping::Streaming) => (
            Safety::Safe,
            "the bridge takes each line's ownership: slower, never wrong",
        ),
        (true, _) => (
            Safety::DriverDecides,
            "a read-current copy may go stale: the data must be consumed at once (seed 004 4.2)",
        ),
    };
    let change = HintChange {
        read_current: Some(rc),
        ..base
    };
    out.push((
        "read_current",
        format!("read_current={}", on_off(rc)),
        change,
        safety,
        why,
    ));
    out
}

fn on_off(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}

/// The stream `sc` under `firmware`'s hints and under every single change of them: what each
/// hint would gain or lose, and whether a driver may set it. On PCI-X only MRM's ordering hint
/// is changed: prefetch depth and block size do not apply there, read current is not modelled,
/// and every read is a Memory Read Block (see [`run`]).
pub fn hint_gains(
    bus: NicBus<'_>,
    params: &NicTxParams,
    firmware: &HintTable,
    sc: &NicTxScenario,
) -> Result<HintReport> {
    let base = run(bus, params, firmware, sc)?;
    // On PCI-X every read is a Memory Read Block, which takes MRM's entry, and only the
    // ordering hint acts there.
    let (bus_name, applies): (String, fn(&str, ReadCommand) -> bool) = match bus {
        NicBus::Pci(b) => (b.name(), |_, _| true),
        NicBus::PciX(b) => (b.name(), |knob, command| {
            knob == "relaxed_ordering" && command == ReadCommand::Mrm
        }),
    };
    let mut gains = Vec::new();
    for mapping in [Mapping::Consistent, Mapping::Streaming] {
        for command in ReadCommand::ALL {
            for (knob, hint, change, safety, why) in single_changes(firmware, mapping, command) {
                if !applies(knob, command) {
                    continue;
                }
                let mut table = *firmware;
                change.apply(&mut table, mapping)?;
                let r = run(bus, params, &table, sc)?;
                gains.push(HintGain {
                    mapping,
                    command,
                    knob,
                    hint,
                    mbit_s: r.mbit_s,
                    gain_pct: (r.mbit_s / base.mbit_s - 1.0) * 100.0,
                    limit: r.limit,
                    safety,
                    why,
                });
            }
        }
    }
    Ok(HintReport {
        bus: bus_name,
        firmware: base,
        gains,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::platform::Picks;

    fn zx1() -> (PciBus, NicTxParams, HintTable) {
        let p = Platform::builtin("hp-rx2600-zx1", &Picks::new()).unwrap();
        let (bus, table, nic) = parts(&p).unwrap();
        let NicBus::Pci(bus) = bus else {
            panic!("the ZX1's default slot is PCI")
        };
        (bus.clone(), *nic, table)
    }

    const UDP_1K: NicTxScenario = NicTxScenario {
        protocol: Protocol::Udp,
        message_bytes: 1024,
        mtu_bytes: 1500,
    };

    /// The firmware's hints with relaxed ordering on the streaming mapping's MRM reads.
    fn relaxed_mrm(firmware: &HintTable) -> HintTable {
        changed(
            firmware,
            Mapping::Streaming,
            HintChange {
                commands: Some(vec![ReadCommand::Mrm]),
                relaxed_ordering: Some(true),
                ..HintChange::default()
            },
        )
    }

    fn changed(table: &HintTable, mapping: Mapping, change: HintChange) -> HintTable {
        let mut t = *table;
        change.apply(&mut t, mapping).unwrap();
        t
    }

    #[test]
    fn frames_carry_their_headers() {
        assert_eq!(UDP_1K.frame().unwrap(), (1024, 1024 + 28 + 14));
        let tcp = NicTxScenario {
            protocol: Protocol::Tcp,
            ..UDP_1K
        };
        assert_eq!(tcp.frame().unwrap(), (1448, 1514));
        let big = NicTxScenario {
            message_bytes: 1473,
            ..UDP_1K
        };
        let err = big.frame().unwrap_err().to_string();
        assert!(
            err.contains("message_bytes") && err.contains("1..=1472"),
            "{err}"
        );
    }

    #[test]
    fn relaxing_ordering_on_the_frames_reads_removes_the_stops_and_never_slows() {
        let (bus, nic, firmware) = zx1();
        let base = run(NicBus::Pci(&bus), &nic, &firmware, &UDP_1K).unwrap();
        assert!(base.extra_commands_per_frame > 0.0, "{base:?}");
        let relaxed = relaxed_mrm(&firmware);
        let r = run(NicBus::Pci(&bus), &nic, &relaxed, &UDP_1K).unwrap();
        assert_eq!(r.extra_commands_per_frame, 0.0);
        assert!(r.mbit_s > base.mbit_s);
        assert!(r.frame_read_ns >= r.frame_read_quiet_ns);
    }

    #[test]
    fn the_senders_cpu_binds_the_tcp_stream_and_hides_the_hints_but_not_udps() {
        let (bus, mut nic, firmware) = zx1();
        let tcp = NicTxScenario {
            protocol: Protocol::Tcp,
            message_bytes: 1024,
            mtu_bytes: 1500,
        };
        let relaxed = relaxed_mrm(&firmware);
        // TCP's full-sized segments make the NIC faster per byte, so the CPU binds and no hint
        // on the bus moves the rate.
        let base = run(NicBus::Pci(&bus), &nic, &firmware, &tcp).unwrap();
        assert_eq!(base.limit, "sender", "{base:?}");
        let r = run(NicBus::Pci(&bus), &nic, &relaxed, &tcp).unwrap();
        assert_eq!(r.mbit_s, base.mbit_s);
        // UDP's datagrams cost the CPU less than the NIC's path: the NIC binds and relaxing
        // ordering still gains.
        let udp = run(NicBus::Pci(&bus), &nic, &firmware, &UDP_1K).unwrap();
        assert_eq!(udp.limit, "nic");
        assert!(udp.sender_ns.unwrap() < udp.nic_ns);
        let faster = run(NicBus::Pci(&bus), &nic, &relaxed, &UDP_1K).unwrap();
        assert!(faster.mbit_s > udp.mbit_s);
        // Without the sender the same TCP stream is bound by the wire, as before it was
        // modelled; with a faster CPU it is never slower.
        let cpu = nic.sender.take().unwrap();
        let wire = run(NicBus::Pci(&bus), &nic, &firmware, &tcp).unwrap();
        assert_eq!((wire.limit, wire.sender_ns), ("wire", None));
        nic.sender = Some(SenderCpu {
            tcp_segment_ns: cpu.tcp_segment_ns / 2,
            ..cpu
        });
        let quick = run(NicBus::Pci(&bus), &nic, &firmware, &tcp).unwrap();
        assert!(quick.mbit_s > base.mbit_s && quick.mbit_s <= wire.mbit_s);
    }

    #[test]
    fn without_pio_writes_ordering_changes_nothing() {
        let (bus, mut nic, firmware) = zx1();
        nic.pio_writes_per_frame = 0;
        let base = run(NicBus::Pci(&bus), &nic, &firmware, &UDP_1K).unwrap();
        let relaxed = changed(
            &firmware,
            Mapping::Streaming,
            HintChange {
                relaxed_ordering: Some(true),
                ..HintChange::default()
            },
        );
        assert_eq!(
            run(NicBus::Pci(&bus), &nic, &relaxed, &UDP_1K).unwrap(),
            base
        );
        assert_eq!(base.frame_read_ns, base.frame_read_quiet_ns);
    }

    #[test]
    fn the_rate_never_exceeds_the_wire_and_falls_with_less_prefetch() {
        let (bus, mut nic, firmware) = zx1();
        let mut last = f64::INFINITY;
        for d in (0..=3).rev() {
            let t = changed(
                &firmware,
                Mapping::Streaming,
                HintChange {
                    prefetch_lines: Some(d),
                    ..HintChange::default()
                },
            );
            let r = run(NicBus::Pci(&bus), &nic, &t, &UDP_1K).unwrap();
            assert!(r.mbit_s <= last + 1e-9, "depth {d}: {r:?}");
            last = r.mbit_s;
        }
        // Without the NIC's own time its two reads (under 3 us) are faster than the wire.
        nic.frame_ns = 0;
        let r = run(NicBus::Pci(&bus), &nic, &firmware, &UDP_1K).unwrap();
        assert_eq!(r.limit, "wire");
        assert!(r.nic_ns < r.wire_ns);
    }

    #[test]
    fn more_pio_writes_per_frame_stop_more_bursts_and_writes_before_the_read_cost_nothing() {
        let (bus, mut nic, firmware) = zx1();
        let one = run(NicBus::Pci(&bus), &nic, &firmware, &UDP_1K).unwrap();
        nic.pio_writes_per_frame = 4;
        let four = run(NicBus::Pci(&bus), &nic, &firmware, &UDP_1K).unwrap();
        assert!(four.extra_commands_per_frame > one.extra_commands_per_frame);
        assert!(four.frame_read_ns > one.frame_read_ns);
        // The share of phases whose write lands in the frame's read is the read's share of the
        // cycle: with the NIC's own time ten times longer, fewer writes meet the read.
        nic.pio_writes_per_frame = 1;
        nic.frame_ns *= 10;
        let slow = run(NicBus::Pci(&bus), &nic, &firmware, &UDP_1K).unwrap();
        assert!(slow.extra_commands_per_frame < one.extra_commands_per_frame);
    }

    #[test]
    fn hint_gains_change_one_hint_at_a_time_and_say_what_is_safe() {
        let (bus, nic, firmware) = zx1();
        let report = hint_gains(NicBus::Pci(&bus), &nic, &firmware, &UDP_1K).unwrap();
        // Per (mapping, command): 3 other depths, 3 other block sizes, ordering, read current.
        assert_eq!(report.gains.len(), 2 * 3 * 8);
        let find = |m: Mapping, c: ReadCommand, h: &str| {
            report
                .gains
                .iter()
                .find(|g| g.mapping == m && g.command == c && g.hint == h)
                .unwrap()
        };
        let ro = find(Mapping::Streaming, ReadCommand::Mrm, "relaxed_ordering=on");
        assert!(ro.gain_pct > 0.0);
        assert_eq!(ro.safety, Safety::DriverDecides);
        let rc = find(Mapping::Consistent, ReadCommand::Mr, "read_current=off");
        assert_eq!(rc.safety, Safety::Unsafe);
        assert!(find(Mapping::Streaming, ReadCommand::Mrm, "prefetch_lines=0").gain_pct < 0.0);
        assert!(!report.gains.iter().any(|g| g.hint == "prefetch_lines=3"));
    }

    #[test]
    fn on_pci_x_ordering_costs_an_overhead_and_nothing_is_fetched_again() {
        let picks: Picks = [("slot".to_string(), "pci-x".to_string())].into();
        let p = Platform::builtin("hp-rx2600-zx1", &picks).unwrap();
        let (bus, firmware, nic) = parts(&p).unwrap();
        let NicBus::PciX(pcix) = bus else {
            panic!("the pci-x slot puts the NIC on PCI-X")
        };
        let report = hint_gains(bus, nic, &firmware, &UDP_1K).unwrap();
        assert!(report.bus.starts_with("PCI-X"), "{}", report.bus);
        // Only MRM's ordering hint acts on PCI-X: one change per mapping.
        assert_eq!(report.gains.len(), 2);
        assert!(report
            .gains
            .iter()
            .all(|g| g.knob == "relaxed_ordering" && g.command == ReadCommand::Mrm));
        let base = &report.firmware;
        assert!(base.extra_commands_per_frame > 0.0);
        // A cut costs the write's command and data phase and the resumed completion's command,
        // no refetch; a 16-byte descriptor inside one ADB is never cut.
        let overhead = pcix.params().command_overhead_clocks;
        let cut_ns = pcix.clock().times(2 * overhead + 1).as_ns_f64();
        let cuts = base.extra_commands_per_frame;
        assert!(cuts > 0.0 && cuts < 1.0, "{cuts}");
        let added = base.frame_read_ns - base.frame_read_quiet_ns;
        assert!(
            (added - cuts * cut_ns).abs() < 1e-6,
            "{added} vs {cuts} x {cut_ns}"
        );
        let mut relaxed = firmware;
        HintChange {
            relaxed_ordering: Some(true),
            ..HintChange::default()
        }
        .apply(&mut relaxed, Mapping::Streaming)
        .unwrap();
        let r = run(bus, nic, &relaxed, &UDP_1K).unwrap();
        assert_eq!(r.frame_read_ns, r.frame_read_quiet_ns);
        let pci_gain = {
            let (pci, nic, firmware) = zx1();
            let gains = hint_gains(NicBus::Pci(&pci), &nic, &firmware, &UDP_1K).unwrap();
            let ro = gains.gains.iter().find(|g| {
                g.mapping == Mapping::Streaming
                    && g.command == ReadCommand::Mrm
                    && g.knob == "relaxed_ordering"
            });
            ro.unwrap().gain_pct
        };
        let pcix_gain = (r.mbit_s / base.mbit_s - 1.0) * 100.0;
        assert!(
            pcix_gain > 0.0 && pcix_gain < pci_gain / 4.0,
            "{pcix_gain} vs {pci_gain}"
        );
        // A 9000-byte MTU TCP stream is bound by the wire: 8948 of every 9038 bytes are payload.
        let tcp = NicTxScenario {
            protocol: Protocol::Tcp,
            message_bytes: 4096,
            mtu_bytes: 9000,
        };
        let r = run(bus, nic, &firmware, &tcp).unwrap();
        assert_eq!(r.limit, "wire");
        assert!(
            (r.mbit_s - 8948.0 / 9038.0 * 1000.0).abs() < 1e-9,
            "{}",
            r.mbit_s
        );
    }
}
