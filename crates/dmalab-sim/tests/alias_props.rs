//! Allocation policy against IOTLB replacement: streams whose pages share a set thrash it once
//! they outnumber its ways, and only then; colouring the streams' first pages spreads them.

use dmalab_sim::config::platform::Platform;
use dmalab_sim::progress::Progress;
use dmalab_sim::workload::alias::{run, AliasFlush, AliasPoint, AliasRecord, Align};

fn cell(streams: u32, ways: u32, io: u64, align: Align, flush: AliasFlush) -> AliasRecord {
    let p = Platform::load("xeon-broadwell-2s", &Default::default()).unwrap();
    let point = AliasPoint {
        allocator: "segtree".into(),
        streams,
        iotlb_entries: 64,
        iotlb_ways: ways,
        io_bytes: io,
        tlp_bytes: 256,
        align,
        flush,
        ios_per_stream: 300,
    };
    run(&p, &point, &Progress::new()).unwrap()
}

#[test]
fn streams_sharing_a_set_thrash_it_only_beyond_its_ways() {
    for flush in [AliasFlush::Strict, AliasFlush::Lazy] {
        // 64 KiB I/Os (16 pages) in a 4-way IOTLB of 16 sets: every stream's k-th page falls
        // in set k. Four streams fit the ways; eight evict each other on every TLP.
        let four = cell(4, 4, 65536, Align::Size, flush);
        assert_eq!(four.thrash_misses_per_io, 0.0, "{four:?}");
        let eight = cell(8, 4, 65536, Align::Size, flush);
        assert_eq!(eight.misses_per_io, eight.tlps_per_io as f64, "{eight:?}");
        // Fully associative, the same eight streams fit.
        assert_eq!(
            cell(8, 64, 65536, Align::Size, flush).thrash_misses_per_io,
            0.0
        );
        // Coloured, each stream starts in its own set: 8 x 16 pages at once fit 16 x 4 ways
        // only if at most four streams' current pages share a set, which colouring gives.
        let colored = cell(8, 4, 65536, Align::Color, flush);
        assert_eq!(colored.thrash_misses_per_io, 0.0, "{colored:?}");
        assert!(colored.first_page_sets > 7.9);
    }
}

#[test]
fn one_page_ios_never_thrash_below_the_capacity() {
    for streams in [1, 8, 32, 64] {
        let r = cell(streams, 4, 4096, Align::Size, AliasFlush::Strict);
        assert_eq!(r.misses_per_io, 1.0, "{r:?}");
    }
}
