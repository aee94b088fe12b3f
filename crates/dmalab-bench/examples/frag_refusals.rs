//! Whether `segtree`'s refusals in the benchmark's `fragmented-32bit` cell with many threads
//! are a zone without room or a range hidden from the request:
//! `frag_refusals [reps] [threads] [designs run before it,..]` (defaults 3, 16, linux-rcache).
//!
//! The cell is the benchmark's own (`run_group`, quick options), with `segtree` wrapped in a
//! checker registered as `segtree-checked`, after the designs named (another design's lanes run
//! first in each of the threads, which is when refusals were seen). Each thread raises its own
//! flag for the length of each call. On a refusal the thread raises `stop`, waits until no
//! other thread is inside a call, and asks again: `segtree` reclaims every cache and the depot
//! before it refuses, so with nobody else inside the second answer says whether the zone has
//! room. A second refusal is a zone without room; a second answer that serves the request is
//! a refusal with room (a bug) or room made by another thread's free between the first answer
//! and the pause. The checker returns the first answer to the benchmark either way (a range the
//! second answer served is freed at once), so the workload runs as it would.
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use crossbeam_utils::CachePadded;
use dmalab_bench::{register_allocator, run_group, BenchOptions};
use dmalab_iova::{
    AllocRequest, DomainConfig, DomainStats, IovaAllocator, IovaError, IovaRange, Pfn,
    SegTreeAllocator, WorkCounters,
};

/// Threads a process may run through the checker (each takes the next flag, for good).
const FLAGS: usize = 4096;

static NEXT: AtomicUsize = AtomicUsize::new(0);
static REFUSED: AtomicU64 = AtomicU64::new(0);
static NO_ROOM: AtomicU64 = AtomicU64::new(0);
static SERVED: AtomicU64 = AtomicU64::new(0);
/// Of `SERVED`, those with no free completed since the refused call began: no other thread
/// gave anything back, so the room was there when the request was refused.
static SERVED_NO_FREE: AtomicU64 = AtomicU64::new(0);
/// Frees completed through the checker.
static FREES: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static INDEX: usize = NEXT.fetch_add(1, Ordering::Relaxed);
}

#[derive(Debug)]
struct Checked {
    inner: SegTreeAllocator,
    /// `inside[i]`: the thread with index `i` is inside a call.
    inside: Box<[CachePadded<AtomicBool>]>,
    /// A thread is asking again, alone.
    stop: AtomicBool,
    asking: Mutex<()>,
}

impl Checked {
    /// Raise this thread's flag once no thread is asking again (Dekker with `stop`: either the
    /// asking thread sees the flag, or this thread sees `stop` and steps back).
    fn enter(&self) -> &AtomicBool {
        let i = INDEX.with(|i| *i);
        assert!(i < FLAGS, "more than {FLAGS} threads");
        let mine = &self.inside[i];
        loop {
            mine.store(true, Ordering::SeqCst);
            if !self.stop.load(Ordering::SeqCst) {
                return mine;
            }
            mine.store(false, Ordering::SeqCst);
            while self.stop.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
        }
    }

    /// Ask for `req` again with every other thread outside the allocator (`frees`: the count of
    /// completed frees when the refused call began).
    fn ask_alone(&self, req: &AllocRequest, frees: u64) {
        let _alone = self.asking.lock().unwrap_or_else(|e| e.into_inner());
        self.stop.store(true, Ordering::SeqCst);
        for other in self.inside.iter() {
            while other.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
        }
        REFUSED.fetch_add(1, Ordering::Relaxed);
        match self.inner.allocate(req) {
            Ok(r) => {
                SERVED.fetch_add(1, Ordering::Relaxed);
                if FREES.load(Ordering::SeqCst) == frees {
                    SERVED_NO_FREE.fetch_add(1, Ordering::Relaxed);
                }
                self.inner.free(r.pfn_lo, r.pages).expect("just served");
            }
            Err(_) => {
                NO_ROOM.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.stop.store(false, Ordering::SeqCst);
    }
}

impl IovaAllocator for Checked {
    fn name(&self) -> String {
        "segtree-checked".into()
    }
    fn config(&self) -> &DomainConfig {
        self.inner.config()
    }
    fn allocate(&self, req: &AllocRequest) -> Result<IovaRange, IovaError> {
        let mine = self.enter();
        let frees = FREES.load(Ordering::SeqCst);
        let r = self.inner.allocate(req);
        mine.store(false, Ordering::SeqCst);
        if matches!(r, Err(IovaError::NoSpace { .. })) {
            self.ask_alone(req, frees);
        }
        r
    }
    fn free(&self, pfn: Pfn, pages: u64) -> Result<(), IovaError> {
        let mine = self.enter();
        let r = self.inner.free(pfn, pages);
        if r.is_ok() {
            FREES.fetch_add(1, Ordering::SeqCst);
        }
        mine.store(false, Ordering::SeqCst);
        r
    }
    fn reserve(&self, pfn_lo: Pfn, pfn_hi: Pfn) -> Result<(), IovaError> {
        self.inner.reserve(pfn_lo, pfn_hi)
    }
    fn stats(&self) -> DomainStats {
        self.inner.stats()
    }
    fn work(&self) -> WorkCounters {
        self.inner.work()
    }
    fn memory_bytes(&self) -> usize {
        self.inner.memory_bytes()
    }
    fn flush_caches(&self) {
        self.inner.flush_caches()
    }
    fn exact_fit(&self) -> bool {
        self.inner.exact_fit()
    }
}

fn checked(cfg: DomainConfig) -> Result<Box<dyn IovaAllocator>, IovaError> {
    Ok(Box::new(Checked {
        inner: SegTreeAllocator::new(cfg)?,
        inside: (0..FLAGS)
            .map(|_| CachePadded::new(AtomicBool::new(false)))
            .collect(),
        stop: AtomicBool::new(false),
        asking: Mutex::new(()),
    }))
}

/// A positive count argument, or the default; anything else stops with a one-line error.
fn count(arg: Option<&String>, name: &str, default: usize) -> usize {
    match arg.map(|s| s.parse::<usize>()) {
        None => default,
        Some(Ok(n)) if n > 0 => n,
        _ => {
            eprintln!("frag_refusals: {name} must be a positive whole number");
            std::process::exit(2);
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let reps = count(args.first(), "reps", 3);
    let threads = count(args.get(1), "threads", 16);
    let mut designs: Vec<&str> = args
        .get(2)
        .map_or(vec!["linux-rcache"], |s| s.split(',').collect());
    register_allocator("segtree-checked", checked).expect("a new name");
    designs.push("segtree-checked");
    let opts = BenchOptions::quick();
    for rep in 0..reps {
        let before = (
            REFUSED.load(Ordering::Relaxed),
            NO_ROOM.load(Ordering::Relaxed),
            SERVED.load(Ordering::Relaxed),
            SERVED_NO_FREE.load(Ordering::Relaxed),
        );
        let records = run_group(&designs, "fragmented-32bit", threads, &opts).unwrap_or_else(|e| {
            eprintln!("frag_refusals: {e}");
            std::process::exit(2);
        });
        let counted: Vec<String> = records
            .iter()
            .map(|r| format!("{} refused {}", r.allocator, r.failures))
            .collect();
        println!(
            "rep {rep}, {threads} threads: {}; asked again alone: {} refusals, no room {}, served {} \
             ({} with no free since the refused call began)",
            counted.join(", "),
            REFUSED.load(Ordering::Relaxed) - before.0,
            NO_ROOM.load(Ordering::Relaxed) - before.1,
            SERVED.load(Ordering::Relaxed) - before.2,
            SERVED_NO_FREE.load(Ordering::Relaxed) - before.3,
        );
    }
}
