//! The device's own DMA engine (a platform's `[device_dma]` section): the part of a NIC, an
//! NVMe controller or a copy engine that turns a transfer into bus requests. The link and the
//! tags are not its only limits: the engine has a per-transfer set-up, a least gap between the
//! requests it issues, and a granularity in which it cuts a transfer before the link's own
//! Max_Payload_Size and Max_Read_Request_Size rules apply; a descriptor-driven engine also
//! fetches descriptors and writes completion records, which take link, tag and memory time.
//! (The split of a device's DMA work into descriptor fetch, data movement and write-back follows
//! the descriptor rings of NIC and NVMe datasheets, for example the NVMe Base Specification's
//! submission and completion queues.)
//!
//! The engine works on `contexts` transfers at once: a transfer holds a context from its set-up
//! to its last byte (for a read, its last completion back in the engine), so one transfer's
//! set-up overlaps the others' requests and data, and the engine's transfer rate is bounded by
//! its contexts over the time each holds one (Little's law), never by the set-up charged one
//! after another. Its requests go out through one issue port, `issue_ns` apart. The device's
//! own side of the round trip is two fixed delays: from the engine's request to the link
//! (`request_path_ns`: its request pipeline, the PCIe controller's transaction and data link
//! layers, the PHY's transmit side) and from the link back to the engine (`completion_path_ns`:
//! the PHY's receive side, the data link layer, the controller's completion buffer and
//! reordering). A read request's tag is held over the whole round trip, both delays included.
//!
//! Two optional parts of an engine that moves data to and from memory of its own (a network
//! processor's, an FPGA's), each absent on engines that stream to and from the link:
//! - `data_bytes_per_us`: the data ports between the PCIe controller and the device's memory
//!   (`data_ports` of them, 1 by default), each at that rate. A transfer's data crosses one
//!   whole, store and forward: a read's after its last completion is back, a write's before
//!   its first request; so it adds `size / rate` to a lone transfer's latency and bounds the
//!   engine's throughput at the ports' rate. With `data_beat_bytes` the port moves whole
//!   beats of that many bytes, aligned as the host address (the data arrives and leaves in
//!   pieces cut at the host's line boundaries, as completions on a Read Completion Boundary of
//!   64 bytes are): a transfer pays for every beat its host range touches, so a 64-byte
//!   transfer at a host offset inside a line takes two beats; `data_beat_whole_pct` says how
//!   much of a beat's time a beat costs whatever it carries (100: whole beats; less: a partial
//!   beat costs that share of a beat plus the rest of its own bytes' time). `data_transfer_ns`
//!   is a fixed time of the port's per transfer besides its beats (its command and handshake
//!   with the memory it moves the data to or from);
//! - `write_hold_ns`: the engine completes a write's command this long after its data has
//!   left, and holds the write's context until then (a read's context is free once its data
//!   is stored); the write's own latency and anything the device does next do not wait;
//! - `device_word_bytes`, `misaligned_store_ns` and `misaligned_fetch_ns`: that memory is
//!   accessed in words, so a read whose device offset is not a word multiple stores its
//!   partial first and last words by reading and merging them, and a write fetches an extra
//!   word and shifts its data: each a fixed cost on the data port.

use crate::config::params::{ParamReader, Valid};
use crate::error::Result;
use serde::Serialize;

const SETUP_NS: Valid = Valid::Range(0, 1_000_000);
const ISSUE_NS: Valid = Valid::Range(0, 100_000);
const GRANULARITY: Valid = Valid::Pow2(4, 4096);
const RECORD_BYTES: Valid = Valid::Range(0, 4096);
const PER_BATCH: Valid = Valid::Range(1, 1024);
const CONTEXTS: Valid = Valid::Range(1, 4096);
const PATH_NS: Valid = Valid::Range(0, 10_000);
const DATA_RATE: Valid = Valid::Range(1_000, 1_000_000);
const WORD: Valid = Valid::Pow2(1, 64);
const BEAT: Valid = Valid::Pow2(1, 4096);
const PCT: Valid = Valid::Range(0, 100);

/// The device's DMA engine.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DeviceEngine {
    /// The engine's set-up time per transfer (parsing the job, address generation).
    pub setup_ns: u64,
    /// The least time between two requests (TLPs) the engine issues.
    pub issue_ns: u64,
    /// The engine cuts a transfer at multiples of this many bytes (a power of two) before the
    /// link's size rules apply.
    pub granularity_bytes: u64,
    /// Bytes of the descriptor the engine reads per transfer (0: the engine needs none).
    pub descriptor_bytes: u64,
    /// Descriptors fetched by one read.
    pub descriptors_per_fetch: u64,
    /// Bytes of the completion record the engine writes per transfer (0: none).
    pub completion_bytes: u64,
    /// Completion records written by one write.
    pub completions_per_write: u64,
    /// Transfers the engine works on at once, 1..=4096 (each holds a context from its set-up to
    /// its last byte).
    pub contexts: u64,
    /// From the engine's request to its first symbol on the link, ns (the device's request
    /// pipeline, PCIe controller and PHY transmit side).
    pub request_path_ns: u64,
    /// From a completion's last symbol on the link to its data in the engine, ns (PHY receive
    /// side, data link layer, completion buffer).
    pub completion_path_ns: u64,
    /// The data port between the PCIe controller and the device's own memory, bytes per
    /// microsecond, 1,000..=1,000,000 (none: the engine streams at the link's pace).
    pub data_bytes_per_us: Option<u64>,
    /// Data ports of that rate, each moving one transfer's data at a time, 1..=4096 (1 where
    /// the file names none).
    pub data_ports: u64,
    /// The port moves whole beats of this many bytes, aligned as the host address, a power of
    /// two 1..=4096 (1 where the file names none: the bytes themselves).
    pub data_beat_bytes: u64,
    /// The port's fixed time per transfer besides its beats, ns (0 where the file names none).
    pub data_transfer_ns: u64,
    /// The share of a whole beat's time that each beat a transfer touches costs whatever it
    /// carries, percent 0..=100 (100 where the file names none: whole beats; 0: the bytes'
    /// time alone).
    pub data_beat_whole_pct: u64,
    /// How long after a write's data has left the engine completes its command and frees its
    /// context, ns (0 where the file names none).
    pub write_hold_ns: u64,
    /// The word of the device's own memory, bytes, a power of two 1..=64 (1 where the file
    /// names none: never misaligned).
    pub device_word_bytes: u64,
    /// A read stored at a device offset that is not a word multiple: the read-modify-write of
    /// its partial words, ns (0 where the file names none).
    pub misaligned_store_ns: u64,
    /// A write fetched from a device offset that is not a word multiple: the extra word and
    /// the shift, ns (0 where the file names none).
    pub misaligned_fetch_ns: u64,
}

impl DeviceEngine {
    /// Picoseconds the data port takes to move the `bytes` at host address `addr`: its fixed
    /// time, and for each beat they touch `data_beat_whole_pct` percent of a whole beat's
    /// time plus the rest of the time of the bytes it carries (none without a port).
    pub fn port_ps(&self, addr: u64, bytes: u64) -> Option<u64> {
        let beat = self.data_beat_bytes.max(1);
        let beats = if bytes == 0 {
            0
        } else {
            (addr.saturating_add(bytes) - 1) / beat - addr / beat + 1
        };
        let whole = u128::from(self.data_beat_whole_pct.min(100));
        // Bytes' worth of port time, in hundredths of a byte.
        let moved = u128::from(beats * beat) * whole + u128::from(bytes) * (100 - whole);
        let fixed = u128::from(self.data_transfer_ns) * 1000;
        self.data_bytes_per_us.map(|rate| {
            let scaled = moved * 10_000;
            // In 64 bits where it fits (always, for transfers the models take): the same
            // quotient at a fraction of a 128-bit division's cost.
            let time = match u64::try_from(scaled) {
                Ok(s) => u128::from(s.div_ceil(rate.max(1))),
                Err(_) => scaled.div_ceil(u128::from(rate)),
            };
            (fixed + time) as u64
        })
    }

    /// Read the section under `prefix`, each value range-checked.
    pub fn read(r: &mut ParamReader<'_>, prefix: &str) -> Result<DeviceEngine> {
        let f = |name: &str| format!("{prefix}.{name}");
        Ok(DeviceEngine {
            setup_ns: SETUP_NS.read(r, &f("setup_ns"))?,
            issue_ns: ISSUE_NS.read(r, &f("issue_ns"))?,
            granularity_bytes: GRANULARITY.read(r, &f("granularity_bytes"))?,
            descriptor_bytes: RECORD_BYTES.read(r, &f("descriptor_bytes"))?,
            descriptors_per_fetch: PER_BATCH.read(r, &f("descriptors_per_fetch"))?,
            completion_bytes: RECORD_BYTES.read(r, &f("completion_bytes"))?,
            completions_per_write: PER_BATCH.read(r, &f("completions_per_write"))?,
            contexts: CONTEXTS.read(r, &f("contexts"))?,
            request_path_ns: PATH_NS.read(r, &f("request_path_ns"))?,
            completion_path_ns: PATH_NS.read(r, &f("completion_path_ns"))?,
            data_bytes_per_us: if r.has_table(&f("data_bytes_per_us")) {
                Some(DATA_RATE.read(r, &f("data_bytes_per_us"))?)
            } else {
                None
            },
            data_ports: CONTEXTS.read_or(r, &f("data_ports"), 1)?,
            data_beat_bytes: BEAT.read_or(r, &f("data_beat_bytes"), 1)?,
            data_transfer_ns: PATH_NS.read_or(r, &f("data_transfer_ns"), 0)?,
            data_beat_whole_pct: PCT.read_or(r, &f("data_beat_whole_pct"), 100)?,
            write_hold_ns: PATH_NS.read_or(r, &f("write_hold_ns"), 0)?,
            device_word_bytes: WORD.read_or(r, &f("device_word_bytes"), 1)?,
            misaligned_store_ns: PATH_NS.read_or(r, &f("misaligned_store_ns"), 0)?,
            misaligned_fetch_ns: PATH_NS.read_or(r, &f("misaligned_fetch_ns"), 0)?,
        })
    }
}

/// What the device's datasheet says it must do (a device file's `[device_rating]`), for the
/// datasheet check (`dmalab platforms --check`): the DMA transfers a second and their size that
/// the rating implies, each way the data moves.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum DeviceRating {
    /// A NIC: every port at line rate with its smallest frames, each way the modelled queue
    /// moves them (a transmit queue reads frames, a receive queue writes them).
    Nic {
        /// Which way the modelled queue moves frames: `read`, `write` or `both`.
        direction: String,
        /// Each port's line rate, Gbit/s.
        line_rate_gbit_s: u64,
        /// Ports that run at once.
        ports: u64,
        /// The smallest frame on the wire, with its frame check sequence.
        min_frame_bytes: u64,
        /// Bytes each frame takes on the wire besides itself (preamble, delimiter, gap).
        wire_overhead_bytes: u64,
        /// Bytes of the frame the DMA does not move (the FCS the MAC adds or strips).
        fcs_bytes: u64,
    },
    /// A drive: its rated random reads a second of `io_bytes` each, which it writes to host
    /// memory.
    Storage {
        /// Rated random reads a second.
        read_iops: u64,
        /// Bytes per read.
        io_bytes: u64,
    },
    /// A copy engine: its rated copy throughput (bytes copied a second, each read once and
    /// written once) with copies of `copy_bytes`, memory in its node.
    CopyEngine {
        /// Rated copy throughput, bytes per microsecond.
        bytes_per_us: u64,
        /// Bytes per copy at that rating.
        copy_bytes: u64,
    },
    /// A DMA engine: its rated throughput each way with transfers of `transfer_bytes`.
    DmaEngine {
        /// Rated throughput each way, bytes per microsecond.
        bytes_per_us: u64,
        /// Bytes per transfer at that rating.
        transfer_bytes: u64,
    },
}

impl DeviceRating {
    /// A copy engine's rating as copies a second of a size: `(copy_bytes, copies_per_s)`.
    pub fn copy_need(&self) -> Option<(u64, f64)> {
        match *self {
            DeviceRating::CopyEngine {
                bytes_per_us,
                copy_bytes,
            } => Some((copy_bytes, bytes_per_us as f64 * 1e6 / copy_bytes as f64)),
            _ => None,
        }
    }
}

/// One direction's need: DMA transfers a second of `size_bytes`, reads (device reads memory)
/// or writes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct RatedNeed {
    /// Whether the device reads host memory (else it writes it).
    pub read: bool,
    /// Bytes per DMA transfer.
    pub size_bytes: u64,
    /// Transfers a second the rating needs.
    pub transfers_per_s: f64,
}

impl DeviceRating {
    /// Read the section under `prefix`, each value range-checked.
    pub fn read(r: &mut ParamReader<'_>, prefix: &str) -> Result<DeviceRating> {
        let f = |name: &str| format!("{prefix}.{name}");
        let kind = r.choice(&f("kind"), &["nic", "storage", "dma-engine", "copy-engine"])?;
        Ok(match kind.as_str() {
            "nic" => DeviceRating::Nic {
                direction: r.choice(&f("direction"), &["read", "write", "both"])?,
                line_rate_gbit_s: r.u64(&f("line_rate_gbit_s"), 1..=1600)?,
                ports: r.u64(&f("ports"), 1..=16)?,
                min_frame_bytes: r.u64(&f("min_frame_bytes"), 1..=16_384)?,
                wire_overhead_bytes: r.u64(&f("wire_overhead_bytes"), 0..=1024)?,
                fcs_bytes: r.u64(&f("fcs_bytes"), 0..=16)?,
            },
            "storage" => DeviceRating::Storage {
                read_iops: r.u64(&f("read_iops"), 1..=1_000_000_000)?,
                io_bytes: r.u64(&f("io_bytes"), 1..=1 << 24)?,
            },
            "copy-engine" => DeviceRating::CopyEngine {
                bytes_per_us: r.u64(&f("bytes_per_us"), 1..=10_000_000)?,
                copy_bytes: r.u64(&f("copy_bytes"), 1..=1 << 30)?,
            },
            _ => DeviceRating::DmaEngine {
                bytes_per_us: r.u64(&f("bytes_per_us"), 1..=10_000_000)?,
                transfer_bytes: r.u64(&f("transfer_bytes"), 1..=1 << 24)?,
            },
        })
    }

    /// What the rating needs of the DMA, each way it moves data (none for a copy engine, whose
    /// copies are no DMA over a link: [`DeviceRating::copy_need`]).
    pub fn needs(&self) -> Vec<RatedNeed> {
        match *self {
            DeviceRating::CopyEngine { .. } => Vec::new(),
            DeviceRating::Nic {
                ref direction,
                line_rate_gbit_s,
                ports,
                min_frame_bytes,
                wire_overhead_bytes,
                fcs_bytes,
            } => {
                let wire_bits = (min_frame_bytes + wire_overhead_bytes) as f64 * 8.0;
                let frames = (line_rate_gbit_s * ports) as f64 * 1e9 / wire_bits;
                let size_bytes = min_frame_bytes.saturating_sub(fcs_bytes).max(1);
                [true, false]
                    .into_iter()
                    .filter(|&read| direction == "both" || (direction == "read") == read)
                    .map(|read| RatedNeed {
                        read,
                        size_bytes,
                        transfers_per_s: frames,
                    })
                    .collect()
            }
            DeviceRating::Storage {
                read_iops,
                io_bytes,
            } => vec![RatedNeed {
                read: false,
                size_bytes: io_bytes,
                transfers_per_s: read_iops as f64,
            }],
            DeviceRating::DmaEngine {
                bytes_per_us,
                transfer_bytes,
            } => [true, false]
                .map(|read| RatedNeed {
                    read,
                    size_bytes: transfer_bytes,
                    transfers_per_s: bytes_per_us as f64 * 1e6 / transfer_bytes as f64,
                })
                .to_vec(),
        }
    }
}
