//! Outside designs join the bench through `register_allocator`: they run on the same
//! workloads beside the built-in ones, bad and taken names are refused, and a factory's error
//! comes back as the cell's error.

use dmalab_bench::{allocator_names, register_allocator, run_group, BenchOptions, RegisterError};
use dmalab_iova::{new_allocator, AllocatorKind, DomainConfig, IovaAllocator, IovaError};

/// The names the tests of this file register. They run in parallel in one process and share
/// the bench's registry, so each test allows for the others' names coming and going meanwhile.
const REGISTERED_HERE: [&str; 3] = ["outside-bitmap", "twice", "refuses"];

fn bitmap(cfg: DomainConfig) -> Result<Box<dyn IovaAllocator>, IovaError> {
    new_allocator(AllocatorKind::Bitmap, cfg)
}

fn refuses(_: DomainConfig) -> Result<Box<dyn IovaAllocator>, IovaError> {
    // This design takes no page but 2 MiB ones.
    Err(IovaError::InvalidPageSize { page_size_bytes: 3 })
}

fn short() -> BenchOptions {
    BenchOptions {
        ops_per_thread: 4_000,
        warmup_ops: 200,
        ..BenchOptions::quick()
    }
}

#[test]
fn a_registered_design_runs_beside_the_built_in_ones() {
    let built_in = allocator_names()
        .into_iter()
        .filter(|n| !REGISTERED_HERE.contains(&n.as_str()))
        .count();
    register_allocator("outside-bitmap", bitmap).unwrap();
    // After every built-in design (another test may have registered its name since).
    let names = allocator_names();
    let at = names.iter().position(|n| n == "outside-bitmap").unwrap();
    assert!(at >= built_in, "{names:?}");
    let names = ["bitmap", "outside-bitmap"];
    let recs = run_group(&names, "map-unmap-1page", 2, &short()).unwrap();
    assert_eq!(recs[1].allocator, "outside-bitmap");
    assert!(recs[1].ops > 0 && recs[1].ops_per_s > 0.0);
    // The same design under two names does the same counted work on the same workload.
    assert_eq!(recs[0].failures, recs[1].failures);
    assert_eq!(recs[0].live_mappings, recs[1].live_mappings);
}

#[test]
fn bad_and_taken_names_are_refused_and_nothing_is_added() {
    let before = allocator_names();
    for bad in ["", "Upper", "has space", &"x".repeat(65)] {
        let err = register_allocator(bad, bitmap).unwrap_err();
        assert!(matches!(err, RegisterError::BadName(_)), "{bad:?}: {err}");
    }
    for taken in ["segtree", "linux-rcache", "vm-allocator"] {
        let err = register_allocator(taken, bitmap).unwrap_err();
        assert!(
            matches!(err, RegisterError::Taken(..)) && err.to_string().contains("segtree"),
            "{err}"
        );
    }
    register_allocator("twice", bitmap).unwrap();
    assert!(matches!(
        register_allocator("twice", bitmap),
        Err(RegisterError::Taken(..))
    ));
    let after = allocator_names();
    // Only the names this file registers are new (the other tests may add theirs meanwhile),
    // "twice" once, and no bad name.
    let new: Vec<&String> = after.iter().filter(|n| !before.contains(n)).collect();
    assert!(
        new.iter().all(|n| REGISTERED_HERE.contains(&n.as_str())),
        "{new:?}"
    );
    assert_eq!(after.iter().filter(|n| *n == "twice").count(), 1);
    assert!(after
        .iter()
        .all(|n| !n.is_empty() && n.len() <= 64 && !n.contains(' ')));
}

#[test]
fn a_factorys_error_is_the_cells_error() {
    register_allocator("refuses", refuses).unwrap();
    let err = run_group(&["refuses"], "mixed", 1, &short()).unwrap_err();
    assert!(err.to_string().contains("page size 3 bytes"), "{err}");
}
