//! Seed 003's claims (P3-*): the IOVA allocator and IOTLB flushing on an Intel VT-d server of
//! 2008, run through the DMA-mapping layer with dmalab's real allocators inside.

use super::{fitted_to, ClaimResult};
use crate::config::platform::{Picks, Platform};
use crate::config::workload::IoScenario;
use crate::dma::{DmaMapper, MapperConfig};
use crate::error::{Result, SimError};
use crate::iommu::flush::FlushPolicy;
use crate::iommu::Translation;
use crate::progress::Progress;
use crate::proto::X86_INTERRUPT_WINDOW;
use crate::units::Ps;
use crate::workload::block::{run_on_bus, IoResult};
use dmalab_iova::AllocatorKind;
use serde_json::json;

const VTD: &str = "intel-vtd-2008-server";

/// The ids of this seed's claims, in `docs/CLAIMS.md` order.
pub(super) const IDS: &[&str] = &["P3-IOPS", "P3-1GBE", "P3-DEFER"];

/// Linux's deferred flush of 2008: a flush every 250 unmaps (the seed's HIGH_WATER_MARK) or
/// after 10 ms (the unmap timer of the Intel IOMMU code).
const DEFERRED: FlushPolicy = FlushPolicy::Deferred {
    high_water: 250,
    timeout: Ps(10_000_000_000),
};

/// One of the seed's three configurations.
#[derive(Clone)]
pub(super) struct Config {
    name: &'static str,
    translation: Translation,
    allocator: Option<AllocatorKind>,
    flush: FlushPolicy,
}

/// IOMMU disabled; mainline (red-black tree, deferred flush); the patch (bitmap, which dropped
/// the deferred flush tables, so strict).
pub(super) const CONFIGS: [Config; 3] = [
    Config {
        name: "IOMMU disabled",
        translation: Translation::None,
        allocator: None,
        flush: FlushPolicy::Strict,
    },
    Config {
        name: "red-black tree",
        translation: Translation::PageTable,
        allocator: Some(AllocatorKind::RbTree),
        flush: DEFERRED,
    },
    Config {
        name: "bitmap",
        translation: Translation::PageTable,
        allocator: Some(AllocatorKind::Bitmap),
        flush: FlushPolicy::Strict,
    },
];

/// The seed's load: one thread, one 1 KB I/O at a time.
pub(super) const ONE_THREAD_1K: IoScenario = IoScenario {
    io_bytes: 1024,
    threads: 1,
    queue_depth: 1,
    ios: 20_000,
    buffers: 1,
    seed: 1,
};

/// Run one configuration on `platform`.
pub(super) fn run_config(
    platform: &Platform,
    c: &Config,
    scenario: IoScenario,
) -> Result<(IoResult, DmaMapper)> {
    let config = MapperConfig {
        translation: c.translation,
        allocator: c.allocator.clone().unwrap_or_default(),
        window_bytes: 1 << 32,
        flush: c.flush,
        cpus: scenario.threads,
        dma_mask_bits: 64,
        window_offset: 0,
        // The interrupt window VT-d decodes as MSI writes (seed 003: "IOAPIC ranges shouldn't
        // be accessed by DMA").
        reserved: vec![X86_INTERRUPT_WINDOW],
    };
    let mut mapper = DmaMapper::new(&config, platform.iommu()?.clone())?;
    let result = run_on_bus(
        &mut mapper,
        platform.io()?,
        scenario,
        Some(&platform.bus),
        &Progress::new(),
    )?;
    Ok((result, mapper))
}

pub(super) fn run_claim(id: &'static str) -> Result<Vec<ClaimResult>> {
    let hba = Platform::builtin(VTD, &Picks::new())?;
    match id {
        "P3-IOPS" => iops_claim(&hba),
        "P3-1GBE" => gbe_claim(),
        "P3-DEFER" => Ok(vec![defer_claim(&hba)?]),
        _ => Err(SimError::UnknownClaim {
            id: id.to_string(),
            known: IDS.join(", "),
        }),
    }
}

fn breakdown_line(name: &str, r: &IoResult, mapper: &DmaMapper) -> String {
    let b = &r.per_io;
    let m = &b.mapping;
    let s = mapper.stats();
    format!(
        "  {name:<15} {:>9.0} IOPS  per I/O (us): submit {:.3}, complete {:.3}, device {:.3}, \
         translation {:.3}, alloc {:.3}, free {:.3}, page table {:.3}, IOTLB flush {:.3}; \
         IOTLB hit rate {:.2}, allocator nodes {} words {} locks {}\n",
        r.iops,
        b.submit_ps.as_us_f64(),
        b.complete_ps.as_us_f64(),
        b.device_ps.as_us_f64(),
        b.translation_ps.as_us_f64(),
        m.alloc_ps.as_us_f64(),
        m.free_ps.as_us_f64(),
        m.table_ps.as_us_f64(),
        m.flush_ps.as_us_f64(),
        s.iotlb.hit_rate(),
        s.allocator_work.nodes_visited,
        s.allocator_work.words_scanned,
        s.allocator_work.lock_acquisitions,
    )
}

fn iops_claim(hba: &Platform) -> Result<Vec<ClaimResult>> {
    let mut results = Vec::new();
    let mut text = String::from("one thread, 1 KB I/Os, queue depth 1:\n");
    for c in &CONFIGS {
        let (r, mapper) = run_config(hba, c, ONE_THREAD_1K)?;
        text.push_str(&breakdown_line(c.name, &r, &mapper));
        results.push(r);
    }
    let base = results[0].iops;
    text.push_str(&format!(
        "  (published: 145253.1, 118313.0, 128954.1 IOPS; modelled base {base:.0})\n"
    ));
    let mut rows = Vec::new();
    for (i, published) in [(1, 0.814), (2, 0.887)] {
        let ratio = results[i].iops / base;
        let case = CONFIGS[i].name;
        rows.push(ClaimResult {
            id: "P3-IOPS",
            case,
            platform: VTD,
            published: json!(published),
            modelled: json!((ratio * 1000.0).round() / 1000.0),
            unit: "IOPS / IOMMU disabled",
            error: Some((ratio - published) / published),
            tolerance: "ratio within 0.02",
            passed: (ratio - published).abs() <= 0.02,
            fitted_here: fitted_to(hba, "P3-IOPS", case),
            breakdown: text.clone(),
        });
    }
    Ok(rows)
}

fn gbe_claim() -> Result<Vec<ClaimResult>> {
    let picks = Picks::from([("device".to_string(), "gbe".to_string())]);
    let gbe = Platform::builtin(VTD, &picks)?;
    // A NIC sending full-sized frames from a ring of 64.
    let scenario = IoScenario {
        io_bytes: 1514,
        threads: 1,
        queue_depth: 64,
        ios: 20_000,
        buffers: 64,
        seed: 1,
    };
    let mut text = String::from("1 Gb Ethernet, 1514-byte frames, 64 in flight:\n");
    let mut rates = Vec::new();
    for c in &CONFIGS {
        let (r, mapper) = run_config(&gbe, c, scenario)?;
        text.push_str(&breakdown_line(c.name, &r, &mapper));
        text.push_str(&format!(
            "                  {:.1} Mbit/s of frames, CPU {:.0}% busy, wire {:.0}% busy\n",
            r.bytes_per_s * 8.0 / 1e6,
            r.cpu_utilization * 100.0,
            r.device_utilization * 100.0
        ));
        rates.push(r.bytes_per_s);
    }
    let worst = rates
        .iter()
        .map(|r| (r / rates[0] - 1.0).abs())
        .fold(0.0, f64::max);
    Ok(vec![ClaimResult {
        id: "P3-1GBE",
        case: "largest difference from IOMMU disabled",
        platform: VTD,
        published: json!(0.0),
        modelled: json!((worst * 1e4).round() / 100.0),
        unit: "% throughput",
        error: Some(worst),
        tolerance: "within 2%",
        passed: worst <= 0.02,
        fitted_here: fitted_to(&gbe, "P3-1GBE", ""),
        breakdown: text,
    }])
}

fn defer_claim(hba: &Platform) -> Result<ClaimResult> {
    let mut per_unmap = Vec::new();
    let mut text = String::from("red-black tree, one thread, 1 KB I/Os; unmap cost per unmap:\n");
    for (name, flush) in [
        ("strict", FlushPolicy::Strict),
        ("deferred (250)", DEFERRED),
    ] {
        let c = Config {
            name,
            translation: Translation::PageTable,
            allocator: Some(AllocatorKind::RbTree),
            flush,
        };
        let (r, mapper) = run_config(hba, &c, ONE_THREAD_1K)?;
        let s = mapper.stats();
        let unmap_ps =
            (s.time.free_ps.0 + s.time.flush_ps.0 + r.per_io.mapping.table_ps.0 / 2 * s.unmaps)
                / s.unmaps.max(1);
        let e = s.exposure;
        text.push_str(&format!(
            "  {name:<15} {:.3} us per unmap (IOTLB flush {:.3}, free {:.3}, entry clear {:.3}); {:.0} IOPS; \
             {} unmapped pages left reachable, longest {:.3} us\n",
            unmap_ps as f64 / 1e6,
            s.time.flush_ps.0 as f64 / s.unmaps.max(1) as f64 / 1e6,
            s.time.free_ps.0 as f64 / s.unmaps.max(1) as f64 / 1e6,
            r.per_io.mapping.table_ps.as_us_f64() / 2.0,
            r.iops,
            e.pages_exposed,
            e.max_window_ps.as_us_f64(),
        ));
        per_unmap.push(unmap_ps as f64 / 1e6);
    }
    Ok(ClaimResult {
        id: "P3-DEFER",
        case: "unmap cost, strict vs deferred",
        platform: VTD,
        published: json!("deferred much cheaper per unmap"),
        modelled: json!(format!(
            "strict {:.3} us, deferred {:.3} us per unmap",
            per_unmap[0], per_unmap[1]
        )),
        unit: "us per unmap",
        error: None,
        tolerance: "deferred cheaper per unmap",
        passed: per_unmap[1] < per_unmap[0],
        fitted_here: fitted_to(hba, "P3-DEFER", ""),
        breakdown: text,
    })
}
