//! Seed 003's claims (P3-*): the IOVA allocator and IOTLB flushing on an Intel VT-d server of
//! 2008, run through the DMA-mapping layer with dmalab's real allocators inside.

use super::spec::{ClaimSpec, Measured};
use super::{rounded, unknown};
use crate::config::platform::Platform;
use crate::dma::DmaMapper;
use crate::error::Result;
use crate::run::run_block;
use crate::workload::block::IoResult;
use serde::Deserialize;
use serde_json::json;

/// What seed 003's claims read from their `setup` (the `workload` table is merged into the
/// scenarios).
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Setup {
    /// Each scenario's name in the breakdown, in order.
    names: Vec<String>,
    /// The IOPS the seed's table gives per configuration (shown beside the modelled ones).
    #[serde(default)]
    published_iops: Vec<f64>,
    #[expect(dead_code, reason = "read through ClaimSpec::scenario")]
    workload: Option<toml::Table>,
}

/// One of the claim's scenarios, run.
struct Ran {
    platform: Platform,
    result: IoResult,
    mapper: DmaMapper,
}

/// Run each of the claim's scenarios, in order.
fn run_all(c: &ClaimSpec) -> Result<Vec<Ran>> {
    // At least one: a claim without scenarios is refused by `scenario(0)`.
    (0..c.scenarios.len().max(1))
        .map(|i| {
            let (platform, result, mapper) = run_block(&c.scenario(i)?)?;
            Ok(Ran {
                platform,
                result,
                mapper,
            })
        })
        .collect()
}

/// Measure one of seed 003's claims.
pub(super) fn measure(c: &ClaimSpec) -> Result<Measured> {
    match c.id.as_str() {
        "P3-IOPS" => iops_claim(c),
        "P3-1GBE" => gbe_claim(c),
        "P3-DEFER" => defer_claim(c),
        _ => Err(unknown(c)),
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

fn iops_claim(c: &ClaimSpec) -> Result<Measured> {
    let setup: Setup = c.setup()?;
    let runs = run_all(c)?;
    let mut text = String::from("one thread, 1 KB I/Os, queue depth 1:\n");
    for (name, r) in setup.names.iter().zip(&runs) {
        text.push_str(&breakdown_line(name, &r.result, &r.mapper));
    }
    let base = runs[0].result.iops;
    let published: Vec<String> = setup
        .published_iops
        .iter()
        .map(|v| format!("{v:.1}"))
        .collect();
    text.push_str(&format!(
        "  (published: {} IOPS; modelled base {base:.0})\n",
        published.join(", ")
    ));
    let i = setup
        .names
        .iter()
        .position(|n| *n == c.case)
        .ok_or_else(|| unknown(c))?;
    let ratio = runs.get(i).ok_or_else(|| unknown(c))?.result.iops / base;
    Ok(Measured {
        modelled: rounded(ratio, 3),
        values: vec![ratio],
        holds: true,
        breakdown: text,
        fits: runs[0].platform.clone(),
    })
}

fn gbe_claim(c: &ClaimSpec) -> Result<Measured> {
    let setup: Setup = c.setup()?;
    let runs = run_all(c)?;
    let mut text = String::from("1 Gb Ethernet, 1514-byte frames, 64 in flight:\n");
    for (name, r) in setup.names.iter().zip(&runs) {
        text.push_str(&breakdown_line(name, &r.result, &r.mapper));
        text.push_str(&format!(
            "                  {:.1} Mbit/s of frames, CPU {:.0}% busy, wire {:.0}% busy\n",
            r.result.bytes_per_s * 8.0 / 1e6,
            r.result.cpu_utilization * 100.0,
            r.result.device_utilization * 100.0
        ));
    }
    let base = runs[0].result.bytes_per_s;
    let worst = runs
        .iter()
        .map(|r| (r.result.bytes_per_s / base - 1.0).abs())
        .fold(0.0, f64::max);
    Ok(Measured {
        modelled: rounded(worst * 100.0, 2),
        values: vec![worst * 100.0],
        holds: true,
        breakdown: text,
        fits: runs[0].platform.clone(),
    })
}

fn defer_claim(c: &ClaimSpec) -> Result<Measured> {
    let setup: Setup = c.setup()?;
    let runs = run_all(c)?;
    let mut per_unmap = Vec::new();
    let mut text = String::from("red-black tree, one thread, 1 KB I/Os; unmap cost per unmap:\n");
    for (name, run) in setup.names.iter().zip(&runs) {
        let r = &run.result;
        let s = run.mapper.stats();
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
    let [strict, deferred] = per_unmap[..] else {
        return Err(unknown(c));
    };
    Ok(Measured {
        modelled: json!(format!(
            "strict {strict:.3} us, deferred {deferred:.3} us per unmap"
        )),
        values: Vec::new(),
        holds: deferred < strict,
        breakdown: text,
        fits: runs[0].platform.clone(),
    })
}
