//! Outside designs join the bench through `register_allocator`: they run on the same
//! workloads beside the built-in ones, bad and taken names are refused, and a factory's error
//! comes back as the cell's error.

use dmalab_bench::{allocator_names, register_allocator, run_group, BenchOptions, RegisterError};
use dmalab_iova::{new_allocator, AllocatorKind, DomainConfig, IovaAllocator, IovaError};

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
    register_allocator("outside-bitmap", bitmap).unwrap();
    assert_eq!(allocator_names().last().unwrap(), "outside-bitmap");
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
    assert_eq!(
        after.len(),
        before.len() + usize::from(!before.contains(&"twice".into()))
    );
}

#[test]
fn a_factorys_error_is_the_cells_error() {
    register_allocator("refuses", refuses).unwrap();
    let err = run_group(&["refuses"], "mixed", 1, &short()).unwrap_err();
    assert!(err.to_string().contains("page size 3 bytes"), "{err}");
}
