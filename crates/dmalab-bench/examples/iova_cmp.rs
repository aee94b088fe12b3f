//! Repeated quick-bench cells for comparing designs: `iova_cmp [reps] [allocators,..] [workloads,..] [threads,..]`.
//! The allocators of a (workload, threads) cell run interleaved, pass by pass (`run_group`).
//! Prints one line per cell and repetition: `alloc workload threads ops_per_s bytes_per_live
//! failures passes(M/s): ... p99_ns=...` (the median and each throughput pass, then the latency
//! pass's 99th percentile); with `IOVA_CMP_WORK` set, also the work counters.
use dmalab_bench::{run_group, BenchOptions, WORKLOADS};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let reps: usize = args.get(1).map_or(5, |s| s.parse().unwrap());
    let allocs: Vec<String> = args.get(2).map_or_else(
        || vec!["segtree".into(), "rbtree".into(), "magazines+rbtree".into()],
        |s| s.split(',').map(String::from).collect(),
    );
    let works: Vec<String> = args.get(3).map_or_else(
        || WORKLOADS.iter().map(|s| s.to_string()).collect(),
        |s| s.split(',').map(String::from).collect(),
    );
    let threads: Vec<usize> = args.get(4).map_or_else(
        || vec![1, 2],
        |s| s.split(',').map(|t| t.parse().unwrap()).collect(),
    );
    let opts = BenchOptions::quick();
    for _ in 0..reps {
        for w in &works {
            for &t in &threads {
                let names: Vec<&str> = allocs.iter().map(String::as_str).collect();
                let records = run_group(&names, w, t, &opts).expect("cells run");
                for (a, r) in allocs.iter().zip(records) {
                    println!(
                        "{} {} {} {:.0} {:.2} {} passes(M/s): {} p99_ns={:.0}",
                        a,
                        w,
                        t,
                        r.ops_per_s,
                        r.bytes_per_live_mapping,
                        r.failures,
                        r.passes_mops(1),
                        r.p99_ns
                    );
                    if std::env::var_os("IOVA_CMP_WORK").is_some() {
                        println!("  {:?}", r.work);
                    }
                }
            }
        }
    }
}
