"""Read a Linux host's DMA path off its sysfs, procfs and kernel log: PCI devices and their
links, each device's NUMA node and IOMMU group, the IOMMU driver and the kernel parameters that
set its policy, and POWER's direct DMA window; then write it as a platform skeleton whose every
value says where it was read (``inspected``) or that it could not be read (``assumed``).

Where each thing is read (the kernel's documented layout):
- ``sys/bus/pci/devices/<BDF>/``: ``vendor``, ``device``, ``class``, ``numa_node``, the
  ``driver`` and ``iommu_group`` links, ``current_link_speed`` and ``current_link_width``
  (Documentation/ABI/testing/sysfs-bus-pci), and ``config``, the configuration space, whose PCI
  Express capability (ID 0x10) gives Device Control's Max_Payload_Size, Max_Read_Request_Size,
  Relaxed Ordering, No Snoop and Extended Tag enables and Link Control's read completion
  boundary (PCI Express Base Specification 4.0, 7.5.3);
- ``sys/kernel/iommu_groups/<N>/type``: the group's default domain (DMA: strict; DMA-FQ: lazy,
  with a flush queue; identity: passthrough) (sysfs-kernel-iommu_groups);
- ``sys/class/iommu/``: the IOMMU units (``dmar*``: Intel VT-d; ``ivhd*``: AMD-Vi;
  ``smmu3.*``: Arm SMMUv3);
- ``proc/cmdline``: ``intel_iommu=``, ``amd_iommu=``, ``iommu.strict=``, ``iommu.passthrough=``;
- the kernel log (``var/log/dmesg`` under the root, or ``dmesg`` on this host): the default
  domain and invalidation policy lines and, on POWER, "Using 64-bit direct DMA at offset".
"""

from __future__ import annotations

import os
import re
import struct
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

SPEEDS_GTS = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0, 6: 64.0}
"""Link speed codes of the Link Status register, in GT/s."""

GENERATION = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}
"""PCIe generation by signalling rate."""

IOMMU_PARAMS = ("intel_iommu", "amd_iommu", "iommu.strict", "iommu.passthrough", "iommu")

_DIRECT = re.compile(r"(\S+): Using 64-bit direct DMA at offset ([0-9a-fA-F]+)")
_POLICY = re.compile(r"DMA domain TLB invalidation policy: (\w+) mode")
_DEFAULT = re.compile(r"Default domain type: (\w+)")


@dataclass
class Link:
    """A device's PCI Express link and Device Control settings."""

    speed_gts: float | None
    width: int | None
    max_speed_gts: float | None
    max_width: int | None
    mps: int
    mps_supported: int
    mrrs: int
    relaxed_ordering: bool
    no_snoop: bool
    ext_tags: bool
    rcb_bytes: int


@dataclass
class Device:
    """One PCI function as the host shows it."""

    bdf: str
    vendor: int | None
    device: int | None
    class_code: int | None
    driver: str | None
    numa_node: int | None
    iommu_group: int | None
    group_type: str | None
    pcie: Link | None
    path: str


@dataclass
class Host:
    """What ``inspect`` read, and what it could not."""

    root: str
    cpu: str | None
    devices: list[Device]
    iommu_driver: str | None
    iommu_units: list[str]
    cmdline: dict[str, str]
    flush: str | None
    flush_from: str | None
    direct_window_offset: int | None
    direct_window_from: str | None
    unreadable: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """Plain data, for JSON."""
        return asdict(self)


class _Reader:
    """Files under one root, with what could not be read written down."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.unreadable: list[str] = []

    def path(self, rel: str) -> Path:
        return self.root / rel

    def text(self, rel: str, *, note: bool = True) -> str | None:
        try:
            return self.path(rel).read_text(errors="replace").strip()
        except OSError as e:
            if note:
                self.unreadable.append(f"{rel}: {e.strerror or e}")
            return None

    def link_name(self, rel: str) -> str | None:
        try:
            return os.path.basename(os.readlink(self.path(rel)))
        except OSError:
            return None


def _int(text: str | None, base: int = 0) -> int | None:
    if text is None:
        return None
    try:
        return int(text.split()[0], base)
    except (ValueError, IndexError):
        return None


def _speed(text: str | None) -> float | None:
    m = re.match(r"([\d.]+) GT/s", text or "")
    return float(m[1]) if m else None


def pcie_link(config: bytes) -> Link | None:
    """The PCI Express capability's settings in configuration space ``config``, or None for a
    conventional PCI function (no capabilities list, or no PCIe capability in it)."""
    if len(config) < 64 or not struct.unpack_from("<H", config, 0x06)[0] & 0x10:
        return None
    at, seen = config[0x34] & 0xFC, 0
    while at and at + 0x14 <= len(config) and seen < 48:
        if config[at] == 0x10:
            return _link_at(config, at)
        at, seen = config[at + 1] & 0xFC, seen + 1
    return None


def _link_at(c: bytes, at: int) -> Link:
    dev_cap = struct.unpack_from("<I", c, at + 0x04)[0]
    dev_ctl = struct.unpack_from("<H", c, at + 0x08)[0]
    link_cap = struct.unpack_from("<I", c, at + 0x0C)[0]
    link_ctl = struct.unpack_from("<H", c, at + 0x10)[0]
    link_sta = struct.unpack_from("<H", c, at + 0x12)[0]
    return Link(
        speed_gts=SPEEDS_GTS.get(link_sta & 0xF),
        width=(link_sta >> 4) & 0x3F or None,
        max_speed_gts=SPEEDS_GTS.get(link_cap & 0xF),
        max_width=(link_cap >> 4) & 0x3F or None,
        mps=128 << ((dev_ctl >> 5) & 0x7),
        mps_supported=128 << (dev_cap & 0x7),
        mrrs=128 << ((dev_ctl >> 12) & 0x7),
        relaxed_ordering=bool(dev_ctl & 0x10),
        no_snoop=bool(dev_ctl & 0x800),
        ext_tags=bool(dev_ctl & 0x100),
        rcb_bytes=128 if link_ctl & 0x8 else 64,
    )


def _device(r: _Reader, bdf: str) -> Device:
    base = f"sys/bus/pci/devices/{bdf}"
    numa = _int(r.text(f"{base}/numa_node"))
    group = _int(r.link_name(f"{base}/iommu_group"))
    group_type = None if group is None else r.text(f"sys/kernel/iommu_groups/{group}/type")
    link = None
    try:
        link = pcie_link(r.path(f"{base}/config").read_bytes())
    except OSError as e:
        r.unreadable.append(f"{base}/config: {e.strerror or e}")
    if link is not None:
        # sysfs's own link files agree with the Link Status register; prefer them when present.
        link.speed_gts = _speed(r.text(f"{base}/current_link_speed", note=False)) or link.speed_gts
        width = _int(r.text(f"{base}/current_link_width", note=False))
        link.width = width or link.width
    return Device(
        bdf=bdf,
        vendor=_int(r.text(f"{base}/vendor")),
        device=_int(r.text(f"{base}/device")),
        class_code=_int(r.text(f"{base}/class")),
        driver=r.link_name(f"{base}/driver"),
        numa_node=None if numa is None or numa < 0 else numa,
        iommu_group=group,
        group_type=group_type,
        pcie=link,
        path=base,
    )


def _kernel_log(r: _Reader) -> tuple[str | None, str]:
    text = r.text("var/log/dmesg", note=False)
    if text is not None:
        return text, "var/log/dmesg"
    if r.root == Path("/"):
        try:
            out = subprocess.run(["dmesg"], capture_output=True, text=True, timeout=10, check=True)
            return out.stdout, "dmesg"
        except (OSError, subprocess.SubprocessError) as e:
            r.unreadable.append(f"the kernel log (var/log/dmesg, dmesg): {e}")
            return None, ""
    r.unreadable.append("var/log/dmesg: not in the recorded tree")
    return None, ""


def _iommu_driver(units: list[str], direct: int | None, cpu: str | None) -> str | None:
    for prefix, name in (("dmar", "intel-vt-d"), ("ivhd", "amd-vi"), ("smmu3", "arm-smmu-v3")):
        if any(u.startswith(prefix) for u in units):
            return name
    if direct is not None or "pSeries" in (cpu or "") or "POWER" in (cpu or ""):
        return "power-tce"
    return None


def _flush(
    cmdline: dict[str, str], log: str | None, devices: list[Device]
) -> tuple[str | None, str | None]:
    """The invalidation policy and where it was read: the kernel parameters, the log line, or
    the groups' domain types, in that order."""
    strict = cmdline.get("iommu.strict")
    if cmdline.get("iommu.passthrough") in ("1", "y", "on") or cmdline.get("iommu") == "pt":
        return "passthrough", "proc/cmdline"
    if strict is not None:
        return ("strict" if strict in ("1", "y", "on") else "lazy"), "proc/cmdline"
    if "strict" in cmdline.get("intel_iommu", "").split(","):
        return "strict", "proc/cmdline"
    m = _POLICY.search(log or "")
    if m:
        return m[1].lower(), "kernel log"
    types = {d.group_type for d in devices if d.group_type}
    by_type = {"DMA-FQ": "lazy", "DMA": "strict", "identity": "passthrough"}
    if len(types) == 1 and (t := types.pop()) in by_type:
        return by_type[t], "sys/kernel/iommu_groups/*/type"
    return None, None


def inspect(root: str | Path = "/") -> Host:
    """Read the host whose filesystem is at ``root`` (``/`` for this one, or a copied tree)."""
    r = _Reader(Path(root))
    cpuinfo = r.text("proc/cpuinfo") or ""
    cpu = next(
        (
            line.split(":", 1)[1].strip()
            for line in cpuinfo.splitlines()
            if line.split(":", 1)[0].strip() in ("model name", "cpu", "platform")
        ),
        None,
    )
    if "pSeries" in cpuinfo and cpu and "pSeries" not in cpu:
        cpu = f"{cpu} (pSeries)"
    try:
        bdfs = sorted(p.name for p in r.path("sys/bus/pci/devices").iterdir())
    except OSError as e:
        r.unreadable.append(f"sys/bus/pci/devices: {e.strerror or e}")
        bdfs = []
    devices = [_device(r, bdf) for bdf in bdfs]
    try:
        units = sorted(p.name for p in r.path("sys/class/iommu").iterdir())
    except OSError:
        units = []
    words = (r.text("proc/cmdline") or "").split()
    cmdline = {k: v for k, _, v in (w.partition("=") for w in words) if k in IOMMU_PARAMS and v}
    log, log_from = _kernel_log(r)
    direct = _DIRECT.search(log or "")
    offset = int(direct[2], 16) if direct else None
    flush, flush_from = _flush(cmdline, log, devices)
    driver = _iommu_driver(units, offset, cpu)
    if driver is None and flush_from is not None:
        flush_from += "; no IOMMU unit was found, so no device is translated"
    return Host(
        root=str(root),
        cpu=cpu,
        devices=devices,
        iommu_driver=driver,
        iommu_units=units,
        cmdline=cmdline,
        flush=flush,
        flush_from=flush_from,
        direct_window_offset=offset,
        direct_window_from=f"{log_from}: {direct[0]}" if direct else None,
        unreadable=r.unreadable,
    )


def _pick(host: Host, bdf: str | None) -> Device | None:
    """The device the platform describes: ``bdf``, else the first PCIe network or storage
    function, else the first PCIe function."""
    if bdf is not None:
        for d in host.devices:
            if d.bdf == bdf:
                return d
        known = ", ".join(d.bdf for d in host.devices) or "none"
        from dmalab import ScenarioError

        raise ScenarioError(f"--device {bdf}: no such PCI function; this host has: {known}")
    pcie = [d for d in host.devices if d.pcie is not None]
    io = [d for d in pcie if (d.class_code or 0) >> 16 in (0x01, 0x02)]
    choices = io or pcie
    return choices[0] if choices else None


def _q(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _value(v: object) -> str:
    return _q(v) if isinstance(v, str) else str(v).lower() if isinstance(v, bool) else str(v)


def _param(key: str, value: object, kind: str, note: str) -> str:
    return f"{key} = {{ value = {_value(value)}, {kind} = {_q(note)} }}"


REFERENCE = "pcie-gen3-x8-server"
"""The built-in platform whose values stand in for what a host does not show."""


def _bus_lines(d: Device | None) -> list[str]:
    """``[bus.pcie]``: what the device's configuration space and sysfs files give, inspected;
    every other parameter the value of :data:`REFERENCE`, assumed, saying why."""
    from dmalab import sim

    reference = {
        p["field"].removeprefix("bus.pcie."): p
        for p in sim.platform_info(REFERENCE)["params"]
        if p["field"].startswith("bus.pcie.")
    }
    inspected: dict[str, tuple[object, str]] = {}
    why = f"not readable from a host: the value of {REFERENCE}"
    if d is not None and d.pcie is not None:
        link, config = d.pcie, f"{d.path}/config"
        if link.speed_gts in GENERATION:
            speed = f"{d.path}/current_link_speed: {link.speed_gts} GT/s"
            inspected["generation"] = (GENERATION[link.speed_gts], speed)
        if link.width:
            inspected["lanes"] = (link.width, f"{d.path}/current_link_width")
        control = f"{config}: PCIe Device Control"
        inspected["max_payload_bytes"] = (link.mps, f"{control}, Max_Payload_Size")
        inspected["max_read_request_bytes"] = (link.mrrs, f"{control}, Max_Read_Request_Size")
        rcb = f"{config}: PCIe Link Control, Read Completion Boundary"
        inspected["read_completion_boundary_bytes"] = (link.rcb_bytes, rcb)
        tags = 256 if link.ext_tags else 32
        why_tags = f"; the device's tag field allows {tags} (Extended Tag Field Enable)"
    else:
        why = (
            "no PCI Express function on this host (a virtual machine's devices are emulated): "
            f"the value of {REFERENCE}"
        )
        why_tags = ""
    lines = []
    for key, p in reference.items():
        if key in inspected:
            value, note = inspected[key]
            lines.append(_param(key, value, "inspected", note))
        else:
            extra = why_tags if key == "max_outstanding_read_requests" else ""
            note = f"{why} ({p['provenance']['note']}){extra}"
            lines.append(f"{key} = {{ value = {p['value']}, assumed = {_q(note)} }}")
    return lines


def platform_toml(
    host: Host, name: str, bdf: str | None = None, date: str = "", device_file: str | None = None
) -> str:
    """The host as a platform file that ``dmalab platforms FILE`` loads: the bus of one device
    (``bdf``, or the first PCIe network or storage function) with every value ``inspected``
    (naming the file read) or ``assumed`` (saying why it could not be read), and what the
    platform schema has no parameter for (the IOMMU, its policy, the NUMA nodes) as comments.
    With ``device_file`` (a device file beside it, see :func:`device_toml`), that device is the
    host's ``default_device``."""
    d = _pick(host, bdf)
    what = f"{d.bdf} ({d.driver or 'no driver'})" if d else "no PCIe device"
    lines = [
        f"# Inspected by dmalab inspect from {host.root} {date}".rstrip(),
        f"# CPU: {host.cpu or 'unknown'}",
        f"# IOMMU: {host.iommu_driver or 'none found'}"
        + (f" (units {', '.join(host.iommu_units)})" if host.iommu_units else ""),
        f"# invalidation: {host.flush or 'unknown'}"
        + (f" (from {host.flush_from})" if host.flush_from else ""),
        f"# kernel parameters: {' '.join(f'{k}={v}' for k, v in host.cmdline.items()) or 'none'}",
    ]
    if host.direct_window_offset is not None:
        lines.append(
            f"# 64-bit direct DMA window at offset {host.direct_window_offset:#x} "
            f"(from {host.direct_window_from})"
        )
    for dev in host.devices:
        lines.append(
            f"# {dev.bdf} {dev.driver or '-'}: NUMA node "
            f"{'-' if dev.numa_node is None else dev.numa_node}, IOMMU group "
            f"{'-' if dev.iommu_group is None else dev.iommu_group} ({dev.group_type or '-'})"
        )
    for miss in host.unreadable:
        lines.append(f"# could not read {miss}")
    lines += [
        "",
        f"name = {_q(name)}",
        f"description = {_q(f'Inspected host: {host.cpu or host.root}; device {what}')}",
        *([f"default_device = {_q(device_file)}"] if device_file else []),
        "",
        "[bus]",
        'kind = "pcie"',
        "",
        "[bus.pcie]",
        *_bus_lines(d),
    ]
    return "\n".join(lines) + "\n"


DEVICE_REFERENCES = {0x01: "samsung-pm1743", 0x02: "intel-xl710"}
"""The built-in device whose engine values stand in for a device of a PCI base class (mass
storage, network) that a host cannot show; any other class takes :data:`ENGINE_REFERENCE`."""

ENGINE_REFERENCE = "fpga-qdma-gen4x8"


def device_file_name(host_name: str, d: Device) -> str:
    """The file name ``inspect --out`` gives the device file of ``d``, beside the host file."""
    return f"{host_name}-{d.bdf.replace(':', '-')}.toml"


def _reference_device(d: Device) -> tuple[str, dict[str, tuple[str, str, str]]]:
    """The built-in device standing in for ``d``'s engine, and its ``[device_dma]`` values by
    key: (value, provenance kind, note)."""
    import tomllib

    from dmalab import _native

    ref = DEVICE_REFERENCES.get((d.class_code or 0) >> 16, ENGINE_REFERENCE)
    table = tomllib.loads(_native.device_text(ref))
    out = {}
    for key, rec in table["device_dma"].items():
        kind = next(k for k in rec if k != "value")
        out[key] = (_value(rec["value"]), kind, str(rec[kind]))
    return ref, out


def device_toml(d: Device, name: str, date: str = "") -> str:
    """A device file for the PCIe function ``d`` (see ``devices/`` and ``HOST+DEVICE``): its
    side of the link as its configuration space shows it (``inspected``: Link Capabilities'
    speed and width, Device Capabilities' Max_Payload_Size, Device Control's
    Max_Read_Request_Size and Extended Tag enable), and its DMA engine, which no host shows, as
    a built-in device's of the same class (``assumed``, saying so)."""
    if d.pcie is None:
        raise ValueError(f"{d.bdf} is not a PCI Express function")
    link, config = d.pcie, f"{d.path}/config"
    ref, dma = _reference_device(d)
    what = f"{d.bdf} ({d.driver or 'no driver'}, {d.vendor or 0:04x}:{d.device or 0:04x})"
    max_speed = link.max_speed_gts or link.speed_gts
    max_width = link.max_width or link.width
    lines = [
        f"# Inspected by dmalab inspect: PCI function {what} {date}".rstrip(),
        "# Its side of the link is read from its configuration space; its DMA engine is not",
        f"# readable from a host and takes the values of the built-in device {ref}.",
        "",
        f"name = {_q(name)}",
        f"description = {_q(f'Inspected PCIe function {what}')}",
        "",
        "[device]",
        f"name = {_q(f'PCIe function {what}')}",
        "",
        "[link]",
    ]
    caps = f"{config}: PCIe Link Capabilities"
    if max_speed in GENERATION:
        lines.append(
            _param("generation", GENERATION[max_speed], "inspected", f"{caps}, Max Link Speed")
        )
    else:
        lines.append(_param("generation", 3, "assumed", "Max Link Speed not readable: Gen3"))
    if max_width:
        lines.append(_param("lanes", max_width, "inspected", f"{caps}, Max Link Width"))
    else:
        lines.append(_param("lanes", 8, "assumed", "Max Link Width not readable: x8"))
    dev_caps = f"{config}: PCIe Device Capabilities, Max_Payload_Size Supported"
    lines.append(_param("max_payload_bytes", link.mps_supported, "inspected", dev_caps))
    control = f"{config}: PCIe Device Control"
    lines.append(
        _param(
            "max_read_request_bytes", link.mrrs, "inspected", f"{control}, Max_Read_Request_Size"
        )
    )
    tags = 256 if link.ext_tags else 32
    lines.append(
        _param(
            "max_outstanding_read_requests",
            tags,
            "inspected",
            f"{control}, Extended Tag Field Enable {'on' if link.ext_tags else 'off'}: the tag "
            f"field allows {tags} reads in flight; the device may keep fewer",
        )
    )
    lines.append(
        _param("tlp_split", "aligned", "assumed", "not readable: cut at aligned multiples of MRRS")
    )
    lines.append(_param("addressing_bits", 64, "assumed", "not readable: 64-bit addresses"))
    lines += ["", "[device_dma]"]
    for key, (value, kind, note) in dma.items():
        lines.append(
            f"{key} = {{ value = {value}, assumed = "
            f"{_q(f'not readable from a host: the value of {ref} ({kind}: {note})')} }}"
        )
    return "\n".join(lines) + "\n"
