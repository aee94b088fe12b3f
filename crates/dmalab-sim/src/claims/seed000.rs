//! Seed 000's claims (P0-*): the 64-bit direct DMA window on a PowerLinux 7R2 pair, against the
//! default window with TCE hypervisor calls per I/O, under uperf-style UDP request/response and
//! TCP stream sweeps.

use super::spec::{ClaimSpec, Measured};
use super::{rounded, unknown};
use crate::config::platform::{Picks, Platform};
use crate::config::workload::NetWorkload;
use crate::dma::{DmaMapper, MapperConfig};
use crate::error::Result;
use crate::iommu::flush::FlushPolicy;
use crate::iommu::Translation;
use crate::progress::Progress;
use crate::workload::net::{run_on_bus, NetResult};
use dmalab_iova::AllocatorKind;
use serde::Deserialize;

/// What seed 000's claims read from their `setup`: a sweep (instances by message sizes), or
/// the points a blocked 64-bit slot is compared at and the options that block it.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Setup {
    #[serde(default)]
    instances: Vec<u64>,
    #[serde(default)]
    message_bytes: Vec<u64>,
    /// (instances, message bytes) pairs.
    #[serde(default)]
    points: Vec<(u64, u64)>,
    #[serde(default)]
    blocked: Picks,
}

/// The platform of the claim's `i`th scenario (0: the standard slot, 1: the 64-bit slot) with
/// `extra` options picked.
fn slot(c: &ClaimSpec, i: usize, extra: &Picks) -> Result<Platform> {
    let sc = c.scenario(i)?;
    let mut picks = sc.choices.clone();
    picks.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
    Platform::load(&sc.platform, &picks)
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

/// Measure one of seed 000's claims.
pub(super) fn measure(c: &ClaimSpec) -> Result<Measured> {
    let setup: Setup = c.setup()?;
    match c.id.as_str() {
        "P0-LAT" => latency_claim(c, &setup),
        "P0-TPUT" => throughput_claim(c, &setup),
        "P0-2TB" | "P0-DRV" => no_benefit_claim(c, &setup),
        _ => Err(unknown(c)),
    }
}

fn latency_claim(c: &ClaimSpec, setup: &Setup) -> Result<Measured> {
    let standard = slot(c, 0, &Picks::new())?;
    let direct = slot(c, 1, &Picks::new())?;
    let mut text = format!(
        "UDP request/response, MTU 1500; standard slot: {}; 64-bit slot: {}\n",
        mapper(&standard)?.1,
        mapper(&direct)?.1
    );
    let mut reductions = Vec::new();
    for &instances in &setup.instances {
        for &size in &setup.message_bytes {
            let s = run_on(&standard, rr(instances, size))?;
            let d = run_on(&direct, rr(instances, size))?;
            let cut = 1.0 - d.latency.mean_ps.0 as f64 / s.latency.mean_ps.0 as f64;
            text.push_str(&format!(
                "  {instances:>2} instances, {size:>5} B: latency {:>7.2} -> {:>7.2} us ({:+.1}%); \
                 TCE hypervisor calls {:.2} us per transaction\n",
                s.latency.mean_ps.as_us_f64(),
                d.latency.mean_ps.as_us_f64(),
                -cut * 100.0,
                (s.client_mapping.hcall_ps.0 + s.server_mapping.hcall_ps.0) as f64
                    / 1e6
                    / (s.per_second * s.elapsed_ps.0 as f64 / 1e12).max(1.0),
            ));
            reductions.push(cut);
        }
    }
    let mean = reductions.iter().sum::<f64>() / reductions.len().max(1) as f64;
    Ok(Measured {
        modelled: rounded(mean * 100.0, 1),
        values: vec![mean * 100.0],
        holds: true,
        breakdown: text,
        fits: standard,
    })
}

fn throughput_claim(c: &ClaimSpec, setup: &Setup) -> Result<Measured> {
    let standard = slot(c, 0, &Picks::new())?;
    let direct = slot(c, 1, &Picks::new())?;
    let mut text = String::from(
        "TCP stream, MTU 1500, TSO on the sender, an ACK every second frame; the receiver \
         maps a buffer per frame in the standard slot:\n",
    );
    let mut gains = Vec::new();
    for &instances in &setup.instances {
        for &size in &setup.message_bytes {
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
    let mean = gains.iter().sum::<f64>() / gains.len().max(1) as f64;
    Ok(Measured {
        modelled: rounded(mean * 100.0, 1),
        values: vec![mean * 100.0],
        holds: true,
        breakdown: text,
        fits: standard,
    })
}

/// A 64-bit slot that cannot use its direct window (the setup's `blocked` options) against a
/// standard slot.
fn no_benefit_claim(c: &ClaimSpec, setup: &Setup) -> Result<Measured> {
    let standard = slot(c, 0, &Picks::new())?;
    let blocked = slot(c, 1, &setup.blocked)?;
    let case = &c.case;
    let mut text = format!("64-bit slot, {case}: {}\n", mapper(&blocked)?.1);
    let mut worst: f64 = 0.0;
    for &(instances, size) in &setup.points {
        let s = run_on(&standard, rr(instances, size))?;
        let b = run_on(&blocked, rr(instances, size))?;
        let diff = b.latency.mean_ps.0 as f64 / s.latency.mean_ps.0 as f64 - 1.0;
        text.push_str(&format!(
            "  UDP RR {instances} instances {size} B: standard {:.2} us, this slot {:.2} us ({:+.2}%)\n",
            s.latency.mean_ps.as_us_f64(),
            b.latency.mean_ps.as_us_f64(),
            diff * 100.0
        ));
        worst = worst.max(diff.abs());
    }
    Ok(Measured {
        modelled: rounded(worst * 100.0, 2),
        values: vec![worst * 100.0],
        holds: true,
        breakdown: text,
        fits: blocked,
    })
}
