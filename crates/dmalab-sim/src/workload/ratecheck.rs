//! The datasheet check (`dmalab platforms --check`): does the model let a device do what its own
//! datasheet says it does, on this host?
//!
//! A device's `[device_rating]` ([`DeviceRating`]) implies
//! DMA transfers a second of a size, each way the data moves: a NIC's every port at line rate
//! with its smallest frames (IEEE 802.3: 64 bytes with the FCS, 20 bytes of preamble, delimiter
//! and gap), a drive's rated random reads written to host memory, an engine's rated throughput.
//! Each is measured as `bench dma` measures a point (local, warm, sequential over 1 MiB, aligned)
//! and judged:
//! - **pass**: the model reaches the rated rate;
//! - **fail**: it does not, and the part that limits it is the device's own (its engine's
//!   contexts or issue port, its read tags) while the trained link could carry the rate: a
//!   device whose file cannot do what its datasheet says;
//! - **host**: it does not, because of the host: the link as trained cannot carry the rate, or
//!   the root complex, memory or socket link limits;
//! - **unused** (a note, not a failure): the device's own link is faster or wider than the link
//!   it trains to on this host, so part of its capacity is never used there;
//! - **unrated** (a note, not a failure): the platform's devices state no rating (a benchmark's
//!   firmware, a part without a datasheet figure), so there is nothing to hold them to.

use crate::bus::device::DeviceRating;
use crate::bus::memory::{Access, Cache, Home};
use crate::bus::trace::Direction;
use crate::config::platform::Platform;
use crate::error::{Result, SimError};
use crate::workload::copy::Placement;
use crate::workload::devdma::{DeviceDma, DmaPoint, IommuMode};
use serde::Serialize;

/// The parts that belong to the device, for telling a device's shortfall from the host's.
const DEVICE_PARTS: [&str; 3] = ["engine contexts", "device engine", "tags"];

/// How one direction of a device's rating fares on a host.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// The model reaches the rated rate.
    Pass,
    /// The device's own parts keep it below its rating where the link allows it.
    Fail,
    /// The host (its link as trained, root complex or memory) keeps the device below its
    /// rating.
    Host,
    /// Part of the device's link capacity is never used on this host (a note).
    Unused,
    /// No device of the platform states a rating: nothing to check (a note).
    Unrated,
}

/// One line of the check.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CheckLine {
    /// The platform checked (`HOST+DEVICE` or a host with its own device).
    pub platform: String,
    /// Which way the data moves (`read`: the device reads memory), or `link`.
    pub what: String,
    /// Bytes per DMA transfer.
    pub size_bytes: u64,
    /// Transfers a second the rating needs.
    pub needed_per_s: f64,
    /// Transfers a second the model reaches.
    pub modelled_per_s: f64,
    /// The part that limits the modelled rate.
    pub limit: String,
    /// The judgement.
    pub verdict: Verdict,
    /// Why, in a sentence.
    pub reason: String,
}

/// Check the platform's devices against their ratings: the device in its PCIe slot and the
/// copy engine in its engine slot, each where its file states a rating; a note where the
/// platform has a device that states none, and an error where it describes no device.
pub fn check(platform: &Platform) -> Result<Vec<CheckLine>> {
    let mut out = Vec::new();
    if let Some(rating) = &platform.device_rating {
        out.extend(check_link_device(platform, rating)?);
    }
    if let Some((size_bytes, copies_per_s)) =
        platform.engine_rating.as_ref().and_then(|r| r.copy_need())
    {
        out.push(check_engine(platform, size_bytes, copies_per_s)?);
    }
    if platform.device_rating.is_none() && platform.engine_rating.is_none() {
        // A platform that describes no device at all is an error; one whose device states no
        // rating gets a note, so that a host built for a benchmark's device can be checked.
        if platform.device_dma.is_none() && platform.copy_costs().is_err() {
            return Err(SimError::NotDescribed {
                platform: platform.name.clone(),
                what: "a device rating ([device_rating] in its device file)".into(),
            });
        }
        out.push(CheckLine {
            platform: platform.name.clone(),
            what: "rating".into(),
            size_bytes: 0,
            needed_per_s: 0.0,
            modelled_per_s: 0.0,
            limit: String::new(),
            verdict: Verdict::Unrated,
            reason: "its device file states no rating ([device_rating]): nothing to hold it to"
                .into(),
        });
    }
    Ok(out)
}

/// A copy engine's rated copy rate against a stream of local copies of its rated size: each
/// channel works one copy at a time (its start-up, then the bytes), the core submits and
/// collects every copy, and on a host with a memory path DRAM reads and writes each byte once.
/// The engine's channels limiting below the rating fail it; the core or DRAM is the host's.
fn check_engine(platform: &Platform, size_bytes: u64, copies_per_s: f64) -> Result<CheckLine> {
    let (_, engine) = platform.copy_costs()?;
    let at = Placement::LOCAL;
    let channels = engine.channels.max(1) as f64;
    let engine_per_s = channels * 1e12 / engine.engine_ps(size_bytes, at) as f64;
    let core_per_s = 1e12 / engine.cpu_ps(at).max(1) as f64;
    let dram_per_s = platform.memory.as_ref().map_or(f64::INFINITY, |m| {
        m.dram_bytes_per_us as f64 * 1e6 / (2 * size_bytes) as f64
    });
    let (modelled_per_s, limit) = [
        (engine_per_s, "engine channels"),
        (core_per_s, "submitting core"),
        (dram_per_s, "DRAM"),
    ]
    .into_iter()
    .fold((f64::INFINITY, ""), |a, b| if b.0 < a.0 { b } else { a });
    let (verdict, reason) = if modelled_per_s >= copies_per_s * 0.999 {
        (Verdict::Pass, "reaches its rated rate".to_string())
    } else if limit == "engine channels" {
        (
            Verdict::Fail,
            format!(
                "its {} channels at their copy rate and start-up stay below its rating",
                engine.channels
            ),
        )
    } else {
        (Verdict::Host, format!("the host's {limit} limits it"))
    };
    Ok(CheckLine {
        platform: platform.name.clone(),
        what: "copy".into(),
        size_bytes,
        needed_per_s: copies_per_s,
        modelled_per_s,
        limit: limit.into(),
        verdict,
        reason,
    })
}

/// A PCIe device's rated transfers against `bench dma`'s measure of them, and a note where its
/// link trains down.
fn check_link_device(platform: &Platform, rating: &DeviceRating) -> Result<Vec<CheckLine>> {
    let model = DeviceDma::new(platform)?;
    let (link, _, _) = platform.device_dma_path()?;
    let raw_bytes_per_s = link.raw_bytes_per_s() as f64;
    let mut out = Vec::new();
    for need in rating.needs() {
        let direction = if need.read {
            Direction::Read
        } else {
            Direction::Write
        };
        let point = DmaPoint {
            direction,
            size_bytes: need.size_bytes,
            offset_bytes: 0,
            window_bytes: (need.size_bytes.next_power_of_two()).max(1 << 20),
            access: Access::Seq,
            memory: Home::Local,
            cache: Cache::Warm,
            iommu: IommuMode::Off,
            page_bytes: 4096,
            device_offset_bytes: 0,
            then_read: false,
            mixed: false,
        };
        let r = model.measure(&point)?;
        let payload = need.transfers_per_s * need.size_bytes as f64;
        let p = link.params();
        let trained = format!("Gen{} x{}", p.generation, p.lanes);
        let trained_down = platform
            .device_link
            .is_some_and(|(g, l)| g > p.generation || l > p.lanes);
        let link_bound = payload > raw_bytes_per_s || r.limit.starts_with("link");
        let (verdict, reason) = if r.transactions_per_s >= need.transfers_per_s * 0.999 {
            (Verdict::Pass, "reaches its rated rate".to_string())
        } else if link_bound && trained_down {
            (
                Verdict::Host,
                format!(
                    "the link trains down to {trained} here ({:.1} GB/s raw; the rating moves \
                     {:.1} GB/s of data)",
                    raw_bytes_per_s / 1e9,
                    payload / 1e9
                ),
            )
        } else if link_bound {
            (
                Verdict::Fail,
                format!(
                    "its own {trained} link cannot carry its rated rate with these transfers \
                     and their descriptors and completions"
                ),
            )
        } else if DEVICE_PARTS.contains(&r.limit) {
            (
                Verdict::Fail,
                format!(
                    "the device's own {} keep it below its rating where the link allows it",
                    r.limit
                ),
            )
        } else {
            (Verdict::Host, format!("the host's {} limits it", r.limit))
        };
        out.push(CheckLine {
            platform: platform.name.clone(),
            what: direction_name(direction).into(),
            size_bytes: need.size_bytes,
            needed_per_s: need.transfers_per_s,
            modelled_per_s: r.transactions_per_s,
            limit: r.limit.into(),
            verdict,
            reason,
        });
    }
    if let Some((generation, lanes)) = platform.device_link {
        let p = link.params();
        if generation > p.generation || lanes > p.lanes {
            // The device's own link, untrained, is faster or wider than the root port's.
            out.push(CheckLine {
                platform: platform.name.clone(),
                what: "link".into(),
                size_bytes: 0,
                needed_per_s: 0.0,
                modelled_per_s: 0.0,
                limit: "link".into(),
                verdict: Verdict::Unused,
                reason: format!(
                    "the device's Gen{generation} x{lanes} link trains to Gen{} x{} here",
                    p.generation, p.lanes
                ),
            });
        }
    }
    Ok(out)
}

fn direction_name(d: Direction) -> &'static str {
    match d {
        Direction::Read => "read",
        Direction::Write => "write",
    }
}
