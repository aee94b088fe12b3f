//! Scenarios: a platform, the options picked, the DMA-mapping configuration and a workload, in
//! one TOML file (`scenarios/` holds named ones), run to metrics with a breakdown of where the
//! time goes and what protection is left.
//!
//! ```toml
//! platform = "intel-vtd-2008-server"
//! [mapping]
//! translation = "page-table"   # none, passthrough, page-table, tce, direct-window, auto
//! allocator = "segtree"
//! flush = "deferred"           # strict, deferred, per-cpu
//! high_water = 250
//! timeout_us = 10000
//! [workload]
//! kind = "block"               # block, udp-rr, tcp-rr, udp-stream, tcp-stream
//! # mtu_bytes = 9000             # network workloads: the platform's MTU unless set
//! io_bytes = 1024
//! ios = 100000
//! ```

use crate::config::platform::{Picks, Platform};
use crate::dma::{DmaMapper, MapperConfig, MapperStats};
use crate::error::{Result, SimError};
use crate::iommu::flush::FlushPolicy;
use crate::iommu::Translation;
use crate::units::Ps;
use crate::workload::block::{self, IoScenario};
use crate::workload::net::{self, NetWorkload};
use dmalab_iova::AllocatorKind;
use serde::Serialize;
use std::collections::BTreeMap;
use std::ops::RangeInclusive;

/// A scenario, read and checked.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// Its name (the file's stem, or what the caller gave).
    pub name: String,
    /// The platform's name or path.
    pub platform: String,
    /// Options picked for the platform's choices.
    pub choices: Picks,
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

/// What a scenario runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Workload {
    /// Block I/O (or frames from a ring) at a size and queue depth.
    Block(IoScenario),
    /// A two-host network workload.
    Net(NetWorkload),
}

/// Where the time goes, per operation, and what the run leaves exposed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Report {
    /// The scenario's name.
    pub scenario: String,
    /// The platform and its options.
    pub platform: String,
    /// The options in force.
    pub choices: Picks,
    /// The translation used, and why.
    pub translation: Translation,
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
    /// 99th percentile latency, microseconds.
    pub latency_p99_us: f64,
    /// CPU utilization (0 to 1) of the submitting or sending side.
    pub cpu_utilization: f64,
    /// CPU utilization of the other side (network workloads).
    pub peer_cpu_utilization: Option<f64>,
    /// Microseconds per operation, by component.
    pub breakdown_us: BTreeMap<&'static str, f64>,
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

struct Fields<'a> {
    file: &'a str,
    table: &'a toml::Table,
    prefix: &'static str,
}

impl<'a> Fields<'a> {
    fn path(&self, key: &str) -> String {
        if self.prefix.is_empty() {
            key.to_string()
        } else {
            format!("{}.{key}", self.prefix)
        }
    }

    fn invalid(&self, key: &str, value: &toml::Value, valid: &str) -> SimError {
        SimError::InvalidScenario {
            file: self.file.into(),
            field: self.path(key),
            value: value.to_string(),
            valid: valid.into(),
        }
    }

    fn str_or(&self, key: &str, default: &'a str) -> Result<&'a str> {
        match self.table.get(key) {
            None => Ok(default),
            Some(toml::Value::String(s)) => Ok(s),
            Some(v) => Err(self.invalid(key, v, "a string")),
        }
    }

    fn u64_or(&self, key: &str, default: u64, range: RangeInclusive<u64>) -> Result<u64> {
        match self.table.get(key) {
            None => Ok(default),
            Some(v) => v
                .as_integer()
                .and_then(|n| u64::try_from(n).ok())
                .filter(|n| range.contains(n))
                .ok_or_else(|| {
                    self.invalid(
                        key,
                        v,
                        &format!("an integer in {}..={}", range.start(), range.end()),
                    )
                }),
        }
    }

    fn sub(&self, key: &'static str) -> Result<Fields<'a>> {
        match self.table.get(key) {
            Some(toml::Value::Table(t)) => Ok(Fields {
                file: self.file,
                table: t,
                prefix: key,
            }),
            Some(v) => Err(self.invalid(key, v, "a table")),
            None => Err(SimError::InvalidScenario {
                file: self.file.into(),
                field: key.into(),
                value: "missing".into(),
                valid: "a table".into(),
            }),
        }
    }
}

impl Scenario {
    /// Read a scenario from TOML text; `name` names it in errors and reports.
    pub fn parse(name: &str, text: &str) -> Result<Scenario> {
        let root: toml::Table = text
            .parse()
            .map_err(|e: toml::de::Error| SimError::Syntax {
                file: name.into(),
                reason: e.to_string(),
            })?;
        let top = Fields {
            file: name,
            table: &root,
            prefix: "",
        };
        let platform = match root.get("platform") {
            Some(toml::Value::String(s)) => s.clone(),
            Some(v) => return Err(top.invalid("platform", v, "a platform name or file")),
            None => {
                return Err(SimError::InvalidScenario {
                    file: name.into(),
                    field: "platform".into(),
                    value: "missing".into(),
                    valid: "a platform name".into(),
                })
            }
        };
        let mut choices = Picks::new();
        if root.contains_key("choices") {
            let c = top.sub("choices")?;
            for (k, v) in c.table {
                let s = v
                    .as_str()
                    .ok_or_else(|| c.invalid(k, v, "an option name"))?;
                choices.insert(k.clone(), s.to_string());
            }
        }
        let m = top.sub("mapping")?;
        let translation = match m.str_or("translation", "auto")? {
            "auto" => None,
            "none" => Some(Translation::None),
            "passthrough" => Some(Translation::Passthrough),
            "page-table" => Some(Translation::PageTable),
            "tce" => Some(Translation::Tce),
            "direct-window" => Some(Translation::DirectWindow),
            other => {
                let v = toml::Value::String(other.into());
                return Err(m.invalid(
                    "translation",
                    &v,
                    "auto, none, passthrough, page-table, tce, direct-window",
                ));
            }
        };
        let allocator_name = m.str_or("allocator", "segtree")?;
        let allocator = AllocatorKind::parse(allocator_name).map_err(|_| {
            m.invalid(
                "allocator",
                &toml::Value::String(allocator_name.into()),
                &AllocatorKind::NAMES.join(", "),
            )
        })?;
        let high_water = m.u64_or("high_water", 250, 1..=1_000_000)? as usize;
        let timeout = Ps::from_ns(m.u64_or("timeout_us", 10_000, 1..=10_000_000)? * 1000);
        let flush = match m.str_or("flush", "strict")? {
            "strict" => FlushPolicy::Strict,
            "deferred" => FlushPolicy::Deferred {
                high_water,
                timeout,
            },
            "per-cpu" => FlushPolicy::PerCpu {
                high_water,
                timeout,
            },
            other => {
                return Err(m.invalid(
                    "flush",
                    &toml::Value::String(other.into()),
                    "strict, deferred, per-cpu",
                ))
            }
        };
        let window_bytes = m.u64_or("window_bytes", 1 << 32, 1 << 13..=1 << 60)?;
        let dma_mask_bits = m.u64_or("dma_mask_bits", 64, 24..=64)? as u32;
        let reserved = match m.table.get("reserved") {
            // By default a page-table IOMMU keeps the x86 interrupt window out of use.
            None if translation == Some(Translation::PageTable) => vec![(0xFEE0_0000, 0xFEEF_FFFF)],
            None => Vec::new(),
            Some(v) => {
                let pairs = v.as_array().ok_or_else(|| {
                    m.invalid("reserved", v, "a list of [start, end] byte ranges")
                })?;
                let mut out = Vec::new();
                for pair in pairs {
                    let r = pair
                        .as_array()
                        .filter(|a| a.len() == 2)
                        .and_then(|a| {
                            Some((
                                u64::try_from(a[0].as_integer()?).ok()?,
                                u64::try_from(a[1].as_integer()?).ok()?,
                            ))
                        })
                        .filter(|(a, b)| a <= b)
                        .ok_or_else(|| {
                            m.invalid("reserved", pair, "[start, end] with start <= end")
                        })?;
                    out.push(r);
                }
                out
            }
        };
        let w = top.sub("workload")?;
        let kind = w.str_or("kind", "block")?;
        let workload = match kind {
            "block" => Workload::Block(IoScenario {
                io_bytes: w.u64_or("io_bytes", 4096, 1..=1 << 30)?,
                threads: w.u64_or("threads", 1, 1..=1024)? as usize,
                queue_depth: w.u64_or("queue_depth", 1, 1..=65536)? as usize,
                ios: w.u64_or("ios", 100_000, 1..=1 << 40)?,
                buffers: w.u64_or("buffers", 1, 1..=1 << 20)?,
                seed: w.u64_or("seed", 1, 0..=u64::MAX >> 1)?,
            }),
            "udp-rr" | "tcp-rr" | "udp-stream" | "tcp-stream" => {
                let rr = kind.ends_with("-rr");
                let default_bytes = match kind {
                    "udp-stream" => 1472,
                    "tcp-stream" => 65536,
                    _ => 64,
                };
                let instances = w.u64_or("instances", 1, 1..=10_000)?;
                let message_bytes = w.u64_or("message_bytes", default_bytes, 1..=1 << 24)?;
                let count_key = if rr { "transactions" } else { "messages" };
                let count = w.u64_or(count_key, 10_000, 1..=1 << 40)?;
                Workload::Net(match kind {
                    "udp-rr" => NetWorkload::UdpRr {
                        instances,
                        message_bytes,
                        transactions: count,
                    },
                    "tcp-rr" => NetWorkload::TcpRr {
                        instances,
                        message_bytes,
                        transactions: count,
                    },
                    "udp-stream" => NetWorkload::UdpStream {
                        instances,
                        message_bytes,
                        messages: count,
                    },
                    _ => NetWorkload::TcpStream {
                        instances,
                        message_bytes,
                        messages: count,
                    },
                })
            }
            other => {
                return Err(w.invalid(
                    "kind",
                    &toml::Value::String(other.into()),
                    "block, udp-rr, tcp-rr, udp-stream, tcp-stream",
                ))
            }
        };
        Ok(Scenario {
            name: name.to_string(),
            platform,
            choices,
            translation,
            allocator,
            flush,
            window_bytes,
            dma_mask_bits,
            reserved,
            mtu_bytes: match w.table.get("mtu_bytes") {
                None => None,
                Some(_) => Some(w.u64_or("mtu_bytes", 1500, 576..=9000)?),
            },
            workload,
        })
    }

    /// Run the scenario.
    pub fn run(&self) -> Result<Report> {
        let platform = Platform::load(&self.platform, &self.choices)?;
        let (translation, window, window_bytes, offset) =
            match (self.translation, platform.window.as_ref()) {
                (Some(t), _) => (t, None, self.window_bytes, 0),
                (None, Some(w)) => {
                    let c = w.choose();
                    (
                        c.translation,
                        Some(c.reason),
                        w.default_window_bytes,
                        w.direct_offset,
                    )
                }
                (None, None) => (Translation::PageTable, None, self.window_bytes, 0),
            };
        let config = |cpus: usize| MapperConfig {
            translation,
            allocator: self.allocator.clone(),
            window_bytes,
            flush: self.flush,
            cpus,
            dma_mask_bits: self.dma_mask_bits,
            window_offset: offset,
            reserved: self.reserved.clone(),
        };
        let costs = platform.iommu()?.clone();
        let mut b = BTreeMap::new();
        let report = |ops_per_s,
                      bits_per_s,
                      lat: [Ps; 3],
                      cpu,
                      peer,
                      mapper: &DmaMapper,
                      transfers,
                      events,
                      sim: Ps,
                      b| {
            let stats = mapper.stats();
            Report {
                scenario: self.name.clone(),
                platform: platform.name.clone(),
                choices: platform.picks.clone(),
                translation,
                window: window.clone(),
                workload: self.workload,
                ops_per_s,
                bits_per_s,
                latency_mean_us: lat[0].as_us_f64(),
                latency_p50_us: lat[1].as_us_f64(),
                latency_p99_us: lat[2].as_us_f64(),
                cpu_utilization: cpu,
                peer_cpu_utilization: peer,
                breakdown_us: b,
                iotlb_hit_rate: stats.iotlb.hit_rate(),
                mapper: stats,
                dma_transfers: transfers,
                events,
                simulated_us: sim.as_us_f64(),
            }
        };
        match self.workload {
            Workload::Block(s) => {
                let mut mapper = DmaMapper::new(&config(s.threads), costs)?;
                let r = block::run_on_bus(&mut mapper, platform.io()?, s, Some(&platform.bus))?;
                let p = &r.per_io;
                let m = &p.mapping;
                for (k, v) in [
                    ("submit", p.submit_ps),
                    ("complete", p.complete_ps),
                    ("device", p.device_ps),
                    ("translation (IOTLB misses)", p.translation_ps),
                    ("map: IOVA allocation", m.alloc_ps),
                    ("unmap: IOVA free", m.free_ps),
                    ("page-table writes", m.table_ps),
                    ("IOTLB invalidation", m.flush_ps),
                    ("hypervisor calls", m.hcall_ps),
                    ("bounce copies", m.bounce_ps),
                ] {
                    b.insert(k, v.as_us_f64());
                }
                let lat = [r.mean_latency_ps, r.p50_latency_ps, r.p99_latency_ps];
                let ios = s.ios;
                Ok(report(
                    r.iops,
                    r.bytes_per_s * 8.0,
                    lat,
                    r.cpu_utilization,
                    None,
                    &mapper,
                    ios,
                    r.events,
                    r.elapsed_ps,
                    b,
                ))
            }
            Workload::Net(w) => {
                let mut net = platform.net()?.clone();
                if let Some(mtu) = self.mtu_bytes {
                    net.mtu_bytes = mtu;
                }
                let net = &net;
                let cores = usize::try_from(net.cores).unwrap_or(1);
                let mut client = DmaMapper::new(&config(cores), costs.clone())?;
                let mut server = DmaMapper::new(&config(cores), costs)?;
                let r = net::run_on_bus(net, &mut client, &mut server, w, Some(&platform.bus))?;
                let n = (r.per_second * r.elapsed_ps.0 as f64 / 1e12).max(1.0);
                let sides = [
                    (
                        [
                            "client IOVA allocation and free",
                            "client hypervisor calls",
                            "client page tables and IOTLB",
                            "client table-lock wait",
                            "client stack (per message)",
                            "client driver (per frame)",
                            "client link (NIC DMA)",
                        ],
                        r.client_mapping,
                        [
                            r.client_lock_wait_ps,
                            r.client_stack_ps,
                            r.client_driver_ps,
                            r.client_bus_ps,
                        ],
                    ),
                    (
                        [
                            "server IOVA allocation and free",
                            "server hypervisor calls",
                            "server page tables and IOTLB",
                            "server table-lock wait",
                            "server stack (per message)",
                            "server driver (per frame)",
                            "server link (NIC DMA)",
                        ],
                        r.server_mapping,
                        [
                            r.server_lock_wait_ps,
                            r.server_stack_ps,
                            r.server_driver_ps,
                            r.server_bus_ps,
                        ],
                    ),
                ];
                for (keys, m, [lock, stack, driver, link]) in sides {
                    let times = [
                        m.alloc_ps + m.free_ps,
                        m.hcall_ps,
                        m.flush_ps + m.table_ps,
                        lock,
                        stack,
                        driver,
                        link,
                    ];
                    for (key, v) in keys.into_iter().zip(times) {
                        b.insert(key, v.0 as f64 / 1e6 / n);
                    }
                }
                let lat = [r.mean_latency_ps, r.p50_latency_ps, r.p99_latency_ps];
                let transfers = client.stats().maps + server.stats().maps;
                let (cpu, peer) = (r.client_cpu_utilization, Some(r.server_cpu_utilization));
                Ok(report(
                    r.per_second,
                    r.bits_per_s,
                    lat,
                    cpu,
                    peer,
                    &server,
                    transfers,
                    r.events,
                    r.elapsed_ps,
                    b,
                ))
            }
        }
    }
}

/// The scenarios built into dmalab (the repository's `scenarios/` files that run workloads).
pub const BUILTIN: &[(&str, &str)] = &[
    (
        "p3-rbtree-deferred",
        include_str!("../../../scenarios/p3-rbtree-deferred.toml"),
    ),
    (
        "p3-bitmap-strict",
        include_str!("../../../scenarios/p3-bitmap-strict.toml"),
    ),
    (
        "p3-segtree-deferred",
        include_str!("../../../scenarios/p3-segtree-deferred.toml"),
    ),
    (
        "p0-udp-rr-default-window",
        include_str!("../../../scenarios/p0-udp-rr-default-window.toml"),
    ),
    (
        "p0-udp-rr-direct-window",
        include_str!("../../../scenarios/p0-udp-rr-direct-window.toml"),
    ),
];

/// A built-in scenario by name, or the scenario file at that path.
pub fn load(name_or_path: &str) -> Result<Scenario> {
    if let Some((n, text)) = BUILTIN.iter().find(|(n, _)| *n == name_or_path) {
        return Scenario::parse(n, text);
    }
    let path = std::path::Path::new(name_or_path);
    if !path.exists() {
        let known = BUILTIN
            .iter()
            .map(|(n, _)| *n)
            .collect::<Vec<_>>()
            .join(", ");
        return Err(SimError::InvalidArgument {
            field: "scenario".into(),
            value: name_or_path.into(),
            valid: format!("a scenario file or one of: {known}"),
        });
    }
    let text = std::fs::read_to_string(path).map_err(|e| SimError::FileRead {
        file: name_or_path.into(),
        reason: e.to_string(),
    })?;
    let stem = path
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or(name_or_path);
    Scenario::parse(stem, &text)
}
