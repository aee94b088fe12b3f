//! Fuzz target: decode a domain and an operation sequence, run it through every design and the reference model in lockstep, and crash on any disagreement.
//!
//! The checks are those of the property tests (`crates/dmalab-iova/tests/model.rs`), from the
//! same harness file (`crates/dmalab-iova/tests/common/mod.rs`). Run with
//! `cargo +nightly fuzz run ops` from the workspace root (needs `cargo install cargo-fuzz`); on
//! stable, `cargo build` here checks that the target compiles, and the binary it builds replays
//! input files given as arguments.

#![no_main]

use arbitrary::{Arbitrary, Unstructured};
use dmalab_iova::AllocatorKind;
use libfuzzer_sys::fuzz_target;

#[allow(dead_code)]
#[path = "../../crates/dmalab-iova/tests/common/mod.rs"]
mod common;

use common::{domain, Harness, Op, ReqSpec};

fn req(u: &mut Unstructured<'_>) -> arbitrary::Result<ReqSpec> {
    let pages = match u.int_in_range(0u8..=9)? {
        0..=5 => u.int_in_range(1u64..=4)?,
        6..=8 => u.int_in_range(1u64..=16)?,
        _ => u.int_in_range(1u64..=80)?,
    };
    Ok(ReqSpec {
        pages,
        align_log: if u.ratio(2u8, 5)? {
            u.int_in_range(0u32..=6)?
        } else {
            0
        },
        limit_frac: if u.ratio(3u8, 10)? {
            Some(u16::arbitrary(u)?)
        } else {
            None
        },
        boundary_shift: if u.ratio(1u8, 5)? {
            Some(u.int_in_range(0u32..=3)?)
        } else {
            None
        },
    })
}

fn op(u: &mut Unstructured<'_>) -> arbitrary::Result<Op> {
    let pick = usize::from(u16::arbitrary(u)?);
    Ok(match u.int_in_range(0u8..=79)? {
        0..=29 => Op::Alloc(req(u)?),
        30..=31 => Op::BadAlloc(req(u)?, u.int_in_range(0u8..=5)?),
        32..=51 => Op::Free(pick),
        52..=54 => Op::DoubleFree(pick),
        55..=57 => {
            let d = u.int_in_range(1i64..=3)?;
            Op::WrongSize(pick, if bool::arbitrary(u)? { d } else { -d })
        }
        58..=59 => Op::FreeUnallocated(u64::arbitrary(u)?, u.int_in_range(1u64..=8)?),
        60..=61 => Op::FreeReserved(pick, u64::arbitrary(u)?, u.int_in_range(1u64..=4)?),
        62 => Op::FreeZero(pick),
        63..=64 => Op::FreeOutside(pick, u.int_in_range(0u8..=4)?),
        65..=72 => Op::Reserve(u64::arbitrary(u)?, u.int_in_range(1u64..=32)?),
        73..=76 => Op::ReserveOverAlloc(pick, u.int_in_range(0u64..=3)?, u.int_in_range(0u64..=3)?),
        77 => Op::ReserveOutside(u.int_in_range(0u8..=4)?),
        _ => Op::Flush,
    })
}

fn decode(data: &[u8]) -> arbitrary::Result<((u64, u64), Vec<Op>)> {
    let mut u = Unstructured::new(data);
    let lo = u.int_in_range(0u64..=3)?;
    let pages = match u.int_in_range(0u8..=2)? {
        0 => u.int_in_range(1u64..=64)?,
        1 => u.int_in_range(64u64..=512)?,
        _ => u.int_in_range(512u64..=2000)?,
    };
    let mut ops = Vec::new();
    while !u.is_empty() && ops.len() < 400 {
        ops.push(op(&mut u)?);
    }
    Ok(((lo, pages), ops))
}

fuzz_target!(|data: &[u8]| {
    let Ok(((lo, pages), ops)) = decode(data) else {
        return;
    };
    for name in AllocatorKind::NAMES {
        if let Err(e) = Harness::new(name, domain(lo, pages)).run(&ops) {
            panic!("{e}\nops: {ops:#?}");
        }
    }
});
