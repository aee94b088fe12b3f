//! The IOVA allocator benchmark: four workloads, any design, 1..=64 threads, counted and timed.
//!
//! An op is one `allocate` or one `free` call. Every request is size-aligned, as the Linux DMA
//! layer asks. Throughput is the median over several untimed passes (on a busy two-core machine
//! a single pass of a few milliseconds is often cut by another process); latency percentiles
//! come from a further pass that times every call with the cycle counter (the timer's own cost,
//! [`timer_overhead_ns`], is included in them, the same for every design, and never
//! subtracted).

pub mod copy;
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
    v
}

fn build(name: &str, cfg: DomainConfig) -> Result<Box<dyn IovaAllocator>, BenchError> {
    if name == vm_allocator::NAME {
        return Ok(Box::new(vm_allocator::VmAllocatorAdapter::new(cfg)?));
    }
    let kind = AllocatorKind::parse(name)
        .map_err(|_| BenchError::UnknownAllocator(name.into(), allocator_names().join(", ")))?;
    Ok(new_allocator(kind, cfg)?)
}

/// Run one cell.
pub fn run(
    allocator: &str,
    workload: &str,
    threads: usize,
    opts: &BenchOptions,
) -> Result<BenchRecord, BenchError> {
    if !(1..=64).contains(&threads) {
        return Err(BenchError::Threads(threads));
    }
    let kind = workload::Workload::parse(workload)
        .ok_or_else(|| BenchError::UnknownWorkload(workload.into(), WORKLOADS.join(", ")))?;
    let cfg = DomainConfig::with_address_bits(opts.address_bits, opts.page_size_bytes)?;
    let alloc = build(allocator, cfg)?;
    let out = workload::run(alloc.as_ref(), kind, threads, opts)?;
    let mut lat = out.latencies_ns;
    lat.sort_unstable_by(f64::total_cmp);
    let pct = |q: f64| -> f64 {
        if lat.is_empty() {
            return 0.0;
        }
        let i = ((lat.len() as f64 - 1.0) * q).round() as usize;
        lat[i]
    };
    Ok(BenchRecord {
        allocator: alloc.name(),
        workload: workload.into(),
        threads,
        ops: out.ops,
        ops_per_s: workload::median(&out.ops_per_s),
        pass_ops_per_s: out.ops_per_s,
        p50_ns: pct(0.5),
        p99_ns: pct(0.99),
        p999_ns: pct(0.999),
        bytes_per_live_mapping: out.memory_bytes as f64 / out.live.max(1) as f64,
        live_mappings: out.live,
        failures: out.failures,
        default: AllocatorKind::parse(allocator).is_ok_and(|k| k == AllocatorKind::default()),
        work: alloc.work(),
    })
}
