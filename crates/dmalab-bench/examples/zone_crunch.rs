//! Whether a crunch in the 32-bit zone slows the rest of a `segtree` domain:
//! `zone_crunch [crunch] [ops]`. With `crunch`, one thread first fills the 32-bit zone of a
//! 36-bit domain with 1-page ranges until a request there fails (which caps the caching of the
//! zone, see `ZONE_CACHE_SHARE`); then two threads run `mixed`-like churn (2,000 live ranges
//! each, sizes 1 to 64 pages as in the benchmark, size-aligned, no limit) for `ops` steps each,
//! and the line printed is their calls per second.
use std::time::Instant;

use dmalab_iova::{AllocRequest, DomainConfig, IovaAllocator, Pfn, SegTreeAllocator};

/// splitmix64, as the benchmark's workloads.
fn next(s: &mut u64) -> u64 {
    *s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *s;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The benchmark's `mixed` sizes: half 1 page, a quarter 2-4, 15% 5-16, 10% 17-64.
fn pages(s: &mut u64) -> u64 {
    match next(s) % 100 {
        0..=49 => 1,
        50..=74 => 2 + next(s) % 3,
        75..=89 => 5 + next(s) % 12,
        _ => 17 + next(s) % 48,
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let crunch = args.iter().any(|a| a == "crunch");
    let ops: u64 = args
        .iter()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(4_000_000);
    let cfg = DomainConfig::with_address_bits(36, 4096).expect("a 36-bit domain");
    let dom = SegTreeAllocator::new(cfg).expect("a domain");
    let mut held = Vec::new();
    if crunch {
        let req = AllocRequest::pages(1).below(cfg.pfn_32bit());
        while let Ok(r) = dom.allocate(&req) {
            held.push(r);
        }
    }
    let t0 = Instant::now();
    std::thread::scope(|sc| {
        for t in 0..2u64 {
            let dom = &dom;
            sc.spawn(move || {
                let mut s = t + 1;
                let take = |s: &mut u64| {
                    let p = pages(s);
                    let r = dom.allocate(&AllocRequest::pages(p).size_aligned());
                    (r.expect("the space above 4 GiB has room").pfn_lo, p)
                };
                let mut live: Vec<(Pfn, u64)> = (0..2000).map(|_| take(&mut s)).collect();
                for _ in 0..ops {
                    let i = (next(&mut s) % live.len() as u64) as usize;
                    let (pfn, p) = live[i];
                    dom.free(pfn, p).expect("a live range");
                    live[i] = take(&mut s);
                }
            });
        }
    });
    let dt = t0.elapsed().as_secs_f64();
    println!(
        "32-bit zone {}: {:.1}M calls/s (two threads, mixed sizes, no limit)",
        if crunch { "full" } else { "untouched" },
        4.0 * ops as f64 / dt / 1e6
    );
}
