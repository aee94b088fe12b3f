//! Platforms: one TOML file per machine (in the repository's `platforms/`, built into the
//! binary), read into typed, range-checked models, with every parameter's provenance kept so
//! that `dmalab reproduce` can list what was fitted.

use crate::bus::device::{DeviceEngine, DeviceRating};
use crate::bus::hints::{HintChange, Mapping};
use crate::bus::lba::{LbaParams, ReadContext};
use crate::bus::memory::MemoryPath;
use crate::bus::nic_send::NicTxParams;
use crate::bus::ordering::OrderingParams;
use crate::bus::pci::{PciBus, PciParams};
use crate::bus::pcie::{PcieLink, PcieParams, TenBitTags};
use crate::bus::pcix::{PciXBus, PciXParams};
use crate::bus::scsi_ctl::ScsiTxParams;
use crate::bus::trace::{Direction, Trace, MAX_TRACE_BYTES};
use crate::bus::Bus;
use crate::config::costs::{
    CpuCopyCosts, EngineCosts, EngineHostSide, IoCosts, NetCosts, StreamParams, VhostCosts,
};
use crate::config::device::{self, DeviceKind};
use crate::config::params::{ParamReader, ParamRecord, Span};
use crate::dma::MapCosts;
use crate::error::{invalid_arg, Result, SimError};
use crate::iommu::walk::IommuHw;
use crate::iommu::window::WindowParams;
use crate::units::{BusAddr, Ps};
use std::collections::BTreeMap;
use std::path::Path;

/// The platform files built into dmalab, by name.
pub const BUILTIN: &[(&str, &str)] = &[
    (
        "ibm-p660-m2plus",
        include_str!("../../../../platforms/ibm-p660-m2plus.toml"),
    ),
    (
        "pcie-gen3-x8-server",
        include_str!("../../../../platforms/pcie-gen3-x8-server.toml"),
    ),
    (
        "intel-vtd-2008-server",
        include_str!("../../../../platforms/intel-vtd-2008-server.toml"),
    ),
    (
        "powerlinux-7r2",
        include_str!("../../../../platforms/powerlinux-7r2.toml"),
    ),
    (
        "xeon-8180-cbdma",
        include_str!("../../../../platforms/xeon-8180-cbdma.toml"),
    ),
    (
        "xeon-spr-dsa",
        include_str!("../../../../platforms/xeon-spr-dsa.toml"),
    ),
    (
        "xeon-broadwell-2s",
        include_str!("../../../../platforms/xeon-broadwell-2s.toml"),
    ),
    (
        "epyc-rome-2s",
        include_str!("../../../../platforms/epyc-rome-2s.toml"),
    ),
    (
        "grace-2s",
        include_str!("../../../../platforms/grace-2s.toml"),
    ),
    (
        "hp-rx2600-zx1",
        include_str!("../../../../platforms/hp-rx2600-zx1.toml"),
    ),
    (
        "arm-morello",
        include_str!("../../../../platforms/arm-morello.toml"),
    ),
    (
        "hisilicon-kunpeng920-2s",
        include_str!("../../../../platforms/hisilicon-kunpeng920-2s.toml"),
    ),
];

/// Choices of options by choice name, such as `firmware = "2001"`.
pub type Picks = BTreeMap<String, String>;

thread_local! {
    /// Draws for every load of one platform on this thread, while [`with_draws`] runs.
    static AMBIENT: std::cell::RefCell<Option<(String, Draws)>> =
        const { std::cell::RefCell::new(None) };
}

/// Run `f` with every load of the platform `name` on this thread (by its built-in name or the
/// path it is loaded by, without explicit draws of its own) reading `draws` in place of its
/// files' values: for code that loads a platform deep inside, such as a claim's measurement.
/// The draws end with `f`, even if it panics.
pub fn with_draws<R>(name: &str, draws: Draws, f: impl FnOnce() -> R) -> R {
    struct Reset(Option<(String, Draws)>);
    impl Drop for Reset {
        fn drop(&mut self) {
            let before = self.0.take();
            AMBIENT.with(|a| *a.borrow_mut() = before);
        }
    }
    let before = AMBIENT.with(|a| a.borrow_mut().replace((name.to_string(), draws)));
    let _reset = Reset(before);
    f()
}

/// Values drawn from parameters' ranges, by dotted path (such as `device_dma.setup_ns`), read
/// in place of the files' values.
pub type Draws = BTreeMap<String, toml::Value>;

/// A machine, read from its platform file with the options picked for its choices.
#[derive(Clone, Debug)]
pub struct Platform {
    /// The platform's name (the file's stem).
    pub name: String,
    /// What machine this is, in a line.
    pub description: String,
    /// The device on the bus, by name, where the file names one.
    pub device: Option<String>,
    /// The bus the device sits on.
    pub bus: Bus,
    /// The TCP-stream workload's parameters, where the platform describes one.
    pub stream: Option<StreamParams>,
    /// The DMA-mapping layer's costs, where the platform has an IOMMU section.
    pub iommu: Option<MapCosts>,
    /// The IOMMU's translation hardware (IOTLB, walk caches, walkers).
    pub iommu_hw: Option<IommuHw>,
    /// The I/O path's host and device costs, where the platform describes them.
    pub io: Option<IoCosts>,
    /// Host, NIC and network costs of network workloads.
    pub net: Option<NetCosts>,
    /// DMA window setup (POWER partitions).
    pub window: Option<WindowParams>,
    /// The CPU's copy costs.
    pub copy: Option<CpuCopyCosts>,
    /// A copy engine's costs.
    pub dma_engine: Option<EngineCosts>,
    /// A vhost backend's own costs.
    pub vhost: Option<VhostCosts>,
    /// The memory path behind the root complex, in cache lines.
    pub memory: Option<MemoryPath>,
    /// The device's own DMA engine.
    pub device_dma: Option<DeviceEngine>,
    /// What the device's datasheet promises, where its file says.
    pub device_rating: Option<DeviceRating>,
    /// What the copy engine's datasheet promises (its file's `[device_rating]`), if it states it.
    pub engine_rating: Option<DeviceRating>,
    /// The device's own link generation and width before training (a device from a device
    /// file).
    pub device_link: Option<(u64, u64)>,
    /// A NIC's send path through a hinted host bridge.
    pub nic_tx: Option<NicTxParams>,
    /// A SCSI controller's write path through a hinted host bridge.
    pub scsi_tx: Option<ScsiTxParams>,
    /// How the root complex orders a device's inbound TLPs.
    pub pcie_ordering: Option<OrderingParams>,
    /// The hinted PCI host bridge (the ZX1's bus adapter) whose DMA hints apply to the
    /// device's reads, on whichever bus the device sits.
    pub hint_bridge: Option<LbaParams>,
    /// What the PCIe link's two ends state of 10-bit tags (none on other buses).
    pub ten_bit_tags: TenBitTags,
    /// Every parameter read, with its provenance.
    pub params: Vec<ParamRecord>,
    /// The options in force, one per choice the file offers.
    pub picks: Picks,
}

impl Platform {
    /// The names of the built-in platforms.
    pub fn builtin_names() -> Vec<&'static str> {
        BUILTIN.iter().map(|(n, _)| *n).collect()
    }

    /// The TOML text of the built-in platform `name` (to derive a platform file from it), or
    /// an error listing the built-in names.
    pub fn builtin_text(name: &str) -> Result<&'static str> {
        builtin_text(name)
    }

    /// A built-in platform by name.
    pub fn builtin(name: &str, picks: &Picks) -> Result<Platform> {
        let text = builtin_text(name)?;
        Self::parse(name, text, picks)
    }

    /// For a built-in platform: no picks (all defaults), then one pick per option of every
    /// choice, so that every parameter any option sets is read once.
    pub fn all_option_picks(name: &str) -> Result<Vec<Picks>> {
        let text = builtin_text(name)?;
        let root = parse_toml(name, text)?;
        let mut out = vec![Picks::new()];
        if let Some(toml::Value::Table(choices)) = root.get("choices") {
            for (choice, spec) in choices {
                if let Some(toml::Value::Table(options)) = spec.get("options") {
                    for option in options.keys() {
                        out.push(Picks::from([(choice.clone(), option.clone())]));
                    }
                }
            }
        }
        Ok(out)
    }

    /// A built-in platform by name, or else the platform file at that path; or `HOST+DEVICE`,
    /// a host (a built-in name or a file) with a device (a built-in device or a device file) in
    /// its PCIe slot ([`crate::config::device`]), named so in reports.
    pub fn load(name_or_path: &str, picks: &Picks) -> Result<Platform> {
        Self::load_drawn(name_or_path, picks, &Draws::new())
    }

    /// As [`Platform::load`], with the values in `draws` (dotted path to value) read in place
    /// of the files': the platform with some parameters drawn from their ranges. A path that
    /// names no parameter of the platform is refused.
    pub fn load_drawn(name_or_path: &str, picks: &Picks, draws: &Draws) -> Result<Platform> {
        if let Some((host, devs)) = split_host_device(name_or_path) {
            let mut tables = Vec::new();
            for dev in split_devices(devs) {
                tables.push((dev, device::load_device(dev)?));
            }
            return Self::with_devices_drawn(host, &tables, picks, draws);
        }
        let text = host_text(name_or_path)?;
        Self::parse_drawn(name_or_path, &text, picks, draws)
    }

    /// The host `host` (a built-in name or a file) with the device `dev` (a built-in device
    /// or a device file) in its slot for that kind of device, named `HOST+DEVICE`.
    pub fn load_with_device(host: &str, dev: &str, picks: &Picks) -> Result<Platform> {
        Self::load_with_device_table(host, dev, &device::load_device(dev)?, picks)
    }

    /// The host `host` with the device file `table` (read from `dev`) in its slot.
    pub fn load_with_device_table(
        host: &str,
        dev: &str,
        table: &toml::Table,
        picks: &Picks,
    ) -> Result<Platform> {
        Self::with_devices_drawn(host, &[(dev, table.clone())], picks, &Draws::new())
    }

    /// The host with each of `devices` in its slot (at most one per kind); a slot no device
    /// names keeps the host's default.
    fn with_devices_drawn(
        host: &str,
        devices: &[(&str, toml::Table)],
        picks: &Picks,
        draws: &Draws,
    ) -> Result<Platform> {
        let text = host_text(host)?;
        let mut root = parse_toml(host, &text)?;
        let mut names = Vec::new();
        let mut filled = Vec::new();
        let mut attached = Vec::new();
        for (dev, table) in devices {
            let kind = device::device_kind(table);
            if filled.contains(&kind) {
                return Err(SimError::NotDescribed {
                    platform: host.to_string(),
                    what: format!(
                        "a second {} slot (for {dev}): name one device of each kind",
                        kind.name()
                    ),
                });
            }
            filled.push(kind);
            device::attach_any(&mut root, host, table, dev)?;
            attached.push((kind, dev.to_string()));
            names.push(
                table
                    .get("name")
                    .and_then(toml::Value::as_str)
                    .unwrap_or(dev),
            );
        }
        attached.extend(attach_defaults(&mut root, host)?);
        let mut p = Self::from_root(host, &root, picks, draws)
            .map_err(|e| blame_device(e, host, &attached))?;
        for n in names {
            p.name = format!("{}+{n}", p.name);
        }
        Ok(p)
    }

    /// Read a platform from the text of its file; `file` names it in errors. A host file that
    /// names a `default_device` gets that device in its PCIe slot, and one that names a
    /// `default_copy_engine` that engine in its copy-engine slot.
    pub fn parse(file: &str, text: &str, picks: &Picks) -> Result<Platform> {
        Self::parse_drawn(file, text, picks, &Draws::new())
    }

    fn parse_drawn(file: &str, text: &str, picks: &Picks, draws: &Draws) -> Result<Platform> {
        let mut root = parse_toml(file, text)?;
        let attached = attach_defaults(&mut root, file)?;
        Self::from_root(file, &root, picks, draws).map_err(|e| blame_device(e, file, &attached))
    }

    /// Read a platform from its file's table, with `draws` in place of the file's values.
    fn from_root(file: &str, root: &toml::Table, picks: &Picks, draws: &Draws) -> Result<Platform> {
        let ambient = AMBIENT.with(|a| {
            a.borrow()
                .as_ref()
                .filter(|(name, _)| name == file && draws.is_empty())
                .map(|(_, d)| d.clone())
        });
        let draws = ambient.as_ref().unwrap_or(draws);
        let mut r = ParamReader::new(file, root, picks)?.with_draws(draws);
        let name = r.text("name")?;
        let description = r.text("description")?;
        let device = if r.has_table("device") {
            Some(r.text("device.name")?)
        } else {
            None
        };
        let mut memory = section(&mut r, "memory", MemoryPath::read)?;
        let kind = r.text("bus.kind")?;
        let derived_latency = memory.as_ref().map(MemoryPath::one_line_read_ns);
        let bus = match kind.as_str() {
            "pci" => Bus::Pci(PciBus::new(PciParams::read(&mut r, "bus.pci", "device")?)),
            "pci-x" => Bus::PciX(PciXBus::new(PciXParams::read(&mut r, "bus.pcix")?)?),
            "pcie" => Bus::Pcie(PcieLink::new(PcieParams::read(
                &mut r,
                "bus.pcie",
                derived_latency,
            )?)?),
            other => {
                let value = toml::Value::String(other.into());
                return Err(r.invalid("bus.kind", &value, "pci, pci-x, pcie"));
            }
        };
        // Where an option can move the device to another bus, the sections of the buses it is
        // not on are still checked, and the ZX1's bus adapter, which carries the DMA hints for
        // every bus of the machine, is read from the PCI section. Otherwise a section of
        // another bus is refused as unread.
        let movable = offers_bus_choice(root);
        let hint_bridge = match &bus {
            Bus::Pci(b) => b.params().lba,
            _ if movable && r.has_table("bus.pci") => {
                PciParams::read(&mut r, "bus.pci", "device")?.lba
            }
            _ => None,
        };
        if movable && !matches!(bus, Bus::PciX(_)) && r.has_table("bus.pcix") {
            PciXBus::new(PciXParams::read(&mut r, "bus.pcix")?)?;
        }
        if let Some(m) = memory.as_mut() {
            if !matches!(bus, Bus::Pcie(_)) {
                let value = toml::Value::String(kind.clone());
                return Err(r.invalid(
                    "bus.kind",
                    &value,
                    "pcie (a [memory] section needs a PCIe link)",
                ));
            }
            m.line_bytes = bus.cache_line_bytes();
        }
        let ten_bit_tags = match &bus {
            Bus::Pcie(_) => TenBitTags::read(&mut r, "bus.pcie")?,
            _ => TenBitTags::default(),
        };
        let device_dma = section(&mut r, "device_dma", DeviceEngine::read)?;
        let device_rating = section(&mut r, "device_rating", DeviceRating::read)?;
        let engine_rating = section(&mut r, "engine_rating", DeviceRating::read)?;
        let device_link = if r.has_table("device_link") {
            Some((
                r.u64("device_link.generation", 1..=6)?,
                r.u64("device_link.lanes", 1..=32)?,
            ))
        } else {
            None
        };
        let stream = section(&mut r, "stream", StreamParams::read)?;
        let iommu_hw = section(&mut r, "iommu_hw", IommuHw::read)?;
        let iommu = if r.has_table("iommu") {
            let llc_ns = memory.as_ref().map_or(0, |m| m.llc_ns);
            let hw = iommu_hw.as_ref().map(|h| (h, llc_ns));
            Some(MapCosts::read_with(&mut r, "iommu", hw)?)
        } else {
            None
        };
        let io = section(&mut r, "io", IoCosts::read)?;
        let net = section(&mut r, "net", NetCosts::read)?;
        let window = section(&mut r, "window", WindowParams::read)?;
        let copy = section(&mut r, "copy", CpuCopyCosts::read)?;
        // A host's `[dma_engine]` holds the core's side of a copy engine; the engine's own keys
        // come with the engine in its slot. Without one, the core's side is still checked.
        let dma_engine = if r.has_table("dma_engine") && !engine_in_slot(root) {
            EngineHostSide::read(&mut r, "dma_engine")?;
            None
        } else {
            section(&mut r, "dma_engine", EngineCosts::read)?
        };
        let vhost = section(&mut r, "vhost", VhostCosts::read)?;
        let nic_tx = section(&mut r, "nic_tx", NicTxParams::read)?;
        let scsi_tx = section(&mut r, "scsi_tx", ScsiTxParams::read)?;
        let pcie_ordering = section(&mut r, "pcie_ordering", OrderingParams::read)?;
        r.refuse_unread()?;
        let picks = effective_picks(root, picks);
        Ok(Platform {
            name,
            description,
            device,
            bus,
            stream,
            iommu,
            iommu_hw,
            io,
            net,
            window,
            copy,
            dma_engine,
            vhost,
            memory,
            device_dma,
            device_rating,
            engine_rating,
            device_link,
            nic_tx,
            scsi_tx,
            pcie_ordering,
            hint_bridge,
            ten_bit_tags,
            params: r.into_records(),
            picks,
        })
    }

    /// The analyzer's trace of one DMA transfer on this platform's bus.
    /// At most [`MAX_TRACE_BYTES`] bytes: a trace keeps every command.
    pub fn trace(&self, direction: Direction, addr: BusAddr, len_bytes: u64) -> Result<Trace> {
        check_trace_length(len_bytes)?;
        self.bus.transfer(direction, addr, len_bytes)
    }

    /// [`Platform::trace`] through a hinted host bridge: the read's mapping kind, a change to
    /// the firmware's hints, and PIO writes reaching the bridge at the given nanoseconds from
    /// the transfer's start. A platform without such a bridge refuses a hint change or PIO
    /// writes rather than ignore them.
    pub fn trace_hinted(
        &self,
        direction: Direction,
        addr: BusAddr,
        len_bytes: u64,
        mapping: Mapping,
        change: &HintChange,
        pio_writes_ns: &[u64],
    ) -> Result<Trace> {
        let hinted = match &self.bus {
            Bus::Pci(b) => b.params().lba.map(|l| (b, l)),
            _ => None,
        };
        let Some((bus, lba)) = hinted else {
            if change.is_empty() && pio_writes_ns.is_empty() {
                return self.trace(direction, addr, len_bytes);
            }
            let what = if self.hint_bridge.is_some() {
                "the device on its hinted PCI bus (traced hints act on PCI only; pick the PCI slot)"
            } else {
                "a PCI host bridge with DMA hints ([bus.pci.lba])"
            };
            return Err(SimError::NotDescribed {
                platform: self.name.clone(),
                what: what.into(),
            });
        };
        let mut table = lba.firmware_table();
        change.apply(&mut table, mapping)?;
        if pio_writes_ns.windows(2).any(|w| w[0] > w[1]) {
            return Err(invalid_arg(
                "pio_writes_ns",
                format!("{pio_writes_ns:?}"),
                "ascending times",
            ));
        }
        let pio: Vec<Ps> = pio_writes_ns.iter().map(|&n| Ps::from_ns(n)).collect();
        let ctx = ReadContext {
            mapping,
            hints: &table,
            pio_writes: &pio,
        };
        check_trace_length(len_bytes)?;
        bus.transfer_with(direction, addr, len_bytes, Some(&ctx))
    }

    /// `part`, or an error naming `what` the platform lacks.
    fn need<'a, T>(&self, part: &'a Option<T>, what: &str) -> Result<&'a T> {
        part.as_ref().ok_or_else(|| SimError::NotDescribed {
            platform: self.name.clone(),
            what: what.into(),
        })
    }

    /// The parameters that state a range and are not read off a host (assumed, fitted, or
    /// cited to a stated precision): what intervals sample.
    pub fn uncertain_params(&self) -> Vec<&ParamRecord> {
        self.params.iter().filter(|r| r.is_uncertain()).collect()
    }

    /// One [`Draws`] per row of `design` (quantiles in `[0, 1)`, one column per name of
    /// `fields`): each field's value at that quantile of its span (see [`Span`]). Errors name
    /// a field this platform does not read, one without a range, or a row of the wrong width.
    pub fn draws(&self, fields: &[String], design: &[Vec<f64>], span: Span) -> Result<Vec<Draws>> {
        let recs = fields
            .iter()
            .map(|f| {
                let rec = self.params.iter().rev().find(|r| &r.field == f);
                rec.filter(|r| r.range.is_some()).ok_or_else(|| {
                    crate::error::invalid_arg(
                        "fields",
                        f,
                        format!("a parameter of {} that states a range", self.name),
                    )
                })
            })
            .collect::<Result<Vec<_>>>()?;
        design
            .iter()
            .enumerate()
            .map(|(i, row)| {
                if row.len() != recs.len() {
                    let what = format!("{} quantiles, one per field", recs.len());
                    return Err(crate::error::invalid_arg(
                        &format!("design[{i}]"),
                        row.len(),
                        what,
                    ));
                }
                let mut d = Draws::new();
                for (rec, u) in recs.iter().zip(row) {
                    if let Some(v) = rec.draw(*u, span) {
                        d.insert(rec.field.clone(), v);
                    }
                }
                Ok(d)
            })
            .collect()
    }

    /// The parameters that are fitted or assumed rather than cited.
    pub fn uncited_params(&self) -> Vec<&ParamRecord> {
        self.params
            .iter()
            .filter(|p| !p.provenance.is_cited())
            .collect()
    }

    /// The IOMMU costs, or an error naming what is missing.
    pub fn iommu(&self) -> Result<&MapCosts> {
        self.need(&self.iommu, "an IOMMU ([iommu])")
    }

    /// The I/O path's costs, or an error naming what is missing.
    pub fn io(&self) -> Result<&IoCosts> {
        self.need(&self.io, "an I/O path ([io])")
    }

    /// The network costs, or an error naming what is missing.
    pub fn net(&self) -> Result<&NetCosts> {
        self.need(&self.net, "network costs ([net])")
    }

    /// The DMA window setup, or an error naming what is missing.
    pub fn window(&self) -> Result<&WindowParams> {
        self.need(&self.window, "DMA windows ([window])")
    }

    /// The copying core's costs, or an error naming what is missing.
    pub fn cpu_copy(&self) -> Result<&CpuCopyCosts> {
        self.need(&self.copy, "CPU copy costs ([copy])")
    }

    /// The CPU copy costs and the copy engine's, or an error naming what is missing.
    pub fn copy_costs(&self) -> Result<(&CpuCopyCosts, &EngineCosts)> {
        Ok((
            self.cpu_copy()?,
            self.need(
                &self.dma_engine,
                "a copy engine (a copy-engine device: --device intel-dsa-spr, or HOST+ENGINE)",
            )?,
        ))
    }

    /// The vhost backend's costs, or an error naming what is missing.
    pub fn vhost(&self) -> Result<&VhostCosts> {
        self.need(&self.vhost, "a vhost backend ([vhost])")
    }

    /// The PCIe link, the memory path and the device's DMA engine that `bench dma` needs, or
    /// an error naming what is missing.
    pub fn device_dma_path(&self) -> Result<(&PcieLink, &MemoryPath, &DeviceEngine)> {
        let Bus::Pcie(link) = &self.bus else {
            return Err(SimError::NotDescribed {
                platform: self.name.clone(),
                what: "a PCIe link ([bus] kind = \"pcie\")".into(),
            });
        };
        Ok((
            link,
            self.need(&self.memory, "a memory path ([memory])")?,
            self.need(&self.device_dma, "a device DMA engine ([device_dma])")?,
        ))
    }

    /// The stream workload's parameters, or an error naming what is missing.
    pub fn stream(&self) -> Result<&StreamParams> {
        self.need(&self.stream, "a TCP stream workload ([stream])")
    }
}

/// Whether an option of one of the file's choices sets `bus.kind`.
fn offers_bus_choice(root: &toml::Table) -> bool {
    let Some(toml::Value::Table(choices)) = root.get("choices") else {
        return false;
    };
    choices.values().any(|choice| {
        choice
            .get("options")
            .and_then(toml::Value::as_table)
            .is_some_and(|options| {
                options
                    .values()
                    .any(|o| o.as_table().is_some_and(|o| o.contains_key("bus.kind")))
            })
    })
}

/// The text of the built-in platform `name`, or an error listing the built-in names.
fn builtin_text(name: &str) -> Result<&'static str> {
    BUILTIN
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, text)| *text)
        .ok_or_else(|| SimError::UnknownPlatform {
            name: name.to_string(),
            known: Platform::builtin_names().join(", "),
        })
}

/// A host's file text: a built-in platform's, or the file's at that path.
fn host_text(name_or_path: &str) -> Result<String> {
    if let Ok(text) = builtin_text(name_or_path) {
        return Ok(text.to_string());
    }
    let path = Path::new(name_or_path);
    if !path.exists() {
        return Err(SimError::UnknownPlatform {
            name: name_or_path.to_string(),
            known: Platform::builtin_names().join(", "),
        });
    }
    std::fs::read_to_string(path).map_err(|e| SimError::FileRead {
        file: name_or_path.to_string(),
        reason: e.to_string(),
    })
}

/// A host file's `default_device`: a built-in device, or a device file's path, which a
/// relative path names from the host file's folder (where `dmalab inspect` writes both).
fn beside(host_file: &str, dev: &str) -> String {
    if device::is_device(dev) || Path::new(dev).is_absolute() {
        return dev.to_string();
    }
    match Path::new(host_file).parent() {
        Some(dir) if dir.join(dev).is_file() => dir.join(dev).to_string_lossy().into_owned(),
        _ => dev.to_string(),
    }
}

/// Attach the devices a host file names by default (`default_device`, `default_copy_engine`)
/// to the slots no named device has taken (attaching removes the key); returns each device
/// attached, with its kind.
fn attach_defaults(root: &mut toml::Table, file: &str) -> Result<Vec<(DeviceKind, String)>> {
    let mut attached = Vec::new();
    for key in ["default_device", "default_copy_engine"] {
        if let Some(toml::Value::String(dev)) = root.get(key).cloned() {
            let dev = beside(file, &dev);
            let table = device::load_device(&dev)?;
            device::attach_any(root, file, &table, &dev)?;
            attached.push((device::device_kind(&table), dev));
        }
    }
    Ok(attached)
}

/// An unknown key in a table that an attached device brought (its `[device_rating]`, say)
/// names the device's file, not the host's: the user fixes it there.
fn blame_device(e: SimError, host: &str, attached: &[(DeviceKind, String)]) -> SimError {
    match e {
        SimError::UnknownKey { file, key, valid } if file == host => {
            let table = key.split('.').next().unwrap_or_default();
            let file = attached
                .iter()
                .find(|(kind, _)| kind.tables().contains(&table))
                .map_or(file, |(_, dev)| {
                    format!("{dev} (the device attached to {host})")
                });
            SimError::UnknownKey { file, key, valid }
        }
        other => other,
    }
}

/// Whether a copy engine's own keys are in the host's `[dma_engine]` (an engine in its slot,
/// or a host file that states them itself).
fn engine_in_slot(root: &toml::Table) -> bool {
    root.get("dma_engine")
        .and_then(toml::Value::as_table)
        .is_some_and(|t| device::ENGINE_KEYS.iter().any(|k| t.contains_key(*k)))
}

/// The devices of `A+B`: split at each `+`, unless the whole is one built-in device or file.
fn split_devices(devs: &str) -> Vec<&str> {
    if device::is_device(devs) {
        vec![devs]
    } else {
        devs.split('+').collect()
    }
}

/// `HOST+DEVICE` split at the first `+` whose left side is a built-in platform or a file,
/// unless the whole is itself a built-in name or a file.
fn split_host_device(name: &str) -> Option<(&str, &str)> {
    let is_host = |h: &str| BUILTIN.iter().any(|(n, _)| *n == h) || Path::new(h).is_file();
    if is_host(name) {
        return None;
    }
    name.match_indices('+')
        .map(|(i, _)| (&name[..i], &name[i + 1..]))
        .find(|(host, _)| is_host(host))
}

/// The TOML table of a file's text, or a syntax error naming the file.
fn parse_toml(file: &str, text: &str) -> Result<toml::Table> {
    text.parse().map_err(|e: toml::de::Error| SimError::Syntax {
        file: file.to_string(),
        reason: e.to_string(),
    })
}

/// Read the optional section `name` with `read`, if the file has it.
fn section<T>(
    r: &mut ParamReader<'_>,
    name: &str,
    read: fn(&mut ParamReader<'_>, &str) -> Result<T>,
) -> Result<Option<T>> {
    if r.has_table(name) {
        read(r, name).map(Some)
    } else {
        Ok(None)
    }
}

/// The options in force: those picked, and each other choice's default.
fn effective_picks(root: &toml::Table, picks: &Picks) -> Picks {
    let mut out = Picks::new();
    if let Some(toml::Value::Table(choices)) = root.get("choices") {
        for (name, choice) in choices {
            let default = choice
                .get("default")
                .and_then(toml::Value::as_str)
                .unwrap_or_default();
            out.insert(
                name.clone(),
                picks
                    .get(name)
                    .cloned()
                    .unwrap_or_else(|| default.to_string()),
            );
        }
    }
    out
}

/// Parse `name=option` pairs (as given on a command line) into picks.
pub fn parse_picks<'a>(pairs: impl IntoIterator<Item = &'a str>) -> Result<Picks> {
    let mut picks = Picks::new();
    for pair in pairs {
        let (k, v) = pair
            .split_once('=')
            .filter(|(k, v)| !k.is_empty() && !v.is_empty())
            .ok_or_else(|| invalid_arg("choice", pair, "NAME=OPTION, such as firmware=2001"))?;
        picks.insert(k.to_string(), v.to_string());
    }
    Ok(picks)
}

/// A trace's length must be 1..=[`MAX_TRACE_BYTES`].
fn check_trace_length(len_bytes: u64) -> Result<()> {
    if (1..=MAX_TRACE_BYTES).contains(&len_bytes) {
        return Ok(());
    }
    let valid = format!(
        "1..={MAX_TRACE_BYTES} (2^24: a trace lists every command; a longer transfer runs as a \
         workload with `dmalab run`)"
    );
    Err(invalid_arg("length_bytes", len_bytes, valid))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_platform_loads_under_every_option() {
        for name in Platform::builtin_names() {
            for picks in Platform::all_option_picks(name).unwrap() {
                let p = Platform::builtin(name, &picks).unwrap();
                assert_eq!(p.name, name);
                assert!(!p.params.is_empty());
            }
        }
    }

    #[test]
    fn an_option_moves_the_device_to_another_bus() {
        let zx1 = |slot: &str| {
            let picks = Picks::from([("slot".to_string(), slot.to_string())]);
            Platform::builtin("hp-rx2600-zx1", &picks).unwrap()
        };
        let (pci, pcix) = (zx1("pci"), zx1("pci-x"));
        assert!(matches!(pci.bus, Bus::Pci(_)) && matches!(pcix.bus, Bus::PciX(_)));
        // The bridge's hints apply on either bus.
        assert_eq!(pci.hint_bridge, pcix.hint_bridge);
        assert!(pcix.hint_bridge.is_some());
        assert!(pcix
            .device
            .as_deref()
            .is_some_and(|d| d.contains("BCM5704S")));
        // The bus kind an option sets is a parameter with its provenance and option.
        let kind = pcix.params.iter().find(|p| p.field == "bus.kind").unwrap();
        assert_eq!(kind.option.as_deref(), Some("slot=pci-x"));
        assert!(!pci.params.iter().any(|p| p.field == "bus.kind"));
        // A bad value names the field.
        let text = builtin_text("hp-rx2600-zx1").unwrap().replace(
            "\"bus.kind\" = { value = \"pci-x\"",
            "\"bus.kind\" = { value = \"isa\"",
        );
        let picks = Picks::from([("slot".to_string(), "pci-x".to_string())]);
        let err = Platform::parse("zx1.toml", &text, &picks).unwrap_err();
        assert!(err.to_string().contains("bus.kind"), "{err}");
    }

    #[test]
    fn another_bus_section_is_refused_without_a_choice_to_use_it() {
        let text = builtin_text("hp-rx2600-zx1").unwrap();
        let cut = text.find("[choices.slot]").unwrap();
        let end = text.find("[device]").unwrap();
        let without_choice = format!("{}{}", &text[..cut], &text[end..]);
        let err = Platform::parse("zx1.toml", &without_choice, &Picks::new()).unwrap_err();
        assert!(err.to_string().contains("bus.pcix"), "{err}");
    }

    #[test]
    fn a_misspelt_parameter_is_refused() {
        let text = BUILTIN[0].1.replace(
            "[bus.pci]\n",
            "[bus.pci]\nbogus_ns = { value = 1, assumed = \"x\" }\n",
        );
        let err = Platform::parse("typo.toml", &text, &Picks::new()).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("`bus.pci.bogus_ns`") && msg.contains("clock_hz"),
            "{msg}"
        );
    }

    #[test]
    fn unknown_platforms_and_bad_picks_are_named() {
        let err = Platform::load("no-such-machine", &Picks::new()).unwrap_err();
        assert!(err.to_string().contains("ibm-p660-m2plus"), "{err}");
        assert!(parse_picks(["firmware"]).is_err());
        let picks = parse_picks(["firmware=1999"]).unwrap();
        let err = Platform::builtin("ibm-p660-m2plus", &picks).unwrap_err();
        assert!(err.to_string().contains("valid: 020910, 2001"), "{err}");
    }

    #[test]
    fn errors_name_the_field_and_range() {
        let text = BUILTIN[0]
            .1
            .replace("value = 128, source", "value = 96, source");
        let err = Platform::parse("edited.toml", &text, &Picks::new()).unwrap_err();
        let msg = err.to_string();
        assert!(
            msg.contains("edited.toml") && msg.contains("cache_line_bytes"),
            "{msg}"
        );
        assert!(msg.contains("power of two"), "{msg}");
    }
}
