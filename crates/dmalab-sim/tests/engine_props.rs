//! The event queue, fuzzed against a `BTreeMap` reference: the same events in the same order,
//! ties by scheduling order, the past refused.

mod common;

use common::{check_queue, QueueOp};
use proptest::prelude::*;

fn op() -> impl Strategy<Value = QueueOp> {
    prop_oneof![
        3 => (0u64..50).prop_map(QueueOp::In),
        1 => Just(QueueOp::In(0)),
        2 => (0u64..400).prop_map(QueueOp::At),
        4 => Just(QueueOp::Step),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn engine_agrees_with_the_reference(ops in prop::collection::vec(op(), 0..300)) {
        check_queue(&ops);
    }
}
