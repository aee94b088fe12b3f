//! The four workloads, run by every thread at once on one shared domain ([`run_group`]), or by
//! lanes taking turns, to follow a long run's state exactly ([`in_turns`]).

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Barrier;
use std::time::Instant;

use dmalab_iova::{AllocRequest, IovaAllocator, IovaError, Pfn};

use crate::timer::{ns_per_tick, ticks};
use crate::{BenchError, BenchOptions};

/// Workload names, in the order the benchmark runs them.
pub const WORKLOADS: [&str; 4] = ["map-unmap-1page", "mixed", "fragmented-32bit", "nic-ring"];

/// A pass's clock reads come at least this far apart once its stride has grown, and the
/// stride halves when they come more than four times this apart: a pass whose calls keep
/// their pace overruns its deadline by a few of these at most.
const CHECK_QUANTUM: std::time::Duration = std::time::Duration::from_millis(1);
/// The most calls between two clock reads.
const MAX_CHECK_STRIDE: u64 = 1 << 20;

/// Live mappings each thread keeps in `mixed` and `nic-ring`.
const LIVE_PER_THREAD: usize = 4096;
/// Unrelated live mappings each thread keeps in `map-unmap-1page`.
const BACKGROUND_PER_THREAD: usize = 64;
/// The largest request any workload makes, in pages (the top of [`Rng::mixed_pages`]).
const MAX_REQUEST_PAGES: u64 = 64;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Workload {
    MapUnmap,
    Mixed,
    Fragmented,
    NicRing,
}

impl Workload {
    pub fn parse(name: &str) -> Option<Self> {
        Some(match name {
            "map-unmap-1page" => Self::MapUnmap,
            "mixed" => Self::Mixed,
            "fragmented-32bit" => Self::Fragmented,
            "nic-ring" => Self::NicRing,
            _ => return None,
        })
    }

    /// Pages the domain must hold for `lanes` lanes with workload seed `seed` to start as
    /// designed: on `map-unmap-1page`, `mixed` and `nic-ring`, each lane's starting live set,
    /// every request rounded up to its size alignment (drawn as the lanes will draw them), plus
    /// one page for a `map-unmap-1page` step; on `fragmented-32bit`, a share of 90% of the zone
    /// for each lane that holds the largest request.
    pub fn pages_needed(self, lanes: usize, seed: u64) -> u64 {
        let lane = |i: usize| -> u64 {
            let mut rng = lane_rng(seed, i);
            let mut drawn =
                |n: usize| -> u64 { (0..n).map(|_| rng.mixed_pages().next_power_of_two()).sum() };
            match self {
                Self::MapUnmap => drawn(BACKGROUND_PER_THREAD) + 1,
                Self::Mixed => drawn(LIVE_PER_THREAD),
                Self::NicRing => LIVE_PER_THREAD as u64,
                Self::Fragmented => (MAX_REQUEST_PAGES * 10).div_ceil(9),
            }
        };
        (0..lanes).map(lane).sum()
    }
}

/// The random stream of lane `i` of a run with workload seed `seed`.
fn lane_rng(seed: u64, i: usize) -> Rng {
    Rng(seed ^ (i as u64 + 1).wrapping_mul(0xa076_1d64_78bd_642f))
}

/// What one cell measured.
pub(crate) struct Outcome {
    /// Calls in all throughput passes.
    pub ops: u64,
    /// Calls per second of wall time in each throughput pass.
    pub ops_per_s: Vec<f64>,
    pub latencies_ns: Vec<f64>,
    pub memory_bytes: usize,
    pub live: u64,
    pub failures: u64,
}

/// splitmix64: small, fast, and the same sequence for the same seed everywhere.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// Skewed DMA sizes: half 1 page, a quarter 2-4, 15% 5-16, 10% 17-64.
    fn mixed_pages(&mut self) -> u64 {
        match self.below(100) {
            0..=49 => 1,
            50..=74 => 2 + self.below(3),
            75..=89 => 5 + self.below(12),
            _ => 17 + self.below(48),
        }
    }
}

/// What a pass does around each call: nothing (the throughput passes), or time it (the latency
/// pass). The untimed passes read no timer at all: two cycle-counter reads cost about as much as
/// a fast allocator's call, and would otherwise be counted in its throughput.
trait Clock {
    fn start(&self) -> u64;
    fn stop(&mut self, t0: u64);
}

/// The throughput and warm-up passes.
struct Untimed;

impl Clock for Untimed {
    #[inline]
    fn start(&self) -> u64 {
        0
    }
    #[inline]
    fn stop(&mut self, _: u64) {}
}

/// The latency pass: every call's ticks.
struct Timed<'a>(&'a mut Vec<u64>);

impl Clock for Timed<'_> {
    #[inline]
    fn start(&self) -> u64 {
        ticks()
    }
    #[inline]
    fn stop(&mut self, t0: u64) {
        let d = ticks() - t0;
        self.0.push(d);
    }
}

/// One thread's state.
struct Lane<'a> {
    a: &'a dyn IovaAllocator,
    w: Workload,
    rng: Rng,
    live: Vec<(u64, u64)>,
    head: usize,
    limit: Option<Pfn>,
    failures: u64,
}

impl<'a> Lane<'a> {
    /// Lane `i` of a run with workload seed `seed`.
    fn new(a: &'a dyn IovaAllocator, w: Workload, seed: u64, i: usize, limit: Option<Pfn>) -> Self {
        Lane {
            a,
            w,
            rng: lane_rng(seed, i),
            live: Vec::new(),
            head: 0,
            limit,
            failures: 0,
        }
    }

    fn req(&self, pages: u64) -> AllocRequest {
        let r = AllocRequest::pages(pages).size_aligned();
        match self.limit {
            Some(l) => r.below(l),
            None => r,
        }
    }

    fn alloc(&mut self, pages: u64, t: &mut impl Clock) -> Result<Option<(u64, u64)>, IovaError> {
        let req = self.req(pages);
        let t0 = t.start();
        let r = self.a.allocate(&req);
        t.stop(t0);
        match r {
            Ok(r) => Ok(Some((r.pfn_lo.0, pages))),
            Err(IovaError::NoSpace { .. }) => {
                self.failures += 1;
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    fn free(&mut self, (pfn, pages): (u64, u64), t: &mut impl Clock) -> Result<(), IovaError> {
        let t0 = t.start();
        let r = self.a.free(Pfn(pfn), pages);
        t.stop(t0);
        r
    }

    /// Build the live set the workload starts from (not measured).
    fn setup(&mut self, fill_pages: u64) -> Result<(), IovaError> {
        let mut none = Untimed;
        match self.w {
            Workload::MapUnmap | Workload::Mixed => {
                let n = if self.w == Workload::MapUnmap {
                    BACKGROUND_PER_THREAD
                } else {
                    LIVE_PER_THREAD
                };
                for _ in 0..n {
                    let p = self.rng.mixed_pages();
                    if let Some(r) = self.alloc(p, &mut none)? {
                        self.live.push(r);
                    }
                }
            }
            Workload::NicRing => {
                for _ in 0..LIVE_PER_THREAD {
                    if let Some(r) = self.alloc(1, &mut none)? {
                        self.live.push(r);
                    }
                }
            }
            Workload::Fragmented => {
                // Fill to 95% of this thread's share of the 32-bit zone, then free at random
                // down to 90%, leaving holes everywhere.
                let mut used = 0;
                while used < fill_pages * 95 / 90 {
                    let p = self.rng.mixed_pages();
                    match self.alloc(p, &mut none)? {
                        Some(r) => {
                            self.live.push(r);
                            used += p;
                        }
                        None => break,
                    }
                }
                while used > fill_pages && !self.live.is_empty() {
                    let i = self.rng.below(self.live.len() as u64) as usize;
                    let r = self.live.swap_remove(i);
                    self.free(r, &mut none)?;
                    used -= r.1;
                }
            }
        }
        self.failures = 0;
        Ok(())
    }

    /// One step of the workload; returns the calls it made.
    fn step(&mut self, t: &mut impl Clock) -> Result<u64, IovaError> {
        match self.w {
            Workload::MapUnmap => {
                let Some(r) = self.alloc(1, t)? else {
                    return Ok(1);
                };
                self.free(r, t)?;
                Ok(2)
            }
            Workload::Mixed | Workload::NicRing => {
                let i = if self.w == Workload::Mixed {
                    self.rng.below(self.live.len() as u64) as usize
                } else {
                    // The next slot of the ring, as `(head + 1) % len` but without a 64-bit
                    // division a step: its latency (tens of cycles on older cores) is on
                    // the chain from one step's index to the next, as long as a fast
                    // allocator's whole call, and it would be timed as the allocators'.
                    let next = self.head + 1;
                    let len = self.live.len();
                    self.head = if next < len { next } else { next % len };
                    self.head
                };
                self.free(self.live[i], t)?;
                let p = if self.w == Workload::Mixed {
                    self.rng.mixed_pages()
                } else {
                    1
                };
                match self.alloc(p, t)? {
                    Some(r) => self.live[i] = r,
                    None => {
                        self.live.swap_remove(i);
                    }
                }
                Ok(2)
            }
            Workload::Fragmented => {
                let i = self.rng.below(self.live.len() as u64) as usize;
                let r = self.live.swap_remove(i);
                self.free(r, t)?;
                let p = self.rng.mixed_pages();
                match self.alloc(p, t)? {
                    Some(r) => {
                        self.live.push(r);
                        Ok(2)
                    }
                    None if self.live.len() > 1 => {
                        let j = self.rng.below(self.live.len() as u64) as usize;
                        let r = self.live.swap_remove(j);
                        self.free(r, t)?;
                        Ok(3)
                    }
                    None => Ok(2),
                }
            }
        }
    }

    /// Run up to `ops` calls or until `deadline`; returns calls made.
    ///
    /// The clock is read once every `stride` calls, and the stride doubles (up to
    /// [`MAX_CHECK_STRIDE`]) while reads come less than [`CHECK_QUANTUM`] apart (and halves
    /// when they come more than four apart): a fast
    /// allocator's pass reads it a few hundred times, not twice every 256 calls. A clock read
    /// costs about 50 ns on this machine kind and, in a virtual machine whose clock reads turn
    /// slow, microseconds; read that often it would be timed as the allocators' own work and
    /// bring every design to the same rate.
    fn pass(&mut self, ops: u64, deadline: Instant, t: &mut impl Clock) -> Result<u64, IovaError> {
        let mut done = 0;
        let (mut stride, mut next_check, mut last) = (2, 2, Instant::now());
        while done < ops {
            if self.live.is_empty() && self.w != Workload::MapUnmap {
                break;
            }
            done += self.step(t)?;
            if done >= next_check {
                let now = Instant::now();
                if now >= deadline {
                    break;
                }
                let since = now - last;
                if since < CHECK_QUANTUM && stride < MAX_CHECK_STRIDE {
                    stride *= 2;
                } else if since > 4 * CHECK_QUANTUM && stride > 2 {
                    stride /= 2;
                }
                (last, next_check) = (now, done + stride);
            }
        }
        Ok(done)
    }

    fn teardown(&mut self) -> Result<(), IovaError> {
        for r in std::mem::take(&mut self.live) {
            self.free(r, &mut Untimed)?;
        }
        Ok(())
    }
}

/// Per-thread results of the measured passes.
struct LaneResult {
    /// Calls made in each throughput pass.
    pass_ops: Vec<u64>,
    latencies: Vec<u64>,
    failures: u64,
}

/// Throughput passes a cell runs at most; it stops earlier once they have taken twice the pass
/// budget (so at least two run, as a pass never outlasts the budget).
const MAX_PASSES: usize = 7;

/// The median of `v` (the mean of the middle two for an even count); 0 for none.
pub(crate) fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_unstable_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The limit of `w`'s requests (on `fragmented-32bit`, `top`, or else the 32-bit zone's top)
/// and the pages each of `lanes` lanes fills: 90% of the space below the limit, shared.
fn zone_and_fill(
    a: &dyn IovaAllocator,
    w: Workload,
    top: Option<Pfn>,
    lanes: usize,
) -> (Option<Pfn>, u64) {
    let cfg = *a.config();
    let limit = (w == Workload::Fragmented).then(|| top.unwrap_or(cfg.pfn_32bit()));
    let zone_pages = limit.map_or(cfg.total_pages(), |l| l.0 - cfg.pfn_lo.0 + 1);
    (limit, zone_pages * 9 / 10 / lanes as u64)
}

/// What the main thread tells the lanes at the start of a round: run a throughput pass of the
/// allocator at this index, or [`STOP`].
const STOP: usize = usize::MAX;

/// Run `w` with `threads` threads on each of `allocs`, interleaved: every thread keeps a lane
/// for each allocator, and the throughput passes take turns, one pass of each allocator per
/// round. On a shared machine whose speed drifts over seconds (another guest on the same core),
/// each design is then measured over the same stretches of time, so their ratio does not depend
/// on which ran first. With one allocator this is the single cell of old. One outcome per
/// allocator, in order; an allocator that fails does not stop the others.
pub(crate) fn run_group(
    allocs: &[&dyn IovaAllocator],
    w: Workload,
    threads: usize,
    opts: &BenchOptions,
) -> Vec<Result<Outcome, BenchError>> {
    let n = allocs.len();
    let zones: Vec<(Option<Pfn>, u64)> = allocs
        .iter()
        .map(|a| zone_and_fill(*a, w, None, threads))
        .collect();
    let barrier = Barrier::new(threads + 1);
    // Set by the main thread before the barrier that opens a round.
    let command = AtomicUsize::new(STOP);
    // A pass lasts from the first lane's start to the last lane's end, in ns since `epoch`, as
    // the lanes see them: the main thread may be scheduled late after a barrier when every core
    // runs a lane, so its own clock readings could miss most of the pass.
    let epoch = Instant::now();
    let (first_start, last_end) = (AtomicU64::new(u64::MAX), AtomicU64::new(0));
    let since = |e: Instant| u64::try_from(e.elapsed().as_nanos()).unwrap_or(u64::MAX);
    let mut pass_seconds: Vec<Vec<f64>> = vec![Vec::new(); n];
    let (mut memory_bytes, mut live) = (vec![0; n], vec![0; n]);
    let results: Vec<Vec<Result<LaneResult, IovaError>>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|i| {
                let (barrier, command, zones) = (&barrier, &command, &zones);
                let (first_start, last_end) = (&first_start, &last_end);
                s.spawn(move || {
                    let mut lanes: Vec<Lane> = allocs
                        .iter()
                        .zip(zones)
                        .map(|(a, &(limit, _))| Lane::new(*a, w, opts.seed, i, limit))
                        .collect();
                    let mut states: Vec<Result<Vec<u64>, IovaError>> = lanes
                        .iter_mut()
                        .zip(zones)
                        .map(|(lane, &(_, fill))| {
                            lane.setup(fill)?;
                            let far = Instant::now() + opts.pass_budget;
                            lane.pass(opts.warmup_ops, far, &mut Untimed)?;
                            Ok(Vec::new())
                        })
                        .collect();
                    // Every lane reaches every barrier, even after an error, so none waits forever.
                    barrier.wait();
                    loop {
                        barrier.wait();
                        let k = command.load(Ordering::Relaxed);
                        if k == STOP {
                            break;
                        }
                        if let Ok(pass_ops) = &mut states[k] {
                            first_start.fetch_min(since(epoch), Ordering::Relaxed);
                            let done = lanes[k].pass(
                                opts.ops_per_thread,
                                Instant::now() + opts.pass_budget,
                                &mut Untimed,
                            );
                            last_end.fetch_max(since(epoch), Ordering::Relaxed);
                            match done {
                                Ok(ops) => pass_ops.push(ops),
                                Err(e) => states[k] = Err(e),
                            }
                        }
                        barrier.wait();
                    }
                    // The latency passes, one allocator after another; the main thread reads each
                    // domain's memory and live count after its pass, before any teardown.
                    let mut latencies = vec![Vec::new(); lanes.len()];
                    for (k, lane) in lanes.iter_mut().enumerate() {
                        barrier.wait();
                        if states[k].is_ok() {
                            let mut lat = Vec::with_capacity(opts.ops_per_thread as usize + 3);
                            let timed = lane.pass(
                                opts.ops_per_thread,
                                Instant::now() + opts.pass_budget,
                                &mut Timed(&mut lat),
                            );
                            match timed {
                                Ok(_) => latencies[k] = lat,
                                Err(e) => states[k] = Err(e),
                            }
                        }
                        barrier.wait();
                    }
                    barrier.wait();
                    lanes
                        .iter_mut()
                        .zip(states)
                        .zip(latencies)
                        .map(|((lane, state), latencies)| {
                            let failures = lane.failures;
                            let torn = lane.teardown();
                            state.and_then(|pass_ops| {
                                torn.map(|()| LaneResult {
                                    pass_ops,
                                    latencies,
                                    failures,
                                })
                            })
                        })
                        .collect()
                })
            })
            .collect();
        barrier.wait();
        let mut spent = vec![std::time::Duration::ZERO; n];
        loop {
            let mut ran = false;
            for k in 0..n {
                if pass_seconds[k].len() >= MAX_PASSES || spent[k] >= 2 * opts.pass_budget {
                    continue;
                }
                ran = true;
                first_start.store(u64::MAX, Ordering::Relaxed);
                last_end.store(0, Ordering::Relaxed);
                command.store(k, Ordering::Relaxed);
                barrier.wait();
                barrier.wait();
                // The barrier orders the lanes' updates before these loads.
                let dt = std::time::Duration::from_nanos(
                    last_end
                        .load(Ordering::Relaxed)
                        .saturating_sub(first_start.load(Ordering::Relaxed)),
                );
                spent[k] += dt;
                pass_seconds[k].push(dt.as_secs_f64());
            }
            if !ran {
                break;
            }
        }
        command.store(STOP, Ordering::Relaxed);
        barrier.wait();
        for k in 0..n {
            barrier.wait();
            barrier.wait();
            memory_bytes[k] = allocs[k].memory_bytes();
            live[k] = allocs[k].stats().live_allocations;
        }
        barrier.wait();
        handles
            .into_iter()
            .map(|h| h.join().expect("benchmark lane panicked"))
            .collect()
    });
    let ns = ns_per_tick();
    (0..n)
        .map(|k| {
            let mut pass_ops = vec![0u64; pass_seconds[k].len()];
            let mut out = Outcome {
                ops: 0,
                ops_per_s: Vec::new(),
                latencies_ns: Vec::new(),
                memory_bytes: memory_bytes[k],
                live: live[k],
                failures: 0,
            };
            for lane in &results {
                let r = lane[k]
                    .as_ref()
                    .map_err(|e| BenchError::Allocator(e.clone()))?;
                for (sum, n) in pass_ops.iter_mut().zip(&r.pass_ops) {
                    *sum += n;
                }
                out.failures += r.failures;
                out.latencies_ns
                    .extend(r.latencies.iter().map(|&d| d as f64 * ns));
            }
            out.ops = pass_ops.iter().sum();
            out.ops_per_s = pass_ops
                .iter()
                .zip(&pass_seconds[k])
                .map(|(&n, &s)| n as f64 / s.max(1e-9))
                .collect();
            Ok(out)
        })
        .collect()
}

/// How [`in_turns`] runs a workload's lanes.
#[derive(Debug, Clone)]
pub struct TurnsOptions {
    /// Lanes, each on its own thread (each thread uses its own cache of the allocator).
    pub lanes: usize,
    /// Steps a lane takes before it hands the turn to the next: the lanes run one at a time, so
    /// a run depends only on its inputs. 0: the lanes run at once, as in the benchmark.
    pub turn: u64,
    /// Reports made, one after every `steps` steps of each lane.
    pub chunks: usize,
    /// Steps of each lane between reports (a step is a free and an allocation).
    pub steps: u64,
    /// The lanes' highest usable frame for `fragmented-32bit` (by default the 32-bit zone's
    /// top), and the zone they fill to 90% between them.
    pub limit: Option<Pfn>,
    /// Workload seed, as in [`crate::BenchOptions::seed`].
    pub seed: u64,
}

/// Run `workload`'s lanes in turns (see [`TurnsOptions::turn`]) and call `report(chunk,
/// refusals)` after each chunk, from the first lane, while it holds the turn: with turns, the
/// allocator's state at each report depends only on the inputs. For following how an
/// allocator's space evolves over a long run; nothing is timed.
pub fn in_turns(
    a: &dyn IovaAllocator,
    workload: &str,
    opts: &TurnsOptions,
    report: &(dyn Fn(usize, u64) + Sync),
) -> Result<(), crate::BenchError> {
    let w = crate::parse_cell(workload, opts.lanes)?;
    let (limit, fill) = zone_and_fill(a, w, opts.limit, opts.lanes);
    let turn = AtomicU64::new(0);
    let barrier = Barrier::new(opts.lanes);
    let results: Vec<Result<(), IovaError>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..opts.lanes)
            .map(|i| {
                let (turn, barrier) = (&turn, &barrier);
                s.spawn(move || {
                    let mut lane = Lane::new(a, w, opts.seed, i, limit);
                    let lanes = opts.lanes as u64;
                    let me = i as u64;
                    // With turns, lane `i` acts when `turn % lanes == i`.
                    // Spin briefly, then yield: with more threads than cores (two such runs
                    // at once, as parallel tests do) the lane holding the turn may be off its
                    // core, and a lane spinning out its time slice would hold it off longer.
                    let wait = || {
                        let mut spins = 0u32;
                        while opts.turn > 0 && turn.load(Ordering::Acquire) % lanes != me {
                            if spins < 128 {
                                spins += 1;
                                std::hint::spin_loop();
                            } else {
                                std::thread::yield_now();
                            }
                        }
                    };
                    let pass = || {
                        if opts.turn > 0 {
                            turn.fetch_add(1, Ordering::AcqRel);
                        }
                    };
                    // Every lane uses the allocator before any sets up, in lane order, so each
                    // sets up knowing how many threads share the domain.
                    wait();
                    let r = a.allocate(&lane.req(1)).and_then(|r| a.free(r.pfn_lo, 1));
                    pass();
                    wait();
                    let r = r.and_then(|()| lane.setup(fill));
                    pass();
                    barrier.wait();
                    let mut out = r;
                    for chunk in 0..opts.chunks {
                        let before = lane.failures;
                        let mut done = 0;
                        // After an error a lane keeps taking its turns, doing nothing, so that
                        // no other lane waits for it forever.
                        while done < opts.steps {
                            wait();
                            let n = if opts.turn > 0 { opts.turn } else { 256 };
                            let n = n.min(opts.steps - done);
                            for _ in 0..n {
                                if out.is_err() || lane.live.is_empty() && w != Workload::MapUnmap {
                                    break;
                                }
                                out = lane.step(&mut Untimed).map(|_| ());
                            }
                            done += n;
                            if done < opts.steps || i != 0 {
                                pass();
                            }
                        }
                        if i == 0 {
                            // The first lane reports while it still holds the turn.
                            report(chunk, lane.failures - before);
                            pass();
                        }
                    }
                    out.and_then(|()| lane.teardown())
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("lane panicked"))
            .collect()
    });
    for r in results {
        r?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use dmalab_iova::{DomainConfig, SegTreeAllocator};
    use std::sync::Mutex;

    /// The reports of a short run in turns on a 64k-page zone: (refusals, free pages in the
    /// tree, live allocations) after each chunk.
    /// The last allocator (by id) any lane called, and how often the caller changed.
    struct Switches {
        last: std::sync::atomic::AtomicU8,
        count: AtomicU64,
    }

    /// A segtree domain that counts, in a shared [`Switches`], each call that follows a call to
    /// another allocator.
    #[derive(Debug)]
    struct Noted<'a> {
        inner: SegTreeAllocator,
        id: u8,
        seen: &'a Switches,
    }

    impl std::fmt::Debug for Switches {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("Switches")
        }
    }

    impl Noted<'_> {
        fn note(&self) {
            if self.seen.last.swap(self.id, Ordering::Relaxed) != self.id {
                self.seen.count.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    impl IovaAllocator for Noted<'_> {
        fn name(&self) -> String {
            format!("noted-{}", self.id)
        }
        fn config(&self) -> &DomainConfig {
            self.inner.config()
        }
        fn allocate(&self, req: &AllocRequest) -> Result<dmalab_iova::IovaRange, IovaError> {
            self.note();
            self.inner.allocate(req)
        }
        fn free(&self, pfn: Pfn, pages: u64) -> Result<(), IovaError> {
            self.note();
            self.inner.free(pfn, pages)
        }
        fn reserve(&self, lo: Pfn, hi: Pfn) -> Result<(), IovaError> {
            self.inner.reserve(lo, hi)
        }
        fn stats(&self) -> dmalab_iova::DomainStats {
            self.inner.stats()
        }
        fn work(&self) -> dmalab_iova::WorkCounters {
            self.inner.work()
        }
        fn memory_bytes(&self) -> usize {
            self.inner.memory_bytes()
        }
        fn exact_fit(&self) -> bool {
            true
        }
    }

    #[test]
    fn a_group_interleaves_its_allocators_pass_by_pass() {
        let seen = Switches {
            last: std::sync::atomic::AtomicU8::new(0),
            count: AtomicU64::new(0),
        };
        let cfg = DomainConfig::with_address_bits(36, 4096).unwrap();
        let noted = |id| Noted {
            inner: SegTreeAllocator::new(cfg).unwrap(),
            id,
            seen: &seen,
        };
        let (a, b) = (noted(1), noted(2));
        let opts = BenchOptions {
            ops_per_thread: 2_000,
            warmup_ops: 100,
            ..BenchOptions::quick()
        };
        let out = run_group(&[&a, &b], Workload::NicRing, 1, &opts);
        let passes: Vec<usize> = out
            .iter()
            .map(|o| o.as_ref().unwrap().ops_per_s.len())
            .collect();
        assert_eq!(passes, vec![MAX_PASSES, MAX_PASSES]);
        // Setup, warm-up and the latency passes switch a few times; run one cell after the
        // other, the throughput passes would add one switch, not one per pass.
        let switches = seen.count.load(Ordering::Relaxed);
        assert!(
            switches >= 2 * MAX_PASSES as u64,
            "{switches} switches between the allocators"
        );
    }

    fn short_run(turn: u64) -> Vec<(u64, u64, u64)> {
        let cfg = DomainConfig::with_address_bits(36, 4096).unwrap();
        let dom = SegTreeAllocator::new(cfg).unwrap();
        let limit = Pfn((1 << 16) - 1);
        let opts = TurnsOptions {
            lanes: 2,
            turn,
            chunks: 3,
            steps: 20_000,
            limit: Some(limit),
            seed: 7,
        };
        let seen = Mutex::new(Vec::new());
        in_turns(&dom, "fragmented-32bit", &opts, &|_, refusals| {
            let z = dom.zone_report(limit);
            let live = dom.stats().live_allocations;
            seen.lock()
                .unwrap()
                .push((refusals, z.tree_free_pages, live));
        })
        .unwrap();
        // Every lane freed what it held.
        assert_eq!(dom.stats().live_allocations, 0);
        seen.into_inner().unwrap()
    }

    /// Two lanes in turns on a 2^18-page zone for 2M steps each: after the first chunks (while
    /// the caches come down to the zone's cap), no refusals, and the tree keeps free runs that
    /// hold a 64-page request. Before spilled ranges joined free pages of the tree and the
    /// caches were capped, the last three chunks had 28 to 38 refusals each, and the tree's
    /// longest free run was 20 to 23 pages, in 4.2k runs.
    #[test]
    fn a_crowded_zone_does_not_wear_down_over_a_long_run() {
        let cfg = DomainConfig::with_address_bits(36, 4096).unwrap();
        let dom = SegTreeAllocator::new(cfg).unwrap();
        let limit = Pfn((1 << 18) - 1);
        let opts = TurnsOptions {
            lanes: 2,
            turn: 64,
            chunks: 8,
            steps: 250_000,
            limit: Some(limit),
            seed: 7,
        };
        let seen = Mutex::new(Vec::new());
        in_turns(&dom, "fragmented-32bit", &opts, &|_, refusals| {
            let z = dom.zone_report(limit);
            seen.lock()
                .unwrap()
                .push((refusals, z.tree_largest_run, z.tree_free_runs));
        })
        .unwrap();
        let seen = seen.into_inner().unwrap();
        assert!(
            seen[5..]
                .iter()
                .all(|&(refusals, largest, _)| refusals == 0 && largest >= 64),
            "(refusals, longest free run, free runs) a chunk: {seen:?}"
        );
    }

    #[test]
    fn lanes_in_turns_repeat_exactly() {
        let a = short_run(8);
        assert_eq!(a.len(), 3);
        // The zone is about 90% used by live ranges at every report.
        assert!(a.iter().all(|&(_, _, live)| live > 5_000), "{a:?}");
        assert_eq!(a, short_run(8));
    }

    #[test]
    fn requests_stay_within_the_largest() {
        let mut rng = lane_rng(1, 0);
        let largest = (0..100_000).map(|_| rng.mixed_pages()).max();
        assert_eq!(largest, Some(MAX_REQUEST_PAGES));
    }

    #[test]
    fn in_turns_refuses_bad_input() {
        let cfg = DomainConfig::with_address_bits(36, 4096).unwrap();
        let dom = SegTreeAllocator::new(cfg).unwrap();
        let mut opts = TurnsOptions {
            lanes: 0,
            turn: 1,
            chunks: 1,
            steps: 1,
            limit: None,
            seed: 1,
        };
        let none = &|_, _| {};
        assert!(matches!(
            in_turns(&dom, "fragmented-32bit", &opts, none),
            Err(BenchError::Threads(0))
        ));
        opts.lanes = 1;
        assert!(matches!(
            in_turns(&dom, "no-such-workload", &opts, none),
            Err(BenchError::UnknownWorkload(..))
        ));
    }
}
