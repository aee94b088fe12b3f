//! Device files (`devices/*.toml`): a PCIe device's side of the link and its DMA engine, apart
//! from any host, attached to a host file to make the platform a command runs on.
//!
//! A device file holds `name`, `description`, a `[device]` table (its `name` as reports show
//! it), a `[link]` table and a `[device_dma]` table (read by [`crate::bus::device`]). Attaching
//! it to a host (a platform file with a PCIe root port) combines the link as PCIe link training
//! and configuration do (PCI Express Base Specification, 4.2 and 7.5.3): the link runs at the
//! lower generation and the narrower width of the two ends, and Max_Payload_Size is set no
//! larger than both ends support; the Max_Read_Request_Size, the read tags kept in flight, the
//! way requests are cut and the address width are the device's own. Every other key of the
//! host's `[bus.pcie]` (the completion boundary, ECRC, the Ack and credit cadence, the cache
//! line, the merge time, whether the root port completes 10-bit tags) is the host's. A device
//! that can use 10-bit tags says how many reads it then keeps in flight (`ten_bit_tag_reads`);
//! one that does not state it cannot.
//!
//! An optional `[device_rating]` table says what the device's datasheet promises (a NIC's line
//! rate with its smallest frames, a drive's rated IOPS, an engine's rated throughput), for the
//! datasheet check; the device's link before training is kept as `device_link`.
//!
//! A host file names the device it has by default (`default_device`); a platform name of the
//! form `HOST+DEVICE` puts another one, a built-in name or a file, in its slot.

use crate::error::{Result, SimError};
use std::path::Path;

/// The device files built into dmalab, by name.
pub const BUILTIN_DEVICES: &[(&str, &str)] = &[
    (
        "intel-xl710",
        include_str!("../../../../devices/intel-xl710.toml"),
    ),
    (
        "connectx-6dx",
        include_str!("../../../../devices/connectx-6dx.toml"),
    ),
    (
        "samsung-pm1743",
        include_str!("../../../../devices/samsung-pm1743.toml"),
    ),
    (
        "fpga-qdma-gen4x8",
        include_str!("../../../../devices/fpga-qdma-gen4x8.toml"),
    ),
    (
        "intel-cbdma-bdx",
        include_str!("../../../../devices/intel-cbdma-bdx.toml"),
    ),
    (
        "intel-cbdma-skx",
        include_str!("../../../../devices/intel-cbdma-skx.toml"),
    ),
    (
        "intel-dsa-spr",
        include_str!("../../../../devices/intel-dsa-spr.toml"),
    ),
    (
        "netronome-nfp6000",
        include_str!("../../../../devices/netronome-nfp6000.toml"),
    ),
];

/// The two kinds of device a host has a slot for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceKind {
    /// A device on a PCIe link (`[link]` and `[device_dma]`): it goes in the host's PCIe slot.
    Pcie,
    /// A copy engine in the CPU package (`[copy_engine]`, no link): it goes in the host's
    /// copy-engine slot, beside the core's side of it (the host's `[dma_engine]`).
    CopyEngine,
}

impl DeviceKind {
    /// The host's tables that a device of this kind fills with its own (all of them its own).
    pub fn tables(self) -> &'static [&'static str] {
        match self {
            DeviceKind::Pcie => &["device", "device_dma", "device_rating", "device_link"],
            DeviceKind::CopyEngine => &["engine_rating"],
        }
    }

    /// The kind's name, as `dmalab platforms` shows it.
    pub fn name(self) -> &'static str {
        match self {
            DeviceKind::Pcie => "pcie",
            DeviceKind::CopyEngine => "copy-engine",
        }
    }
}

/// The kind of the (checked) device file `table`.
pub fn device_kind(table: &toml::Table) -> DeviceKind {
    if table.contains_key("copy_engine") {
        DeviceKind::CopyEngine
    } else {
        DeviceKind::Pcie
    }
}

/// A copy engine's own keys (a device file's `[copy_engine]`); the host's `[dma_engine]` holds
/// the rest of what [`crate::config::costs::EngineCosts`] reads, the core's side.
pub const ENGINE_KEYS: [&str; 7] = [
    "channels",
    "submit_ns",
    "doorbell_ns",
    "descriptors_per_doorbell",
    "startup_ns",
    "bytes_per_us",
    "remote_memory_pct",
];

/// The core's side of a copy engine, which a host's `[dma_engine]` must state to take one.
pub const HOST_ENGINE_KEYS: [&str; 4] = [
    "completion",
    "completion_ns",
    "interrupt_latency_ns",
    "remote_cpu_ns",
];

/// The link keys that take the lower of the host's and the device's values.
const NEGOTIATED: [&str; 3] = ["generation", "lanes", "max_payload_bytes"];

/// The link keys the device alone sets.
const DEVICE_LINK: [&str; 4] = [
    "max_read_request_bytes",
    "max_outstanding_read_requests",
    "tlp_split",
    "addressing_bits",
];

/// The link keys a device may state or leave out: the reads it keeps in flight with 10-bit
/// tags (absent: it is no 10-Bit Tag Requester).
const DEVICE_LINK_OPTIONAL: [&str; 1] = ["ten_bit_tag_reads"];

/// The top-level keys a device file may hold.
const DEVICE_KEYS: [&str; 8] = [
    "name",
    "description",
    "device",
    "link",
    "device_dma",
    "device_rating",
    "storage",
    "copy_engine",
];

/// The names of the built-in devices.
pub fn builtin_device_names() -> Vec<&'static str> {
    BUILTIN_DEVICES.iter().map(|(n, _)| *n).collect()
}

/// The TOML text of the built-in device `name`, or an error listing the built-in names.
pub fn builtin_device_text(name: &str) -> Result<&'static str> {
    BUILTIN_DEVICES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, text)| *text)
        .ok_or_else(|| unknown_device(name))
}

/// Whether `name_or_path` names a built-in device or an existing file.
pub fn is_device(name_or_path: &str) -> bool {
    BUILTIN_DEVICES.iter().any(|(n, _)| *n == name_or_path) || Path::new(name_or_path).is_file()
}

fn unknown_device(name: &str) -> SimError {
    SimError::UnknownDevice {
        name: name.to_string(),
        known: builtin_device_names().join(", "),
    }
}

/// The device file's table: a built-in name or a path.
pub fn load_device(name_or_path: &str) -> Result<toml::Table> {
    let text = match builtin_device_text(name_or_path) {
        Ok(text) => text.to_string(),
        Err(_) if Path::new(name_or_path).is_file() => std::fs::read_to_string(name_or_path)
            .map_err(|e| SimError::FileRead {
                file: name_or_path.to_string(),
                reason: e.to_string(),
            })?,
        Err(e) => return Err(e),
    };
    parse_device(name_or_path, &text)
}

/// A device file's table from its text (`file` names it in errors), its keys checked; its
/// values are checked when it is attached to a host and read.
pub fn parse_device(file: &str, text: &str) -> Result<toml::Table> {
    let table: toml::Table = text
        .parse()
        .map_err(|e: toml::de::Error| SimError::Syntax {
            file: file.to_string(),
            reason: e.to_string(),
        })?;
    check_device(file, &table)?;
    Ok(table)
}

/// A device file holds only its own keys, each table where it belongs.
fn check_device(file: &str, table: &toml::Table) -> Result<()> {
    for key in table.keys() {
        if !DEVICE_KEYS.contains(&key.as_str()) {
            return Err(SimError::UnknownKey {
                file: file.to_string(),
                key: key.clone(),
                valid: DEVICE_KEYS.join(", "),
            });
        }
    }
    if table.contains_key("copy_engine") {
        return check_engine(file, table);
    }
    for needed in ["device", "link", "device_dma"] {
        if !matches!(table.get(needed), Some(toml::Value::Table(_))) {
            return Err(SimError::MissingField {
                file: file.to_string(),
                field: needed.to_string(),
                expected: format!("a [{needed}] table"),
            });
        }
    }
    if let Some(toml::Value::Table(link)) = table.get("link") {
        let valid: Vec<&str> = NEGOTIATED
            .iter()
            .chain(&DEVICE_LINK)
            .chain(&DEVICE_LINK_OPTIONAL)
            .copied()
            .collect();
        for key in link.keys() {
            if !valid.contains(&key.as_str()) {
                return Err(SimError::UnknownKey {
                    file: file.to_string(),
                    key: format!("link.{key}"),
                    valid: valid.join(", "),
                });
            }
        }
    }
    Ok(())
}

/// A copy engine's file: `[device]` and `[copy_engine]` with the engine's own keys only, and
/// none of a PCIe device's tables.
fn check_engine(file: &str, table: &toml::Table) -> Result<()> {
    for needed in ["device", "copy_engine"] {
        if !matches!(table.get(needed), Some(toml::Value::Table(_))) {
            return Err(SimError::MissingField {
                file: file.to_string(),
                field: needed.to_string(),
                expected: format!("a [{needed}] table"),
            });
        }
    }
    for key in ["link", "device_dma", "storage"] {
        if table.contains_key(key) {
            return Err(SimError::UnknownKey {
                file: file.to_string(),
                key: key.to_string(),
                valid: "name, description, device, copy_engine, device_rating (a copy engine \
                        has no link)"
                    .into(),
            });
        }
    }
    if let Some(toml::Value::Table(engine)) = table.get("copy_engine") {
        for key in engine.keys() {
            if !ENGINE_KEYS.contains(&key.as_str()) {
                return Err(SimError::UnknownKey {
                    file: file.to_string(),
                    key: format!("copy_engine.{key}"),
                    valid: ENGINE_KEYS.join(", "),
                });
            }
        }
    }
    Ok(())
}

/// Put the device `device` (read from `device_file`) in the host's slot for its kind: a PCIe
/// device in the PCIe slot ([`attach`]), a copy engine in the copy-engine slot
/// ([`attach_engine`]).
pub fn attach_any(
    root: &mut toml::Table,
    host_file: &str,
    device: &toml::Table,
    device_file: &str,
) -> Result<()> {
    match device_kind(device) {
        DeviceKind::Pcie => attach(root, host_file, device, device_file),
        DeviceKind::CopyEngine => attach_engine(root, host_file, device, device_file),
    }
}

/// Put the copy engine `device` (read from `device_file`) in the host's copy-engine slot: its
/// `[copy_engine]` keys join the core's side in the host's `[dma_engine]` (replacing any the
/// host states), and its `[device_rating]` becomes the platform's `engine_rating`. The host's
/// `default_copy_engine` key is removed. A host must state the core's side
/// ([`HOST_ENGINE_KEYS`]) to take an engine.
pub fn attach_engine(
    root: &mut toml::Table,
    host_file: &str,
    device: &toml::Table,
    device_file: &str,
) -> Result<()> {
    root.remove("default_copy_engine");
    let Some(toml::Value::Table(host)) = root.get_mut("dma_engine") else {
        return Err(SimError::NotDescribed {
            platform: host_file.to_string(),
            what: format!(
                "the core's side of a copy engine ([dma_engine] with {}) to attach {device_file} to",
                HOST_ENGINE_KEYS.join(", ")
            ),
        });
    };
    if let Some(toml::Value::Table(engine)) = device.get("copy_engine") {
        for (k, v) in engine {
            host.insert(k.clone(), v.clone());
        }
    }
    if let Some(rating) = device.get("device_rating") {
        root.insert("engine_rating".into(), rating.clone());
    }
    describe(root, device, "copy engine");
    Ok(())
}

/// Put the device `device` (read from `device_file`) in the PCIe slot of the host table `root`
/// (read from `host_file`): its `[device]` and `[device_dma]` replace the host's, and its link
/// combines with the host's root port. The host's `default_device` key is removed.
pub fn attach(
    root: &mut toml::Table,
    host_file: &str,
    device: &toml::Table,
    device_file: &str,
) -> Result<()> {
    root.remove("default_device");
    let pcie_host = root
        .get("bus")
        .and_then(|b| b.get("kind"))
        .and_then(toml::Value::as_str)
        == Some("pcie");
    let Some(toml::Value::Table(pcie)) = root
        .get_mut("bus")
        .and_then(|b| b.as_table_mut())
        .and_then(|b| b.get_mut("pcie"))
        .filter(|_| pcie_host)
    else {
        return Err(SimError::NotDescribed {
            platform: host_file.to_string(),
            what: format!("a PCIe root port ([bus] kind = \"pcie\") to attach {device_file} to"),
        });
    };
    let link = device
        .get("link")
        .and_then(toml::Value::as_table)
        .cloned()
        .unwrap_or_default();
    for key in NEGOTIATED {
        let theirs = link.get(key).ok_or_else(|| missing(device_file, key))?;
        let ours = pcie.get(key);
        let mut lower = match ours {
            Some(ours) if value_of(ours) <= value_of(theirs) => ours.clone(),
            _ => theirs.clone(),
        };
        // The trained value is the lower of two capabilities, so the values it could take run
        // from the lower of their least to the lower of their greatest.
        if let (Some(ours), toml::Value::Table(t)) = (ours, &mut lower) {
            let (a, b) = (span_of(ours), span_of(theirs));
            if t.contains_key("range") {
                let span = [a.0.min(b.0), a.1.min(b.1)].map(toml::Value::Integer);
                t.insert("range".into(), toml::Value::Array(span.to_vec()));
            }
        }
        pcie.insert(key.to_string(), lower);
    }
    for key in DEVICE_LINK {
        let theirs = link.get(key).ok_or_else(|| missing(device_file, key))?;
        pcie.insert(key.to_string(), theirs.clone());
    }
    for key in DEVICE_LINK_OPTIONAL {
        match link.get(key) {
            Some(theirs) => pcie.insert(key.to_string(), theirs.clone()),
            None => pcie.remove(key),
        };
    }
    // The device's own link before training, for the datasheet check.
    let untrained: toml::Table = ["generation", "lanes"]
        .into_iter()
        .filter_map(|k| link.get(k).map(|v| (k.to_string(), v.clone())))
        .collect();
    root.insert("device_link".into(), toml::Value::Table(untrained));
    describe(root, device, "device");
    for table in ["device", "device_dma", "device_rating"] {
        if let Some(t) = device.get(table) {
            root.insert(table.to_string(), t.clone());
        }
    }
    attach_storage(root, device);
    Ok(())
}

/// Append the device's description to the host's, as `HOST; LABEL: DEVICE`.
fn describe(root: &mut toml::Table, device: &toml::Table, label: &str) {
    if let (Some(toml::Value::String(host)), Some(toml::Value::String(dev))) =
        (root.get("description").cloned(), device.get("description"))
    {
        root.insert(
            "description".into(),
            toml::Value::String(format!("{host}; {label}: {dev}")),
        );
    }
}

/// A drive's own costs go into the host's I/O path: its `[storage]` read latency and rate
/// become the host's `[io]` device costs. A device without `[storage]` is no drive: a host's
/// `[io]` path (the block workloads) has nothing to read from, so it is removed and a block
/// run names what is missing.
fn attach_storage(root: &mut toml::Table, device: &toml::Table) {
    let storage = device.get("storage").and_then(toml::Value::as_table);
    match (storage, root.get_mut("io")) {
        (Some(s), Some(toml::Value::Table(io))) => {
            for (theirs, ours) in STORAGE_TO_IO {
                if let Some(v) = s.get(theirs) {
                    io.insert(ours.to_string(), v.clone());
                }
            }
        }
        (None, Some(_)) => {
            root.remove("io");
        }
        _ => {}
    }
}

/// A device's `[storage]` keys and the host `[io]` keys they set.
const STORAGE_TO_IO: [(&str, &str); 2] = [
    ("read_latency_ns", "device_latency_ns"),
    ("bytes_per_s", "device_bytes_per_s"),
];

fn missing(device_file: &str, key: &str) -> SimError {
    SimError::MissingField {
        file: device_file.to_string(),
        field: format!("link.{key}"),
        expected: "the device's side of the link".into(),
    }
}

/// The least and greatest value a parameter record states (its `range`, else its value).
fn span_of(v: &toml::Value) -> (i64, i64) {
    let range = v.get("range").and_then(toml::Value::as_array);
    match range.map(Vec::as_slice) {
        Some([lo, hi]) => (
            lo.as_integer().unwrap_or(i64::MIN),
            hi.as_integer().unwrap_or(i64::MAX),
        ),
        _ => (value_of(v), value_of(v)),
    }
}

/// The integer of a parameter record (`{ value = N, ... }`) or a bare value, for comparing the
/// two ends of a link (a value that is no integer compares as the largest).
fn value_of(v: &toml::Value) -> i64 {
    let inner = match v {
        toml::Value::Table(t) => t.get("value").unwrap_or(v),
        other => other,
    };
    inner.as_integer().unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_builtin_device_file_holds_only_device_keys() {
        for name in builtin_device_names() {
            load_device(name).unwrap();
        }
    }

    #[test]
    fn the_link_trains_to_the_lower_end() {
        let mut host: toml::Table = r#"
            [bus]
            kind = "pcie"
            [bus.pcie]
            generation = { value = 3, source = "host" }
            lanes = { value = 16, source = "host" }
            max_payload_bytes = { value = 256, source = "host" }
        "#
        .parse()
        .unwrap();
        let dev = load_device("connectx-6dx").unwrap();
        attach(&mut host, "h", &dev, "connectx-6dx").unwrap();
        let pcie = host["bus"]["pcie"].as_table().unwrap();
        assert_eq!(value_of(&pcie["generation"]), 3);
        assert_eq!(value_of(&pcie["lanes"]), 16);
        assert_eq!(value_of(&pcie["max_payload_bytes"]), 256);
        assert!(pcie.contains_key("max_outstanding_read_requests"));
        assert!(host.contains_key("device_dma"));
    }

    #[test]
    fn a_device_needs_a_pcie_host_and_refuses_stray_keys() {
        let mut host: toml::Table = "[bus]\nkind = \"pci\"\n".parse().unwrap();
        let dev = load_device("intel-xl710").unwrap();
        let err = attach(&mut host, "h", &dev, "intel-xl710").unwrap_err();
        assert!(err.to_string().contains("PCIe root port"), "{err}");
        let mut stray = dev.clone();
        stray.insert("memory".into(), toml::Value::Table(toml::Table::new()));
        let err = check_device("d", &stray).unwrap_err();
        assert!(err.to_string().contains("`memory`"), "{err}");
        assert!(load_device("no-such-device").is_err());
    }
}
