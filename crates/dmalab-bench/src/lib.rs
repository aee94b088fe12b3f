//! The IOVA allocator benchmark: four workloads, any design, 1..=64 threads, counted and timed.
//!
//! An op is one `allocate` or one `free` call. Every request is size-aligned, as the Linux DMA
//! layer asks. Throughput is the median over several untimed passes (on a busy two-core machine
//! a single pass of a few milliseconds is often cut by another process); latency percentiles
//! come from a further pass that times every call with the cycle counter (the timer's own cost,
//! [`timer_overhead_ns`], is included in them, the same for every design, and never
//! subtracted).

pub mod copy;
pub mod linux_rcache;
mod timer;
pub mod vm_allocator;
mod workload;

use dmalab_iova::{
    new_allocator, AllocatorKind, DomainConfig, IovaAllocator, IovaError, WorkCounters,
};

pub use timer::timer_overhead_ns;
pub use workload::{in_turns, TurnsOptions, WORKLOADS};

/// Why a benchmark cell could not run.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// An allocator name the benchmark does not know.
    #[error("unknown allocator {0:?}; valid: {1}")]
    UnknownAllocator(String, String),
    /// A workload name the benchmark does not know.
    #[error("unknown workload {0:?}; valid: {1}")]
    UnknownWorkload(String, String),
    /// Thread count outside 1..=64.
    #[error("threads {0} is outside the valid range 1..=64")]
    Threads(usize),
    /// A domain too small for the workload's starting live set (see [`address_bits_range`]).
    #[error(
        "address_bits {address_bits} is outside the valid range {min}..={max} for {workload} \
         with {threads} thread(s), whose starting live set takes up to {pages} pages"
    )]
    AddressBits {
        /// The width given.
        address_bits: u32,
        /// The workload.
        workload: String,
        /// Threads asked for.
        threads: usize,
        /// Pages the workload needs the domain to hold.
        pages: u64,
        /// Narrowest valid width.
        min: u32,
        /// Widest valid width (an IOVA is a 64-bit address).
        max: u32,
    },
    /// The allocator refused to build or to set up the workload.
    #[error(transparent)]
    Allocator(#[from] IovaError),
}

/// How long and on what domain to run.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// Ops each thread does in each measured pass.
    pub ops_per_thread: u64,
    /// Ops each thread does before measuring.
    pub warmup_ops: u64,
    /// Workload seed.
    pub seed: u64,
    /// The domain covers IOVAs below 2^address_bits.
    pub address_bits: u32,
    /// Page size in bytes.
    pub page_size_bytes: u64,
    /// Wall time one pass may take whatever its op count, so that slow designs end too.
    pub pass_budget: std::time::Duration,
}

impl BenchOptions {
    /// Short runs: the whole comparison in well under a minute.
    pub fn quick() -> Self {
        Self {
            ops_per_thread: 1_000_000,
            warmup_ops: 50_000,
            seed: 1,
            address_bits: 36,
            page_size_bytes: 4096,
            pass_budget: std::time::Duration::from_millis(250),
        }
    }

    /// Longer runs for steadier numbers.
    pub fn full() -> Self {
        Self {
            ops_per_thread: 10_000_000,
            warmup_ops: 500_000,
            pass_budget: std::time::Duration::from_secs(2),
            ..Self::quick()
        }
    }
}

/// One cell's result.
#[derive(Debug, Clone, serde::Serialize)]
pub struct BenchRecord {
    /// Design name.
    pub allocator: String,
    /// Workload name.
    pub workload: String,
    /// Threads run at once.
    pub threads: usize,
    /// Ops in the untimed passes, all threads.
    pub ops: u64,
    /// Ops per second of wall time: the median over the untimed passes.
    pub ops_per_s: f64,
    /// Ops per second in each untimed pass, in order.
    pub pass_ops_per_s: Vec<f64>,
    /// Median latency of one call, ns.
    pub p50_ns: f64,
    /// 99th percentile, ns.
    pub p99_ns: f64,
    /// 99.9th percentile, ns.
    pub p999_ns: f64,
    /// 99.99th percentile, ns.
    pub p9999_ns: f64,
    /// Allocator heap bytes over live mappings at the end.
    pub bytes_per_live_mapping: f64,
    /// Live mappings at the end.
    pub live_mappings: u64,
    /// Allocations refused for lack of space in the measured passes.
    pub failures: u64,
    /// Whether this is the library's default design.
    pub default: bool,
    /// Work the allocator counted over the whole cell.
    pub work: WorkCounters,
}

impl BenchRecord {
    /// Each untimed pass in millions of ops per second, `decimals` places each, space-separated.
    pub fn passes_mops(&self, decimals: usize) -> String {
        let passes: Vec<String> = self
            .pass_ops_per_s
            .iter()
            .map(|x| format!("{:.*}", decimals, x / 1e6))
            .collect();
        passes.join(" ")
    }
}

/// Every allocator name the benchmark accepts.
pub fn allocator_names() -> Vec<String> {
    let mut v: Vec<String> = AllocatorKind::NAMES.iter().map(|s| s.to_string()).collect();
    v.push(vm_allocator::NAME.into());
    v.push(linux_rcache::NAME.into());
    v
}

fn build(name: &str, cfg: DomainConfig) -> Result<Box<dyn IovaAllocator>, BenchError> {
    if name == vm_allocator::NAME {
        return Ok(Box::new(vm_allocator::VmAllocatorAdapter::new(cfg)?));
    }
    if name == linux_rcache::NAME {
        return Ok(Box::new(linux_rcache::LinuxRcache::new(cfg)?));
    }
    let kind = AllocatorKind::parse(name)
        .map_err(|_| BenchError::UnknownAllocator(name.into(), allocator_names().join(", ")))?;
    Ok(new_allocator(kind, cfg)?)
}

/// The address widths `workload` runs in with `threads` threads and `opts`' seed and page size:
/// from the narrowest domain (past its unused frame 0) that holds the pages the workload's lanes
/// need to start as designed (their starting live set, drawn as they will draw it), to 64 bits.
pub fn address_bits_range(
    workload: &str,
    threads: usize,
    opts: &BenchOptions,
) -> Result<std::ops::RangeInclusive<u32>, BenchError> {
    Ok(address_bits_need(parse_cell(workload, threads)?, threads, opts).0)
}

/// The workload named, for `threads` threads (or lanes).
pub(crate) fn parse_cell(workload: &str, threads: usize) -> Result<workload::Workload, BenchError> {
    if !(1..=64).contains(&threads) {
        return Err(BenchError::Threads(threads));
    }
    workload::Workload::parse(workload)
        .ok_or_else(|| BenchError::UnknownWorkload(workload.into(), WORKLOADS.join(", ")))
}

/// The valid address widths and the pages behind the narrowest.
fn address_bits_need(
    kind: workload::Workload,
    threads: usize,
    opts: &BenchOptions,
) -> (std::ops::RangeInclusive<u32>, u64) {
    let pages = kind.pages_needed(threads, opts.seed);
    // Frames 1..2^(bits - page_shift) must number at least `pages`.
    let page_shift = opts.page_size_bytes.trailing_zeros();
    let min = page_shift + (u64::BITS - pages.leading_zeros());
    (min..=u64::BITS, pages)
}

/// Run one cell.
pub fn run(
    allocator: &str,
    workload: &str,
    threads: usize,
    opts: &BenchOptions,
) -> Result<BenchRecord, BenchError> {
    Ok(run_group(&[allocator], workload, threads, opts)?
        .pop()
        .expect("one record per allocator"))
}

/// Run the cells of `workload` with `threads` threads for every allocator in `allocators`,
/// interleaved: their throughput passes take turns, one pass of each per round, so that on a
/// machine whose speed drifts (a shared host) every design is measured over the same stretches
/// of time and their ratios stay comparable. One record per allocator, in order; the first
/// allocator that fails fails the group.
pub fn run_group(
    allocators: &[&str],
    workload: &str,
    threads: usize,
    opts: &BenchOptions,
) -> Result<Vec<BenchRecord>, BenchError> {
    let kind = parse_cell(workload, threads)?;
    let cfg = DomainConfig::with_address_bits(opts.address_bits, opts.page_size_bytes)?;
    let (valid, pages) = address_bits_need(kind, threads, opts);
    if !valid.contains(&opts.address_bits) {
        return Err(BenchError::AddressBits {
            address_bits: opts.address_bits,
            workload: workload.into(),
            threads,
            pages,
            min: *valid.start(),
            max: *valid.end(),
        });
    }
    let built: Vec<Box<dyn IovaAllocator>> = allocators
        .iter()
        .map(|a| build(a, cfg))
        .collect::<Result<_, _>>()?;
    let refs: Vec<&dyn IovaAllocator> = built.iter().map(|a| a.as_ref()).collect();
    let outcomes = workload::run_group(&refs, kind, threads, opts);
    allocators
        .iter()
        .zip(&built)
        .zip(outcomes)
        .map(|((name, alloc), out)| Ok(record(name, alloc.as_ref(), workload, threads, out?)))
        .collect()
}

/// A cell's record from its outcome.
fn record(
    allocator: &str,
    alloc: &dyn IovaAllocator,
    workload: &str,
    threads: usize,
    out: workload::Outcome,
) -> BenchRecord {
    let mut lat = out.latencies_ns;
    lat.sort_unstable_by(f64::total_cmp);
    let pct = |q: f64| -> f64 {
        if lat.is_empty() {
            return 0.0;
        }
        let i = ((lat.len() as f64 - 1.0) * q).round() as usize;
        lat[i]
    };
    BenchRecord {
        allocator: alloc.name(),
        workload: workload.into(),
        threads,
        ops: out.ops,
        ops_per_s: workload::median(&out.ops_per_s),
        pass_ops_per_s: out.ops_per_s,
        p50_ns: pct(0.5),
        p99_ns: pct(0.99),
        p999_ns: pct(0.999),
        p9999_ns: pct(0.9999),
        bytes_per_live_mapping: out.memory_bytes as f64 / out.live.max(1) as f64,
        live_mappings: out.live,
        failures: out.failures,
        default: AllocatorKind::parse(allocator).is_ok_and(|k| k == AllocatorKind::default()),
        work: alloc.work(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn address_bits_range_holds_the_starting_live_set() {
        let opts = BenchOptions::quick();
        // 4096 one-page mappings a lane: 2^12 frames less frame 0 are one too few.
        assert_eq!(address_bits_range("nic-ring", 1, &opts).unwrap(), 25..=64);
        assert_eq!(address_bits_range("nic-ring", 2, &opts).unwrap(), 26..=64);
        let mixed = address_bits_range("mixed", 1, &opts).unwrap();
        assert!(mixed.start() > &25, "{mixed:?}");
        assert!(matches!(
            address_bits_range("nope", 1, &opts),
            Err(BenchError::UnknownWorkload(..))
        ));
    }

    #[test]
    fn a_domain_too_small_for_the_workload_is_refused() {
        let opts = BenchOptions {
            address_bits: 13,
            ..BenchOptions::quick()
        };
        let err = run("segtree", "nic-ring", 1, &opts).unwrap_err();
        assert!(
            matches!(
                err,
                BenchError::AddressBits {
                    min: 25,
                    max: 64,
                    pages: 4096,
                    ..
                }
            ),
            "{err:?}"
        );
        assert!(err.to_string().contains("valid range 25..=64"), "{err}");
    }
}
