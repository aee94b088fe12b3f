//! A vhost backend on one core moving packets between host and guest memory through a virtio
//! ring (seed 002): each packet of up to 64 KB (TSO) is split into mbufs of 2, 4 or 8 KB, and each
//! mbuf's copy runs on the core or on a copy engine, as a [`CopyPolicy`] decides.
//!
//! The core and the engines work in parallel: the core pays its per-packet and per-mbuf work,
//! its own copies, and for each engine copy the submission and the completion check; an engine
//! runs its copies one after another from its ring, and the core stalls when the ring is full.
//! Throughput is the bytes moved over the time the last of them took.

use crate::config::costs::{Completion, CpuCopyCosts, EngineCosts, VhostCosts};
use crate::config::workload::{check, valid};
use crate::error::{invalid_arg, Result};
use crate::progress::{Progress, EVERY};
use crate::workload::copy::Placement;
use serde::Serialize;
use std::collections::VecDeque;

/// Who copies.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "policy", rename_all = "kebab-case")]
pub enum CopyPolicy {
    /// Every copy on the core.
    CpuOnly,
    /// Every copy on the engine in the core's node.
    EngineOnly,
    /// Copies of at least `local_bytes` (engine in the core's node) or `remote_bytes` (engine in
    /// the other node) to the engine, shorter ones on the core: seed 002's adaptive pipeline.
    Threshold {
        /// Minimum length for a NUMA-local engine (the seed's 2048).
        local_bytes: u64,
        /// Minimum length for a NUMA-remote engine (the seed's 3072).
        remote_bytes: u64,
    },
    /// dmalab's planner: each copy goes where it finishes the work soonest, given the core's
    /// and every engine's backlog, their placement and the modelled costs.
    Planner,
}

/// One run of the backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct VhostScenario {
    /// Bytes per packet (64 KiB with TSO).
    pub packet_bytes: u64,
    /// Bytes per mbuf.
    pub mbuf_bytes: u64,
    /// Where the core, the engine and the buffers sit; `engine` is the engine the threshold and
    /// engine-only policies use.
    pub placement: Placement,
    /// Whether the planner may also use an engine in the other node.
    pub second_engine: bool,
    /// Who copies.
    pub policy: CopyPolicy,
    /// Packets to move.
    pub packets: u64,
}

/// What a run measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct VhostResult {
    /// The scenario.
    pub scenario: VhostScenario,
    /// Payload throughput, Gbit/s.
    pub gbit_per_s: f64,
    /// Copies done by the core.
    pub cpu_copies: u64,
    /// Copies done by engines.
    pub engine_copies: u64,
    /// Core busy time over the run.
    pub core_busy_fraction: f64,
    /// Times the core waited for a full engine ring.
    pub ring_stalls: u64,
    /// The core's busy time per packet by part, ns: the packet's own work, the mbufs'
    /// handling, the copies it does itself, and handing copies to engines and collecting them.
    pub core_ns_per_packet: CoreParts,
}

/// The core's busy time per packet by part, ns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct CoreParts {
    /// The packet's own work (descriptors, header, offloads, notification).
    pub packet: f64,
    /// Allocating, chaining and describing the mbufs.
    pub mbufs: f64,
    /// The copies the core does.
    pub copies: f64,
    /// Submitting copies to engines and checking their completions.
    pub engine_handoff: f64,
}

struct Engine {
    at: Placement,
    /// When each channel is next free.
    channels: Vec<u64>,
    /// When the last copy given to this engine completes (as the core sees it).
    free_at: u64,
    in_flight: VecDeque<u64>,
    /// Total copy work given to this engine so far.
    load: u64,
}

/// Run the backend.
pub fn run(
    cpu: &CpuCopyCosts,
    engine: &EngineCosts,
    costs: &VhostCosts,
    s: VhostScenario,
) -> Result<VhostResult> {
    run_with(cpu, Some(engine), costs, s, &Progress::new())
}

/// Run the backend on a host that may have no copy engine (`engine` is `None`): then only
/// [`CopyPolicy::CpuOnly`] runs, and any other policy is refused, naming what is missing.
/// It stops with [`crate::SimError::Interrupted`] within [`EVERY`] packets of a
/// [`Progress::cancel`] (it leaves the counters to its caller).
pub fn run_with(
    cpu: &CpuCopyCosts,
    engine: Option<&EngineCosts>,
    costs: &VhostCosts,
    s: VhostScenario,
    progress: &Progress,
) -> Result<VhostResult> {
    let no_engine;
    let engine = match engine {
        Some(e) => e,
        None if s.policy == CopyPolicy::CpuOnly => {
            // Never used: every copy runs on the core.
            no_engine = EngineCosts {
                channels: 1,
                submit_ns: 0,
                doorbell_ns: 0,
                descriptors_per_doorbell: 1,
                completion: Completion::Poll,
                completion_ns: 0,
                interrupt_latency_ns: 0,
                remote_cpu_ns: 0,
                startup_ns: 0,
                bytes_per_us: 1,
                remote_memory_pct: 0,
            };
            &no_engine
        }
        None => {
            return Err(invalid_arg(
                "policy",
                "one that uses a copy engine",
                "cpu-only: this host has no copy engine (attach one: --device ENGINE)",
            ))
        }
    };
    if !(64..=1 << 20).contains(&s.packet_bytes) {
        return Err(invalid_arg("packet_bytes", s.packet_bytes, "64..=1048576"));
    }
    if !(64..=1 << 16).contains(&s.mbuf_bytes) {
        return Err(invalid_arg("mbuf_bytes", s.mbuf_bytes, "64..=65536"));
    }
    check("packets", s.packets, valid::VHOST_PACKETS)?;
    let channels = usize::try_from(engine.channels.max(1)).unwrap_or(1);
    let other = Placement {
        engine: 1 - s.placement.engine.min(1),
        ..s.placement
    };
    let mut engines = vec![Engine {
        at: s.placement,
        channels: vec![0; channels],
        free_at: 0,
        in_flight: VecDeque::new(),
        load: 0,
    }];
    if s.second_engine && s.policy == CopyPolicy::Planner {
        engines.push(Engine {
            at: other,
            channels: vec![0; channels],
            free_at: 0,
            in_flight: VecDeque::new(),
            load: 0,
        });
    }
    let ring = usize::try_from(costs.ring_entries).unwrap_or(usize::MAX);
    let latency = engine.completion_latency_ps();
    let (mut core, mut busy, mut cpu_copies, mut engine_copies, mut stalls) =
        (0u64, 0u64, 0u64, 0u64, 0u64);
    // Busy picoseconds by part: packet work, mbufs, core copies, engine hand-off.
    let mut parts = [0u64; 4];
    // Guest memory is the copies' destination (the backend enqueues into the guest).
    let guest_remote = s.placement.dst != s.placement.cpu;
    let per_packet_ps = if guest_remote {
        let slow = costs.guest_memory_share_pct * cpu.remote_slowdown_pct;
        costs.per_packet_ns * 1000 * (10_000 + slow) / 10_000
    } else {
        costs.per_packet_ns * 1000
    };
    for packet in 0..s.packets {
        if packet % EVERY == 0 {
            progress.check()?;
        }
        let work = per_packet_ps;
        core += work;
        busy += work;
        parts[0] += work;
        let mut left = s.packet_bytes;
        while left > 0 {
            let len = left.min(s.mbuf_bytes);
            left -= len;
            let mbuf = costs.per_mbuf_ns * 1000;
            core += mbuf;
            busy += mbuf;
            parts[1] += mbuf;
            let cpu_ps = cpu.copy_ps(len, s.placement);
            let choice = choose(s.policy, len, cpu_ps, busy, &engines, engine, s.placement);
            match choice {
                None => {
                    core += cpu_ps;
                    busy += cpu_ps;
                    parts[2] += cpu_ps;
                    cpu_copies += 1;
                }
                Some(i) => {
                    let e = &mut engines[i];
                    // Retire finished copies; wait for a ring slot if the ring is full.
                    while e.in_flight.front().is_some_and(|&t| t <= core) {
                        e.in_flight.pop_front();
                    }
                    if e.in_flight.len() >= ring {
                        stalls += 1;
                        core = core.max(e.in_flight.pop_front().unwrap_or(core));
                    }
                    let submit = engine.cpu_ps(e.at);
                    core += submit;
                    busy += submit;
                    parts[3] += submit;
                    let copy = engine.engine_ps(len, e.at);
                    // The channel that frees first takes it; the core sees the completion
                    // after the interrupt latency, if any.
                    let (ch, &free) = e
                        .channels
                        .iter()
                        .enumerate()
                        .min_by_key(|&(i, &t)| (t, i))
                        .unwrap_or((0, &0));
                    let finish = free.max(core) + copy;
                    if let Some(c) = e.channels.get_mut(ch) {
                        *c = finish;
                    }
                    e.load += copy / e.channels.len().max(1) as u64;
                    let done = finish + latency;
                    e.free_at = e.free_at.max(done);
                    e.in_flight.push_back(done);
                    engine_copies += 1;
                }
            }
        }
    }
    let end = engines
        .iter()
        .map(|e| e.free_at)
        .fold(core, u64::max)
        .max(1);
    let bits = (s.packet_bytes * s.packets * 8) as f64;
    Ok(VhostResult {
        scenario: s,
        gbit_per_s: bits / (end as f64 / 1e12) / 1e9,
        cpu_copies,
        engine_copies,
        core_busy_fraction: busy as f64 / end as f64,
        ring_stalls: stalls,
        core_ns_per_packet: {
            let per = |ps: u64| ps as f64 / 1000.0 / s.packets.max(1) as f64;
            CoreParts {
                packet: per(parts[0]),
                mbufs: per(parts[1]),
                copies: per(parts[2]),
                engine_handoff: per(parts[3]),
            }
        },
    })
}

/// Which engine takes a copy of `len` bytes, or `None` for the core.
fn choose(
    policy: CopyPolicy,
    len: u64,
    cpu_ps: u64,
    core_load: u64,
    engines: &[Engine],
    costs: &EngineCosts,
    at: Placement,
) -> Option<usize> {
    match policy {
        CopyPolicy::CpuOnly => None,
        CopyPolicy::EngineOnly => Some(0),
        CopyPolicy::Threshold {
            local_bytes,
            remote_bytes,
        } => {
            let min = if at.engine == at.cpu {
                local_bytes
            } else {
                remote_bytes
            };
            (len >= min).then_some(0)
        }
        CopyPolicy::Planner => {
            // The core and the engines run in parallel, so a stream of copies goes as fast as
            // the most loaded of them allows: give this copy to whichever keeps the largest
            // total load (core work, or each engine's copy work, so far) lowest, each engine's
            // cost taken from its own placement; on a tie, the option with less core work.
            let worst_engine = engines.iter().map(|e| e.load).max().unwrap_or(0);
            let mut best = (
                (core_load + cpu_ps).max(worst_engine),
                core_load + cpu_ps,
                None,
            );
            for (i, e) in engines.iter().enumerate() {
                let c = core_load + costs.cpu_ps(e.at);
                let mine = e.load + costs.engine_ps(len, e.at);
                let others = engines
                    .iter()
                    .enumerate()
                    .filter(|(j, _)| *j != i)
                    .map(|(_, o)| o.load)
                    .max()
                    .unwrap_or(0);
                let key = (c.max(mine).max(others), c);
                if key < (best.0, best.1) {
                    best = (key.0, key.1, Some(i));
                }
            }
            best.2
        }
    }
}

/// One row of the policy sweep.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SweepRow {
    /// Placement name.
    pub placement: &'static str,
    /// Bytes per mbuf.
    pub mbuf_bytes: u64,
    /// Bytes per packet.
    pub packet_bytes: u64,
    /// Gbit/s with every copy on the core.
    pub cpu_only: f64,
    /// Gbit/s with every copy on the engine.
    pub engine_only: f64,
    /// Gbit/s with the seed's thresholds (2048 B local, 3072 B remote).
    pub threshold: f64,
    /// Gbit/s with dmalab's planner (which may also use the engine in the other node).
    pub planner: f64,
}

impl SweepRow {
    /// The planner's gain over the better of CPU-only and the threshold.
    pub fn planner_gain(&self) -> f64 {
        self.planner / self.cpu_only.max(self.threshold) - 1.0
    }
}

/// The placements the sweep covers, by the seed's names.
pub const PLACEMENTS: [(&str, Placement); 4] = [
    ("local", Placement::LOCAL),
    ("engine remote", Placement::ENGINE_REMOTE),
    ("min remote", Placement::MIN_REMOTE),
    ("max remote", Placement::MAX_REMOTE),
];

/// The seed's adaptive pipeline: 2048 B with a local engine, 3072 B with a remote one.
pub const SEED_THRESHOLD: CopyPolicy = CopyPolicy::Threshold {
    local_bytes: 2048,
    remote_bytes: 3072,
};

/// Every policy over packet sizes (1 KiB to 64 KiB), mbufs of 2, 4 and 8 KiB and the four
/// placements.
pub fn sweep(
    cpu: &CpuCopyCosts,
    engine: &EngineCosts,
    costs: &VhostCosts,
    packets: u64,
    progress: &Progress,
) -> Result<Vec<SweepRow>> {
    let mut rows = Vec::new();
    // Progress in runs: four policies per cell.
    progress.start((PLACEMENTS.len() * 3 * 7 * 4) as u64);
    let mut runs = 0;
    let mut one = |sc: VhostScenario| {
        let r = run_with(cpu, Some(engine), costs, sc, progress)?;
        runs += 1;
        progress.set(runs);
        Ok::<_, crate::SimError>(r.gbit_per_s)
    };
    for (name, at) in PLACEMENTS {
        for mbuf in [2048u64, 4096, 8192] {
            for shift in 10..=16 {
                let packet = 1u64 << shift;
                let sc = |policy| VhostScenario {
                    packet_bytes: packet,
                    mbuf_bytes: mbuf,
                    placement: at,
                    second_engine: true,
                    policy,
                    packets,
                };
                rows.push(SweepRow {
                    placement: name,
                    mbuf_bytes: mbuf,
                    packet_bytes: packet,
                    cpu_only: one(sc(CopyPolicy::CpuOnly))?,
                    engine_only: one(sc(CopyPolicy::EngineOnly))?,
                    threshold: one(sc(SEED_THRESHOLD))?,
                    planner: one(sc(CopyPolicy::Planner))?,
                });
            }
        }
    }
    Ok(rows)
}
