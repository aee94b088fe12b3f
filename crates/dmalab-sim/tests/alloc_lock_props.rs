//! The IOVA allocator's lock in the block workload, on `grace-2s` with its NVMe drives. Each test
//! fails without the mechanism (one thread has no lock to wait for, by construction, so no test
//! is spent on it):
//! - with `rbtree` every allocation and free works in the shared tree, so the lock, one holder at
//!   a time, bounds the I/O rate: I/Os per second times the lock's hold per I/O never exceeds one
//!   second per second (fails without the lock: 64 threads then run 20M I/Os per second against
//!   a 0.22 us hold);
//! - a cached design (`segtree`), whose maps and unmaps mostly stay in a per-CPU cache, waits far
//!   less for the lock than `rbtree` with the same threads (fails if cache hits took the lock).

use dmalab_sim::config::scenario::Scenario;
use dmalab_sim::run::report::Report;

fn run(allocator: &str, flush: &str, threads: usize) -> Report {
    let text = format!(
        "platform = \"grace-2s\"\n\
         [mapping]\ntranslation = \"page-table\"\nallocator = \"{allocator}\"\nflush = \"{flush}\"\n\
         [workload]\nkind = \"block\"\nio_bytes = 4096\nios = 20000\nthreads = {threads}\n\
         queue_depth = 4\ndevices = 8\n"
    );
    Scenario::parse("alloc-lock-props", &text)
        .unwrap()
        .run()
        .unwrap()
}

const WAIT: &str = "IOVA allocator lock wait";

#[test]
fn the_lock_bounds_the_rate_of_a_tree_every_operation_reaches() {
    for flush in ["strict", "per-cpu"] {
        for threads in [8, 64] {
            let r = run("rbtree", flush, threads);
            let b = &r.breakdown_us;
            let hold_s = (b["map: IOVA allocation"] + b["unmap: IOVA free"]) * 1e-6;
            assert!(
                r.ops_per_s * hold_s <= 1.0 + 1e-9,
                "{flush}, {threads} threads: {} I/Os per second hold the lock {hold_s} s each",
                r.ops_per_s
            );
            assert!(b[WAIT] > 0.0, "{flush}, {threads} threads never waited");
        }
    }
}

#[test]
fn per_cpu_caches_keep_threads_off_the_lock() {
    for flush in ["strict", "per-cpu"] {
        let tree = run("rbtree", flush, 64).breakdown_us[WAIT];
        let cached = run("segtree", flush, 64).breakdown_us[WAIT];
        assert!(
            cached * 10.0 < tree,
            "{flush}: segtree waits {cached} us an I/O against rbtree's {tree}"
        );
    }
}

/// `magazines+rbtree` (Linux's design) with 2,048 I/Os in flight: the first wave's IOVAs all
/// come from the tree (the caches start empty), under its lock. Counted from the start, a short
/// run is mostly that wave; with a warm-up of two waves, uncounted, the lock's wait falls to
/// what the steady state costs, the rate rises, and a run with no warm-up counts exactly as it
/// did before the key existed (the same report as leaving the key out).
#[test]
fn a_warm_up_leaves_the_first_waves_cold_allocations_uncounted() {
    let run = |warm: Option<u64>| {
        let text = format!(
            "platform = \"grace-2s\"\n\
             [mapping]\ntranslation = \"page-table\"\nallocator = \"magazines+rbtree\"\n\
             flush = \"strict\"\n\
             [workload]\nkind = \"block\"\nio_bytes = 4096\nios = 20000\nthreads = 64\n\
             queue_depth = 32\ndevices = 8\n{}",
            warm.map_or(String::new(), |w| format!("warm_up_ios = {w}\n"))
        );
        Scenario::parse("warm-up", &text).unwrap().run().unwrap()
    };
    let (cold, none, warm) = (run(None), run(Some(0)), run(Some(2 * 64 * 32)));
    assert_eq!(cold.ops_per_s, none.ops_per_s);
    assert_eq!(cold.breakdown_us, none.breakdown_us);
    assert!(
        warm.breakdown_us[WAIT] * 5.0 < cold.breakdown_us[WAIT],
        "warm {} against cold {}",
        warm.breakdown_us[WAIT],
        cold.breakdown_us[WAIT]
    );
    assert!(warm.ops_per_s > 2.0 * cold.ops_per_s);
}
