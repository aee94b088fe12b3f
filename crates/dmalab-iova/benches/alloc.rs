//! Criterion micro-benchmarks: one map+unmap of one page per design (the `dmalab bench iova`
//! command runs the full comparison with ratios).

use criterion::{criterion_group, criterion_main, Criterion};
use dmalab_iova::{new_allocator, AllocRequest, AllocatorKind, DomainConfig};

fn map_unmap(c: &mut Criterion) {
    let cfg = DomainConfig::with_address_bits(36, 4096).expect("valid domain");
    let mut g = c.benchmark_group("map-unmap-1page");
    for name in AllocatorKind::NAMES {
        let a =
            new_allocator(AllocatorKind::parse(name).expect("known name"), cfg).expect("builds");
        let req = AllocRequest::pages(1).size_aligned();
        g.bench_function(name, |b| {
            b.iter(|| {
                let r = a.allocate(&req).expect("space");
                a.free(r.pfn_lo, r.pages).expect("live");
            })
        });
    }
    g.finish();
}

criterion_group!(benches, map_unmap);
criterion_main!(benches);
