//! A NIC's send path's own parameters (a platform's `[nic_tx]` section): its line rate, its
//! descriptor, where its frames lie in a line, the driver's PIO writes, the NIC's own time per
//! frame and the buffer on the card its reads fill; the model that uses them is
//! [`crate::workload::nic_tx`].

use crate::config::params::{ParamReader, Valid};
use crate::error::Result;
use serde::Serialize;

/// The NIC's and the driver's parameters (a platform's `[nic_tx]` section).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct NicTxParams {
    /// Ethernet line rate.
    pub link_bits_per_s: u64,
    /// Preamble, start delimiter, FCS and inter-frame gap per frame.
    pub wire_overhead_bytes: u64,
    /// One send descriptor, read by the NIC from a consistent mapping.
    pub descriptor_bytes: u64,
    /// Where a frame's first byte lies within a cache line.
    pub frame_offset_bytes: u64,
    /// Programmed-I/O writes the driver makes per frame sent.
    pub pio_writes_per_frame: u64,
    /// The NIC's own time per frame besides its DMA reads.
    pub frame_ns: u64,
    /// The card's memory that its DMA reads fill ahead of the MAC, bytes. Where it holds two
    /// frames or more, the NIC reads one frame while it sends another, so its reads and its own
    /// work are two stages; with less, each frame's reads lie on the NIC's serial path.
    pub card_buffer_bytes: u64,
    /// The sending host's CPU, where the platform describes it (`[nic_tx.sender]`).
    pub sender: Option<SenderCpu>,
}

/// The sending host's CPU time per frame (`[nic_tx.sender]`): netperf's process and the stack
/// it calls on one CPU, a third stage beside the NIC's serial path and the wire. A send call
/// costs `send_call_ns`; each frame the stack's output path and the driver's transmit routine
/// cost `stack_frame_ns`; each payload byte is copied from the user's buffer with its checksum
/// folded in (`copy_ps_per_byte`); a TCP segment adds TCP's own work (`tcp_segment_ns`: its
/// output path and the processing of the acknowledgements that come back, one for every
/// second segment). UDP sends one datagram a call; TCP packs the calls' bytes into full-sized
/// segments, so a segment carries `payload / message` calls. The interrupt CPU reclaims each
/// sent frame (`completion_frame_ns`); where netperf runs on that CPU (`interrupt_cpu =
/// "same"`) the two costs add up on one CPU, otherwise they run on two in parallel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct SenderCpu {
    /// One send system call: entry and exit, the socket layer, the copy's set-up.
    pub send_call_ns: u64,
    /// One frame through IP output and the device queue.
    pub stack_frame_ns: u64,
    /// One frame through the NIC driver's transmit routine: its descriptor and its doorbell.
    pub driver_frame_ns: u64,
    /// Copying and checksumming one payload byte, picoseconds.
    pub copy_ps_per_byte: u64,
    /// TCP's own work per segment, acknowledgements included.
    pub tcp_segment_ns: u64,
    /// The interrupt CPU's work per frame sent: reclaiming it from the send ring.
    pub completion_frame_ns: u64,
    /// Whether netperf runs on the CPU the NIC's interrupts go to.
    pub shares_interrupt_cpu: bool,
}

impl SenderCpu {
    /// Read `[{prefix}]`.
    pub fn read(r: &mut ParamReader<'_>, prefix: &str) -> Result<SenderCpu> {
        let f = |n: &str| format!("{prefix}.{n}");
        Ok(SenderCpu {
            send_call_ns: Valid::Range(0, 1_000_000).read(r, &f("send_call_ns"))?,
            stack_frame_ns: Valid::Range(0, 1_000_000).read(r, &f("stack_frame_ns"))?,
            driver_frame_ns: Valid::Range(0, 1_000_000).read(r, &f("driver_frame_ns"))?,
            copy_ps_per_byte: Valid::Range(0, 100_000).read(r, &f("copy_ps_per_byte"))?,
            tcp_segment_ns: Valid::Range(0, 1_000_000).read(r, &f("tcp_segment_ns"))?,
            completion_frame_ns: Valid::Range(0, 1_000_000).read(r, &f("completion_frame_ns"))?,
            shares_interrupt_cpu: r.choice(&f("interrupt_cpu"), &["other", "same"])? == "same",
        })
    }

    /// The sending CPU's time per frame of `payload` bytes, ns: `messages` send calls' worth
    /// (one for a UDP datagram; a TCP segment's payload over the send size) and, for TCP, its
    /// segment.
    pub fn send_ns(&self, payload: u64, messages: f64, tcp: bool) -> f64 {
        let bytes_ns = (payload * self.copy_ps_per_byte) as f64 / 1000.0;
        let tcp_ns = if tcp { self.tcp_segment_ns as f64 } else { 0.0 };
        let frame_ns = (self.stack_frame_ns + self.driver_frame_ns) as f64;
        messages * self.send_call_ns as f64 + frame_ns + bytes_ns + tcp_ns
    }

    /// The host's stage per frame, ns: the sending CPU's time and the interrupt CPU's, added
    /// where they share one CPU, the longer of the two where they run on two.
    pub fn frame_ns(&self, payload: u64, messages: f64, tcp: bool) -> f64 {
        let send = self.send_ns(payload, messages, tcp);
        let completion = self.completion_frame_ns as f64;
        if self.shares_interrupt_cpu {
            send + completion
        } else {
            send.max(completion)
        }
    }
}

impl NicTxParams {
    /// Whole frames of `frame_bytes` the card's buffer holds.
    pub fn card_frames(&self, frame_bytes: u64) -> u64 {
        self.card_buffer_bytes / frame_bytes.max(1)
    }

    /// Whether the card reads one frame while it sends another: its buffer holds two.
    pub fn reads_ahead(&self, frame_bytes: u64) -> bool {
        self.card_frames(frame_bytes) >= 2
    }

    /// Read the section under `prefix`.
    pub fn read(r: &mut ParamReader<'_>, prefix: &str) -> Result<NicTxParams> {
        let f = |n: &str| format!("{prefix}.{n}");
        Ok(NicTxParams {
            link_bits_per_s: r.u64(&f("link_bits_per_s"), 1_000_000..=1_000_000_000_000)?,
            wire_overhead_bytes: r.u64(&f("wire_overhead_bytes"), 0..=64)?,
            descriptor_bytes: r.pow2(&f("descriptor_bytes"), 4..=128)?,
            frame_offset_bytes: Valid::Range(0, 127).read(r, &f("frame_offset_bytes"))?,
            pio_writes_per_frame: Valid::Range(0, 16).read(r, &f("pio_writes_per_frame"))?,
            frame_ns: Valid::Range(0, 1_000_000).read(r, &f("frame_ns"))?,
            card_buffer_bytes: Valid::Range(0, 1 << 30).read(r, &f("card_buffer_bytes"))?,
            sender: if r.has_table(&f("sender")) {
                Some(SenderCpu::read(r, &f("sender"))?)
            } else {
                None
            },
        })
    }
}
