//! A request is refused only when the zone has no room for it, counting every thread's cache and
//! the depot: 16 threads (oversubscribed on a small machine) allocate and free on a small zone
//! whose caller-held pages always leave room for the next request, while the designs' caches
//! fill with what the threads free. Any `NoSpace` is then a range the allocator hid from the
//! request (in a cache, the depot, or a window between its own steps).
//!
//! The accounting is exact and conservative. Before each allocation a thread charges the
//! request to a shared counter, by a compare-exchange that never lets the counter pass the
//! zone's capacity, and it uncharges it only after the range's `free` returned (or the
//! allocation failed). So at every instant the counter is at least what callers hold, and the
//! request under way always finds room among the pages nobody holds:
//!
//! * `one_page_requests_are_never_refused_while_a_page_is_free`: every request is one page
//!   (no alignment), charged one page, against the zone's page count: no fragmentation can block
//!   a one-page request, so a page nobody holds is room.
//! * `aligned_power_of_two_requests_are_never_refused_while_an_aligned_block_is_free`: requests
//!   of 1 to `BLOCK` pages (powers of two, size-aligned) below a limit (a 32-bit device's zone
//!   inside a larger domain), each charged `BLOCK` pages against the zone's pages: a size-aligned
//!   power of two of at most `BLOCK` pages lies inside one `BLOCK`-aligned block, so with fewer
//!   than `zone / BLOCK` allocations held some aligned block is untouched by them, and it holds
//!   any request. The threads' caches meanwhile hold ranges of every size all over the zone.
//!
//! `DMALAB_ROOM_OPS` sets the operations per thread (default 20000; 4000 in a debug build).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
#[path = "support/rng.rs"]
mod rng;
use rng::Rng;

use dmalab_iova::{
    new_allocator, AllocRequest, AllocatorKind, DomainConfig, IovaAllocator, IovaError, IovaRange,
    Pfn,
};

const THREADS: usize = 16;
/// The largest request of the aligned test, and what each of its requests is charged.
const BLOCK: u64 = 16;

/// The tests here run one at a time: each wants every core for its 16 threads.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn ops_per_thread() -> u64 {
    std::env::var("DMALAB_ROOM_OPS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(if cfg!(debug_assertions) {
            4_000
        } else {
            20_000
        })
}

/// The shared charge: at most `capacity`, and at least what callers hold at every instant.
struct Charge {
    charged: AtomicU64,
    capacity: u64,
}

impl Charge {
    /// Charge `units` if the counter stays within the capacity; the counter's value then.
    fn take(&self, units: u64) -> Option<u64> {
        self.charged
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |c| {
                (c + units <= self.capacity).then_some(c + units)
            })
            .ok()
            .map(|c| c + units)
    }
    fn give(&self, units: u64) {
        self.charged.fetch_sub(units, Ordering::SeqCst);
    }
}

/// One way of drawing requests: the request for a draw, and what it is charged.
trait Shape: Sync {
    fn draw(&self, rng: &mut Rng) -> AllocRequest;
    fn units(&self, req: &AllocRequest) -> u64;
}

/// One thread: bursts of allocations (a burst of random length, up to its own share of the
/// capacity and beyond, so that the threads' holdings shift between them), then frees of what it
/// holds in random order, so that every thread's cache fills with ranges and empties again. A
/// request the charge refuses makes the thread free one of its own instead (the capacity is
/// full: other threads' bursts hold it). Returns the refusals seen, described.
fn worker(dom: &dyn IovaAllocator, charge: &Charge, shape: &dyn Shape, seed: u64) -> Vec<String> {
    let mut rng = Rng(seed | 1);
    let mut held: Vec<(IovaRange, u64)> = Vec::new();
    let mut refusals = Vec::new();
    let fair = charge.capacity / THREADS as u64;
    let mut target = 0u64;
    let mut growing = true;
    for _ in 0..ops_per_thread() {
        let units_held: u64 = held.iter().map(|&(_, u)| u).sum();
        if growing && units_held >= target {
            growing = false;
        }
        if !growing && held.is_empty() {
            growing = true;
            // Up to three times a fair share: some bursts must wait for others' frees.
            target = 1 + rng.below(3 * fair);
        }
        let req = shape.draw(&mut rng);
        let units = shape.units(&req);
        let charged = growing.then(|| charge.take(units)).flatten();
        match charged {
            Some(at) => match dom.allocate(&req) {
                Ok(r) => held.push((r, units)),
                Err(IovaError::NoSpace { .. }) => {
                    charge.give(units);
                    if refusals.len() < 8 {
                        refusals.push(format!(
                            "{req:?} refused with {at} of {} charged (this one included)",
                            charge.capacity
                        ));
                    } else {
                        refusals.push(String::new());
                    }
                }
                Err(e) => panic!("{req:?}: {e}"),
            },
            None => {
                if held.is_empty() {
                    // Others hold the capacity: let them run.
                    std::thread::yield_now();
                    growing = false;
                    continue;
                }
                growing = false;
                let i = rng.below(held.len() as u64) as usize;
                let (r, u) = held.swap_remove(i);
                dom.free(r.pfn_lo, r.pages).expect("free of a held range");
                charge.give(u);
            }
        }
        if !growing && !held.is_empty() {
            let i = rng.below(held.len() as u64) as usize;
            let (r, u) = held.swap_remove(i);
            dom.free(r.pfn_lo, r.pages).expect("free of a held range");
            charge.give(u);
        }
    }
    for (r, u) in held {
        dom.free(r.pfn_lo, r.pages).expect("free of a held range");
        charge.give(u);
    }
    refusals
}

/// Run the 16 threads on `dom`; panics naming the refusals if there were any.
fn no_refusal(dom: &dyn IovaAllocator, capacity: u64, shape: &dyn Shape) {
    let charge = Charge {
        charged: AtomicU64::new(0),
        capacity,
    };
    let refusals: Vec<String> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..THREADS)
            .map(|i| {
                let (charge, seed) = (&charge, 0x9e37_79b9_7f4a_7c15u64.wrapping_mul(i as u64 + 1));
                s.spawn(move || worker(dom, charge, shape, seed))
            })
            .collect();
        hs.into_iter()
            .flat_map(|h| h.join().expect("worker panicked"))
            .collect()
    });
    let shown: Vec<&String> = refusals.iter().filter(|s| !s.is_empty()).take(8).collect();
    assert!(
        refusals.is_empty(),
        "{}: {} requests refused while the zone had room for them, e.g. {shown:#?}",
        dom.name(),
        refusals.len()
    );
    assert_eq!(charge.charged.load(Ordering::SeqCst), 0);
    dom.flush_caches();
    let st = dom.stats();
    assert_eq!(st.live_allocations, 0, "{st:?}");
}

fn build(name: &str, cfg: DomainConfig) -> Box<dyn IovaAllocator> {
    new_allocator(AllocatorKind::parse(name).unwrap(), cfg).unwrap()
}

/// One page, no alignment, charged one page.
struct OnePage;

impl Shape for OnePage {
    fn draw(&self, _: &mut Rng) -> AllocRequest {
        AllocRequest::pages(1)
    }
    fn units(&self, _: &AllocRequest) -> u64 {
        1
    }
}

/// 1 to `BLOCK` pages (powers of two, most of them small), size-aligned, below `limit`; each
/// charged `BLOCK` pages.
struct AlignedBelow {
    limit: Pfn,
}

impl Shape for AlignedBelow {
    fn draw(&self, rng: &mut Rng) -> AllocRequest {
        let log = match rng.below(10) {
            0..=4 => 0,
            5..=6 => 1,
            7 => 2,
            8 => 3,
            _ => BLOCK.trailing_zeros() as u64,
        };
        AllocRequest::pages(1 << log)
            .size_aligned()
            .below(self.limit)
    }
    fn units(&self, _: &AllocRequest) -> u64 {
        BLOCK
    }
}

/// 1 to `MAX_UNALIGNED` pages with no alignment, each charged twice that: with `k` other
/// allocations held, the pages nobody holds form at most `k + 1` runs of `zone - k *
/// MAX_UNALIGNED` pages in all, so one run holds `MAX_UNALIGNED` pages whenever `zone >= (2k + 1)
/// * MAX_UNALIGNED`, which a capacity of `zone + MAX_UNALIGNED` ensures.
struct Unaligned;

const MAX_UNALIGNED: u64 = 8;

impl Shape for Unaligned {
    fn draw(&self, rng: &mut Rng) -> AllocRequest {
        AllocRequest::pages(1 + rng.below(MAX_UNALIGNED))
    }
    fn units(&self, _: &AllocRequest) -> u64 {
        2 * MAX_UNALIGNED
    }
}

/// Every design; the magazine layers only where no request needs padding (they round a
/// request up to a power of two, and the padding stays allocated while the request lives).
const DESIGNS: [&str; 5] = [
    "segtree",
    "magazines+rbtree",
    "magazines+bitmap",
    "rbtree",
    "bitmap",
];
const EXACT_DESIGNS: [&str; 3] = ["segtree", "rbtree", "bitmap"];

#[test]
fn one_page_requests_are_never_refused_while_a_page_is_free() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // 2048 pages: 128 for each thread, far less than one thread's cache may hold.
    let zone = 2048;
    for name in DESIGNS {
        let cfg = DomainConfig::new(Pfn(0), Pfn(zone - 1), 4096).unwrap();
        let dom = build(name, cfg);
        no_refusal(&*dom, zone, &OnePage);
    }
}

#[test]
fn aligned_power_of_two_requests_are_never_refused_while_an_aligned_block_is_free() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    // A zone of 4096 pages below the limit, in a domain of 16384 pages (both aligned to
    // `BLOCK`): 256 blocks, 16 for each thread.
    let zone = 4096;
    for name in DESIGNS {
        let cfg = DomainConfig::new(Pfn(0), Pfn(4 * zone - 1), 4096).unwrap();
        let dom = build(name, cfg);
        let shape = AlignedBelow {
            limit: Pfn(zone - 1),
        };
        no_refusal(&*dom, zone, &shape);
    }
}

#[test]
fn unaligned_requests_are_never_refused_while_a_run_is_free() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let zone = 2048;
    for name in EXACT_DESIGNS {
        let cfg = DomainConfig::new(Pfn(0), Pfn(zone - 1), 4096).unwrap();
        let dom = build(name, cfg);
        no_refusal(&*dom, zone + MAX_UNALIGNED, &Unaligned);
    }
}
