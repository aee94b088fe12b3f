//! Fuzz target: arbitrary bytes to the scenario reader (as TOML and as JSON) and the platform
//! reader, and a run on a small budget of whatever they accept: no panic, every refusal a typed
//! error (see `crates/dmalab-sim/tests/support/readers.rs`).
//!
//! Run with `cargo +nightly fuzz run readers` from the repository root.

#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../crates/dmalab-sim/tests/support/readers.rs"]
mod readers;

fuzz_target!(|data: &[u8]| {
    if let Some((&mode, rest)) = data.split_first() {
        if let Ok(text) = std::str::from_utf8(rest) {
            readers::read_and_run(text, mode & 1 == 1);
        }
    }
});
