//! A NIC sending a stream of frames through a hinted PCI host bridge (seed 004's netperf
//! `UDP_STREAM` and `TCP_STREAM` through a BCM5701 on the HP ZX1): per frame the NIC fetches the
//! send descriptor (a consistent mapping) and the frame (a streaming mapping) through the bridge,
//! under the hints in force, while the driver's programmed-I/O writes (the send mailbox) reach
//! the bridge at some point of the NIC's cycle.
//!
//! dmalab's model:
//! - **Stages.** The NIC's reads of a frame (its send descriptor, then the frame) and its own
//!   work per frame (`frame_ns`: everything the NIC does per frame besides its two DMA reads);
//!   the wire, which carries the frame with its preamble, FCS and gap; and, where the platform
//!   describes it, the sending host's CPU, which spends its send calls, its stack's and
//!   driver's work per frame, the copy and checksum of the payload and, for TCP, TCP's own work
//!   per segment ([`crate::bus::nic_send::SenderCpu`]). The slowest stage sets the rate. The
//!   interrupt CPU's work runs beside the sending CPU's, or adds to it where netperf shares
//!   that CPU.
//! - **The card's buffer.** A NIC that reads frames into its own memory ahead of the MAC
//!   (`card_buffer_bytes`, the BCM5701's 96 KiB mbuf pool) reads one frame while it sends
//!   another, so its reads are a stage of their own, beside its own work: they bind only when
//!   they are the slowest stage, and until then no hint on the bus moves the rate (seed 004
//!   5.2: "I'm measuring what the card is buffering, not PCI bus utilization"). A card whose
//!   buffer holds less than two frames has its reads on its serial path, after its own work.
//! - **PIO writes at every phase.** Nothing ties the driver's mailbox writes to the NIC's cycle,
//!   so the model takes `PHASES` evenly spaced phases of the first write within the cycle (the
//!   others follow at equal spacing) and averages the frame read's time over them: a write that
//!   reaches the bridge while the frame's burst streams stops it when ordering is enforced and
//!   the lines fetched are fetched again ([`crate::bus::lba`]); with relaxed ordering it waits.
//!   The cycle is the NIC's serial path where its reads lie on it, and the stream's period (its
//!   slowest stage) where the card reads ahead. Deterministic: no random draw.
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
    /// The NIC's time per frame, ns: its own work plus its two reads where they lie on its
    /// serial path, or the slower of the two where the card reads ahead.
    pub nic_ns: f64,
    /// Whole frames the card's buffer holds; two or more and the card reads ahead.
    pub card_frames: u64,
    /// The frame's time on the wire, ns.
    pub wire_ns: f64,
    /// The sending host's CPU time per frame, ns, where the platform describes it.
    pub sender_ns: Option<f64>,
    /// The slowest stage: `bus` (the card's reads, where it reads ahead), `nic` (its own work,
    /// or its serial path with its reads on it), `wire` or `sender`.
    pub limit: &'static str,
    /// When the doorbell reaches the bridge: `paced` (by completions, the send ring full) or
    /// `uniform` (any phase of the NIC's cycle alike).
    pub doorbell: &'static str,
    /// The share of frames whose read a PIO write splits: 0 or 1 when paced (every frame's
    /// write lands at the same phase), the share of phases that split it when uniform (on
    /// PCI-X, a frame's expected cuts of its descriptor and frame reads, at most 1).
    pub stopped_share: f64,
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

/// When the driver's doorbell (its PIO writes for a frame) reaches the bridge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Doorbell {
    /// Paced by completions where the send ring is full (the sending host is faster than the
    /// NIC's side), at a uniform phase otherwise: what [`run`] does.
    Paced,
    /// At a uniform phase of the NIC's cycle always: the open-loop model, for comparison.
    Uniform,
}

/// The stream `sc` through `bus` under the hints of `table`.
pub fn run(
    bus: NicBus<'_>,
    params: &NicTxParams,
    table: &HintTable,
    sc: &NicTxScenario,
) -> Result<NicTxRecord> {
    run_with(bus, params, table, sc, Doorbell::Paced)
}

/// [`run`] with the doorbell's timing chosen.
///
/// A full send ring closes the loop: the driver stops its queue when the ring fills and wakes
/// it from its completion handler, so the next frame's doorbell follows a completion by the
/// host's reaction (the interrupt CPU's reclaim, then the sending CPU's path for one frame).
/// A completion is taken at the end of the frame's read (the NIC then holds the frame), so the
/// doorbell reaches the bridge at a fixed phase of the NIC's cycle, the reaction after the last
/// frame's read ended, and meets every frame's burst or none. Where the sending host is the
/// slowest stage the ring does not fill, and its doorbells keep a uniform phase. Only the PCI
/// bus resolves the phase; on PCI-X a doorbell keeps its uniform chance of cutting a split
/// completion.
pub fn run_with(
    bus: NicBus<'_>,
    params: &NicTxParams,
    table: &HintTable,
    sc: &NicTxScenario,
    doorbell: Doorbell,
) -> Result<NicTxRecord> {
    let (payload, frame) = sc.frame()?;
    let wire_ns = wire_ns(params, frame);
    let tcp = sc.protocol == Protocol::Tcp;
    let calls = if tcp {
        payload as f64 / sc.message_bytes as f64
    } else {
        1.0
    };
    let sender_ns = params.sender.map(|s| s.frame_ns(payload, calls, tcp));
    let ahead = params.reads_ahead(frame);
    // Where the card reads ahead, the stages besides the NIC's set the period its reads and
    // the PIO writes share too.
    let others_ns = ahead.then(|| wire_ns.max(sender_ns.unwrap_or(0.0)));
    // Where the doorbell may be paced: the host's time per frame, and its reaction to a
    // completion (the interrupt CPU's reclaim, then the sending CPU's path for one frame).
    let pace = match (doorbell, params.sender, sender_ns) {
        (Doorbell::Paced, Some(s), Some(host_ns)) => Some(Pace {
            host_ns,
            reaction_ns: s.completion_frame_ns as f64 + s.send_ns(payload, calls, tcp),
            wire_ns,
        }),
        _ => None,
    };
    let reads = match bus {
        NicBus::Pci(b) => reads_pci(b, params, table, frame, others_ns, pace)?,
        NicBus::PciX(b) => reads_pcix(b, params, table, frame, others_ns)?,
    };
    let own_ns = params.frame_ns as f64;
    let read_ns = reads.descriptor_ns + reads.frame_read_ns;
    let (mut limit, nic_ns) = match ahead {
        true if read_ns > own_ns => ("bus", read_ns),
        true => ("nic", own_ns),
        false => ("nic", own_ns + read_ns),
    };
    let mut cycle = nic_ns;
    if wire_ns > cycle {
        (limit, cycle) = ("wire", wire_ns);
    }
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
        card_frames: params.card_frames(frame),
        wire_ns,
        sender_ns,
        limit,
        doorbell: if reads.paced { "paced" } else { "uniform" },
        stopped_share: reads.stopped_share,
        mbit_s: (payload * 8) as f64 * 1000.0 / cycle,
    })
}

/// A frame's two reads, ns, averaged over the PIO writes' phase.
struct Reads {
    descriptor_ns: f64,
    /// The frame's read with no PIO write in its way.
    quiet_ns: f64,
    frame_read_ns: f64,
    /// Commands the PIO writes add per frame.
    extra_commands: f64,
    /// The share of frames whose read a PIO write splits.
    stopped_share: f64,
    /// Whether the doorbell was paced by completions (the send ring full).
    paced: bool,
}

/// What paces a doorbell where the send ring fills: the host's time per frame, its reaction to
/// a completion and the wire's time per frame, ns.
#[derive(Clone, Copy)]
struct Pace {
    host_ns: f64,
    reaction_ns: f64,
    wire_ns: f64,
}

/// On PCI: reads go through the bus's hinted bridge when it has one. `others_ns`, where the
/// card reads ahead, is the slowest of the stages besides the NIC's.
fn reads_pci(
    bus: &PciBus,
    params: &NicTxParams,
    table: &HintTable,
    frame: u64,
    others_ns: Option<f64>,
    pace: Option<Pace>,
) -> Result<Reads> {
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
    let own_ns = params.frame_ns as f64;
    // The phases are spread over the cycle without stops (the stops lengthen it by about 1% on
    // the ZX1). On the serial path the frame's read starts after the NIC's own work and the
    // descriptor; reading ahead, the card reads the descriptor and the frame at the start of
    // the stream's period and waits out the rest. A write arriving before the frame's read
    // goes on the bus between the NIC's reads and costs them nothing.
    let (cycle_ns, read_start_ns) = match others_ns {
        None => (own_ns + descriptor_ns + quiet_ns, own_ns + descriptor_ns),
        Some(others) => (
            own_ns.max(descriptor_ns + quiet_ns).max(others),
            descriptor_ns,
        ),
    };
    let cycle_ps = (cycle_ns * 1000.0).round() as u64;
    let read_start_ps = (read_start_ns * 1000.0).round() as u64;
    // The ring fills where the host is faster than the NIC's side with no write in its way
    // (its serial path, or the slower of its own work and its reads where it reads ahead) and
    // the wire. Then the first write reaches the bridge the host's reaction after the last
    // frame's read ended: one phase instead of all of them.
    let nic_quiet_ns = match others_ns {
        None => own_ns + descriptor_ns + quiet_ns,
        Some(_) => own_ns.max(descriptor_ns + quiet_ns),
    };
    let paced_ps = pace
        .filter(|p| p.host_ns < nic_quiet_ns.max(p.wire_ns))
        .map(|p| {
            let read_end_ns = read_start_ns + quiet_ns;
            ((read_end_ns + p.reaction_ns) * 1000.0).round() as u64 % cycle_ps.max(1)
        });
    let phases: Vec<u64> = match paced_ps {
        Some(p) => vec![p],
        None => (0..PHASES).map(|k| cycle_ps * k / PHASES).collect(),
    };
    let (mut total_ns, mut extra, mut stopped) = (0.0, 0.0, 0u32);
    let n = params.pio_writes_per_frame;
    for &first_ps in &phases {
        let mut pio: Vec<Ps> = (0..n)
            .map(|k| (first_ps + cycle_ps * k / n.max(1)) % cycle_ps.max(1))
            .filter(|&t| t >= read_start_ps)
            .map(|t| Ps(t - read_start_ps))
            .collect();
        pio.sort();
        let t = read(Mapping::Streaming, frame_addr, frame, &pio)?;
        total_ns += span_ns(&t);
        let more = t.entries.len().saturating_sub(quiet.entries.len());
        extra += more as f64;
        stopped += u32::from(more > 0);
    }
    let count = phases.len() as f64;
    Ok(Reads {
        descriptor_ns,
        quiet_ns,
        frame_read_ns: total_ns / count,
        extra_commands: extra / count,
        stopped_share: f64::from(stopped) / count,
        paced: paced_ps.is_some(),
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
/// the wire, before cuts; where the card reads ahead, the slowest stage), so it cuts with
/// probability the cuttable time's share of it. The
/// device's reads are all Memory Read Blocks, so only MRM's entry acts. Read current is not
/// modelled on PCI-X: seed 004 gives no fetch time for the PCI-X path to scale.
fn reads_pcix(
    bus: &PciXBus,
    params: &NicTxParams,
    table: &HintTable,
    frame: u64,
    others_ns: Option<f64>,
) -> Result<Reads> {
    let read = |addr: u64, len: u64| bus.transfer(Direction::Read, BusAddr(addr), len);
    let descriptor = read(RING_BASE, params.descriptor_bytes)?;
    let quiet = read(FRAME_BASE + params.frame_offset_bytes, frame)?;
    let (descriptor_ns, quiet_ns) = (span_ns(&descriptor), span_ns(&quiet));
    // The frame's period before any cut: the slower of the NIC's serial path and the wire, or
    // where the card reads ahead the slowest stage.
    let own_ns = params.frame_ns as f64;
    let period_ns = match others_ns {
        None => (own_ns + descriptor_ns + quiet_ns).max(wire_ns(params, frame)),
        Some(others) => own_ns.max(descriptor_ns + quiet_ns).max(others),
    };
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
        stopped_share: (descriptor_cuts + frame_cuts).min(1.0),
        paced: false,
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
    /// The stage that limits the stream with it: `bus`, `nic`, `wire` or `sender`.
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

/// One single change of a hint table: the knob, the hint as `NAME=VALUE`, the change, whether
/// a driver may set it and why.
pub(crate) type SingleChange = (&'static str, String, HintChange, Safety, &'static str);

/// The single changes of `firmware`'s hints for (mapping, command), with their safety (any
/// device's reads through the bridge: `dmalab hints` for a NIC or a SCSI controller).
pub(crate) fn single_changes(
    firmware: &HintTable,
    mapping: Mapping,
    command: ReadCommand,
) -> Vec<SingleChange> {
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

    /// The ZX1's NIC with its reads on its serial path: no buffer on the card, no sender
    /// modelled, and an own time that makes the NIC the slowest stage.
    fn serial(nic: &NicTxParams) -> NicTxParams {
        NicTxParams {
            card_buffer_bytes: 0,
            frame_ns: 7_800,
            sender: None,
            ..*nic
        }
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
        let (bus, file, firmware) = zx1();
        let relaxed = relaxed_mrm(&firmware);
        for nic in [file, serial(&file)] {
            let base = run(NicBus::Pci(&bus), &nic, &firmware, &UDP_1K).unwrap();
            assert!(base.extra_commands_per_frame > 0.0, "{base:?}");
            let r = run(NicBus::Pci(&bus), &nic, &relaxed, &UDP_1K).unwrap();
            assert_eq!(r.extra_commands_per_frame, 0.0);
            assert!(r.frame_read_ns < base.frame_read_ns);
            assert!(r.frame_read_ns >= r.frame_read_quiet_ns);
            assert!(r.mbit_s >= base.mbit_s);
        }
        // With its reads on its serial path the NIC goes faster; reading ahead into its
        // buffer, the card's shorter reads move no stage that binds.
        let serial = serial(&file);
        let base = run(NicBus::Pci(&bus), &serial, &firmware, &UDP_1K).unwrap();
        let r = run(NicBus::Pci(&bus), &serial, &relaxed, &UDP_1K).unwrap();
        assert!(r.mbit_s > base.mbit_s);
        let base = run(NicBus::Pci(&bus), &file, &firmware, &UDP_1K).unwrap();
        let r = run(NicBus::Pci(&bus), &file, &relaxed, &UDP_1K).unwrap();
        assert_eq!(r.mbit_s, base.mbit_s);
    }

    #[test]
    fn a_card_that_reads_ahead_hides_its_reads_until_they_are_the_slowest_stage() {
        let (bus, file, firmware) = zx1();
        let depth0 = changed(
            &firmware,
            Mapping::Streaming,
            HintChange {
                prefetch_lines: Some(0),
                ..HintChange::default()
            },
        );
        // The file's card holds 92 frames of 1066 bytes: prefetch depth 0 slows its reads but
        // not the stream, which its sender binds.
        let base = run(NicBus::Pci(&bus), &file, &firmware, &UDP_1K).unwrap();
        let slow = run(NicBus::Pci(&bus), &file, &depth0, &UDP_1K).unwrap();
        assert_eq!(base.card_frames, file.card_buffer_bytes / 1066);
        assert!(slow.frame_read_ns > base.frame_read_ns + 1000.0, "{slow:?}");
        assert_eq!((slow.mbit_s, slow.limit), (base.mbit_s, "sender"));
        // The same card with its reads on its serial path loses a fifth.
        let serial = serial(&file);
        let base = run(NicBus::Pci(&bus), &serial, &firmware, &UDP_1K).unwrap();
        let slow = run(NicBus::Pci(&bus), &serial, &depth0, &UDP_1K).unwrap();
        assert!(slow.mbit_s < 0.85 * base.mbit_s, "{slow:?} vs {base:?}");
        // A card of one frame's buffer cannot read ahead: its reads are on its serial path.
        let one = NicTxParams {
            card_buffer_bytes: 1066,
            ..serial
        };
        assert_eq!(run(NicBus::Pci(&bus), &one, &firmware, &UDP_1K).unwrap(), {
            NicTxRecord {
                card_frames: 1,
                ..base.clone()
            }
        });
        // Minimum frames from a card with no own time and no sender: its reads (a descriptor
        // and a line) outlast the wire's 672 ns, so they bind and the hints act again.
        let tiny = NicTxScenario {
            message_bytes: 18,
            ..UDP_1K
        };
        let bare = NicTxParams {
            frame_ns: 0,
            sender: None,
            ..file
        };
        let r = run(NicBus::Pci(&bus), &bare, &firmware, &tiny).unwrap();
        assert_eq!(r.limit, "bus", "{r:?}");
        assert_eq!(r.nic_ns, r.descriptor_ns + r.frame_read_ns);
        let owned = changed(
            &firmware,
            Mapping::Consistent,
            HintChange {
                read_current: Some(false),
                ..HintChange::default()
            },
        );
        assert!(run(NicBus::Pci(&bus), &bare, &owned, &tiny).unwrap().mbit_s < r.mbit_s);
    }

    #[test]
    fn the_senders_cpu_binds_the_tcp_stream_and_hides_the_hints_but_not_udps() {
        let (bus, file, firmware) = zx1();
        let mut nic = serial(&file);
        nic.sender = file.sender;
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
        // UDP's datagrams cost the CPU less than this NIC's serial path: the NIC binds, the
        // send ring fills and the doorbell follows each completion by the host's reaction.
        // That lands in the NIC's 9 us of own work, before the next frame's read, so no write
        // splits a burst and relaxing ordering gains nothing; a doorbell at a uniform phase
        // would split some and relaxing would gain.
        nic.frame_ns = 9_000;
        let udp = run(NicBus::Pci(&bus), &nic, &firmware, &UDP_1K).unwrap();
        assert_eq!((udp.limit, udp.doorbell), ("nic", "paced"));
        assert!(udp.sender_ns.unwrap() < udp.nic_ns);
        assert_eq!(udp.stopped_share, 0.0);
        let faster = run(NicBus::Pci(&bus), &nic, &relaxed, &UDP_1K).unwrap();
        assert_eq!(faster.mbit_s, udp.mbit_s);
        let open = |t| run_with(NicBus::Pci(&bus), &nic, t, &UDP_1K, Doorbell::Uniform).unwrap();
        assert!(open(&firmware).stopped_share > 0.0);
        assert!(open(&relaxed).mbit_s > open(&firmware).mbit_s);
        // Without the sender the same TCP stream is bound by the wire, as before it was
        // modelled; with a faster CPU it is never slower.
        nic.frame_ns = serial(&file).frame_ns;
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
        // Without the NIC's own time and the sender its two reads (under 3 us) are faster than
        // the wire.
        nic.frame_ns = 0;
        nic.sender = None;
        let r = run(NicBus::Pci(&bus), &nic, &firmware, &UDP_1K).unwrap();
        assert_eq!(r.limit, "wire");
        assert!(r.nic_ns < r.wire_ns);
    }

    #[test]
    fn more_pio_writes_per_frame_stop_more_bursts_and_writes_before_the_read_cost_nothing() {
        let (bus, file, firmware) = zx1();
        // Reading ahead, the writes spread over the stream's period: a slower sender lengthens
        // it, and fewer writes meet the frame's read.
        let base = run(NicBus::Pci(&bus), &file, &firmware, &UDP_1K).unwrap();
        let cpu = file.sender.unwrap();
        let slower = NicTxParams {
            sender: Some(SenderCpu {
                send_call_ns: cpu.send_call_ns * 3,
                ..cpu
            }),
            ..file
        };
        let r = run(NicBus::Pci(&bus), &slower, &firmware, &UDP_1K).unwrap();
        assert!(r.extra_commands_per_frame < base.extra_commands_per_frame);
        let mut nic = serial(&file);
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
        let (bus, file, firmware) = zx1();
        // The file's sender binds the stream: no change moves it, and each says so.
        let report = hint_gains(NicBus::Pci(&bus), &file, &firmware, &UDP_1K).unwrap();
        assert!(report
            .gains
            .iter()
            .all(|g| g.gain_pct == 0.0 && g.limit == "sender"));
        let nic = serial(&file);
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
        let (bus, firmware, file) = parts(&p).unwrap();
        let NicBus::PciX(pcix) = bus else {
            panic!("the pci-x slot puts the NIC on PCI-X")
        };
        assert_eq!(file.card_buffer_bytes, 64 << 10);
        let nic = &serial(file);
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
            let gains = hint_gains(NicBus::Pci(&pci), &serial(&nic), &firmware, &UDP_1K).unwrap();
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
        let r = run(bus, file, &firmware, &tcp).unwrap();
        assert_eq!(r.limit, "wire");
        assert!(
            (r.mbit_s - 8948.0 / 9038.0 * 1000.0).abs() < 1e-9,
            "{}",
            r.mbit_s
        );
    }
}
