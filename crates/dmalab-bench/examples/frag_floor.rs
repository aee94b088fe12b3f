//! The latency floor of `fragmented-32bit`: what a free that checks its range must cost there.
//!
//! Any allocator that refuses double and wrong-size frees reads something of the freed range's
//! own, at a place set by its address; on `fragmented-32bit` the range is a random one of about
//! 136,000 live ranges spread over the 32-bit zone. This example keeps only that: a "free" is
//! one compare-exchange on the range's byte in a one-byte-per-page plane of the zone (1 MiB, as
//! `segtree`'s live plane), an "allocation" one store to the byte just freed (as a cache hit
//! reuses a recent range). It times each call as the benchmark does and prints the percentiles
//! of the calls together, next to `segtree`'s in the benchmark's own cell, run in the same
//! process. Before them it times the same compare-exchange on planes that fit in the first- and
//! second-level caches, and an empty timed region: what this machine's timer and its own noise
//! add to any call, whatever the allocator. Usage: `frag_floor [reps]`.
use std::sync::atomic::{AtomicU8, Ordering};

use dmalab_bench::{run, BenchOptions};

#[inline(always)]
fn ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: rdtsc has no preconditions on x86_64.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        0
    }
}

/// splitmix64, as the benchmark's workloads.
fn next(s: &mut u64) -> u64 {
    *s = s.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *s;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn ns_per_tick() -> f64 {
    let (t0, c0) = (std::time::Instant::now(), ticks());
    while t0.elapsed().as_millis() < 20 {}
    t0.elapsed().as_nanos() as f64 / (ticks() - c0).max(1) as f64
}

/// The planes timed: a name, the plane's pages and the live ranges in it. The first fits in
/// the first-level cache, the second in the second level; the third is the 32-bit zone of
/// `fragmented-32bit` with its live ranges.
const PLANES: [(&str, u64, usize); 3] = [
    ("compare-exchange, 16 KiB plane", 1 << 14, 2_000),
    ("compare-exchange, 128 KiB plane", 1 << 17, 16_000),
    ("compare-exchange, 1 MiB plane (floor)", 1 << 20, 136_000),
];

fn line(what: &str, p50: f64, p999: f64) {
    println!(
        "{what:<38} p50 {p50:6.1} ns  p99.9 {p999:7.1} ns  ratio {:5.1}",
        p999 / p50
    );
}

/// p50 and p99.9 of `lat` (in ticks), in ns.
fn p50_p999(mut lat: Vec<u64>, ns: f64) -> (f64, f64) {
    lat.sort_unstable();
    let at = |q: f64| lat[((lat.len() - 1) as f64 * q).round() as usize] as f64 * ns;
    (at(0.5), at(0.999))
}

/// p50 and p99.9 of an empty timed region (two timer reads back to back), in ns: the noise
/// of the timer and the machine alone.
fn empty(calls: usize, ns: f64) -> (f64, f64) {
    let lat = (0..calls).map(|_| {
        let a = ticks();
        ticks() - a
    });
    p50_p999(lat.collect(), ns)
}

/// p50 and p99.9 of the floor's calls on a plane of `pages` bytes with `live` live ranges, in
/// ns.
fn floor(calls: usize, ns: f64, pages: u64, nlive: usize) -> (f64, f64) {
    let plane: Vec<AtomicU8> = (0..pages).map(|_| AtomicU8::new(0)).collect();
    let mut rng = 1u64;
    let mut live: Vec<u64> = Vec::with_capacity(nlive + 1);
    while live.len() < nlive {
        let p = next(&mut rng) % pages;
        if plane[p as usize].swap(1, Ordering::Relaxed) == 0 {
            live.push(p);
        }
    }
    let mut lat = Vec::with_capacity(2 * calls);
    for i in 0..calls {
        let k = (next(&mut rng) % live.len() as u64) as usize;
        let p = live.swap_remove(k) as usize;
        let t0 = ticks();
        let ok = plane[p].compare_exchange(1, 0, Ordering::Acquire, Ordering::Relaxed);
        let t1 = ticks();
        let t2 = ticks();
        plane[p].store(1, Ordering::Release);
        let t3 = ticks();
        assert!(ok.is_ok());
        live.push(p as u64);
        if i >= calls / 10 {
            lat.push(t1 - t0);
            lat.push(t3 - t2);
        }
    }
    p50_p999(lat, ns)
}

fn main() {
    let reps: usize = std::env::args()
        .nth(1)
        .map_or(3, |s| s.parse().expect("reps is a count"));
    let ns = ns_per_tick();
    let opts = BenchOptions::quick();
    for _ in 0..reps {
        let (p50, p999) = empty(2_000_000, ns);
        line("nothing (two timer reads)", p50, p999);
        for (what, pages, live) in PLANES {
            let (p50, p999) = floor(1_000_000, ns, pages, live);
            line(what, p50, p999);
        }
        let r = run("segtree", "fragmented-32bit", 1, &opts).expect("cell runs");
        line("segtree, 1 thread", r.p50_ns, r.p999_ns);
    }
}
