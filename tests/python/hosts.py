"""Recorded host trees for the ``dmalab inspect --root`` tests.

Each tree is built on the fly under a temporary directory, following the layout the Linux
kernel documents for sysfs and procfs (Documentation/ABI/testing/sysfs-bus-pci,
sysfs-kernel-iommu_groups, sysfs-class-iommu) and the PCI Express Base Specification for the
binary ``config`` file. ``build`` writes one tree and returns the truth about it, so a test can
compare what ``inspect`` reports against what was recorded.
"""

from __future__ import annotations

import os
import pathlib
import struct
from typing import Any, TypedDict

KINDS = ("x86-vtd", "amd-vi", "arm-smmuv3", "power-pseries", "vm-no-iommu")

# Link speed codes of the Link Capabilities / Link Status registers, in GT/s.
_SPEEDS: dict[int, float] = {1: 2.5, 2: 5.0, 3: 8.0, 4: 16.0, 5: 32.0}

# Kernel parameters the truth records when they appear on the command line.
_IOMMU_PARAMS = ("intel_iommu", "amd_iommu", "iommu.strict", "iommu.passthrough")

_PM_CAP = 0x40
_PCIE_CAP = 0x50


class _Pcie(TypedDict):
    mps_supported: int
    mps: int
    mrrs: int
    relaxed_ordering: bool
    no_snoop: bool
    ext_tags: bool
    speed_code: int
    width: int
    max_speed_code: int
    max_width: int


class _Device(TypedDict):
    bdf: str
    vendor: int
    device: int
    class_code: int
    driver: str
    numa_node: int  # -1 when the platform has no NUMA information
    group: int | None
    group_type: str | None
    pcie: _Pcie | None


class _Host(TypedDict):
    iommu_driver: str | None
    units: list[str]
    cmdline: str
    cpuinfo: list[str]
    dmesg: list[str]
    direct_window_offset: int | None
    devices: list[_Device]


def _pcie(
    *,
    speed: int,
    width: int,
    mps: int,
    mps_supported: int,
    mrrs: int,
    ro: bool,
    ns: bool,
    ext_tags: bool = True,
) -> _Pcie:
    """A trained link at its maximum speed and width (the usual case on a healthy host)."""
    return {
        "mps_supported": mps_supported,
        "mps": mps,
        "mrrs": mrrs,
        "relaxed_ordering": ro,
        "no_snoop": ns,
        "ext_tags": ext_tags,
        "speed_code": speed,
        "width": width,
        "max_speed_code": speed,
        "max_width": width,
    }


def _size_code(size: int) -> int:
    """The 3-bit encoding of a payload/read-request size: ``size == 128 << code``."""
    for code in range(6):
        if 128 << code == size:
            return code
    raise ValueError(f"not an encodable PCIe size: {size}")


def config_space(
    *, vendor: int, device: int, class_code: int, pcie: dict[str, Any] | None
) -> bytes:
    """A 4096-byte PCI configuration space (or 256 bytes when pcie is None: a conventional PCI
    device with no PCIe capability)."""
    cfg = bytearray(4096 if pcie is not None else 256)
    struct.pack_into("<HHH", cfg, 0x00, vendor, device, 0x0006)  # memory + bus master
    cfg[0x08] = 0x01  # revision
    cfg[0x09] = class_code & 0xFF  # programming interface
    cfg[0x0A] = (class_code >> 8) & 0xFF  # subclass
    cfg[0x0B] = (class_code >> 16) & 0xFF  # base class
    cfg[0x0E] = 0x00  # header type 0, single function
    if pcie is None:
        return bytes(cfg)  # status without the capabilities bit, capabilities pointer 0

    struct.pack_into("<H", cfg, 0x06, 0x0010)  # status: capabilities list present
    cfg[0x34] = _PM_CAP

    # Power Management capability, pointing on to the PCI Express capability.
    struct.pack_into("<BBHH", cfg, _PM_CAP, 0x01, _PCIE_CAP, 0x0003, 0x0008)

    # PCI Express capability, last in the list.
    base = _PCIE_CAP
    struct.pack_into("<BBH", cfg, base, 0x10, 0x00, 0x0002 | (0 << 4))  # v2, endpoint
    devcap = _size_code(pcie["mps_supported"])
    if pcie["ext_tags"]:
        devcap |= 1 << 5  # Extended Tag Field Supported
    struct.pack_into("<I", cfg, base + 0x04, devcap)
    devctl = (_size_code(pcie["mps"]) << 5) | (_size_code(pcie["mrrs"]) << 12)
    if pcie["relaxed_ordering"]:
        devctl |= 1 << 4
    if pcie["ext_tags"]:
        devctl |= 1 << 8
    if pcie["no_snoop"]:
        devctl |= 1 << 11
    struct.pack_into("<H", cfg, base + 0x08, devctl)
    linkcap = (pcie["max_speed_code"] & 0xF) | ((pcie["max_width"] & 0x3F) << 4)
    struct.pack_into("<I", cfg, base + 0x0C, linkcap)
    linksta = (pcie["speed_code"] & 0xF) | ((pcie["width"] & 0x3F) << 4)
    struct.pack_into("<H", cfg, base + 0x12, linksta)
    return bytes(cfg)


def _x86_vtd() -> _Host:
    cmdline = "BOOT_IMAGE=/vmlinuz-6.8.0 root=/dev/sda1 intel_iommu=on iommu.strict=0"
    return {
        "iommu_driver": "intel-vt-d",
        "units": ["dmar0", "dmar1"],
        "cmdline": cmdline,
        "cpuinfo": [
            "processor\t: 0",
            "vendor_id\t: GenuineIntel",
            "cpu family\t: 6",
            "model\t\t: 85",
            "model name\t: Intel(R) Xeon(R) Gold 6230 CPU @ 2.10GHz",
            "physical id\t: 0",
            "flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr vmx",
        ],
        "dmesg": [
            f"[    0.000000] Command line: {cmdline}",
            "[    0.011234] ACPI: DMAR 0x000000006F3D2000 0001C8 (v01 INTEL  S2600WF  00000001)",
            "[    0.512301] DMAR: IOMMU enabled",
            "[    0.512388] DMAR: Host address width 46",
            "[    0.512392] DMAR: DRHD base: 0x000000d37fc000 flags: 0x0",
            "[    0.512401] DMAR: dmar0: reg_base_addr d37fc000 ver 1:0 "
            "cap 8d2078c106f0466 ecap f020df",
            "[    0.512410] DMAR: dmar1: reg_base_addr e0ffc000 ver 1:0 "
            "cap 8d2078c106f0466 ecap f020df",
            "[    1.402117] DMAR-IR: Enabled IRQ remapping in x2apic mode",
            "[    1.873550] iommu: Default domain type: Translated",
            "[    1.873553] iommu: DMA domain TLB invalidation policy: lazy mode",
        ],
        "direct_window_offset": None,
        "devices": [
            {
                "bdf": "0000:3b:00.0",
                "vendor": 0x8086,
                "device": 0x1583,
                "class_code": 0x020000,
                "driver": "i40e",
                "numa_node": 0,
                "group": 12,
                "group_type": "DMA-FQ",
                "pcie": _pcie(
                    speed=3, width=8, mps=256, mps_supported=512, mrrs=512, ro=True, ns=True
                ),
            },
            {
                "bdf": "0000:af:00.0",
                "vendor": 0x144D,
                "device": 0xA808,
                "class_code": 0x010802,
                "driver": "nvme",
                "numa_node": 1,
                "group": 40,
                "group_type": "DMA-FQ",
                "pcie": _pcie(
                    speed=3, width=4, mps=256, mps_supported=256, mrrs=512, ro=True, ns=True
                ),
            },
        ],
    }


def _amd_vi() -> _Host:
    cmdline = "BOOT_IMAGE=/vmlinuz-6.8.0 root=/dev/nvme0n1p2 amd_iommu=on iommu.passthrough=0"
    return {
        "iommu_driver": "amd-vi",
        "units": ["ivhd0"],
        "cmdline": cmdline,
        "cpuinfo": [
            "processor\t: 0",
            "vendor_id\t: AuthenticAMD",
            "cpu family\t: 23",
            "model\t\t: 49",
            "model name\t: AMD EPYC 7502 32-Core Processor",
            "physical id\t: 0",
            "flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr svm",
        ],
        "dmesg": [
            f"[    0.000000] Command line: {cmdline}",
            "[    1.201842] pci 0000:00:00.2: AMD-Vi: IOMMU performance counters supported",
            "[    1.203310] pci 0000:00:00.2: AMD-Vi: Found IOMMU cap 0x40",
            "[    1.203318] AMD-Vi: Extended features (0x58f77ef22294a5a, 0x0): PPR NX GT IA GA PC",
            "[    1.203330] AMD-Vi: Interrupt remapping enabled",
            "[    1.203331] AMD-Vi: Virtual APIC enabled",
            "[    1.311502] iommu: Default domain type: Translated",
            "[    1.311504] iommu: DMA domain TLB invalidation policy: strict mode",
        ],
        "direct_window_offset": None,
        "devices": [
            {
                "bdf": "0000:41:00.0",
                "vendor": 0x15B3,
                "device": 0x1017,
                "class_code": 0x020000,
                "driver": "mlx5_core",
                "numa_node": 0,
                "group": 21,
                "group_type": "DMA",
                "pcie": _pcie(
                    speed=4, width=16, mps=512, mps_supported=512, mrrs=4096, ro=True, ns=False
                ),
            },
            {
                "bdf": "0000:c1:00.0",
                "vendor": 0x144D,
                "device": 0xA824,
                "class_code": 0x010802,
                "driver": "nvme",
                "numa_node": 1,
                "group": 33,
                "group_type": "identity",
                "pcie": _pcie(
                    speed=4, width=4, mps=512, mps_supported=512, mrrs=512, ro=True, ns=True
                ),
            },
        ],
    }


def _arm_smmuv3() -> _Host:
    cmdline = "BOOT_IMAGE=/Image-6.8.0 root=/dev/nvme0n1p2 iommu.strict=1"
    smmu = "arm-smmu-v3 arm-smmu-v3.0.auto"
    return {
        "iommu_driver": "arm-smmu-v3",
        "units": ["smmu3.0x0000000009050000"],
        "cmdline": cmdline,
        "cpuinfo": [
            "processor\t: 0",
            "BogoMIPS\t: 50.00",
            "Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics cpuid asimdrdm",
            "CPU implementer\t: 0x41",
            "CPU architecture: 8",
            "CPU variant\t: 0x3",
            "CPU part\t: 0xd0c",
            "CPU revision\t: 1",
        ],
        "dmesg": [
            "[    0.000000] Booting Linux on physical CPU 0x0000000000 [0x413fd0c1]",
            f"[    0.000000] Kernel command line: {cmdline}",
            f"[    1.102331] {smmu}: option mask 0x0",
            f"[    1.102340] {smmu}: ias 48-bit, oas 48-bit (features 0x00001fef)",
            f"[    1.102871] {smmu}: allocated 65536 entries for cmdq",
            f"[    1.103012] {smmu}: allocated 32768 entries for evtq",
            "[    1.221145] iommu: Default domain type: Translated",
            "[    1.221147] iommu: DMA domain TLB invalidation policy: strict mode",
        ],
        "direct_window_offset": None,
        "devices": [
            {
                "bdf": "0000:7d:00.0",
                "vendor": 0x19E5,
                "device": 0xA222,
                "class_code": 0x020000,
                "driver": "hns3",
                "numa_node": 0,
                "group": 5,
                "group_type": "DMA",
                "pcie": _pcie(
                    speed=3, width=8, mps=256, mps_supported=512, mrrs=512, ro=True, ns=False
                ),
            },
            {
                "bdf": "0000:04:00.0",
                "vendor": 0x144D,
                "device": 0xA808,
                "class_code": 0x010802,
                "driver": "nvme",
                "numa_node": 0,
                "group": 6,
                "group_type": "DMA",
                "pcie": _pcie(
                    speed=3, width=4, mps=256, mps_supported=256, mrrs=512, ro=True, ns=True
                ),
            },
        ],
    }


def _power_pseries() -> _Host:
    cmdline = "root=/dev/sda2"
    offset = 0x800000000000000
    return {
        "iommu_driver": "power-tce",
        "units": [],
        "cmdline": cmdline,
        "cpuinfo": [
            "processor\t: 0",
            "cpu\t\t: POWER9 (architected), altivec supported",
            "clock\t\t: 3800.000000MHz",
            "revision\t: 2.2 (pvr 004e 1202)",
            "timebase\t: 512000000",
            "platform\t: pSeries",
            "model\t\t: IBM,9009-42A",
            "machine\t\t: CHRP IBM,9009-42A",
        ],
        "dmesg": [
            "[    0.000000] Linux version 6.8.0 (buildd@ppc64el) (gcc 13.2.0) #1 SMP",
            f"[    0.000000] Kernel command line: {cmdline}",
            "[    0.000000] Hardware name: IBM,9009-42A POWER9 (raw) 0x4e1202 0xf000005 pSeries",
            f"[    1.012433] pci 0000:01:00.0: Using 64-bit direct DMA at offset {offset:x}",
            f"[    1.013109] pci 0001:01:00.0: Using 64-bit direct DMA at offset {offset:x}",
            "[    1.402210] ibmvscsi 30000002: SRP_VERSION: 16.a",
            "[    1.402871] ibmvscsi 30000002: Maximum ID: 64 Maximum LUN: 32 Maximum Channel: 3",
            "[    1.611090] ipr: IBM Power RAID SCSI Device Driver version: 2.6.4 (March 14, 2017)",
        ],
        "direct_window_offset": offset,
        "devices": [
            {
                "bdf": "0000:01:00.0",
                "vendor": 0x15B3,
                "device": 0x6750,
                "class_code": 0x020000,
                "driver": "mlx4_core",
                "numa_node": 0,
                "group": 0,
                "group_type": "DMA",
                "pcie": _pcie(
                    speed=2, width=8, mps=256, mps_supported=256, mrrs=512, ro=True, ns=False
                ),
            },
            {
                "bdf": "0001:01:00.0",
                "vendor": 0x1014,
                "device": 0x034A,
                "class_code": 0x010400,  # the ipr adapters identify as RAID bus controllers
                "driver": "ipr",
                "numa_node": 0,
                "group": 1,
                "group_type": "DMA",
                "pcie": _pcie(
                    speed=2, width=8, mps=256, mps_supported=512, mrrs=512, ro=False, ns=False
                ),
            },
        ],
    }


def _vm_no_iommu() -> _Host:
    cmdline = "console=ttyS0 root=/dev/vda1"
    return {
        "iommu_driver": None,
        "units": [],
        "cmdline": cmdline,
        "cpuinfo": [
            "processor\t: 0",
            "vendor_id\t: GenuineIntel",
            "cpu family\t: 6",
            "model\t\t: 6",
            "model name\t: QEMU Virtual CPU version 2.5+",
            "flags\t\t: fpu de pse tsc msr pae mce cx8 apic sep mtrr pge hypervisor",
        ],
        "dmesg": [
            "[    0.000000] Linux version 6.8.0 (buildd@amd64) (gcc 13.2.0) #1 SMP",
            f"[    0.000000] Command line: {cmdline}",
            "[    0.000000] DMI: QEMU Standard PC (i440FX + PIIX, 1996), BIOS 1.16.3 04/01/2014",
            "[    0.000000] Hypervisor detected: KVM",
            "[    0.301442] PCI: Using configuration type 1 for base access",
            "[    0.412876] pci 0000:00:03.0: [1af4:1000] type 00 class 0x020000",
            "[    0.413301] pci 0000:00:04.0: [1af4:1001] type 00 class 0x010000",
            "[    0.902114] virtio_blk virtio1: [vda] 41943040 512-byte logical blocks (21.5 GB)",
        ],
        "direct_window_offset": None,
        "devices": [
            {
                "bdf": "0000:00:03.0",
                "vendor": 0x1AF4,
                "device": 0x1000,
                "class_code": 0x020000,
                "driver": "virtio-pci",
                "numa_node": -1,
                "group": None,
                "group_type": None,
                "pcie": None,
            },
            {
                "bdf": "0000:00:04.0",
                "vendor": 0x1AF4,
                "device": 0x1001,
                "class_code": 0x010000,
                "driver": "virtio-pci",
                "numa_node": -1,
                "group": None,
                "group_type": None,
                "pcie": None,
            },
        ],
    }


_HOSTS = {
    "x86-vtd": _x86_vtd,
    "amd-vi": _amd_vi,
    "arm-smmuv3": _arm_smmuv3,
    "power-pseries": _power_pseries,
    "vm-no-iommu": _vm_no_iommu,
}


def _write(path: pathlib.Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def _symlink(link: pathlib.Path, target: str) -> None:
    """A relative symlink, as sysfs has; replaced if it is already there."""
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() or link.exists():
        link.unlink()
    os.symlink(target, link)


def _speed_text(code: int) -> str:
    return f"{_SPEEDS[code]:.1f} GT/s PCIe"


def _write_device(sysfs: pathlib.Path, dev: _Device) -> None:
    bdf = dev["bdf"]
    d = sysfs / "bus" / "pci" / "devices" / bdf
    d.mkdir(parents=True, exist_ok=True)
    _write(d / "vendor", f"0x{dev['vendor']:04x}")
    _write(d / "device", f"0x{dev['device']:04x}")
    _write(d / "class", f"0x{dev['class_code']:06x}")
    _write(d / "numa_node", str(dev["numa_node"]))
    pcie = dev["pcie"]
    cfg = config_space(
        vendor=dev["vendor"],
        device=dev["device"],
        class_code=dev["class_code"],
        pcie=dict(pcie) if pcie is not None else None,
    )
    (d / "config").write_bytes(cfg)
    if pcie is not None:
        _write(d / "current_link_speed", _speed_text(pcie["speed_code"]))
        _write(d / "current_link_width", str(pcie["width"]))
        _write(d / "max_link_speed", _speed_text(pcie["max_speed_code"]))
        _write(d / "max_link_width", str(pcie["max_width"]))

    (sysfs / "bus" / "pci" / "drivers" / dev["driver"]).mkdir(parents=True, exist_ok=True)
    _symlink(d / "driver", f"../../../../bus/pci/drivers/{dev['driver']}")

    group = dev["group"]
    if group is not None:
        g = sysfs / "kernel" / "iommu_groups" / str(group)
        _write(g / "type", dev["group_type"] or "DMA")
        _symlink(g / "devices" / bdf, f"../../../../bus/pci/devices/{bdf}")
        _symlink(d / "iommu_group", f"../../../../kernel/iommu_groups/{group}")


def _cmdline_params(cmdline: str) -> dict[str, str]:
    params: dict[str, str] = {}
    for word in cmdline.split():
        key, sep, value = word.partition("=")
        if sep and key in _IOMMU_PARAMS:
            params[key] = value
    return params


def _truth_pcie(pcie: _Pcie | None) -> dict[str, Any] | None:
    if pcie is None:
        return None
    return {
        "speed_gts": _SPEEDS[pcie["speed_code"]],
        "width": pcie["width"],
        "max_speed_gts": _SPEEDS[pcie["max_speed_code"]],
        "max_width": pcie["max_width"],
        "mps": pcie["mps"],
        "mps_supported": pcie["mps_supported"],
        "mrrs": pcie["mrrs"],
        "relaxed_ordering": pcie["relaxed_ordering"],
        "no_snoop": pcie["no_snoop"],
        "ext_tags": pcie["ext_tags"],
    }


def build(kind: str, root: pathlib.Path) -> dict[str, Any]:
    """Create the host tree of `kind` under `root` and return the truth about it."""
    if kind not in _HOSTS:
        raise ValueError(f"unknown host kind {kind!r}; expected one of {', '.join(KINDS)}")
    host = _HOSTS[kind]()
    root = pathlib.Path(root)
    sysfs = root / "sys"

    for dev in host["devices"]:
        _write_device(sysfs, dev)

    if host["units"]:
        for unit in host["units"]:
            u = sysfs / "class" / "iommu" / unit
            u.mkdir(parents=True, exist_ok=True)
            if host["iommu_driver"] == "intel-vt-d":
                _write(u / "intel-iommu" / "version", "1:0")

    _write(root / "proc" / "cmdline", host["cmdline"])
    _write(root / "proc" / "cpuinfo", "\n".join(host["cpuinfo"]))
    _write(root / "var" / "log" / "dmesg", "\n".join(host["dmesg"]))

    devices: dict[str, dict[str, Any]] = {}
    for dev in host["devices"]:
        devices[dev["bdf"]] = {
            "vendor": dev["vendor"],
            "device": dev["device"],
            "class": dev["class_code"],
            "driver": dev["driver"],
            "numa_node": None if dev["numa_node"] == -1 else dev["numa_node"],
            "iommu_group": dev["group"],
            "group_type": dev["group_type"],
            "pcie": _truth_pcie(dev["pcie"]),
        }
    return {
        "kind": kind,
        "iommu_driver": host["iommu_driver"],
        "iommu_units": list(host["units"]),
        "cmdline": _cmdline_params(host["cmdline"]),
        "direct_window_offset": host["direct_window_offset"],
        "devices": devices,
    }
