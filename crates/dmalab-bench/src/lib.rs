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

/// Every allocator name the benchmark accepts: the built-in designs, then those added with
/// [`register_allocator`], in the order they were added.
pub fn allocator_names() -> Vec<String> {
    let mut v = builtin_names();
    v.extend(registry().iter().map(|(n, _)| n.clone()));
    v
}

/// Builds an outside design's allocator over a domain: what [`register_allocator`] takes.
pub type AllocatorFactory = fn(DomainConfig) -> Result<Box<dyn IovaAllocator>, IovaError>;

/// Why [`register_allocator`] refused a design.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegisterError {
    /// The name is empty, too long, or not made of `[a-z0-9+._-]`.
    #[error(
        "allocator name {0:?} is not valid: 1 to 64 characters of a-z, 0-9, '+', '.', '_' or '-'"
    )]
    BadName(String),
    /// A built-in design or an earlier registration has the name.
    #[error("allocator name {0:?} is taken; taken: {1}")]
    Taken(String, String),
}

/// The designs added from outside the bench, in the order they were added.
fn registry() -> std::sync::RwLockReadGuard<'static, Vec<(String, AllocatorFactory)>> {
    REGISTRY
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

static REGISTRY: std::sync::RwLock<Vec<(String, AllocatorFactory)>> =
    std::sync::RwLock::new(Vec::new());

/// Add an allocator design to the bench under `name`, for the rest of the process: from then
/// on [`run_group`] takes `name` beside the built-in designs, runs it on the
/// same workloads, threads and timing, and [`allocator_names`] lists it. So a crate outside
/// this one (a VMM's own allocator, or a harness around another implementation) runs on the
/// bench without a patched copy of it. `factory` builds one allocator per cell, over the
/// cell's domain; the bench drives it only through [`IovaAllocator`]. A name must be new
/// (built-in and registered names are refused) and made of `[a-z0-9+._-]`, 1 to 64 long.
///
/// ```
/// use dmalab_bench::{allocator_names, register_allocator, run_group, BenchOptions};
/// use dmalab_iova::{new_allocator, AllocatorKind, DomainConfig};
///
/// fn mine(cfg: DomainConfig) -> Result<Box<dyn dmalab_iova::IovaAllocator>, dmalab_iova::IovaError> {
///     new_allocator(AllocatorKind::RbTree, cfg) // stands in for an outside design
/// }
/// register_allocator("my-rbtree", mine).unwrap();
/// assert!(allocator_names().contains(&"my-rbtree".to_string()));
/// assert!(register_allocator("segtree", mine).is_err());
/// let opts = BenchOptions { ops_per_thread: 2_000, warmup_ops: 100, ..BenchOptions::quick() };
/// let recs = run_group(&["segtree", "my-rbtree"], "mixed", 1, &opts).unwrap();
/// assert_eq!(recs[1].allocator, "my-rbtree");
/// ```
pub fn register_allocator(name: &str, factory: AllocatorFactory) -> Result<(), RegisterError> {
    let ok = (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b"+._-".contains(&b));
    if !ok {
        return Err(RegisterError::BadName(name.into()));
    }
    let known = allocator_names();
    let mut reg = REGISTRY
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    // Checked again under the lock: another thread may have added it since.
    if known.iter().any(|n| n == name) || reg.iter().any(|(n, _)| n == name) {
        let mut taken = builtin_names();
        taken.extend(reg.iter().map(|(n, _)| n.clone()));
        return Err(RegisterError::Taken(name.into(), taken.join(", ")));
    }
    reg.push((name.into(), factory));
    Ok(())
}

/// The built-in designs' names alone.
fn builtin_names() -> Vec<String> {
    let mut v: Vec<String> = AllocatorKind::NAMES.iter().map(|s| s.to_string()).collect();
    v.push(vm_allocator::NAME.into());
    v.push(linux_rcache::NAME.into());
    v
}

fn build(name: &str, cfg: DomainConfig) -> Result<Box<dyn IovaAllocator>, BenchError> {
    let outside = registry().iter().find(|(n, _)| n == name).map(|(_, f)| *f);
    if let Some(factory) = outside {
        return Ok(factory(cfg)?);
    }
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
        // An outside design is named as it was registered (its own name() may be a built-in
        // design's, which it wraps); a built-in one by its design's name.
        allocator: if registry().iter().any(|(n, _)| n == allocator) {
            allocator.to_string()
        } else {
            alloc.name()
        },
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
