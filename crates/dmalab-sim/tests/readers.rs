//! The scenario and platform readers on damaged input: every built-in file with single-byte
//! changes, truncations and key renames is either accepted (and runs on a small budget) or
//! refused with a typed error; nothing panics. The `readers` fuzz target drives the same code
//! with arbitrary bytes.

#[path = "support/readers.rs"]
mod readers;

use dmalab_sim::config::device::BUILTIN_DEVICES as DEVICES;
use dmalab_sim::config::platform::BUILTIN as PLATFORMS;
use dmalab_sim::config::scenario::BUILTIN as SCENARIOS;
use proptest::prelude::*;

fn files() -> Vec<&'static str> {
    SCENARIOS
        .iter()
        .chain(PLATFORMS)
        .chain(DEVICES)
        .map(|(_, text)| *text)
        .collect()
}

#[test]
fn every_builtin_file_is_accepted_by_its_reader() {
    for text in files() {
        assert_eq!(readers::read_and_run(text, false), 1);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn damaged_files_are_accepted_or_refused_never_a_panic(
        file in 0usize..64,
        at in any::<prop::sample::Index>(),
        byte in any::<u8>(),
        cut in any::<bool>(),
    ) {
        let files = files();
        let text = files[file % files.len()].as_bytes();
        let i = at.index(text.len());
        let mut bytes = text.to_vec();
        if cut {
            bytes.truncate(i);
        } else {
            bytes[i] = byte;
        }
        if let Ok(s) = std::str::from_utf8(&bytes) {
            readers::read_and_run(s, false);
            readers::read_and_run(s, true);
        }
    }
}
