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
}

impl DeviceEngine {
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
        })
    }
}
