//! Copy-break, answered for a platform: is copying a small frame into a pre-mapped, aligned
//! buffer cheaper than mapping it where it lies (an unaligned DMA plus a TCE map and unmap)?
//!
//! Seed 001 leaves this open ("What is more expensive, unaligned DMA or TCE?"). dmalab answers
//! it per frame size with the stream model of [`crate::workload::stream`]: both policies' stages per
//! frame, the throughput each reaches, the winner, and where the CPU costs of the two cross.

use crate::config::platform::Platform;
use crate::error::Result;
use crate::workload::stream::{run, StreamResult, StreamScenario, TxPolicy};
use serde::Serialize;

/// Both policies at one frame size.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CopyBreakPoint {
    /// Bytes per frame (Ethernet header to end of payload).
    pub frame_bytes: u64,
    /// Map the frame where it lies (unaligned DMA, TCE map and unmap).
    pub map: StreamResult,
    /// Copy it into a pre-mapped aligned buffer.
    pub copy: StreamResult,
    /// `copy` or `map`: the higher throughput (`copy` on a tie: it also spares the TCE space).
    pub winner: &'static str,
}

/// The whole answer for a platform.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CopyBreakAnswer {
    /// The comparison at the full-sized frame.
    pub full_frame: CopyBreakPoint,
    /// The frame sizes (from the smallest TCP frame to the MTU) at which copying wins.
    pub copy_wins_bytes: (u64, u64),
    /// Whether copying wins at every size swept.
    pub copy_wins_everywhere: bool,
    /// The frame size above which a copy costs the CPU more than a TCE map plus unmap (the
    /// CPU-only crossover; the bus savings of aligned DMA come on top of it).
    pub cpu_crossover_bytes: u64,
}

/// Compare the two policies at one frame size (unaligned receive as Linux, for both).
pub fn compare(platform: &Platform, frame_bytes: u64) -> Result<CopyBreakPoint> {
    let base = StreamScenario {
        frame_bytes: Some(frame_bytes),
        ..StreamScenario::LINUX
    };
    let map = run(&platform.bus, platform.stream()?, base)?;
    let copy = run(
        &platform.bus,
        platform.stream()?,
        StreamScenario {
            tx: TxPolicy::CopyAligned,
            ..base
        },
    )?;
    let winner = if copy.per_send_ps <= map.per_send_ps {
        "copy"
    } else {
        "map"
    };
    Ok(CopyBreakPoint {
        frame_bytes,
        map,
        copy,
        winner,
    })
}

/// Sweep every frame size from the smallest TCP frame to the MTU.
pub fn answer(platform: &Platform) -> Result<CopyBreakAnswer> {
    let params = platform.stream()?;
    let full = params.frame_bytes();
    let smallest = params.min_frame_bytes();
    let mut wins = Vec::new();
    for frame in smallest..=full {
        if compare(platform, frame)?.winner == "copy" {
            wins.push(frame);
        }
    }
    let span = (
        wins.first().copied().unwrap_or(0),
        wins.last().copied().unwrap_or(0),
    );
    let everywhere = wins.len() as u64 == full - smallest + 1;
    let mapping_ns = params.tce_map_ns + params.tce_unmap_ns;
    let cpu_crossover_bytes =
        mapping_ns.saturating_sub(params.copy_setup_ns) * 1024 / params.copy_ns_per_kib.max(1);
    Ok(CopyBreakAnswer {
        full_frame: compare(platform, full)?,
        copy_wins_bytes: span,
        copy_wins_everywhere: everywhere,
        cpu_crossover_bytes,
    })
}
