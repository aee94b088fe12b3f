//! A TCP stream through one NIC on a shared bus, per send: the frame's DMA reads, the
//! descriptor fetches and write-backs, the ACKs coming back, the sender's CPU costs and the
//! wire. Each is a stage that every send must pass; the slowest stage sets the throughput, and
//! the breakdown shows what each stage spends per send.
//!
//! This is seed 001's workload: one TCP session of MTU-1500 frames from an IBM p660 through an
//! e1000 on a bridged PCI bus, with Linux's unaligned, mapped-in-place buffers or AIX's copy into
//! pre-mapped, line-aligned buffers, and with or without large send (TSO). The bus stage uses the
//! same command model as `dmalab trace` ([`crate::bus::pci`]); nothing here knows a published number.

use crate::bus::trace::{Direction, Trace};
use crate::bus::Bus;
use crate::config::costs::StreamParams;
use crate::config::proto::{ETHERNET_HEADER_BYTES, IPV4_TCP_HEADER_BYTES};
use crate::error::{invalid_arg, Result};
use crate::units::{BusAddr, Ps};
use serde::{Deserialize, Serialize};

/// Where the model places aligned buffers: 1 MiB, the start of a page of any size a platform may
/// give (any line-aligned start gives the same commands as long as it is also aligned to the
/// prefetch boundary).
const ALIGNED_BASE: u64 = 0x10_0000;

/// How the driver gets a frame to the NIC.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TxPolicy {
    /// Map the frame where it lies, unaligned, and unmap it after (Linux 2.4's e1000).
    MapInPlace,
    /// Copy the frame into a pre-mapped, line-aligned buffer (AIX; the copy-break patch).
    CopyAligned,
}

/// One stream scenario: what the publication varies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamScenario {
    /// How frames reach the NIC.
    pub tx: TxPolicy,
    /// Whether receive buffers start on a cache line.
    pub rx_aligned: bool,
    /// Large send: the NIC cuts a 64 KiB send into frames.
    pub tso: bool,
    /// Bytes of each frame (Ethernet header to end of payload); `None` for full-sized frames.
    pub frame_bytes: Option<u64>,
}

impl StreamScenario {
    /// Linux 2.4 in seed 001: frames mapped where they lie, unaligned; unaligned receive.
    pub const LINUX: StreamScenario = StreamScenario {
        tx: TxPolicy::MapInPlace,
        rx_aligned: false,
        tso: false,
        frame_bytes: None,
    };
    /// AIX in seed 001: frames copied into aligned, pre-mapped buffers; aligned receive.
    pub const AIX: StreamScenario = StreamScenario {
        tx: TxPolicy::CopyAligned,
        rx_aligned: true,
        tso: false,
        frame_bytes: None,
    };
}

/// One cost inside a stage, per send.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Cost {
    /// What it is.
    pub what: String,
    /// Its time per send.
    pub per_send_ps: Ps,
}

/// A stage every send passes through: the CPU, the bus, the wire.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Stage {
    /// `host`, `bus` or `wire`.
    pub name: &'static str,
    /// The stage's time per send: the sum of its costs.
    pub per_send_ps: Ps,
    /// The costs, largest first.
    pub costs: Vec<Cost>,
}

/// What the stream achieves and why.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StreamResult {
    /// The scenario run.
    pub scenario: StreamScenario,
    /// Frames per send (1, or the frames of one large send).
    pub frames_per_send: u64,
    /// TCP payload per send.
    pub payload_bytes_per_send: u64,
    /// The stages; the slowest sets the pace.
    pub stages: Vec<Stage>,
    /// The name of the slowest stage.
    pub bottleneck: &'static str,
    /// The time per send: the slowest stage's.
    pub per_send_ps: Ps,
    /// TCP payload throughput, bits per second.
    pub throughput_bits_per_s: f64,
    /// Bus commands per frame for the frame data alone.
    pub data_commands_per_frame: f64,
    /// Partial cache lines written per frame (each a read-modify-write in memory).
    pub partial_lines_per_frame: f64,
}

impl StreamResult {
    /// Throughput in Mbit/s.
    pub fn mbit_per_s(&self) -> f64 {
        self.throughput_bits_per_s / 1e6
    }
}

/// Run the stream workload of `params` on `bus`.
pub fn run(bus: &Bus, params: &StreamParams, scenario: StreamScenario) -> Result<StreamResult> {
    let frame = scenario.frame_bytes.unwrap_or_else(|| params.frame_bytes());
    let min_frame = params.min_frame_bytes();
    if !(min_frame..=params.frame_bytes()).contains(&frame) {
        return Err(invalid_arg(
            "frame_bytes",
            frame,
            format!("{min_frame}..={}", params.frame_bytes()),
        ));
    }
    let per_frame_payload = frame - ETHERNET_HEADER_BYTES - IPV4_TCP_HEADER_BYTES;
    let frames = if scenario.tso {
        ((params.tso_segment_bytes - IPV4_TCP_HEADER_BYTES) / per_frame_payload).max(1)
    } else {
        1
    };
    let payload = frames * per_frame_payload;
    let mut bus_costs = Vec::new();
    let data = tx_data(bus, params, scenario, frame, payload)?;
    let data_commands = data.iter().map(|t| t.totals.commands).sum::<u64>();
    let data_ps: Ps = data.iter().map(|t| t.totals.bus_time_ps).sum();
    bus_costs.push(Cost {
        what: format!("frame data reads ({data_commands} commands)"),
        per_send_ps: data_ps,
    });

    let desc_fetch = bus.transfer(
        Direction::Read,
        BusAddr(ALIGNED_BASE),
        params.descriptor_bytes * params.descriptors_per_fetch,
    )?;
    let writeback = bus.transfer(
        Direction::Write,
        BusAddr(ALIGNED_BASE),
        params.descriptor_bytes,
    )?;
    let tx_descs = if scenario.tso {
        2 + payload.div_ceil(params.page_bytes)
    } else {
        1
    };
    bus_costs.push(share(
        format!(
            "transmit descriptor fetches ({tx_descs} per send, {} per read)",
            params.descriptors_per_fetch
        ),
        desc_fetch.totals.bus_time_ps,
        tx_descs,
        params.descriptors_per_fetch,
    ));
    bus_costs.push(share(
        "transmit descriptor write-back".into(),
        writeback.totals.bus_time_ps,
        1,
        1,
    ));
    let rx_offset = if scenario.rx_aligned {
        0
    } else {
        params.unaligned_rx_offset_bytes
    };
    let ack = bus.transfer(
        Direction::Write,
        BusAddr(ALIGNED_BASE + rx_offset),
        params.ack_frame_bytes,
    )?;
    let acks_num = frames;
    let acks_den = params.data_segments_per_ack;
    bus_costs.push(share(
        format!("ACK frame writes (1 per {acks_den} frames)"),
        ack.totals.bus_time_ps,
        acks_num,
        acks_den,
    ));
    bus_costs.push(share(
        "receive descriptor write-backs".into(),
        writeback.totals.bus_time_ps,
        acks_num,
        acks_den,
    ));
    bus_costs.push(share(
        "receive descriptor fetches".into(),
        desc_fetch.totals.bus_time_ps,
        acks_num,
        acks_den * params.descriptors_per_fetch,
    ));

    let mut host_costs = vec![Cost {
        what: "TCP/IP and driver per send".into(),
        per_send_ps: Ps::from_ns(params.host_per_send_ns),
    }];
    match scenario.tx {
        TxPolicy::CopyAligned if !scenario.tso => {
            let copy_ps = Ps::from_ns(params.copy_setup_ns)
                + Ps((frame * params.copy_ns_per_kib * 1000).div_ceil(1024));
            host_costs.push(Cost {
                what: format!("copy {frame} bytes into a pre-mapped aligned buffer"),
                per_send_ps: copy_ps,
            });
        }
        _ => {
            host_costs.push(Cost {
                what: "TCE map".into(),
                per_send_ps: Ps::from_ns(params.tce_map_ns),
            });
            host_costs.push(Cost {
                what: "TCE unmap".into(),
                per_send_ps: Ps::from_ns(params.tce_unmap_ns),
            });
        }
    }
    let wire_bits = (frame + params.wire_overhead_bytes) * 8 * frames;
    let wire_ps = Ps((u128::from(wire_bits) * 1_000_000_000_000)
        .div_ceil(u128::from(params.link_bits_per_s)) as u64);
    let wire_costs = vec![Cost {
        what: format!("{frames} frame(s) of {frame} bytes on the wire"),
        per_send_ps: wire_ps,
    }];

    let stages = vec![
        stage("host", host_costs),
        stage("bus", bus_costs),
        stage("wire", wire_costs),
    ];
    let slowest = stages
        .iter()
        .max_by_key(|s| s.per_send_ps)
        .map_or(&stages[0], |s| s);
    let (bottleneck, per_send) = (slowest.name, slowest.per_send_ps);
    // Partial lines per send: each ACK and each write-back (one per send, one per ACK).
    let acks = acks_num as f64 / acks_den as f64;
    let partial = acks * (ack.totals.partial_lines + writeback.totals.partial_lines) as f64
        + writeback.totals.partial_lines as f64;
    Ok(StreamResult {
        scenario,
        frames_per_send: frames,
        payload_bytes_per_send: payload,
        throughput_bits_per_s: (payload * 8) as f64 * 1e12 / per_send.0.max(1) as f64,
        data_commands_per_frame: data_commands as f64 / frames as f64,
        partial_lines_per_frame: partial / frames as f64,
        stages,
        bottleneck,
        per_send_ps: per_send,
    })
}

/// The frame-data reads of one send.
fn tx_data(
    bus: &Bus,
    params: &StreamParams,
    scenario: StreamScenario,
    frame: u64,
    payload: u64,
) -> Result<Vec<Trace>> {
    let offset = match scenario.tx {
        TxPolicy::MapInPlace => params.unaligned_tx_offset_bytes,
        TxPolicy::CopyAligned => 0,
    };
    if scenario.tso {
        // Large send: the headers once from their own buffer, the payload from page-aligned
        // socket buffers; the NIC builds each frame's headers itself.
        let headers = ETHERNET_HEADER_BYTES + IPV4_TCP_HEADER_BYTES;
        let first_page = BusAddr(ALIGNED_BASE + params.page_bytes);
        return Ok(vec![
            bus.transfer(Direction::Read, BusAddr(ALIGNED_BASE + offset), headers)?,
            bus.transfer(Direction::Read, first_page, payload)?,
        ]);
    }
    Ok(vec![bus.transfer(
        Direction::Read,
        BusAddr(ALIGNED_BASE + offset),
        frame,
    )?])
}

/// A cost that occurs `num` times every `den` sends, per send, rounded to the nearest ps.
fn share(what: String, each: Ps, num: u64, den: u64) -> Cost {
    let den = den.max(1);
    let ps = (u128::from(each.0) * u128::from(num) + u128::from(den) / 2) / u128::from(den);
    Cost {
        what,
        per_send_ps: Ps(u64::try_from(ps).unwrap_or(u64::MAX)),
    }
}

fn stage(name: &'static str, mut costs: Vec<Cost>) -> Stage {
    costs.sort_by_key(|c| std::cmp::Reverse(c.per_send_ps));
    Stage {
        name,
        per_send_ps: costs.iter().map(|c| c.per_send_ps).sum(),
        costs,
    }
}
