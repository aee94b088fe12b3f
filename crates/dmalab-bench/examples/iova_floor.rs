//! Harness floor: ns per call of the map-unmap-1page loop, with and without the benchmark's
//! per-call rdtsc pair, for a do-nothing allocator and real designs.
use std::hint::black_box;
use std::time::Instant;

use dmalab_iova::{
    new_allocator, AllocRequest, AllocatorKind, DomainConfig, DomainStats, IovaAllocator,
    IovaError, IovaRange, Pfn, WorkCounters,
};

#[derive(Debug)]
struct Null(DomainConfig);
impl IovaAllocator for Null {
    fn name(&self) -> String {
        "null".into()
    }
    fn config(&self) -> &DomainConfig {
        &self.0
    }
    fn allocate(&self, req: &AllocRequest) -> Result<IovaRange, IovaError> {
        let limit = req.validate(&self.0)?;
        Ok(IovaRange {
            pfn_lo: Pfn(limit.0 - 7),
            pages: req.pages,
        })
    }
    fn free(&self, pfn: Pfn, pages: u64) -> Result<(), IovaError> {
        if pages == 0 || pfn.0 < self.0.pfn_lo.0 {
            return Err(IovaError::ZeroSize);
        }
        Ok(())
    }
    fn reserve(&self, _: Pfn, _: Pfn) -> Result<(), IovaError> {
        Ok(())
    }
    fn stats(&self) -> DomainStats {
        DomainStats::default()
    }
    fn work(&self) -> WorkCounters {
        WorkCounters::default()
    }
    fn memory_bytes(&self) -> usize {
        0
    }
    fn exact_fit(&self) -> bool {
        true
    }
}

#[inline(always)]
fn ticks() -> u64 {
    unsafe { core::arch::x86_64::_rdtsc() }
}

fn run(a: &dyn IovaAllocator, n: u64, timed: bool) -> f64 {
    let mut sink = 0u64;
    let t = Instant::now();
    for _ in 0..n {
        let req = AllocRequest::pages(1).size_aligned();
        let t0 = if timed { ticks() } else { 0 };
        let r = a.allocate(black_box(&req));
        if timed {
            sink = sink.wrapping_add(ticks() - t0)
        }
        let r = r.unwrap();
        let t0 = if timed { ticks() } else { 0 };
        let f = a.free(r.pfn_lo, 1);
        if timed {
            sink = sink.wrapping_add(ticks() - t0)
        }
        f.unwrap();
    }
    black_box(sink);
    t.elapsed().as_nanos() as f64 / (2 * n) as f64
}

fn main() {
    let cfg = DomainConfig::with_address_bits(36, 4096).unwrap();
    let names: Vec<String> = std::env::args().skip(1).collect();
    let names = if names.is_empty() {
        vec![
            "null".into(),
            "segtree".into(),
            "rbtree".into(),
            "magazines+rbtree".into(),
        ]
    } else {
        names
    };
    for _ in 0..5 {
        for name in &names {
            let a: Box<dyn IovaAllocator> = if name == "null" {
                Box::new(Null(cfg))
            } else {
                new_allocator(AllocatorKind::parse(name).unwrap(), cfg).unwrap()
            };
            // background mappings like the workload
            let bg: Vec<_> = (0..64)
                .map(|i| {
                    a.allocate(&AllocRequest::pages(1 + (i % 3)).size_aligned())
                        .unwrap()
                })
                .collect();
            run(a.as_ref(), 200_000, true);
            let t = run(a.as_ref(), 2_000_000, true);
            let u = run(a.as_ref(), 2_000_000, false);
            println!("{name:18} ns/call with rdtsc pair {t:6.2}  without {u:6.2}");
            for r in bg {
                a.free(r.pfn_lo, r.pages).unwrap();
            }
        }
    }
}
