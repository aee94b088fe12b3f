//! Running a scenario: load its platform, resolve its translation (the platform's window rules
//! under `auto`), build each host's DMA mapper with the real allocator inside, run the workload
//! model on the event engine, and report with a breakdown of where the time goes.
//!
//! The layer of whole runs, above the workloads: [`report`] is what a run returns, [`space`]
//! searches over whole runs for the smallest IOVA window a scenario needs.

pub mod report;
pub mod space;

use crate::bus::trace::Trace;
use crate::config::check::Checker;
use crate::config::platform::Platform;
use crate::config::scenario::{RunTask, Scenario};
use crate::config::workload::{IoScenario, NetWorkload, Workload};
use crate::dma::{DmaMapper, MapTime, MapperConfig};
use crate::error::Result;
use crate::iommu::walk::Invalidation;
use crate::iommu::Translation;
use crate::progress::Progress;
use crate::run::report::Report;
use crate::units::Ps;
use crate::workload::block::IoResult;
use crate::workload::latency::Latency;
use crate::workload::timeline::Timeline;
use crate::workload::{block, net};
use std::collections::BTreeMap;

impl Scenario {
    /// Run the scenario's workload.
    pub fn run(&self) -> Result<Report> {
        self.run_with(&Progress::new())
    }

    /// Run the scenario's workload, writing its progress to `progress`.
    pub fn run_with(&self, progress: &Progress) -> Result<Report> {
        self.run_traced(progress, 0).map(|(r, _)| r)
    }

    /// Run the scenario's workload, writing its progress to `progress` and keeping at most
    /// `timeline_limit` slices of its timeline (0: none).
    pub fn run_traced(
        &self,
        progress: &Progress,
        timeline_limit: usize,
    ) -> Result<(Report, Timeline)> {
        let task = self.run_task()?;
        let platform = Platform::load_drawn(&self.platform, &self.choices, &self.draws)?;
        let ctx = RunContext::new(self, task, &platform, progress);
        match task.workload {
            Workload::Block(s) => ctx.block(s, timeline_limit),
            Workload::Net(w) => ctx.net(w, timeline_limit),
        }
    }

    /// Trace the scenario's DMA transfer on its platform's bus.
    pub fn trace(&self) -> Result<(Platform, Trace)> {
        let t = self.trace_task()?;
        let platform = Platform::load_drawn(&self.platform, &self.choices, &self.draws)?;
        let trace = platform.trace(t.direction, t.address, t.length_bytes)?;
        Ok((platform, trace))
    }
}

/// Run a block scenario and keep what a report leaves out: its platform, the workload's own
/// result and the mapper with its statistics (the claims' breakdowns read them).
pub(crate) fn run_block(scenario: &Scenario) -> Result<(Platform, IoResult, DmaMapper)> {
    let task = scenario.run_task()?;
    let Workload::Block(s) = task.workload else {
        return Err(Checker {
            file: &scenario.name,
        }
        .invalid("workload.kind", "a network workload", "block"));
    };
    let platform = Platform::load_drawn(&scenario.platform, &scenario.choices, &scenario.draws)?;
    let progress = Progress::new();
    let ctx = RunContext::new(scenario, task, &platform, &progress);
    let (r, mapper, _) = ctx.block_run(s, 0)?;
    Ok((platform, r, mapper))
}

/// One run's resolved configuration.
struct RunContext<'a> {
    scenario: &'a Scenario,
    task: &'a RunTask,
    platform: &'a Platform,
    progress: &'a Progress,
    translation: Translation,
    /// The platform's window decision, when its rules chose the translation.
    window: Option<String>,
    window_bytes: u64,
    window_offset: u64,
}

/// What a workload measured, in the report's terms.
struct Measured {
    ops_per_s: f64,
    bits_per_s: f64,
    latency: Latency,
    cpu: f64,
    peer_cpu: Option<f64>,
    transfers: u64,
    events: u64,
    elapsed_ps: Ps,
    breakdown_us: BTreeMap<String, f64>,
}

impl<'a> RunContext<'a> {
    fn new(
        scenario: &'a Scenario,
        task: &'a RunTask,
        platform: &'a Platform,
        progress: &'a Progress,
    ) -> Self {
        let (translation, window, window_bytes, window_offset) =
            match (task.translation, platform.window.as_ref()) {
                (Some(t), _) => (t, None, task.window_bytes, 0),
                (None, Some(w)) => {
                    let c = w.choose();
                    let (size, offset) = (w.default_window_bytes, w.direct_offset);
                    (c.translation, Some(c.reason), size, offset)
                }
                (None, None) => (Translation::PageTable, None, task.window_bytes, 0),
            };
        RunContext {
            scenario,
            task,
            platform,
            progress,
            translation,
            window,
            window_bytes,
            window_offset,
        }
    }

    fn mapper(&self, cpus: usize) -> Result<DmaMapper> {
        let config = MapperConfig {
            translation: self.translation,
            allocator: self.task.allocator.clone(),
            window_bytes: self.window_bytes,
            flush: self.task.flush,
            cpus,
            dma_mask_bits: self.task.dma_mask_bits,
            window_offset: self.window_offset,
            reserved: self.task.reserved.clone(),
        };
        DmaMapper::new(&config, self.platform.iommu()?.clone())
    }

    /// Run block workload `s`: the result, the mapper it ran through and its timeline (at
    /// most `timeline_limit` slices).
    fn block_run(
        &self,
        s: IoScenario,
        timeline_limit: usize,
    ) -> Result<(IoResult, DmaMapper, Timeline)> {
        let mut mapper = self.mapper(s.threads)?;
        let mut io = self.platform.io()?.clone();
        let shared = self
            .platform
            .iommu_hw
            .as_ref()
            .filter(|h| h.invalidation == Invalidation::SharedSync);
        io.shared_sync = shared.map(|h| h.sync_costs());
        let (bus, memory) = (Some(&self.platform.bus), self.platform.memory.as_ref());
        let (r, timeline) = block::run_traced(
            &mut mapper,
            &io,
            s,
            bus,
            memory,
            self.progress,
            timeline_limit,
        )?;
        Ok((r, mapper, timeline))
    }

    fn block(&self, s: IoScenario, timeline_limit: usize) -> Result<(Report, Timeline)> {
        let (r, mapper, timeline) = self.block_run(s, timeline_limit)?;
        let p = &r.per_io;
        let m = &p.mapping;
        let breakdown_us = [
            ("submit", p.submit_ps),
            ("complete", p.complete_ps),
            ("device", p.device_ps),
            ("translation (IOTLB misses)", p.translation_ps),
            ("map: IOVA allocation", m.alloc_ps),
            ("unmap: IOVA free", m.free_ps),
            ("page-table writes", m.table_ps),
            ("IOTLB invalidation", m.flush_ps),
            ("IOTLB invalidation queue wait", p.invalidation_wait_ps),
            ("submission queue lock wait", p.queue_lock_wait_ps),
            ("IOVA allocator lock wait", p.alloc_lock_wait_ps),
            ("socket link crossings", p.socket_ps),
            ("hypervisor calls", m.hcall_ps),
            ("bounce copies", m.bounce_ps),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.as_us_f64()))
        .collect();
        let measured = Measured {
            ops_per_s: r.iops,
            bits_per_s: r.bytes_per_s * 8.0,
            latency: r.latency.clone(),
            cpu: r.cpu_utilization,
            peer_cpu: None,
            transfers: s.ios,
            events: r.events,
            elapsed_ps: r.elapsed_ps,
            breakdown_us,
        };
        Ok((self.report(measured, &mapper), timeline))
    }

    fn net(&self, w: NetWorkload, timeline_limit: usize) -> Result<(Report, Timeline)> {
        let mut costs = self.platform.net()?.clone();
        if let Some(mtu) = self.task.mtu_bytes {
            costs.mtu_bytes = mtu;
        }
        let cores = usize::try_from(costs.cores).unwrap_or(1);
        let mut client = self.mapper(cores)?;
        let mut server = self.mapper(cores)?;
        let bus = Some(&self.platform.bus);
        let (r, timeline) = net::run_traced(
            &costs,
            &mut client,
            &mut server,
            w,
            bus,
            self.progress,
            timeline_limit,
        )?;
        let n = (r.per_second * r.elapsed_ps.0 as f64 / 1e12).max(1.0);
        let mut breakdown_us = BTreeMap::new();
        let client_times = [
            r.client_lock_wait_ps,
            r.client_stack_ps,
            r.client_driver_ps,
            r.client_bus_ps,
        ];
        let server_times = [
            r.server_lock_wait_ps,
            r.server_stack_ps,
            r.server_driver_ps,
            r.server_bus_ps,
        ];
        let sides = [
            ("client", &r.client_mapping, client_times),
            ("server", &r.server_mapping, server_times),
        ];
        for (side, m, [lock, stack, driver, link]) in sides {
            for (what, v) in net_side(m, lock, stack, driver, link) {
                breakdown_us.insert(format!("{side} {what}"), v.0 as f64 / 1e6 / n);
            }
        }
        let measured = Measured {
            ops_per_s: r.per_second,
            bits_per_s: r.bits_per_s,
            latency: r.latency.clone(),
            cpu: r.client_cpu_utilization,
            peer_cpu: Some(r.server_cpu_utilization),
            transfers: client.stats().maps + server.stats().maps,
            events: r.events,
            elapsed_ps: r.elapsed_ps,
            breakdown_us,
        };
        Ok((self.report(measured, &server), timeline))
    }

    fn report(&self, m: Measured, mapper: &DmaMapper) -> Report {
        let stats = mapper.stats();
        Report {
            scenario: self.scenario.name.clone(),
            description: self.scenario.description.clone(),
            platform: self.platform.name.clone(),
            choices: self.platform.picks.clone(),
            translation: self.translation,
            allocator: self.task.allocator.name(),
            flush: self.task.flush,
            window: self.window.clone(),
            workload: self.task.workload,
            ops_per_s: m.ops_per_s,
            bits_per_s: m.bits_per_s,
            latency_mean_us: m.latency.mean_ps.as_us_f64(),
            latency_p50_us: m.latency.p50_ps.as_us_f64(),
            latency_p90_us: m.latency.p90_ps.as_us_f64(),
            latency_p99_us: m.latency.p99_ps.as_us_f64(),
            latency_p99_9_us: m.latency.p99_9_ps.as_us_f64(),
            latency_p99_99_us: m.latency.p99_99_ps.as_us_f64(),
            latency_max_us: m.latency.max_ps.as_us_f64(),
            latency_histogram: m.latency.histogram,
            cpu_utilization: m.cpu,
            peer_cpu_utilization: m.peer_cpu,
            breakdown_us: m.breakdown_us,
            iotlb_hit_rate: stats.iotlb.hit_rate(),
            mapper: stats,
            dma_transfers: m.transfers,
            events: m.events,
            simulated_us: m.elapsed_ps.as_us_f64(),
        }
    }
}

/// One host's share of a network run, by component, summed over the run.
fn net_side(m: &MapTime, lock: Ps, stack: Ps, driver: Ps, link: Ps) -> [(&'static str, Ps); 7] {
    [
        ("IOVA allocation and free", m.alloc_ps + m.free_ps),
        ("hypervisor calls", m.hcall_ps),
        ("page tables and IOTLB", m.flush_ps + m.table_ps),
        ("table-lock wait", lock),
        ("stack (per message)", stack),
        ("driver (per frame)", driver),
        ("link (NIC DMA)", link),
    ]
}
