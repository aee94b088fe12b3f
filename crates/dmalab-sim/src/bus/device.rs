//! The device's own DMA engine (a platform's `[device_dma]` section): the part of a NIC, an
//! NVMe controller or a copy engine that turns a transfer into bus requests. The link and the
//! tags are not its only limits: the engine has a per-transfer set-up, a least gap between the
//! requests it issues, and a granularity in which it cuts a transfer before the link's own
//! Max_Payload_Size and Max_Read_Request_Size rules apply; a descriptor-driven engine also
//! fetches descriptors and writes completion records, which take link, tag and memory time.
//! (The split of a device's DMA work into descriptor fetch, data movement and write-back follows
//! the descriptor rings of NIC and NVMe datasheets, for example the NVMe Base Specification's
//! submission and completion queues.)

use crate::config::params::{ParamReader, Valid};
use crate::error::Result;
use serde::Serialize;

const SETUP_NS: Valid = Valid::Range(0, 1_000_000);
const ISSUE_NS: Valid = Valid::Range(0, 100_000);
const GRANULARITY: Valid = Valid::Pow2(4, 4096);
const RECORD_BYTES: Valid = Valid::Range(0, 4096);
const PER_BATCH: Valid = Valid::Range(1, 1024);

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
        })
    }
}
