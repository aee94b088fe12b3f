//! CPU copies against a DMA copy engine across NUMA nodes (seed 002's CBDMA study).
//!
//! A CPU copy costs the copying core a set-up and the bytes at its copy rate, slower when the
//! source or the destination sits in another node than the core. An engine copy costs the core
//! only the descriptor's submission (build it, write it to the ring, ring the doorbell) and the
//! completion check, more when the engine sits in another node (the doorbell and the completion
//! line cross the socket link); the engine itself spends a start-up and the bytes at its rate,
//! slower for memory in another node than the engine. With the core and the engine working in
//! parallel, a stream of copies of one length runs at the slower of the two sides, so the engine
//! wins a length when its slower side beats the CPU's copy.

use crate::config::costs::{Completion, CpuCopyCosts, EngineCosts};
use crate::error::{invalid_arg, Result};
use serde::Serialize;

/// Where the core, the engine and the two buffers sit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Placement {
    /// The copying core's node.
    pub cpu: u8,
    /// The engine's node.
    pub engine: u8,
    /// The source buffer's node.
    pub src: u8,
    /// The destination buffer's node.
    pub dst: u8,
}

impl Placement {
    /// The named placements, as scenario and claim files write them.
    pub const NAMED: [(&'static str, Placement); 4] = [
        ("local", Placement::LOCAL),
        ("engine-remote", Placement::ENGINE_REMOTE),
        ("min-remote", Placement::MIN_REMOTE),
        ("max-remote", Placement::MAX_REMOTE),
    ];

    /// The placement named `name` (one of [`Placement::NAMED`]).
    pub fn named(name: &str) -> Result<Placement> {
        Placement::lookup(name).map(|(_, p)| p)
    }

    /// The entry of [`Placement::NAMED`] called `name`, its name with a static lifetime.
    pub fn lookup(name: &str) -> Result<(&'static str, Placement)> {
        Placement::NAMED
            .iter()
            .find(|(n, _)| *n == name)
            .copied()
            .ok_or_else(|| {
                let names: Vec<&str> = Placement::NAMED.iter().map(|(n, _)| *n).collect();
                invalid_arg("placement", name, names.join(", "))
            })
    }

    /// Everything in node 0.
    pub const LOCAL: Placement = Placement {
        cpu: 0,
        engine: 0,
        src: 0,
        dst: 0,
    };
    /// The engine (and memory) in the other node than the core: seed 002's "NUMA-Remote".
    pub const ENGINE_REMOTE: Placement = Placement {
        cpu: 0,
        engine: 1,
        src: 1,
        dst: 1,
    };
    /// Engine and source together, destination across: "Min Remote".
    pub const MIN_REMOTE: Placement = Placement {
        cpu: 0,
        engine: 0,
        src: 0,
        dst: 1,
    };
    /// Engine away from both buffers: "Max Remote".
    pub const MAX_REMOTE: Placement = Placement {
        cpu: 0,
        engine: 0,
        src: 1,
        dst: 1,
    };
}

impl CpuCopyCosts {
    /// Core time of one copy of `len` bytes, in picoseconds.
    pub fn copy_ps(&self, len: u64, at: Placement) -> u64 {
        let remote = at.src != at.cpu || at.dst != at.cpu;
        let pct = 100 + if remote { self.remote_slowdown_pct } else { 0 };
        self.setup_ns * 1000 + (len * 1_000_000 * pct / 100).div_ceil(self.bytes_per_us)
    }
}

impl EngineCosts {
    /// Core time to hand one copy to the engine and collect it, in picoseconds.
    pub fn cpu_ps(&self, at: Placement) -> u64 {
        let remote = if at.engine != at.cpu {
            self.remote_cpu_ns
        } else {
            0
        };
        let batch = self.descriptors_per_doorbell.max(1);
        let completion = match self.completion {
            Completion::Poll => self.completion_ns * 1000,
            Completion::Interrupt => self.completion_ns * 1000 / batch,
        };
        (self.submit_ns + remote) * 1000 + self.doorbell_ns * 1000 / batch + completion
    }

    /// Time from the engine finishing a copy to the core knowing it.
    pub fn completion_latency_ps(&self) -> u64 {
        match self.completion {
            Completion::Poll => 0,
            Completion::Interrupt => self.interrupt_latency_ns * 1000,
        }
    }

    /// Engine time of one copy of `len` bytes, in picoseconds.
    pub fn engine_ps(&self, len: u64, at: Placement) -> u64 {
        let far = u64::from(at.src != at.engine) + u64::from(at.dst != at.engine);
        let pct = 100 + far * self.remote_memory_pct;
        self.startup_ns * 1000 + (len * 1_000_000 * pct / 100).div_ceil(self.bytes_per_us)
    }

    /// Per-copy time of a stream of engine copies of `len` bytes: the slower of the core's
    /// share and the engine's, its channels working in parallel.
    pub fn stream_ps(&self, len: u64, at: Placement) -> u64 {
        self.cpu_ps(at)
            .max(self.engine_ps(len, at) / self.channels.max(1))
    }
}

/// The shortest copy length (a multiple of `step`, up to `max_len`) from which the engine beats
/// the CPU at every longer length, or `None` if it never does.
pub fn crossover(
    cpu: &CpuCopyCosts,
    engine: &EngineCosts,
    at: Placement,
    step: u64,
    max_len: u64,
) -> Result<Option<u64>> {
    if step == 0 || max_len < step {
        return Err(invalid_arg("step", step, format!("1..={max_len}")));
    }
    let mut first_win = None;
    let mut len = step;
    while len <= max_len {
        let engine_wins = engine.stream_ps(len, at) < cpu.copy_ps(len, at);
        match (engine_wins, first_win) {
            (true, None) => first_win = Some(len),
            (false, Some(_)) => first_win = None,
            _ => {}
        }
        len += step;
    }
    Ok(first_win)
}

/// One point of the crossover curve: per-copy time of each way at a length.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CurvePoint {
    /// Copy length.
    pub len_bytes: u64,
    /// CPU copy, core and memory local.
    pub cpu_local_ns: f64,
    /// CPU copy with the buffers in the other node.
    pub cpu_remote_ns: f64,
    /// Engine copy, engine in the core's node.
    pub engine_local_ns: f64,
    /// Engine copy, engine (and memory) in the other node.
    pub engine_remote_ns: f64,
}

/// The crossover curve at powers of two from 64 bytes to `max_len`.
pub fn curve(cpu: &CpuCopyCosts, engine: &EngineCosts, max_len: u64) -> Vec<CurvePoint> {
    let remote_buffers = Placement {
        src: 1,
        dst: 1,
        ..Placement::LOCAL
    };
    let mut out = Vec::new();
    let mut len = 64;
    while len <= max_len {
        out.push(CurvePoint {
            len_bytes: len,
            cpu_local_ns: cpu.copy_ps(len, Placement::LOCAL) as f64 / 1e3,
            cpu_remote_ns: cpu.copy_ps(len, remote_buffers) as f64 / 1e3,
            engine_local_ns: engine.stream_ps(len, Placement::LOCAL) as f64 / 1e3,
            engine_remote_ns: engine.stream_ps(len, Placement::ENGINE_REMOTE) as f64 / 1e3,
        });
        len *= 2;
    }
    out
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A core copying at 8 B/ns after 20 ns, 40% slower across nodes.
    pub(crate) fn cpu() -> CpuCopyCosts {
        CpuCopyCosts {
            setup_ns: 20,
            bytes_per_us: 8_000,
            remote_slowdown_pct: 40,
        }
    }

    /// One polled engine channel at 16 B/ns, 300 ns of fixed path per copy.
    pub(crate) fn engine() -> EngineCosts {
        EngineCosts {
            channels: 1,
            submit_ns: 50,
            doorbell_ns: 100,
            descriptors_per_doorbell: 1,
            completion: Completion::Poll,
            completion_ns: 50,
            interrupt_latency_ns: 0,
            remote_cpu_ns: 120,
            startup_ns: 100,
            bytes_per_us: 16_000,
            remote_memory_pct: 20,
        }
    }

    #[test]
    fn costs_grow_with_length_and_distance() {
        assert_eq!(cpu().copy_ps(8000, Placement::LOCAL), 20_000 + 1_000_000);
        assert!(cpu().copy_ps(8000, Placement::MAX_REMOTE) > cpu().copy_ps(8000, Placement::LOCAL));
        assert!(engine().cpu_ps(Placement::ENGINE_REMOTE) > engine().cpu_ps(Placement::LOCAL));
        assert!(
            engine().engine_ps(4096, Placement::MAX_REMOTE)
                > engine().engine_ps(4096, Placement::MIN_REMOTE)
        );
    }

    #[test]
    fn batching_interrupts_and_channels_change_the_right_side() {
        let e = engine();
        let batched = EngineCosts {
            descriptors_per_doorbell: 4,
            ..e.clone()
        };
        assert_eq!(
            e.cpu_ps(Placement::LOCAL) - batched.cpu_ps(Placement::LOCAL),
            75_000
        );
        let irq = EngineCosts {
            completion: Completion::Interrupt,
            interrupt_latency_ns: 2000,
            ..batched.clone()
        };
        assert!(irq.cpu_ps(Placement::LOCAL) < batched.cpu_ps(Placement::LOCAL));
        assert_eq!(irq.completion_latency_ps(), 2_000_000);
        let two = EngineCosts {
            channels: 2,
            ..e.clone()
        };
        let len = 65536;
        assert_eq!(
            two.stream_ps(len, Placement::LOCAL) * 2,
            e.stream_ps(len, Placement::LOCAL)
        );
    }

    #[test]
    fn the_engine_wins_from_its_crossover_on() {
        let x = crossover(&cpu(), &engine(), Placement::LOCAL, 64, 65536)
            .unwrap()
            .unwrap();
        // The core's 200 ns per engine copy equals a CPU copy of (200 - 20) ns * 8 B/ns = 1440 B.
        assert_eq!(x, 1472);
        let far = crossover(&cpu(), &engine(), Placement::ENGINE_REMOTE, 64, 65536)
            .unwrap()
            .unwrap();
        assert!(far > x);
        assert!(crossover(&cpu(), &engine(), Placement::LOCAL, 0, 64).is_err());
        assert_eq!(curve(&cpu(), &engine(), 4096).len(), 7);
    }
}
