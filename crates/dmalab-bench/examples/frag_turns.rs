//! How `fragmented-32bit` wears a segtree domain's 32-bit zone down, deterministically:
//! `frag_turns LANES TURN CHUNKS STEPS [half]`.
//!
//! Runs LANES lanes of the workload (each on its own thread, so with its own cache) in turns of
//! TURN steps (0: all at once, as in the benchmark, and no longer deterministic), and after
//! every STEPS steps of each lane prints the refusals the first lane met and where the zone's
//! free pages are (`SegTreeAllocator::zone_report`): free in the tree (pages, runs, the longest,
//! free aligned 64-page blocks), in the depot, in each cache. With `half`, the lanes use only
//! the lower half of the zone. Example: `frag_turns 2 64 8 2000000`.
use dmalab_bench::{in_turns, TurnsOptions};
use dmalab_iova::{DomainConfig, Pfn, SegTreeAllocator};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |i: usize, d: u64| -> u64 {
        args.get(i).map_or(d, |s| {
            s.parse()
                .expect("arguments: LANES TURN CHUNKS STEPS [half]")
        })
    };
    let cfg = DomainConfig::with_address_bits(36, 4096).expect("a 36-bit domain");
    let zone_top = cfg.pfn_32bit();
    let limit = if args.get(5).is_some_and(|s| s == "half") {
        Pfn(zone_top.0 / 2)
    } else {
        zone_top
    };
    let opts = TurnsOptions {
        lanes: arg(1, 2) as usize,
        turn: arg(2, 64),
        chunks: arg(3, 8) as usize,
        steps: arg(4, 2_000_000),
        limit: Some(limit),
        seed: 1,
    };
    let dom = SegTreeAllocator::new(cfg).expect("a segtree domain");
    let t0 = std::time::Instant::now();
    println!("chunk refusals tree_free tree_runs largest free_64_blocks depot caches seconds");
    in_turns(&dom, "fragmented-32bit", &opts, &|chunk, refusals| {
        let z = dom.zone_report(limit);
        println!(
            "{chunk} {refusals} {} {} {} {} {} {:?} {:.1}",
            z.tree_free_pages,
            z.tree_free_runs,
            z.tree_largest_run,
            z.tree_free_blocks_64,
            z.depot_pages,
            z.cached_pages,
            t0.elapsed().as_secs_f64()
        );
    })
    .expect("the workload runs");
}
