//! One-page allocate/free pairs on several designs in turn, in the same process: the median
//! nanoseconds a pair over many short rounds, and each design's ratio to the first. A quick
//! check of the hot path between edits (`pair_count` counts instructions; this times them).
//! `cargo run --release -p dmalab-bench --example pair_time -- [ROUNDS] [BACKGROUND] [DESIGN...]`
//! (BACKGROUND: live one-page ranges each design holds through the run; default 0).
use std::hint::black_box;
use std::time::Instant;

use dmalab_bench::linux_rcache::LinuxRcache;
use dmalab_iova::{new_allocator, AllocRequest, AllocatorKind, DomainConfig, IovaAllocator};

const PAIRS: u64 = 1 << 17;

fn make(design: &str) -> Box<dyn IovaAllocator> {
    let cfg = DomainConfig::with_address_bits(36, 4096).expect("a 36-bit domain");
    match design {
        "linux-rcache" => Box::new(LinuxRcache::with_cpu_slots(cfg, 2).expect("valid")),
        _ => {
            new_allocator(AllocatorKind::parse(design).expect("a design name"), cfg).expect("valid")
        }
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(31);
    let background: usize = args.next().and_then(|s| s.parse().ok()).unwrap_or(0);
    let mut designs: Vec<String> = args.collect();
    if designs.is_empty() {
        designs = vec!["linux-rcache".into(), "segtree".into()];
    }
    let doms: Vec<_> = designs.iter().map(|d| make(d)).collect();
    let req = AllocRequest::pages(1);
    // Live ranges kept through the run, so the pairs reuse another offset.
    let _kept: Vec<_> = doms
        .iter()
        .map(|a| {
            (0..background)
                .map(|_| a.allocate(&req).expect("room"))
                .collect::<Vec<_>>()
        })
        .collect();
    let mut ns = vec![Vec::with_capacity(rounds); doms.len()];
    for _ in 0..rounds {
        for (a, out) in doms.iter().zip(ns.iter_mut()) {
            let t = Instant::now();
            for _ in 0..PAIRS {
                let r = black_box(a).allocate(black_box(&req)).expect("room");
                black_box(a).free(r.pfn_lo, r.pages).expect("live");
            }
            out.push(t.elapsed().as_nanos() as f64 / PAIRS as f64);
        }
    }
    let meds: Vec<f64> = ns.iter_mut().map(|v| median(v)).collect();
    for (d, m) in designs.iter().zip(&meds) {
        println!("{d:14} {m:6.2} ns a pair, {:.3}x the first", meds[0] / m);
    }
}
