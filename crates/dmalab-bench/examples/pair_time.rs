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

fn make(design: &str) -> Result<Box<dyn IovaAllocator>, String> {
    let cfg = DomainConfig::with_address_bits(36, 4096).map_err(|e| e.to_string())?;
    Ok(match design {
        "linux-rcache" => Box::new(LinuxRcache::with_cpu_slots(cfg, 2).map_err(|e| e.to_string())?),
        _ => {
            let kind = AllocatorKind::parse(design).map_err(|e| format!("{e}, linux-rcache"))?;
            new_allocator(kind, cfg).map_err(|e| e.to_string())?
        }
    })
}

/// A count argument, or a one-line error naming it.
fn count(arg: Option<String>, name: &str, default: usize) -> usize {
    match arg.map(|s| s.parse::<usize>()) {
        None => default,
        Some(Ok(n)) if n > 0 || name == "BACKGROUND" => n,
        _ => fail(&format!(
            "{name} must be a whole number (ROUNDS at least 1)"
        )),
    }
}

fn fail(msg: &str) -> ! {
    eprintln!("pair_time: error: {msg}");
    std::process::exit(2)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let rounds = count(args.next(), "ROUNDS", 31);
    let background = count(args.next(), "BACKGROUND", 0);
    let mut designs: Vec<String> = args.collect();
    if designs.is_empty() {
        designs = vec!["linux-rcache".into(), "segtree".into()];
    }
    let doms: Vec<_> = designs
        .iter()
        .map(|d| make(d).unwrap_or_else(|e| fail(&e)))
        .collect();
    let req = AllocRequest::pages(1);
    // Live ranges kept through the run, so the pairs reuse another offset.
    let _kept: Vec<_> = doms
        .iter()
        .map(|a| {
            (0..background)
                .map(|_| a.allocate(&req))
                .collect::<Result<Vec<_>, _>>()
                .unwrap_or_else(|e| fail(&format!("BACKGROUND: {e}")))
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
