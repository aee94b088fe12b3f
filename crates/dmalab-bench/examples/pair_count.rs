//! A fixed number of one-page allocate/free pairs on one design, for an instruction counter:
//! `valgrind --tool=callgrind target/release/examples/pair_count DESIGN N` at two values of N,
//! and the difference over the difference of N is the instructions a pair costs, the loop's
//! own included (the method of `docs/results/2026-11-26-linux-rcache.md`).
use std::hint::black_box;

use dmalab_bench::linux_rcache::LinuxRcache;
use dmalab_iova::{new_allocator, AllocRequest, AllocatorKind, DomainConfig, IovaAllocator};

fn main() {
    let mut args = std::env::args().skip(1);
    let design = args.next().unwrap_or_else(|| "segtree".into());
    let n: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let cfg = DomainConfig::with_address_bits(36, 4096).expect("a 36-bit domain");
    let a: Box<dyn IovaAllocator> = match design.as_str() {
        "linux-rcache" => Box::new(LinuxRcache::with_cpu_slots(cfg, 2).expect("valid")),
        _ => new_allocator(AllocatorKind::parse(&design).expect("a design name"), cfg)
            .expect("valid"),
    };
    let req = AllocRequest::pages(1);
    for _ in 0..n {
        let r = black_box(&a).allocate(black_box(&req)).expect("room");
        black_box(&a).free(r.pfn_lo, r.pages).expect("live");
    }
}
