//! A cheap per-call timer: the cycle counter, calibrated once against the monotonic clock.

use std::sync::OnceLock;
use std::time::Instant;

/// A timestamp in timer ticks.
#[inline]
pub(crate) fn ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: rdtsc has no preconditions on x86_64.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        static START: OnceLock<Instant> = OnceLock::new();
        START.get_or_init(Instant::now).elapsed().as_nanos() as u64
    }
}

/// Nanoseconds per tick, measured over 20 ms once per process.
pub(crate) fn ns_per_tick() -> f64 {
    static NS: OnceLock<f64> = OnceLock::new();
    *NS.get_or_init(|| {
        let (t0, c0) = (Instant::now(), ticks());
        while t0.elapsed().as_millis() < 20 {
            std::hint::spin_loop();
        }
        let (ns, c) = (t0.elapsed().as_nanos() as f64, ticks() - c0);
        ns / c.max(1) as f64
    })
}

/// Median cost of two back-to-back timestamps, in ns: what the timer adds to every latency.
pub fn timer_overhead_ns() -> f64 {
    let mut d: Vec<u64> = (0..10_001)
        .map(|_| {
            let a = ticks();
            let b = ticks();
            b - a
        })
        .collect();
    d.sort_unstable();
    d[d.len() / 2] as f64 * ns_per_tick()
}
