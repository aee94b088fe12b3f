//! Scenarios: one TOML schema, read here only, for both kinds of scenario. A *trace* scenario
//! names one DMA transfer for `dmalab trace`; a *run* scenario has a `[mapping]` and a
//! `[workload]` for `dmalab run`. Unknown keys are refused, naming the key and the valid ones;
//! named scenarios are built into the crate, so they work wherever dmalab is installed.
//!
//! ```toml
//! platform = "intel-vtd-2008-server"   # a built-in platform or a platform file's path
//! device = "intel-xl710"               # optional: a device (built-in or file) for its PCIe slot
//! description = "..."                  # optional, one line
//! [choices]                            # options of the platform's choices (default: theirs)
//! [mapping]
//! translation = "page-table"   # auto (default), none, passthrough, page-table, tce, direct-window
//! allocator = "segtree"        # default segtree; bitmap, rbtree, magazines+rbtree, ...
//! flush = "deferred"           # strict (default), deferred, per-cpu
//! high_water = 250             # unmaps per deferred flush (default 250; 1..=1000000)
//! timeout_us = 10000           # age that forces a deferred flush (default 10000; 1..=10^7)
//! window_bytes = 4294967296    # IOVA space of the domain (default 2^32; 2^13..=2^60)
//! dma_mask_bits = 64           # the device's DMA mask (default 64; 24..=64)
//! reserved = [[0xFEE00000, 0xFEEFFFFF]]  # default: the x86 interrupt window with page-table
//! [workload]                   # keys, defaults and ranges: see `config::workload`
//! kind = "block"
//! io_bytes = 1024
//! ```
//!
//! A trace scenario has `direction` (`read`/`tx` or `write`/`rx`), `address` and
//! `length_bytes` at the top level instead of `[mapping]` and `[workload]`.

use crate::bus::trace::{Direction, MAX_TRACE_BYTES};
use crate::config::check::{in_range, Checker};
use crate::config::platform::{Draws, Picks};
use crate::config::proto::X86_INTERRUPT_WINDOW;
use crate::config::workload::{Workload, WorkloadFile};
use crate::error::{Result, SimError};
use crate::iommu::flush::FlushPolicy;
use crate::iommu::Translation;
use crate::units::{BusAddr, Ps};
use dmalab_iova::AllocatorKind;
use serde::{Deserialize, Serialize};

/// A scenario file as written (see the module's example for every key and its default).
#[derive(Clone, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    /// What the scenario shows, in a line.
    pub description: Option<String>,
    /// A built-in platform's name or a platform file's path.
    pub platform: String,
    /// A device (a built-in name or a device file) for the platform's PCIe slot instead of its
    /// own.
    pub device: Option<String>,
    /// Options picked for the platform's choices.
    #[serde(default)]
    pub choices: Picks,
    /// Trace scenarios: `read` (or `tx`) or `write` (or `rx`).
    pub direction: Option<String>,
    /// Trace scenarios: the bus address of the transfer's first byte.
    pub address: Option<u64>,
    /// Trace scenarios: the transfer's length.
    pub length_bytes: Option<u64>,
    /// Run scenarios: the DMA-mapping configuration.
    pub mapping: Option<MappingFile>,
    /// Run scenarios: the workload.
    pub workload: Option<WorkloadFile>,
}

/// The `[mapping]` table as written; every key optional, defaults in the module's example.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
#[expect(
    missing_docs,
    reason = "the keys are documented in the module's example"
)]
pub struct MappingFile {
    pub translation: Option<TranslationChoice>,
    pub allocator: Option<String>,
    pub flush: Option<FlushChoice>,
    pub high_water: Option<u64>,
    pub timeout_us: Option<u64>,
    pub window_bytes: Option<u64>,
    pub dma_mask_bits: Option<u64>,
    pub reserved: Option<Vec<[u64; 2]>>,
}

/// `[mapping] translation`: a translation, or `auto` to let the platform's window rules choose.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
#[expect(missing_docs, reason = "each names the Translation of the same name")]
pub enum TranslationChoice {
    #[default]
    Auto,
    None,
    Passthrough,
    PageTable,
    Tce,
    DirectWindow,
}

/// `[mapping] flush`: the invalidation policy's name.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
#[expect(missing_docs, reason = "each names the FlushPolicy of the same name")]
pub enum FlushChoice {
    #[default]
    Strict,
    Deferred,
    PerCpu,
}

/// A scenario, read and checked.
#[derive(Clone, Debug, PartialEq)]
pub struct Scenario {
    /// Its name (the file's stem, or what the caller gave).
    pub name: String,
    /// What it shows, in a line.
    pub description: Option<String>,
    /// The platform's name or path (`HOST+DEVICE` when the scenario names a device).
    pub platform: String,
    /// Options picked for the platform's choices.
    pub choices: Picks,
    /// Platform parameters drawn from their stated ranges, read in place of the files' values
    /// (empty for a scenario as written; intervals fill it).
    pub draws: Draws,
    /// What it does.
    pub task: Task,
}

/// What a scenario does.
#[derive(Clone, Debug, PartialEq)]
pub enum Task {
    /// Trace one DMA transfer on the platform's bus.
    Trace(TraceTask),
    /// Run a workload through a DMA-mapping configuration on the event engine.
    Run(RunTask),
}

/// One DMA transfer to trace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TraceTask {
    /// Which way the data moves.
    pub direction: Direction,
    /// The bus address of the first byte.
    pub address: BusAddr,
    /// Bytes moved.
    pub length_bytes: u64,
}

/// A workload and the DMA-mapping configuration it runs through.
#[derive(Clone, Debug, PartialEq)]
pub struct RunTask {
    /// The translation, or `None` to let the platform's window rules choose (`auto`).
    pub translation: Option<Translation>,
    /// The IOVA allocator.
    pub allocator: AllocatorKind,
    /// The invalidation policy.
    pub flush: FlushPolicy,
    /// Bytes of IOVA space the domain manages.
    pub window_bytes: u64,
    /// The device's DMA mask.
    pub dma_mask_bits: u32,
    /// IOVA byte ranges no mapping may use.
    pub reserved: Vec<(u64, u64)>,
    /// The network workloads' MTU, when the scenario sets one (else the platform's).
    pub mtu_bytes: Option<u64>,
    /// The workload.
    pub workload: Workload,
}

impl Scenario {
    /// Read a scenario from TOML text; `name` names it in errors and reports.
    pub fn parse(name: &str, text: &str) -> Result<Scenario> {
        let de = toml::Deserializer::parse(text).map_err(|e| SimError::Syntax {
            file: name.into(),
            reason: e.to_string(),
        })?;
        let file = serde_path_to_error::deserialize(de)
            .map_err(|e| schema_error(name, e.path().to_string(), e.inner().message()))?;
        Self::from_file(name, file)
    }

    /// Read a scenario from JSON text of the same keys.
    pub fn from_json(name: &str, text: &str) -> Result<Scenario> {
        let value = serde_json::from_str(text).map_err(|e| SimError::Syntax {
            file: name.into(),
            reason: e.to_string(),
        })?;
        Self::from_value(name, value)
    }

    /// Read a scenario from serde's data model (as a Python dict gives it).
    pub fn from_value(name: &str, value: serde_json::Value) -> Result<Scenario> {
        let file = serde_path_to_error::deserialize(value).map_err(|e| {
            let inner = e.inner().to_string();
            schema_error(name, e.path().to_string(), &inner)
        })?;
        Self::from_file(name, file)
    }

    /// Check a scenario as written and resolve its defaults.
    pub fn from_file(name: &str, f: ScenarioFile) -> Result<Scenario> {
        let c = Checker { file: name };
        let trace_keys = f.direction.is_some() || f.address.is_some() || f.length_bytes.is_some();
        let task = match (trace_keys, &f.mapping, &f.workload) {
            (true, None, None) => Task::Trace(trace_task(&c, &f)?),
            (false, Some(m), Some(w)) => Task::Run(run_task(&c, m, w)?),
            (true, _, _) => {
                let valid = "a trace scenario (direction, address, length_bytes) or a run \
                             scenario ([mapping] and [workload]), not both";
                return Err(c.invalid("mapping", "set with trace keys", valid));
            }
            (false, None, _) => return Err(c.invalid("mapping", "missing", "a table")),
            (false, _, None) => return Err(c.invalid("workload", "missing", "a table")),
        };
        Ok(Scenario {
            name: name.to_string(),
            description: f.description,
            platform: match f.device {
                Some(dev) => format!("{}+{dev}", f.platform),
                None => f.platform,
            },
            choices: f.choices,
            draws: Draws::new(),
            task,
        })
    }

    /// The run task, or an error saying this is a trace scenario.
    pub fn run_task(&self) -> Result<&RunTask> {
        match &self.task {
            Task::Run(r) => Ok(r),
            Task::Trace(_) => Err(Checker { file: &self.name }.invalid(
                "workload",
                "missing (a trace scenario)",
                "a run scenario with [mapping] and [workload]; trace this one with `dmalab trace`",
            )),
        }
    }

    /// The trace task, or an error saying this is a run scenario.
    pub fn trace_task(&self) -> Result<TraceTask> {
        match &self.task {
            Task::Trace(t) => Ok(*t),
            Task::Run(_) => Err(Checker { file: &self.name }.invalid(
                "direction",
                "missing (a run scenario)",
                "a trace scenario with direction, address and length_bytes; run this one \
                 with `dmalab run`",
            )),
        }
    }
}

fn schema_error(file: &str, path: String, reason: &str) -> SimError {
    SimError::ScenarioSchema {
        file: file.to_string(),
        key: if path == "." {
            "(top level)".into()
        } else {
            path
        },
        reason: reason.to_string(),
    }
}

fn trace_task(c: &Checker<'_>, f: &ScenarioFile) -> Result<TraceTask> {
    let text = f.direction.as_deref().unwrap_or("");
    let direction = Direction::parse(text)
        .ok_or_else(|| c.invalid("direction", format!("{text:?}"), "read (tx) or write (rx)"))?;
    let address = f
        .address
        .ok_or_else(|| c.invalid("address", "missing", "a bus address"))?;
    let length = f.length_bytes.unwrap_or(0);
    let length_bytes = in_range(c, "length_bytes", length, 1, MAX_TRACE_BYTES)?;
    Ok(TraceTask {
        direction,
        address: BusAddr(address),
        length_bytes,
    })
}

fn run_task(c: &Checker<'_>, m: &MappingFile, w: &WorkloadFile) -> Result<RunTask> {
    let translation = match m.translation.unwrap_or_default() {
        TranslationChoice::Auto => None,
        TranslationChoice::None => Some(Translation::None),
        TranslationChoice::Passthrough => Some(Translation::Passthrough),
        TranslationChoice::PageTable => Some(Translation::PageTable),
        TranslationChoice::Tce => Some(Translation::Tce),
        TranslationChoice::DirectWindow => Some(Translation::DirectWindow),
    };
    let name = m.allocator.as_deref().unwrap_or("segtree");
    let allocator = AllocatorKind::parse(name).map_err(|_| {
        c.invalid(
            "mapping.allocator",
            format!("{name:?}"),
            &AllocatorKind::NAMES.join(", "),
        )
    })?;
    let high_water = in_range(
        c,
        "mapping.high_water",
        m.high_water.unwrap_or(250),
        1,
        1_000_000,
    )?;
    let timeout_us = in_range(
        c,
        "mapping.timeout_us",
        m.timeout_us.unwrap_or(10_000),
        1,
        10_000_000,
    )?;
    let (high_water, timeout) = (high_water as usize, Ps::from_ns(timeout_us * 1000));
    let flush = match m.flush.unwrap_or_default() {
        FlushChoice::Strict => FlushPolicy::Strict,
        FlushChoice::Deferred => FlushPolicy::Deferred {
            high_water,
            timeout,
        },
        FlushChoice::PerCpu => FlushPolicy::PerCpu {
            high_water,
            timeout,
        },
    };
    let window = m.window_bytes.unwrap_or(1 << 32);
    let window_bytes = in_range(c, "mapping.window_bytes", window, 1 << 13, 1 << 60)?;
    let dma_mask_bits = in_range(
        c,
        "mapping.dma_mask_bits",
        m.dma_mask_bits.unwrap_or(64),
        24,
        64,
    )?;
    let reserved = match &m.reserved {
        // By default a page-table IOMMU keeps the x86 interrupt window out of use.
        None if translation == Some(Translation::PageTable) => vec![X86_INTERRUPT_WINDOW],
        None => Vec::new(),
        Some(pairs) => {
            for [start, end] in pairs {
                if start > end {
                    let value = format!("[{start:#x}, {end:#x}]");
                    return Err(c.invalid(
                        "mapping.reserved",
                        value,
                        "[start, end] with start <= end",
                    ));
                }
            }
            pairs.iter().map(|[s, e]| (*s, *e)).collect()
        }
    };
    let (workload, mtu_bytes) = w.resolve(c)?;
    Ok(RunTask {
        translation,
        allocator,
        flush,
        window_bytes,
        dma_mask_bits: dma_mask_bits as u32,
        reserved,
        mtu_bytes,
        workload,
    })
}

/// The scenarios built into dmalab (the repository's `scenarios/` files), by name.
pub const BUILTIN: &[(&str, &str)] = &[
    (
        "p1-tx-unaligned",
        include_str!("../../../../scenarios/p1-tx-unaligned.toml"),
    ),
    (
        "p1-tx-aligned",
        include_str!("../../../../scenarios/p1-tx-aligned.toml"),
    ),
    (
        "p1-rx-unaligned",
        include_str!("../../../../scenarios/p1-rx-unaligned.toml"),
    ),
    (
        "p1-rx-aligned",
        include_str!("../../../../scenarios/p1-rx-aligned.toml"),
    ),
    (
        "p3-rbtree-deferred",
        include_str!("../../../../scenarios/p3-rbtree-deferred.toml"),
    ),
    (
        "p3-bitmap-strict",
        include_str!("../../../../scenarios/p3-bitmap-strict.toml"),
    ),
    (
        "p3-segtree-deferred",
        include_str!("../../../../scenarios/p3-segtree-deferred.toml"),
    ),
    (
        "p3-iommu-off",
        include_str!("../../../../scenarios/p3-iommu-off.toml"),
    ),
    (
        "p3-rbtree-strict",
        include_str!("../../../../scenarios/p3-rbtree-strict.toml"),
    ),
    (
        "grace-nvme8-strict",
        include_str!("../../../../scenarios/grace-nvme8-strict.toml"),
    ),
    (
        "grace-nvme8-lazy",
        include_str!("../../../../scenarios/grace-nvme8-lazy.toml"),
    ),
    (
        "grace-nvme8-passthrough",
        include_str!("../../../../scenarios/grace-nvme8-passthrough.toml"),
    ),
    (
        "p0-udp-rr-default-window",
        include_str!("../../../../scenarios/p0-udp-rr-default-window.toml"),
    ),
    (
        "p0-udp-rr-direct-window",
        include_str!("../../../../scenarios/p0-udp-rr-direct-window.toml"),
    ),
];

/// The names of the built-in scenarios that run workloads (`dmalab run`) or trace transfers
/// (`dmalab trace`), as `trace` asks.
pub fn builtin_names(trace: bool) -> Vec<&'static str> {
    BUILTIN
        .iter()
        .filter(|(name, text)| {
            Scenario::parse(name, text).is_ok_and(|s| matches!(s.task, Task::Trace(_)) == trace)
        })
        .map(|(n, _)| *n)
        .collect()
}

/// The built-in scenario `name` with `overrides` merged into it key by key (a table into a
/// table, any other value in place of the scenario's): how a claim runs a named scenario for
/// fewer operations or picks a platform option on top of it. The result is checked as any
/// scenario file is.
pub fn builtin_with(name: &str, overrides: &toml::Table) -> Result<Scenario> {
    let Some((n, text)) = BUILTIN.iter().find(|(n, _)| *n == name) else {
        return Err(unknown_scenario(name, "one of"));
    };
    parse_with(n, text, overrides)
}

/// A built-in scenario by name, or the scenario file at that path, with `overrides` merged in
/// as [`builtin_with`] does (how a command changes a scenario's allocator or length).
pub fn load_with(name_or_path: &str, overrides: &toml::Table) -> Result<Scenario> {
    if BUILTIN.iter().any(|(n, _)| *n == name_or_path) {
        return builtin_with(name_or_path, overrides);
    }
    let (stem, text) = read_file(name_or_path)?;
    parse_with(&stem, &text, overrides)
}

/// The scenario `text` named `name`, with `overrides` merged in before it is checked.
fn parse_with(name: &str, text: &str, overrides: &toml::Table) -> Result<Scenario> {
    let mut table: toml::Table = toml::from_str(text).map_err(|e| SimError::Syntax {
        file: name.to_string(),
        reason: e.to_string(),
    })?;
    merge(&mut table, overrides);
    let file = serde_path_to_error::deserialize(toml::Value::Table(table))
        .map_err(|e| schema_error(name, e.path().to_string(), &e.inner().to_string()))?;
    Scenario::from_file(name, file)
}

/// The error for a scenario `name` that is none of the built-in ones; `valid` leads the list.
fn unknown_scenario(name: &str, valid: &str) -> SimError {
    let known: Vec<&str> = BUILTIN.iter().map(|(n, _)| *n).collect();
    SimError::InvalidArgument {
        field: "scenario".into(),
        value: name.into(),
        valid: format!("{valid}: {}", known.join(", ")),
    }
}

fn merge(base: &mut toml::Table, overrides: &toml::Table) {
    for (key, value) in overrides {
        match (base.get_mut(key), value) {
            (Some(toml::Value::Table(b)), toml::Value::Table(o)) => merge(b, o),
            _ => {
                base.insert(key.clone(), value.clone());
            }
        }
    }
}

/// A built-in scenario by name, or the scenario file at that path.
pub fn load(name_or_path: &str) -> Result<Scenario> {
    if let Some((n, text)) = BUILTIN.iter().find(|(n, _)| *n == name_or_path) {
        return Scenario::parse(n, text);
    }
    let (stem, text) = read_file(name_or_path)?;
    Scenario::parse(&stem, &text)
}

/// The scenario file at `path`: its stem (the scenario's name) and its text.
fn read_file(path: &str) -> Result<(String, String)> {
    let p = std::path::Path::new(path);
    if !p.is_file() {
        return Err(unknown_scenario(path, "a scenario file or one of"));
    }
    let text = std::fs::read_to_string(p).map_err(|e| SimError::FileRead {
        file: path.into(),
        reason: e.to_string(),
    })?;
    let stem = p.file_stem().and_then(|s| s.to_str()).unwrap_or(path);
    Ok((stem.to_string(), text))
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUN: &str = "platform = \"intel-vtd-2008-server\"\n[mapping]\nflush = \"deferred\"\n\
                       [workload]\nkind = \"block\"\nios = 10\n";

    #[test]
    fn every_builtin_scenario_reads() {
        for (name, text) in BUILTIN {
            Scenario::parse(name, text).unwrap();
        }
        assert_eq!(
            builtin_names(true).len() + builtin_names(false).len(),
            BUILTIN.len()
        );
    }

    #[test]
    fn a_misspelt_key_is_refused_naming_it_and_the_valid_ones() {
        let text = RUN.replace("flush =", "flsh =");
        let err = Scenario::parse("typo", &text).unwrap_err().to_string();
        assert!(
            err.contains("mapping.flsh") && err.contains("`flush`"),
            "{err}"
        );
        let text = RUN.replace("ios = 10", "ios = 10\nbogus_key = 1");
        let err = Scenario::parse("typo", &text).unwrap_err().to_string();
        assert!(err.contains("workload.bogus_key"), "{err}");
    }

    #[test]
    fn a_key_of_another_kind_is_refused() {
        let text = RUN.replace("ios = 10", "transactions = 10");
        let err = Scenario::parse("kind", &text).unwrap_err().to_string();
        assert!(
            err.contains("workload.transactions") && err.contains("io_bytes"),
            "{err}"
        );
    }

    #[test]
    fn defaults_and_ranges() {
        let s = Scenario::parse("ok", RUN).unwrap();
        let r = s.run_task().unwrap();
        assert_eq!(r.reserved, Vec::<(u64, u64)>::new());
        assert!(matches!(
            r.flush,
            FlushPolicy::Deferred {
                high_water: 250,
                ..
            }
        ));
        let text = RUN.replace("ios = 10", "ios = 0");
        let err = Scenario::parse("range", &text).unwrap_err().to_string();
        assert!(
            err.contains("workload.ios") && err.contains("1..="),
            "{err}"
        );
    }

    #[test]
    fn json_reads_the_same_schema() {
        let json = r#"{"platform": "intel-vtd-2008-server", "mapping": {"flsh": "deferred"},
                      "workload": {"kind": "block"}}"#;
        let err = Scenario::from_json("dict", json).unwrap_err().to_string();
        assert!(err.contains("mapping.flsh"), "{err}");
    }
}
