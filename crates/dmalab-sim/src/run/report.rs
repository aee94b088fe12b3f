//! What a run reports: throughput, latency, CPU, where the time goes per operation, and what
//! the mapping configuration leaves exposed, with the configuration that produced it.

use crate::config::platform::Picks;
use crate::config::workload::Workload;
use crate::dma::MapperStats;
use crate::iommu::flush::FlushPolicy;
use crate::iommu::Translation;
use crate::workload::latency::LatencyBucket;
use serde::Serialize;
use std::collections::BTreeMap;

/// Where the time goes, per operation, and what the run leaves exposed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    /// The scenario's name.
    pub scenario: String,
    /// The platform and its options.
    pub platform: String,
    /// The options in force.
    pub choices: Picks,
    /// What the scenario shows, as its file says.
    pub description: Option<String>,
    /// The translation used.
    pub translation: Translation,
    /// The IOVA allocator.
    pub allocator: String,
    /// The invalidation policy.
    pub flush: FlushPolicy,
    /// The window decision where the platform has window rules.
    pub window: Option<String>,
    /// The workload run.
    pub workload: Workload,
    /// Operations (I/Os, transactions or messages) per second.
    pub ops_per_s: f64,
    /// Payload bits per second.
    pub bits_per_s: f64,
    /// Mean latency, microseconds.
    pub latency_mean_us: f64,
    /// Median latency, microseconds.
    pub latency_p50_us: f64,
    /// 90th percentile latency, microseconds.
    pub latency_p90_us: f64,
    /// 99th percentile latency, microseconds.
    pub latency_p99_us: f64,
    /// 99.9th percentile latency, microseconds.
    pub latency_p99_9_us: f64,
    /// 99.99th percentile latency, microseconds.
    pub latency_p99_99_us: f64,
    /// Largest latency, microseconds.
    pub latency_max_us: f64,
    /// The latency histogram in quarter-octave buckets (for plotting).
    pub latency_histogram: Vec<LatencyBucket>,
    /// CPU utilization (0 to 1) of the submitting or sending side.
    pub cpu_utilization: f64,
    /// CPU utilization of the other side (network workloads).
    pub peer_cpu_utilization: Option<f64>,
    /// Microseconds per operation, by component.
    pub breakdown_us: BTreeMap<String, f64>,
    /// IOTLB (or TCE cache) hit rate.
    pub iotlb_hit_rate: f64,
    /// Mapping-layer totals (allocator work, IOTLB, exposure) of the device's host.
    pub mapper: MapperStats,
    /// DMA transfers simulated.
    pub dma_transfers: u64,
    /// Engine events handled.
    pub events: u64,
    /// Simulated time, microseconds.
    pub simulated_us: f64,
}
