//! Seed 000's claims (P0-*): the 64-bit direct DMA window on a PowerLinux 7R2 pair, against the
//! default window with TCE hypervisor calls per I/O, under uperf-style UDP request/response and
//! TCP stream sweeps.

use super::{fitted_to, ClaimResult};
use crate::config::platform::{Picks, Platform};
use crate::config::workload::NetWorkload;
use crate::dma::{DmaMapper, MapperConfig};
use crate::error::{Result, SimError};
use crate::iommu::flush::FlushPolicy;
use crate::iommu::Translation;
use crate::progress::Progress;
use crate::workload::net::{run_on_bus, NetResult};
use dmalab_iova::AllocatorKind;
use serde_json::json;

const P7R2: &str = "powerlinux-7r2";

/// The ids of this seed's claims, in `docs/CLAIMS.md` order.
pub(super) const IDS: &[&str] = &["P0-LAT", "P0-TPUT", "P0-2TB", "P0-DRV"];

/// Request/response sweep: 50 instances "and also fewer", message sizes swept.
const RR_INSTANCES: [u64; 3] = [1, 10, 50];
const RR_SIZES: [u64; 5] = [1, 64, 256, 1024, 4096];
/// Stream sweep: 2, 4 and 8 instances, message sizes swept.
const STREAM_INSTANCES: [u64; 3] = [2, 4, 8];
const STREAM_SIZES: [u64; 4] = [1024, 4096, 16384, 65536];

fn platform(picks: &[(&str, &str)]) -> Result<Platform> {
    let picks: Picks = picks
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    Platform::builtin(P7R2, &picks)
}

/// The mapper one host's NIC gets on `p`: the window the partition chooses.
pub fn mapper(p: &Platform) -> Result<(DmaMapper, String)> {
    let w = p.window()?;
    let choice = w.choose();
    let config = MapperConfig {
        translation: choice.translation,
        allocator: AllocatorKind::Bitmap,
        window_bytes: w.default_window_bytes,
        flush: FlushPolicy::Strict,
        cpus: 1,
        dma_mask_bits: 64,
        window_offset: if choice.translation == Translation::DirectWindow {
            w.direct_offset
        } else {
            0
        },
        reserved: Vec::new(),
    };
    Ok((DmaMapper::new(&config, p.iommu()?.clone())?, choice.reason))
}

fn run_on(p: &Platform, workload: NetWorkload) -> Result<NetResult> {
    let (mut client, _) = mapper(p)?;
    let (mut server, _) = mapper(p)?;
    let progress = Progress::new();
    run_on_bus(
        p.net()?,
        &mut client,
        &mut server,
        workload,
        Some(&p.bus),
        &progress,
    )
}

fn rr(instances: u64, message_bytes: u64) -> NetWorkload {
    NetWorkload::UdpRr {
        instances,
        message_bytes,
        transactions: 2_000.max(instances * 40),
    }
}

fn stream(instances: u64, message_bytes: u64) -> NetWorkload {
    // 400 TSO segments' worth per instance, whatever the send size.
    let per_segment = (65_536 / message_bytes).max(1);
    NetWorkload::TcpStream {
        instances,
        message_bytes,
        messages: 400 * instances * per_segment,
    }
}

pub(super) fn run_claim(id: &'static str) -> Result<Vec<ClaimResult>> {
    match id {
        "P0-LAT" => Ok(vec![latency_claim()?]),
        "P0-TPUT" => Ok(vec![throughput_claim()?]),
        "P0-2TB" => Ok(vec![no_benefit_claim(
            id,
            "partition maximum memory 3 TB",
            ("partition", "3t"),
        )?]),
        "P0-DRV" => Ok(vec![no_benefit_claim(
            id,
            "driver without 64-bit DMA",
            ("driver", "no-64bit"),
        )?]),
        _ => Err(SimError::UnknownClaim {
            id: id.to_string(),
            known: IDS.join(", "),
        }),
    }
}

fn latency_claim() -> Result<ClaimResult> {
    let standard = platform(&[])?;
    let direct = platform(&[("slot", "64bit")])?;
    let mut text = format!(
        "UDP request/response, MTU 1500; standard slot: {}; 64-bit slot: {}\n",
        mapper(&standard)?.1,
        mapper(&direct)?.1
    );
    let mut reductions = Vec::new();
    for instances in RR_INSTANCES {
        for size in RR_SIZES {
            let s = run_on(&standard, rr(instances, size))?;
            let d = run_on(&direct, rr(instances, size))?;
            let cut = 1.0 - d.mean_latency_ps.0 as f64 / s.mean_latency_ps.0 as f64;
            text.push_str(&format!(
                "  {instances:>2} instances, {size:>5} B: latency {:>7.2} -> {:>7.2} us ({:+.1}%); \
                 TCE hypervisor calls {:.2} us per transaction\n",
                s.mean_latency_ps.as_us_f64(),
                d.mean_latency_ps.as_us_f64(),
                -cut * 100.0,
                (s.client_mapping.hcall_ps.0 + s.server_mapping.hcall_ps.0) as f64
                    / 1e6
                    / (s.per_second * s.elapsed_ps.0 as f64 / 1e12).max(1.0),
            ));
            reductions.push(cut);
        }
    }
    let mean = reductions.iter().sum::<f64>() / reductions.len() as f64;
    Ok(ClaimResult {
        id: "P0-LAT",
        case: "mean latency cut, 64-bit slot",
        platform: P7R2,
        published: json!(21.0),
        modelled: json!((mean * 1000.0).round() / 10.0),
        unit: "% lower latency",
        error: Some((mean - 0.21) / 0.21),
        tolerance: "18% to 24%",
        passed: (0.18..=0.24).contains(&mean),
        fitted_here: fitted_to(&standard, "P0-LAT", ""),
        breakdown: text,
    })
}

fn throughput_claim() -> Result<ClaimResult> {
    let standard = platform(&[])?;
    let direct = platform(&[("slot", "64bit")])?;
    let mut text = String::from(
        "TCP stream, MTU 1500, TSO on the sender, an ACK every second frame; the receiver \
         maps a buffer per frame in the standard slot:\n",
    );
    let mut gains = Vec::new();
    for instances in STREAM_INSTANCES {
        for size in STREAM_SIZES {
            let s = run_on(&standard, stream(instances, size))?;
            let d = run_on(&direct, stream(instances, size))?;
            let gain = d.bits_per_s / s.bits_per_s - 1.0;
            text.push_str(&format!(
                "  {instances} instances, {size:>5} B: {:>7.0} -> {:>7.0} Mbit/s ({:+.1}%); receiver CPU {:.0}% -> {:.0}%; \
                 receiver hypervisor calls {:.2} us per two frames\n",
                s.bits_per_s / 1e6,
                d.bits_per_s / 1e6,
                gain * 100.0,
                s.server_cpu_utilization * 100.0,
                d.server_cpu_utilization * 100.0,
                s.server_mapping.hcall_ps.0 as f64 / 1e6 / s.acks.max(1) as f64,
            ));
            gains.push(gain);
        }
    }
    let mean = gains.iter().sum::<f64>() / gains.len() as f64;
    Ok(ClaimResult {
        id: "P0-TPUT",
        case: "mean throughput gain, 64-bit slot",
        platform: P7R2,
        published: json!(11.0),
        modelled: json!((mean * 1000.0).round() / 10.0),
        unit: "% higher throughput",
        error: Some((mean - 0.11) / 0.11),
        tolerance: "8% to 14%",
        passed: (0.08..=0.14).contains(&mean),
        fitted_here: fitted_to(&standard, "P0-TPUT", ""),
        breakdown: text,
    })
}

/// A 64-bit slot that cannot use its direct window (`pick`) against a standard slot.
fn no_benefit_claim(
    id: &'static str,
    case: &'static str,
    pick: (&str, &str),
) -> Result<ClaimResult> {
    let standard = platform(&[])?;
    let blocked = platform(&[("slot", "64bit"), pick])?;
    let mut text = format!("64-bit slot, {case}: {}\n", mapper(&blocked)?.1);
    let mut worst: f64 = 0.0;
    for (instances, size) in [(50, 1), (50, 1024), (10, 4096)] {
        let s = run_on(&standard, rr(instances, size))?;
        let b = run_on(&blocked, rr(instances, size))?;
        let diff = b.mean_latency_ps.0 as f64 / s.mean_latency_ps.0 as f64 - 1.0;
        text.push_str(&format!(
            "  UDP RR {instances} instances {size} B: standard {:.2} us, this slot {:.2} us ({:+.2}%)\n",
            s.mean_latency_ps.as_us_f64(),
            b.mean_latency_ps.as_us_f64(),
            diff * 100.0
        ));
        worst = worst.max(diff.abs());
    }
    Ok(ClaimResult {
        id,
        case,
        platform: P7R2,
        published: json!(0.0),
        modelled: json!((worst * 1e4).round() / 100.0),
        unit: "% latency difference",
        error: Some(worst),
        tolerance: "within 1%",
        passed: worst <= 0.01,
        fitted_here: fitted_to(&blocked, id, ""),
        breakdown: text,
    })
}
