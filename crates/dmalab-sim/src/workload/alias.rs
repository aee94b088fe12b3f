//! Allocation policy against IOTLB replacement (seed 003's open question: "the allocation
//! policy \[should\] match the IO TLB replacement implemented in the IOMMU HW"). Several DMA
//! streams run at once, each mapping one I/O after another through the real IOVA allocator; the
//! device moves every I/O as TLPs of `tlp_bytes`, and the streams' TLPs reach the IOMMU
//! interleaved one by one (round-robin, the root complex serving the DMA engines in turn). Every
//! TLP is translated through a set-associative IOTLB whose set is the I/O page number's low bits
//! ([`crate::iommu::iotlb`]). Where the streams' current pages fall in the same set, more
//! streams than the set has ways evict each other between two TLPs of one page: a page is then
//! walked again for each TLP, not once.
//!
//! Placement is what decides it: which pages the allocator hands each stream, and whether the
//! DMA layer aligns an I/O's IOVA to its size (Linux aligns a mapping to its size rounded up to
//! a power of two, so every stream's k-th page shares its low bits). A miss beyond the first
//! one of each page of an I/O is a *thrash* miss; each miss costs the platform's walk
//! (`walk_level_ns` x `table_levels`). Unmapping invalidates at once (strict) or in per-stream
//! flush queues of 256 (lazy), as `bench map` does.
//!
//! What is left out: timing (streams are interleaved in lockstep, the worst case for aliasing
//! and the simplest), the device's own prefetch of translations (ATS), and per-CPU allocator
//! caches per stream (one simulation thread holds one cache, as in `bench map`).

use crate::config::platform::Platform;
use crate::config::workload::check as check_range;
use crate::error::{invalid_arg, iova, Result};
use crate::iommu::iotlb::{Iotlb, Replacement};
use crate::progress::Progress;
use crate::workload::mapbench::FLUSH_QUEUE_ENTRIES;
use dmalab_iova::{new_allocator, AllocRequest, AllocatorKind, DomainConfig, Pfn};
use serde::{Deserialize, Serialize};

/// How the DMA layer places an I/O's IOVA range.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Align {
    /// Aligned to its size rounded up to a power of two (Linux's IOMMU DMA layer).
    Size,
    /// Any page the allocator picks.
    Page,
    /// Coloured: the range is padded by up to `sets - 1` pages so that stream `s`'s I/Os start
    /// in set `s mod sets` (page colouring applied to the IOTLB: a what-if policy, not one a
    /// kernel ships).
    Color,
}

/// When unmapped pages are invalidated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AliasFlush {
    /// Each unmap invalidates its pages, then frees them.
    Strict,
    /// Each stream queues its unmaps; the 256th flushes the whole IOTLB and frees the batch.
    Lazy,
}

/// One cell of the what-if table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AliasPoint {
    /// The IOVA allocator's name.
    pub allocator: String,
    /// Concurrent DMA streams, 1..=1024.
    pub streams: u32,
    /// IOTLB entries, 1..=65536.
    pub iotlb_entries: u32,
    /// IOTLB ways (entries for a fully associative one), 1..=entries.
    pub iotlb_ways: u32,
    /// Bytes per I/O, 1..=2^24.
    pub io_bytes: u64,
    /// Bytes per TLP, a power of two in 64..=4096.
    pub tlp_bytes: u64,
    /// The DMA layer's alignment of an I/O's IOVA.
    pub align: Align,
    /// Strict or lazy invalidation.
    pub flush: AliasFlush,
    /// I/Os each stream runs, 1..=10^6.
    pub ios_per_stream: u64,
}

/// What one cell measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AliasRecord {
    /// The cell.
    #[serde(flatten)]
    pub point: AliasPoint,
    /// The platform.
    pub platform: String,
    /// IOTLB sets (entries over ways, a power of two).
    pub iotlb_sets: u32,
    /// TLPs per I/O.
    pub tlps_per_io: u64,
    /// IOTLB misses per I/O.
    pub misses_per_io: f64,
    /// Misses per I/O beyond one per page: walks repeated because another stream evicted the
    /// page between two of its TLPs.
    pub thrash_misses_per_io: f64,
    /// Misses over TLPs.
    pub miss_rate: f64,
    /// Walk time per I/O, microseconds (misses x the platform's walk).
    pub walk_us_per_io: f64,
    /// Distinct IOTLB sets the streams' first pages fell in, averaged over rounds: how spread
    /// the placement is.
    pub first_page_sets: f64,
}

/// Run one cell on `platform`'s IOMMU (its page size and walk cost; the IOTLB geometry is the
/// cell's).
pub fn run(platform: &Platform, p: &AliasPoint, progress: &Progress) -> Result<AliasRecord> {
    let costs = platform.iommu.as_ref().ok_or_else(|| {
        invalid_arg(
            "platform",
            &platform.name,
            "a platform with an [iommu] section",
        )
    })?;
    check(p)?;
    let page = costs.page_bytes;
    let kind = AllocatorKind::parse(&p.allocator)
        .map_err(|e| invalid_arg("allocator", &p.allocator, e))?;
    // A 4 GiB window, as the DMA layer gives a 32-bit device; page 0 is never handed out.
    let window_pages = (1u64 << 32) / page;
    let domain = DomainConfig::new(Pfn(1), Pfn(window_pages - 1), page)
        .map_err(iova(|| "IOVA domain of 4 GiB".into()))?;
    let alloc =
        new_allocator(kind, domain).map_err(iova(|| format!("allocator {}", p.allocator)))?;
    let ways = p.iotlb_ways as usize;
    let mut tlb = Iotlb::new(p.iotlb_entries as usize, ways, Replacement::Lru);
    let sets = tlb.capacity() / ways;
    let pages = p.io_bytes.div_ceil(page);
    let tlps = p.io_bytes.div_ceil(p.tlp_bytes);
    let streams = p.streams as usize;
    let mut queues: Vec<Vec<(u64, u64)>> = vec![Vec::new(); streams];
    // Each stream's current I/O: its first page, and the range allocated for it.
    let mut bases = vec![0u64; streams];
    let mut held = vec![(0u64, 0u64); streams];
    let pad = if p.align == Align::Color {
        sets as u64 - 1
    } else {
        0
    };
    let (mut misses, mut spread) = (0u64, 0u64);
    progress.start(p.ios_per_stream);
    for round in 0..p.ios_per_stream {
        for (s, base) in bases.iter_mut().enumerate() {
            let mut req = AllocRequest::pages(pages + pad);
            if p.align == Align::Size {
                req = req.size_aligned();
            }
            let lo = alloc
                .allocate(&req)
                .map_err(iova(|| {
                    format!("stream {s}: IOVA allocation of {pages} pages")
                }))?
                .pfn_lo
                .0;
            held[s] = (lo, pages + pad);
            // Colour: the first page at or after `lo` in set `s mod sets`.
            let set = sets as u64;
            *base = if pad > 0 {
                lo + (s as u64 % set + set - lo % set) % set
            } else {
                lo
            };
        }
        let mut first_sets: Vec<u64> = bases.iter().map(|b| b % sets as u64).collect();
        first_sets.sort_unstable();
        first_sets.dedup();
        spread += first_sets.len() as u64;
        // The streams' TLPs in turn: TLP t of every stream, then t + 1.
        for t in 0..tlps {
            let offset = t * p.tlp_bytes / page;
            for &base in &bases {
                if !tlb.access(base + offset) {
                    misses += 1;
                }
            }
        }
        for (s, &base) in bases.iter().enumerate() {
            let (lo, n) = held[s];
            match p.flush {
                AliasFlush::Strict => {
                    for pg in base..base + pages {
                        tlb.invalidate(pg);
                    }
                    free(&*alloc, s, lo, n)?;
                }
                AliasFlush::Lazy => {
                    queues[s].push((lo, n));
                    if queues[s].len() >= FLUSH_QUEUE_ENTRIES {
                        tlb.flush();
                        for (b, n) in std::mem::take(&mut queues[s]) {
                            free(&*alloc, s, b, n)?;
                        }
                    }
                }
            }
        }
        // Every round (the streams' I/Os), as a round of many streams is long.
        progress.set(round + 1);
        progress.check()?;
    }
    progress.set(p.ios_per_stream);
    let ios = (p.ios_per_stream * u64::from(p.streams)) as f64;
    let per_io = misses as f64 / ios;
    Ok(AliasRecord {
        point: p.clone(),
        platform: platform.name.clone(),
        iotlb_sets: sets as u32,
        tlps_per_io: tlps,
        misses_per_io: per_io,
        thrash_misses_per_io: per_io - pages as f64,
        miss_rate: per_io / tlps as f64,
        walk_us_per_io: per_io * costs.table_walk().0 as f64 / 1e6,
        first_page_sets: spread as f64 / p.ios_per_stream as f64,
    })
}

fn free(alloc: &dyn dmalab_iova::IovaAllocator, stream: usize, pfn: u64, pages: u64) -> Result<()> {
    alloc.free(Pfn(pfn), pages).map_err(iova(|| {
        format!("stream {stream}: IOVA free at page {pfn:#x}")
    }))
}

fn check(p: &AliasPoint) -> Result<()> {
    check_range("streams", p.streams.into(), 1..=1024)?;
    check_range("iotlb_entries", p.iotlb_entries.into(), 1..=65_536)?;
    check_range(
        "iotlb_ways",
        p.iotlb_ways.into(),
        1..=p.iotlb_entries.into(),
    )?;
    let sets = p.iotlb_entries / p.iotlb_ways;
    if !p.iotlb_entries.is_multiple_of(p.iotlb_ways) || !sets.is_power_of_two() {
        return Err(invalid_arg(
            "iotlb_entries",
            format!("{} in {}-way sets", p.iotlb_entries, p.iotlb_ways),
            "a power-of-two number of sets of iotlb_ways entries",
        ));
    }
    check_range("io_bytes", p.io_bytes, 1..=1 << 24)?;
    if !(64..=4096).contains(&p.tlp_bytes) || !p.tlp_bytes.is_power_of_two() {
        return Err(invalid_arg(
            "tlp_bytes",
            p.tlp_bytes,
            "a power of two in 64..=4096",
        ));
    }
    check_range("ios_per_stream", p.ios_per_stream, 1..=1_000_000)?;
    Ok(())
}
