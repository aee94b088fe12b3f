//! Fuzz target: decode a sequence of schedule and step operations and run the engine's event
//! queue against the `BTreeMap` reference of `crates/dmalab-sim/tests/common/mod.rs`.
//!
//! Run with `cargo +nightly fuzz run event_queue` from the repository root.

#![no_main]

use arbitrary::Unstructured;
use libfuzzer_sys::fuzz_target;

#[path = "../../crates/dmalab-sim/tests/common/mod.rs"]
mod common;

use common::{check_queue, QueueOp};

fn ops(u: &mut Unstructured<'_>) -> arbitrary::Result<Vec<QueueOp>> {
    let mut out = Vec::new();
    while !u.is_empty() && out.len() < 4096 {
        out.push(match u.int_in_range(0u8..=9)? {
            0..=3 => QueueOp::In(u.int_in_range(0u64..=1000)?),
            4..=5 => QueueOp::At(u.int_in_range(0u64..=100_000)?),
            _ => QueueOp::Step,
        });
    }
    Ok(out)
}

fuzz_target!(|data: &[u8]| {
    if let Ok(ops) = ops(&mut Unstructured::new(data)) {
        check_queue(&ops);
    }
});
