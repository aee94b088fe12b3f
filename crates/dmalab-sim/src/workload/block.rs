//! Closed-loop I/O through the DMA-mapping layer: `threads` submitters keep `queue_depth` I/Os
//! of `io_bytes` each in flight to one device; every I/O is mapped before the doorbell and
//! unmapped at completion, like fio or sgp_dd against a block HBA, or a NIC sending frames from
//! a ring. It runs on the event engine, with the real IOVA allocator inside the mapper.
//!
//! Per I/O: a CPU submits (its per-I/O cost plus the map), the device translates the buffer's
//! pages (IOTLB hits or walks), moves the bytes at its rate after its fixed latency, then a CPU
//! completes (its per-I/O cost plus the unmap) and submits the next.

use crate::bus::trace::Direction;
use crate::bus::Bus;
use crate::config::params::ParamReader;
use crate::config::workload::IoScenario;
use crate::dma::{DmaMapper, MapTime, Mapping};
use crate::engine::Engine;
use crate::error::{invalid_arg, Result};
use crate::resource::Resource;
use crate::units::{BusAddr, Ps};
use rand::{Rng, SeedableRng};
use rand_pcg::Pcg64Mcg;
use serde::Serialize;

/// The host and device costs of the I/O path (a platform's `[io]` section).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct IoCosts {
    /// CPU time to submit one I/O (syscall, block and SCSI layers, driver), without mapping.
    pub submit_ns: u64,
    /// CPU time to complete one I/O (interrupt, driver, block layer, return), without unmapping.
    pub complete_ns: u64,
    /// The device's fixed time per I/O (doorbell to the start of its DMA, and its completion).
    pub device_latency_ns: u64,
    /// The device's data rate (its DMA engine, its link or its wire).
    pub device_bytes_per_s: u64,
}

impl IoCosts {
    /// Read the costs under `prefix` (such as `io`), each range-checked.
    pub fn read(r: &mut ParamReader<'_>, prefix: &str) -> Result<IoCosts> {
        let f = |name: &str| format!("{prefix}.{name}");
        Ok(IoCosts {
            submit_ns: r.u64(&f("submit_ns"), 0..=100_000_000)?,
            complete_ns: r.u64(&f("complete_ns"), 0..=100_000_000)?,
            device_latency_ns: r.u64(&f("device_latency_ns"), 0..=100_000_000)?,
            device_bytes_per_s: r.u64(&f("device_bytes_per_s"), 1_000..=1 << 40)?,
        })
    }
}

/// Where an I/O's time goes, summed over the run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct IoBreakdown {
    /// CPU submit path, without mapping.
    pub submit_ps: Ps,
    /// CPU complete path, without unmapping.
    pub complete_ps: Ps,
    /// Map and unmap, by component.
    pub mapping: MapTime,
    /// Device time waiting for address translation (IOTLB misses).
    pub translation_ps: Ps,
    /// Device time: latency and data.
    pub device_ps: Ps,
}

/// What a run measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct IoResult {
    /// The scenario run.
    pub scenario: IoScenario,
    /// Completed I/Os per second of simulated time.
    pub iops: f64,
    /// Bytes per second.
    pub bytes_per_s: f64,
    /// Mean latency from submit to completion done.
    pub mean_latency_ps: Ps,
    /// Median latency.
    pub p50_latency_ps: Ps,
    /// 99th percentile latency.
    pub p99_latency_ps: Ps,
    /// CPU busy time over elapsed time, averaged over the submitting CPUs.
    pub cpu_utilization: f64,
    /// Device busy time over elapsed time.
    pub device_utilization: f64,
    /// Time per I/O by component (totals divided by I/Os).
    pub per_io: IoBreakdown,
    /// Simulated time.
    pub elapsed_ps: Ps,
    /// Events the engine handled.
    pub events: u64,
}

/// What happens next to the I/O in queue slot `slot` (events stay small: the slot's state is
/// kept in a table, not carried in the event queue).
#[derive(Clone, Copy)]
enum Stage {
    /// The slot's thread submits its next I/O.
    Submit,
    /// The doorbell reaches the device.
    DeviceStart,
    /// The device's data transfer may start.
    DataStart,
    /// The device completed the I/O.
    DeviceDone,
}

#[derive(Clone, Copy)]
struct Ev {
    stage: Stage,
    slot: u32,
}

/// The I/O in flight in one queue slot.
struct InFlight {
    thread: usize,
    mapping: Option<Mapping>,
    submitted: Ps,
}

/// Run `scenario` with `mapper` and `costs`.
pub fn run(mapper: &mut DmaMapper, costs: &IoCosts, scenario: IoScenario) -> Result<IoResult> {
    run_on_bus(mapper, costs, scenario, None)
}

/// Run `scenario` with the device's data moved over `bus` (the platform's PCI, PCI-X or PCIe
/// model: its commands or TLPs at the mapping's device address), or, without a bus, at the
/// device's rate alone. With a bus the data time is the slower of the two (a NIC's wire, say,
/// may be slower than its link). The device writes memory (reads from a disk, frames received).
pub fn run_on_bus(
    mapper: &mut DmaMapper,
    costs: &IoCosts,
    scenario: IoScenario,
    bus: Option<&Bus>,
) -> Result<IoResult> {
    validate(&scenario)?;
    crate::progress::start(scenario.ios);
    let mut engine: Engine<Ev> = Engine::new();
    let mut rng = Pcg64Mcg::seed_from_u64(scenario.seed);
    let mut cpus: Vec<Resource> = (0..scenario.threads)
        .map(|i| Resource::new(format!("cpu{i}"), 1))
        .collect();
    let mut device = Resource::new("device", scenario.threads * scenario.queue_depth);
    let mut device_busy = Resource::new("device data path", 1);
    let mut b = IoBreakdown::default();
    // Reserve for the common case only: `ios` may be far larger than memory would hold at once.
    let mut latencies = Vec::with_capacity(usize::try_from(scenario.ios.min(1 << 20)).unwrap_or(0));
    let mut started = 0u64;
    let mut slots: Vec<InFlight> = Vec::with_capacity(scenario.threads * scenario.queue_depth);
    for thread in 0..scenario.threads {
        for _ in 0..scenario.queue_depth {
            let slot = u32::try_from(slots.len())
                .map_err(|_| invalid_arg("threads x queue_depth", slots.len(), "below 2^32"))?;
            slots.push(InFlight {
                thread,
                mapping: None,
                submitted: Ps::ZERO,
            });
            if started < scenario.ios {
                engine.schedule_in(
                    Ps::ZERO,
                    Ev {
                        stage: Stage::Submit,
                        slot,
                    },
                );
                started += 1;
            }
        }
    }
    let page = 4096u64;
    let rate_ps = Ps::for_bytes(scenario.io_bytes, costs.device_bytes_per_s);
    let mut bus_times: Vec<Option<Ps>> = if bus.is_some() {
        vec![None; 4096]
    } else {
        Vec::new()
    };
    let mut error = None;
    let mut done = 0u64;
    let mut last_end = Ps::ZERO;
    engine.run_until(Ps(u64::MAX), |eng, now, ev| {
        let step = (|| -> Result<()> {
            let Ev { stage, slot } = ev;
            let io = &mut slots[slot as usize];
            let thread = io.thread;
            match stage {
                Stage::Submit => {
                    let pick = if scenario.buffers > 1 {
                        rng.random_range(0..scenario.buffers)
                    } else {
                        0
                    };
                    let buffer = pick + thread as u64 * scenario.buffers;
                    let phys = (1 << 30) + buffer * page.max(scenario.io_bytes.next_power_of_two());
                    let (mapping, t) = mapper.map(now, thread, phys, scenario.io_bytes)?;
                    let submit = Ps::from_ns(costs.submit_ns);
                    b.submit_ps += submit;
                    b.mapping.add(&t);
                    let cpu = cpus[thread].acquire(now, submit + t.total());
                    *io = InFlight {
                        thread,
                        mapping: Some(mapping),
                        submitted: now,
                    };
                    eng.schedule_at(
                        cpu.end,
                        Ev {
                            stage: Stage::DeviceStart,
                            slot,
                        },
                    )?;
                }
                Stage::DeviceStart => {
                    // Resources are taken when requests reach them, so that service is first
                    // come, first served in simulated time.
                    let walk = io
                        .mapping
                        .as_ref()
                        .map_or(Ps::ZERO, |m| mapper.device_access(m));
                    b.translation_ps += walk;
                    let dev = device.acquire(now, Ps::from_ns(costs.device_latency_ns) + walk);
                    eng.schedule_at(
                        dev.end,
                        Ev {
                            stage: Stage::DataStart,
                            slot,
                        },
                    )?;
                }
                Stage::DataStart => {
                    let data_ps = match (bus, io.mapping.as_ref()) {
                        (Some(bus), Some(m)) => {
                            // The bus time depends on the address only through its offset in a
                            // page (lines, payload and 4 KiB boundaries): compute it once each.
                            let key = m.dma_addr % 4096;
                            let t = match bus_times[key as usize] {
                                Some(t) => t,
                                None => {
                                    let tr = bus.transfer(
                                        Direction::Write,
                                        BusAddr(key + 4096),
                                        scenario.io_bytes,
                                    )?;
                                    bus_times[key as usize] = Some(tr.totals.bus_time_ps);
                                    tr.totals.bus_time_ps
                                }
                            };
                            t.max(rate_ps)
                        }
                        _ => rate_ps,
                    };
                    let data = device_busy.acquire(now, data_ps);
                    b.device_ps += Ps::from_ns(costs.device_latency_ns) + data_ps;
                    eng.schedule_at(
                        data.end,
                        Ev {
                            stage: Stage::DeviceDone,
                            slot,
                        },
                    )?;
                }
                Stage::DeviceDone => {
                    if let Some(mapping) = io.mapping.take() {
                        let t = mapper.unmap(now, thread, &mapping)?;
                        b.mapping.add(&t);
                        let complete = Ps::from_ns(costs.complete_ns);
                        b.complete_ps += complete;
                        let cpu = cpus[thread].acquire(now, complete + t.total());
                        latencies.push(cpu.end - io.submitted);
                        last_end = last_end.max(cpu.end);
                        done += 1;
                        if done % crate::progress::EVERY == 0 {
                            crate::progress::set(done);
                        }
                        if started < scenario.ios {
                            started += 1;
                            eng.schedule_at(
                                cpu.end,
                                Ev {
                                    stage: Stage::Submit,
                                    slot,
                                },
                            )?;
                        }
                    }
                }
            }
            Ok(())
        })();
        match step {
            Ok(()) => true,
            Err(e) => {
                error = Some(e);
                false
            }
        }
    });
    crate::progress::set(done);
    if let Some(e) = error {
        return Err(e);
    }
    let elapsed = last_end.max(engine.now());
    latencies.sort_unstable();
    let n = done.max(1);
    let pct = |q: f64| {
        latencies
            .get(((latencies.len() as f64 - 1.0) * q).round() as usize)
            .copied()
            .unwrap_or(Ps::ZERO)
    };
    let secs = elapsed.0 as f64 / 1e12;
    Ok(IoResult {
        scenario,
        iops: done as f64 / secs,
        bytes_per_s: (done * scenario.io_bytes) as f64 / secs,
        mean_latency_ps: Ps(latencies.iter().map(|l| l.0).sum::<u64>() / n),
        p50_latency_ps: pct(0.5),
        p99_latency_ps: pct(0.99),
        cpu_utilization: cpus.iter().map(|c| c.utilization(elapsed)).sum::<f64>()
            / cpus.len() as f64,
        device_utilization: device_busy.utilization(elapsed),
        per_io: divide(&b, n),
        elapsed_ps: elapsed,
        events: engine.handled(),
    })
}

fn validate(s: &IoScenario) -> Result<()> {
    if !(1..=1 << 30).contains(&s.io_bytes) {
        return Err(invalid_arg("io_bytes", s.io_bytes, "1..=2^30"));
    }
    if !(1..=1024).contains(&s.threads) {
        return Err(invalid_arg("threads", s.threads, "1..=1024"));
    }
    if !(1..=65536).contains(&s.queue_depth) {
        return Err(invalid_arg("queue_depth", s.queue_depth, "1..=65536"));
    }
    if s.ios == 0 {
        return Err(invalid_arg("ios", 0, "at least 1"));
    }
    if !(1..=1 << 20).contains(&s.buffers) {
        return Err(invalid_arg("buffers", s.buffers, "1..=2^20"));
    }
    Ok(())
}

fn divide(b: &IoBreakdown, n: u64) -> IoBreakdown {
    let d = |p: Ps| Ps(p.0 / n);
    IoBreakdown {
        submit_ps: d(b.submit_ps),
        complete_ps: d(b.complete_ps),
        mapping: b.mapping.per(n),
        translation_ps: d(b.translation_ps),
        device_ps: d(b.device_ps),
    }
}
