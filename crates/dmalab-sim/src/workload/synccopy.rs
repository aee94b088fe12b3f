//! One synchronous copy (`dmalab bench copy`): the time from a core deciding to copy `len`
//! bytes to the core knowing the copy is done, when the core copies them itself and when it hands
//! them to a copy engine (CBDMA, DSA) and waits.
//!
//! Seed 002's stream of copies asks a different question: there the core and the engine overlap
//! and the slower side sets the pace ([`EngineCosts::stream_ps`]). Here nothing overlaps, so every
//! part of the path adds up, in order:
//! - **CPU copy**: the call's set-up, then, on a platform with a memory path, the wait for the
//!   first source line (the buffers are cold: their lines are in DRAM, in the home node of the
//!   buffer, across the socket link when that is not the core's), then the bytes at the core's
//!   copy rate ([`CpuCopyCosts::copy_ps`]).
//! - **Engine copy**: the core builds the descriptor and rings the doorbell (one copy, one
//!   doorbell: nothing to batch), the engine starts the descriptor. On a platform with a memory
//!   path the engine, which sits in the uncore beside the caching agents rather than behind a
//!   PCIe link, then reads the descriptor's line, which the core has just written, from the LLC
//!   (across the socket link when the engine is in the other node), and waits for its first
//!   source line from DRAM (across the link when the source is homed away from the engine).
//!   It moves the bytes at its rate ([`EngineCosts::engine_ps`]) and writes a completion record;
//!   the core sees that line from the LLC when the engine is in the core's node and writes
//!   allocate there, otherwise from DRAM, across the link when the engine is in the other node.
//!   Last, the core's completion check (polling) or the interrupt's latency and handler.
//!
//! Platforms without a `[memory]` section have no line terms: their copy rates and start-up
//! times carry the memory's part.

use crate::bus::memory::MemoryPath;
use crate::config::costs::{Completion, CpuCopyCosts, EngineCosts};
use crate::config::platform::Platform;
use crate::error::{invalid_arg, Result};
use crate::workload::copy::Placement;
use serde::Serialize;

/// The largest copy `bench copy` models: 1 GiB.
pub const MAX_COPY_BYTES: u64 = 1 << 30;

/// One synchronous copy of a size at a placement, both ways.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SyncCopyRecord {
    /// The platform's name.
    pub platform: String,
    /// Bytes copied.
    pub size_bytes: u64,
    /// Where the core, the engine and the buffers sit ([`Placement::NAMED`]).
    pub placement: &'static str,
    /// The core copying the bytes itself, nanoseconds.
    pub cpu_ns: f64,
    /// The core handing the copy to the engine and waiting for it, nanoseconds.
    pub engine_ns: f64,
    /// `cpu` or `engine`: the faster way (the CPU on a tie).
    pub faster: &'static str,
    /// The CPU copy's parts in order, `(part, ns)`.
    pub cpu_parts: Vec<(&'static str, f64)>,
    /// The engine copy's parts in order, `(part, ns)`.
    pub engine_parts: Vec<(&'static str, f64)>,
}

/// A platform's CPU copy costs, copy engine and, where it has one, memory path.
#[derive(Clone, Debug)]
pub struct SyncCopy<'a> {
    name: &'a str,
    cpu: &'a CpuCopyCosts,
    engine: &'a EngineCosts,
    memory: Option<&'a MemoryPath>,
}

impl<'a> SyncCopy<'a> {
    /// The model of `platform`, or an error naming the section it lacks.
    pub fn new(platform: &'a Platform) -> Result<SyncCopy<'a>> {
        let (cpu, engine) = platform.copy_costs()?;
        Ok(SyncCopy::from_parts(
            &platform.name,
            cpu,
            engine,
            platform.memory.as_ref(),
        ))
    }

    /// The model from its parts (`name` is the platform's name in records).
    pub fn from_parts(
        name: &'a str,
        cpu: &'a CpuCopyCosts,
        engine: &'a EngineCosts,
        memory: Option<&'a MemoryPath>,
    ) -> SyncCopy<'a> {
        SyncCopy {
            name,
            cpu,
            engine,
            memory,
        }
    }

    /// The CPU copy's parts, in picoseconds.
    pub fn cpu_parts(&self, len: u64, at: Placement) -> Vec<(&'static str, u64)> {
        let setup = self.cpu.setup_ns * 1000;
        let mut parts = vec![("set-up", setup)];
        if let Some(m) = self.memory {
            let far = if at.src != at.cpu {
                m.socket_link_ns
            } else {
                0
            };
            parts.push(("first line", (m.dram_ns + far) * 1000));
        }
        parts.push(("copy", self.cpu.copy_ps(len, at) - setup));
        parts
    }

    /// The engine copy's parts, in picoseconds.
    pub fn engine_parts(&self, len: u64, at: Placement) -> Vec<(&'static str, u64)> {
        let e = self.engine;
        let remote_engine = at.engine != at.cpu;
        let submit = e.submit_ns + if remote_engine { e.remote_cpu_ns } else { 0 };
        let start = e.startup_ns * 1000;
        let mut parts = vec![
            ("submit", submit * 1000),
            ("doorbell", e.doorbell_ns * 1000),
            ("engine start", start),
        ];
        if let Some(m) = self.memory {
            let link = |far: bool| if far { m.socket_link_ns } else { 0 };
            let descriptor = m.llc_ns + link(remote_engine);
            parts.push(("descriptor line", descriptor * 1000));
            let first = m.dram_ns + link(at.src != at.engine);
            parts.push(("first line", first * 1000));
        }
        parts.push(("copy", e.engine_ps(len, at) - start));
        if let Some(m) = self.memory {
            let seen = if !remote_engine && m.write_allocate {
                m.llc_ns
            } else {
                m.dram_ns
            };
            let far = if remote_engine { m.socket_link_ns } else { 0 };
            parts.push(("completion line", (seen + far) * 1000));
        }
        let completion = match e.completion {
            Completion::Poll => e.completion_ns * 1000,
            Completion::Interrupt => (e.interrupt_latency_ns + e.completion_ns) * 1000,
        };
        parts.push(("completion", completion));
        parts
    }

    /// One copy of `size_bytes` at the placement named `placement`, both ways.
    pub fn measure(&self, size_bytes: u64, placement: &str) -> Result<SyncCopyRecord> {
        if !(1..=MAX_COPY_BYTES).contains(&size_bytes) {
            return Err(invalid_arg(
                "size_bytes",
                size_bytes,
                format!("1..={MAX_COPY_BYTES}"),
            ));
        }
        let (name, at) = Placement::lookup(placement)?;
        let ns = |parts: Vec<(&'static str, u64)>| -> (f64, Vec<(&'static str, f64)>) {
            let total: u64 = parts.iter().map(|(_, ps)| ps).sum();
            let parts = parts.into_iter().map(|(n, ps)| (n, ps as f64 / 1e3));
            (total as f64 / 1e3, parts.collect())
        };
        let (cpu_ns, cpu_parts) = ns(self.cpu_parts(size_bytes, at));
        let (engine_ns, engine_parts) = ns(self.engine_parts(size_bytes, at));
        Ok(SyncCopyRecord {
            platform: self.name.to_string(),
            size_bytes,
            placement: name,
            cpu_ns,
            engine_ns,
            faster: if engine_ns < cpu_ns { "engine" } else { "cpu" },
            cpu_parts,
            engine_parts,
        })
    }
}

/// Every (size, placement) pair on `platform`, sizes outer.
pub fn sweep(
    platform: &Platform,
    sizes: &[u64],
    placements: &[String],
) -> Result<Vec<SyncCopyRecord>> {
    let model = SyncCopy::new(platform)?;
    let mut out = Vec::with_capacity(sizes.len() * placements.len());
    for &size in sizes {
        for at in placements {
            out.push(model.measure(size, at)?);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bus::memory::tests::two_socket as memory;
    use crate::workload::copy::tests::{cpu, engine};

    #[test]
    fn without_a_memory_path_the_parts_are_the_copy_costs_in_sequence() {
        let (c, e) = (cpu(), engine());
        let m = SyncCopy::from_parts("p", &c, &e, None);
        let r = m.measure(8000, "local").unwrap();
        // 20 ns set-up + 8000 B at 8 B/ns.
        assert_eq!(r.cpu_ns, 1020.0);
        // Submit 50, doorbell 100, start 100, 8000 B at 16 B/ns, completion 50.
        assert_eq!(r.engine_ns, 800.0);
        assert_eq!(r.faster, "engine");
        let names: Vec<&str> = r.engine_parts.iter().map(|(n, _)| *n).collect();
        assert_eq!(
            names,
            ["submit", "doorbell", "engine start", "copy", "completion"]
        );
    }

    #[test]
    fn an_interrupt_adds_its_latency_and_handler_once() {
        let (c, m) = (cpu(), memory());
        let polled = engine();
        let irq = EngineCosts {
            completion: Completion::Interrupt,
            interrupt_latency_ns: 3_000,
            ..engine()
        };
        let a = SyncCopy::from_parts("p", &c, &polled, Some(&m));
        let b = SyncCopy::from_parts("p", &c, &irq, Some(&m));
        let (a, b) = (
            a.measure(4096, "local").unwrap(),
            b.measure(4096, "local").unwrap(),
        );
        assert!((b.engine_ns - a.engine_ns - 3_000.0).abs() < 1e-9);
        assert_eq!(a.cpu_ns, b.cpu_ns);
    }

    #[test]
    fn the_memory_path_adds_line_waits_and_distance_never_helps() {
        let (c, e, m) = (cpu(), engine(), memory());
        let with = SyncCopy::from_parts("p", &c, &e, Some(&m));
        let without = SyncCopy::from_parts("p", &c, &e, None);
        for size in [1u64, 63, 64, 65, 4096, 65_536, 1 << 20] {
            let local = with.measure(size, "local").unwrap();
            let bare = without.measure(size, "local").unwrap();
            // The core waits one DRAM line; the engine the descriptor's line from the LLC, one
            // DRAM line and the completion line from the LLC (writes allocate there).
            assert_eq!(local.cpu_ns - bare.cpu_ns, 80.0);
            assert!((local.engine_ns - bare.engine_ns - (20.0 + 80.0 + 20.0)).abs() < 1e-9);
            for far in ["engine-remote", "min-remote", "max-remote"] {
                let r = with.measure(size, far).unwrap();
                assert!(r.cpu_ns >= local.cpu_ns, "{far} {size}");
                assert!(r.engine_ns > local.engine_ns, "{far} {size}");
            }
            let bigger = with.measure(size + 1, "local").unwrap();
            assert!(bigger.cpu_ns >= local.cpu_ns && bigger.engine_ns >= local.engine_ns);
        }
        // An engine in the other node: its completion line crosses the link from DRAM.
        let r = with.measure(64, "engine-remote").unwrap();
        assert!(r.engine_parts.contains(&("completion line", 130.0)));
    }

    #[test]
    fn the_engine_wins_large_copies_when_its_rate_is_higher() {
        let (c, e, m) = (cpu(), engine(), memory());
        let model = SyncCopy::from_parts("p", &c, &e, Some(&m));
        assert_eq!(model.measure(64, "local").unwrap().faster, "cpu");
        assert_eq!(model.measure(1 << 20, "local").unwrap().faster, "engine");
    }

    #[test]
    fn bad_sizes_and_placements_name_the_field() {
        let (c, e) = (cpu(), engine());
        let m = SyncCopy::from_parts("p", &c, &e, None);
        for (size, at, field) in [
            (0, "local", "size_bytes"),
            (MAX_COPY_BYTES + 1, "local", "size_bytes"),
            (64, "nearby", "placement"),
        ] {
            let err = m.measure(size, at).unwrap_err().to_string();
            assert!(err.contains(field), "{err}");
        }
    }
}
