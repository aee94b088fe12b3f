//! The smallest IOVA space: what each flush policy must hold live, found by bisection, with
//! the windows either side of the answer run.

use dmalab_sim::config::scenario::builtin_with;
use dmalab_sim::iommu::Translation;
use dmalab_sim::progress::Progress;
use dmalab_sim::run::space::{smallest_space, table_bytes};

fn search(name: &str, extra: &str) -> dmalab_sim::run::space::SpaceResult {
    let over: toml::Table = toml::from_str(&format!("[workload]\nios = 3000\n{extra}")).unwrap();
    smallest_space(&builtin_with(name, &over).unwrap(), &Progress::new()).unwrap()
}

#[test]
fn strict_needs_one_page_in_flight_and_deferred_holds_its_queue() {
    // One thread, one I/O in flight, 1 KiB I/Os: strict frees each page before the next map.
    let strict = search("p3-bitmap-strict", "");
    assert_eq!(strict.window_pages, 2, "{strict:?}");
    assert_eq!(strict.refused_at_bytes, None);
    // Deferred flushing keeps up to 250 unmapped pages allocated until their flush.
    let deferred = search("p3-segtree-deferred", "");
    assert!(deferred.window_pages > 250, "{deferred:?}");
    let bad = deferred.refused_at_bytes.unwrap();
    assert_eq!(bad + deferred.page_bytes, deferred.window_bytes);
    // Both neighbours were run: the answer ran clean and the page below refused.
    let ran = |w: u64| {
        deferred
            .probes
            .iter()
            .find(|p| p.window_bytes == w)
            .unwrap()
    };
    assert!(ran(deferred.window_bytes).refusal.is_none());
    assert!(ran(bad).refusal.is_some());
    assert_eq!(deferred.translation, Translation::PageTable);
    assert!(deferred.table_bytes < deferred.scenario_table_bytes);
}

#[test]
fn more_io_in_flight_needs_more_space() {
    let one = search("p3-segtree-deferred", "queue_depth = 1");
    let many = search("p3-segtree-deferred", "queue_depth = 64");
    assert!(many.window_pages > one.window_pages, "{one:?} {many:?}");
    assert_eq!(
        many.table_bytes,
        table_bytes(Translation::PageTable, many.window_pages, 4096, 4)
    );
}

#[test]
fn a_scenario_without_iovas_is_refused_by_name() {
    let over: toml::Table = toml::from_str("[workload]\nios = 100").unwrap();
    let sc = builtin_with("p3-iommu-off", &over).unwrap();
    let err = smallest_space(&sc, &Progress::new())
        .unwrap_err()
        .to_string();
    assert!(err.contains("translation"), "{err}");
}
