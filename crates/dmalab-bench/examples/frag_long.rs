//! Long single-cell runs: `frag_long ALLOCATOR WORKLOAD THREADS OPS_PER_PASS SECONDS_PER_PASS`.
//! Prints each throughput pass (up to 7), the failures and the work counters, to follow how a
//! design behaves long after the quick benchmark's passes end.
use dmalab_bench::{run, BenchOptions};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let get = |i: usize, d: &str| args.get(i).cloned().unwrap_or_else(|| d.to_string());
    let alloc = get(1, "segtree");
    let work = get(2, "fragmented-32bit");
    let threads: usize = get(3, "1").parse().expect("threads");
    let mut opts = BenchOptions::quick();
    opts.ops_per_thread = get(4, "1000000").parse().expect("ops per pass");
    opts.pass_budget = std::time::Duration::from_secs_f64(get(5, "60").parse().expect("seconds"));
    let r = run(&alloc, &work, threads, &opts).expect("cell runs");
    println!(
        "{alloc} {work} {threads}T: passes (M ops/s) {} failures {}\n  {:?}",
        r.passes_mops(2),
        r.failures,
        r.work
    );
}
