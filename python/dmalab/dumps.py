"""A host from its system dump: the ``sys-*.txt`` files a pcie-bench result directory keeps (or
the same commands' output saved on a user's machine), read into a platform file whose every
value names the file and line it came from (``inspected``) or, where a dump cannot say, is
``assumed`` from the CPU's generation with a range (``dmalab inspect --dumps``).

Files read, each optional (a missing or garbled one is a warning, never an error):
- ``sys-cpuinfo.txt`` (``/proc/cpuinfo``): the CPU model, sockets (``physical id``), cores,
  threads and the cache line (``clflush size``);
- ``sys-lstopo.txt`` (``lstopo``): the last-level cache's size;
- ``sys-dmidecode.txt`` (``dmidecode``): the memory devices populated and their speed;
- ``sys-numactl.txt`` (``numactl --hardware``): the NUMA nodes;
- ``sys-lspci.txt`` (``lspci -vvv``): the device's link as trained (speed, width), its Device
  Control (Max_Payload_Size, Max_Read_Request_Size) and the Read Completion Boundary;
- ``sys-kernel-cmdline.txt`` and ``sys-dmesg.txt``: whether the IOMMU is on, whether superpages
  are turned off, and each VT-d unit's capability registers (CAP, ECAP), whose fields give the
  table levels (SAGAW), the superpage sizes (SLLPS), page-walk coherency (ECAP.C) and queued
  invalidation (ECAP.QI) (Intel VT-d Architecture Specification, 10.4.2 and 10.4.3).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Dump", "Generation", "generation", "platform_toml", "read_dumps"]

DEVICE_PATTERN = "Netronome"
"""The device a pcie-bench directory measures, as lspci names it."""


@dataclass
class Fact:
    """A value read from a dump, with the file and line it came from."""

    value: Any
    where: str


@dataclass
class Dump:
    """What a host's dump says, each value with where it was read, and what it could not."""

    root: str
    cpu: Fact | None = None
    sockets: Fact | None = None
    cores: Fact | None = None
    threads: Fact | None = None
    line_bytes: Fact | None = None
    llc_bytes: Fact | None = None
    dimms: Fact | None = None
    """Populated memory devices: a list of (size MB, speed MT/s or None)."""
    numa_nodes: Fact | None = None
    link_gts: Fact | None = None
    link_width: Fact | None = None
    mps: Fact | None = None
    mrrs: Fact | None = None
    rcb: Fact | None = None
    iommu_on: Fact | None = None
    superpages_off: Fact | None = None
    vtd_cap: Fact | None = None
    vtd_ecap: Fact | None = None
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        """Every fact as ``{"value", "where"}`` (none where unread), and the warnings."""
        out: dict[str, Any] = {"root": self.root}
        for name in FACTS:
            f = getattr(self, name)
            out[name] = None if f is None else {"value": f.value, "where": f.where}
        out["warnings"] = list(self.warnings)
        return out


FACTS = (
    "cpu",
    "sockets",
    "cores",
    "threads",
    "line_bytes",
    "llc_bytes",
    "dimms",
    "numa_nodes",
    "link_gts",
    "link_width",
    "mps",
    "mrrs",
    "rcb",
    "iommu_on",
    "superpages_off",
    "vtd_cap",
    "vtd_ecap",
)


def _lines(root: Path, name: str, dump: Dump) -> list[str] | None:
    """The lines of ``root/name``, or none (with a warning) where it is missing, unreadable or
    says the command was not there."""
    path = root / name
    try:
        text = path.read_bytes().decode("utf-8", errors="replace")
    except OSError as e:
        dump.warnings.append(f"{name}: cannot be read ({e.strerror or e}); its values are assumed")
        return None
    lines = text.splitlines()
    if any("not found" in ln and ln.startswith("/bin/sh") for ln in lines[:3]):
        dump.warnings.append(f"{name}: the command was missing on the host ({lines[0].strip()})")
        return None
    if not text.strip():
        dump.warnings.append(f"{name}: empty; its values are assumed")
        return None
    return lines


_SIZE = re.compile(r"\((\d+)\s*([KMG])B\)")


def _cpuinfo(lines: list[str], dump: Dump) -> None:
    where = "sys-cpuinfo.txt"
    sockets: set[str] = set()
    threads = 0
    for i, ln in enumerate(lines, 1):
        key, _, value = ln.partition(":")
        key, value = key.strip(), value.strip()
        if key == "model name" and dump.cpu is None:
            dump.cpu = Fact(" ".join(value.split()), f"{where}:{i}")
        elif key == "physical id":
            sockets.add(value)
        elif key == "processor":
            threads += 1
        elif key == "cpu cores" and dump.cores is None and value.isdigit():
            dump.cores = Fact(int(value), f"{where}:{i} (per socket)")
        elif key == "clflush size" and dump.line_bytes is None and value.isdigit():
            dump.line_bytes = Fact(int(value), f"{where}:{i}")
    if threads:
        dump.threads = Fact(threads, f"{where}: {threads} processor entries")
    if sockets:
        dump.sockets = Fact(len(sockets), f"{where}: physical id {', '.join(sorted(sockets))}")
    if dump.cpu is None:
        dump.warnings.append(f"{where}: no 'model name' line; the CPU's generation is unknown")


def _lstopo(lines: list[str], dump: Dump) -> None:
    for i, ln in enumerate(lines, 1):
        if ln.strip().startswith("L3 "):
            m = _SIZE.search(ln)
            if m:
                n = int(m.group(1)) << {"K": 10, "M": 20, "G": 30}[m.group(2)]
                dump.llc_bytes = Fact(n, f"sys-lstopo.txt:{i}")
                return
    dump.warnings.append("sys-lstopo.txt: no L3 cache line; the LLC's size is assumed")


def _dmidecode(lines: list[str], dump: Dump) -> None:
    dimms: list[tuple[int, int | None]] = []
    first = 0
    block: dict[str, str] | None = None
    at = 0

    def close() -> None:
        nonlocal first
        if block is None:
            return
        size = block.get("Size", "")
        m = re.match(r"(\d+)\s*(MB|GB)", size)
        if m:
            mb = int(m.group(1)) * (1024 if m.group(2) == "GB" else 1)
            sp = re.match(r"(\d+)\s*(MHz|MT/s)", block.get("Configured Clock Speed", ""))
            sp = sp or re.match(r"(\d+)\s*(MHz|MT/s)", block.get("Speed", ""))
            dimms.append((mb, int(sp.group(1)) if sp else None))
            first = first or at

    for i, ln in enumerate(lines, 1):
        if ln.strip() == "Memory Device":
            close()
            block, at = {}, i
        elif block is not None and ":" in ln and ln.startswith("\t") and not ln.startswith("\t\t"):
            k, _, v = ln.strip().partition(":")
            block[k.strip()] = v.strip()
        elif block is not None and not ln.strip():
            close()
            block = None
    close()
    if dimms:
        dump.dimms = Fact(
            dimms, f"sys-dmidecode.txt: {len(dimms)} Memory Devices from line {first}"
        )
    else:
        dump.warnings.append("sys-dmidecode.txt: no populated Memory Device; memory is assumed")


def _numactl(lines: list[str], dump: Dump) -> None:
    for i, ln in enumerate(lines, 1):
        m = re.match(r"available:\s*(\d+)\s+nodes", ln)
        if m:
            dump.numa_nodes = Fact(int(m.group(1)), f"sys-numactl.txt:{i}")
            return
    dump.warnings.append("sys-numactl.txt: no 'available: N nodes' line")


_GTS = re.compile(r"Speed\s+([\d.]+)\s*GT/s")


def _lspci(lines: list[str], dump: Dump, pattern: str) -> None:
    where = "sys-lspci.txt"
    start = next((i for i, ln in enumerate(lines) if pattern in ln and ln[:1].isalnum()), None)
    if start is None:
        dump.warnings.append(f"{where}: no device matching {pattern!r}; its link is assumed")
        return
    end = next((j for j in range(start + 1, len(lines)) if lines[j][:1].isalnum()), len(lines))
    for j in range(start + 1, end):
        ln = lines[j].strip()
        here = f"{where}:{j + 1}"
        if ln.startswith("LnkSta:") and dump.link_gts is None:
            m, w = _GTS.search(ln), re.search(r"Width x(\d+)", ln)
            if m:
                dump.link_gts = Fact(float(m.group(1)), here)
            if w:
                dump.link_width = Fact(int(w.group(1)), here)
        elif ln.startswith("MaxPayload") and "MaxReadReq" in ln and dump.mps is None:
            p = re.search(r"MaxPayload (\d+) bytes, MaxReadReq (\d+) bytes", ln)
            if p:
                dump.mps = Fact(int(p.group(1)), f"{here} (Device Control)")
                dump.mrrs = Fact(int(p.group(2)), f"{here} (Device Control)")
        elif ln.startswith("LnkCtl:") and dump.rcb is None:
            r = re.search(r"RCB (\d+) bytes", ln)
            if r:
                dump.rcb = Fact(int(r.group(1)), here)
    for name in ("link_gts", "mps", "rcb"):
        if getattr(dump, name) is None:
            dump.warnings.append(f"{where}: the device's entry has no {name}; it is assumed")


_CAP = re.compile(r"cap ([0-9a-fA-F]+) ecap ([0-9a-fA-F]+)")
_DRHD = re.compile(r"DRHD base: 0x([0-9a-fA-F]+) flags: 0x([0-9a-fA-F]+)")


def _kernel(cmdline: list[str] | None, dmesg: list[str] | None, dump: Dump) -> None:
    if cmdline is not None:
        text = " ".join(cmdline)
        m = re.search(r"intel_iommu=(\S+)", text)
        opts = m.group(1).split(",") if m else []
        dump.iommu_on = Fact("on" in opts, "sys-kernel-cmdline.txt:1")
        if "sp_off" in opts:
            dump.superpages_off = Fact(True, "sys-kernel-cmdline.txt:1 (intel_iommu=...sp_off)")
    if dmesg is None:
        return
    # The unit that takes every device no other unit lists (flags bit 0, INCLUDE_PCI_ALL)
    # serves an add-in card unless a unit's scope names it; the dump does not list scopes, so
    # that unit is taken, and units that differ are warned of.
    units: list[tuple[bool, int, int, str]] = []
    include_all = False
    for i, ln in enumerate(dmesg, 1):
        d = _DRHD.search(ln)
        if d:
            include_all = int(d.group(2), 16) & 1 == 1
        c = _CAP.search(ln)
        if c:
            units.append(
                (include_all, int(c.group(1), 16), int(c.group(2), 16), f"sys-dmesg.txt:{i}")
            )
        if "disable supported super page" in ln.lower() and dump.superpages_off is None:
            dump.superpages_off = Fact(True, f"sys-dmesg.txt:{i}")
    if not units:
        dump.warnings.append("sys-dmesg.txt: no VT-d unit (DMAR cap/ecap); the IOMMU is assumed")
        return
    chosen = next((u for u in units if u[0]), units[0])
    dump.vtd_cap = Fact(chosen[1], chosen[3] + " (CAP)")
    dump.vtd_ecap = Fact(chosen[2], chosen[3] + " (ECAP)")
    caps = {(u[1] >> 34) & 0xF for u in units} | set()
    if len(caps) > 1:
        dump.warnings.append(
            "sys-dmesg.txt: the VT-d units report different superpage sizes; the unit that "
            f"takes every device ({chosen[3]}) is used"
        )


def read_dumps(root: str | Path, device: str = DEVICE_PATTERN) -> Dump:
    """Read the ``sys-*.txt`` files of ``root``; raises :class:`dmalab.ScenarioError` only if
    ``root`` is no directory."""
    from dmalab import ScenarioError

    path = Path(root)
    if not path.is_dir():
        raise ScenarioError(f"--dumps {root}: not a directory")
    dump = Dump(str(path))
    for name, reader in (
        ("sys-cpuinfo.txt", _cpuinfo),
        ("sys-lstopo.txt", _lstopo),
        ("sys-dmidecode.txt", _dmidecode),
        ("sys-numactl.txt", _numactl),
    ):
        lines = _lines(path, name, dump)
        if lines is not None:
            reader(lines, dump)
    lspci = _lines(path, "sys-lspci.txt", dump)
    if lspci is not None:
        _lspci(lspci, dump, device)
    _kernel(_lines(path, "sys-kernel-cmdline.txt", dump), _lines(path, "sys-dmesg.txt", dump), dump)
    return dump


@dataclass(frozen=True)
class Generation:
    """What a CPU's public specifications say of its DMA path that a dump does not: memory
    channels, the socket links, whether I/O writes allocate in the LLC (DDIO), the LLC's ways."""

    name: str
    pattern: str
    """A regular expression on /proc/cpuinfo's model name."""
    channels: int
    socket_link_gts: float | None
    """QPI transfers a second per link, GT/s (none: one socket, no QPI)."""
    socket_links: int
    ddio: bool
    source: str


GENERATIONS = (
    Generation(
        "Sandy Bridge-EP",
        r"E5-26\d\d(?! v)",
        4,
        7.2,
        2,
        True,
        "Intel ARK, Xeon E5-2600 (Sandy Bridge-EP): 4 DDR3 channels per socket, 2 QPI links at "
        "up to 8 GT/s (7.2 GT/s on the E5-2630); Intel DDIO from the Xeon E5 family on",
    ),
    Generation(
        "Ivy Bridge-EP",
        r"E5-26\d\d v2",
        4,
        7.2,
        2,
        True,
        "Intel ARK, Xeon E5-2600 v2 (Ivy Bridge-EP): 4 DDR3 channels per socket, 2 QPI links "
        "(7.2 GT/s on the E5-2620 v2); Intel DDIO from the Xeon E5 family on",
    ),
    Generation(
        "Haswell-EP",
        r"E5-26\d\d v3",
        4,
        8.0,
        2,
        True,
        "Intel ARK, Xeon E5-2600 v3 (Haswell-EP): 4 DDR4 channels per socket, 2 QPI links "
        "(8 GT/s on the E5-2620 v3); Intel DDIO from the Xeon E5 family on",
    ),
    Generation(
        "Haswell (client, Xeon E3)",
        r"E3-12\d\d v3",
        2,
        None,
        0,
        False,
        "Intel ARK, Xeon E3-1200 v3: 2 DDR3 channels, one socket (DMI, no QPI); Intel DDIO is "
        "a Xeon E5/E7 feature, not the E3's",
    ),
)


def generation(cpu: str | None) -> Generation | None:
    """The generation whose pattern the model name matches, or none."""
    if cpu:
        for g in GENERATIONS:
            if re.search(g.pattern, cpu):
                return g
    return None


def _q(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _v(v: object) -> str:
    if isinstance(v, str):
        return _q(v)
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, list):
        return "[" + ", ".join(_v(x) for x in v) + "]"
    return str(v)


def _line(key: str, value: object, kind: str, note: str, rng: list[Any] | None = None) -> str:
    extra = f", range = {_v(rng)}" if rng is not None else ""
    exact = ", exact = true" if kind == "source" else ""
    return f"{key} = {{ value = {_v(value)}, {kind} = {_q(note)}{extra}{exact} }}"


GENERATION_GTS = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5, 64.0: 6}


def page_bytes(dump: Dump) -> int:
    """The page the IOMMU maps a pcie-bench buffer in: 2 MiB where the unit has 2 MiB
    superpages (CAP.SLLPS bit 0) and the kernel does not turn them off, else 4 KiB. The
    buffers are 4 MiB chunks, physically contiguous and aligned (sys-buf-sz.txt and
    sys-dma-addrs.txt), so Linux's VT-d driver maps them in 2 MiB pages where it may."""
    cap = dump.vtd_cap.value if dump.vtd_cap else 0
    if dump.superpages_off is not None or not (cap >> 34) & 1:
        return 4096
    return 2 << 20


def platform_toml(
    dump: Dump, name: str, device: str = "netronome-nfp6000", *, calibrated: bool = True
) -> str:
    """The host as a platform file: what the dump says, ``inspected`` (file and line); what
    the CPU's public specifications say, ``source``; the walk values the validation corpus
    fixed for the CPU's generation, ``fitted`` (:data:`WALK_FITS`; not with ``calibrated``
    false: the host from its dump alone, as leave-one-host-out predicts it); the rest
    ``assumed`` with a range, the reasons those of dmalab's Broadwell-EP reference host (the
    same server lineage)."""
    g = generation(dump.cpu.value if dump.cpu else None)
    gname = g.name if g else "an unknown x86 generation"
    warn = list(dump.warnings)
    if g is None:
        warn.append(
            f"the CPU ({dump.cpu.value if dump.cpu else 'unknown'}) matches no known generation: "
            "memory channels, socket links and DDIO are assumed with wide ranges"
        )
    lines = [
        f"# A host built by `dmalab inspect --dumps` from {dump.root}",
        f"# CPU: {dump.cpu.value if dump.cpu else 'unknown'} ({gname})",
        *[f"# warning: {w}" for w in warn],
        "",
        f"name = {_q(name)}",
        f"description = {_q(f'{gname} host read from its system dump')}",
        f"default_device = {_q(device)}",
        "",
        "[bus]",
        'kind = "pcie"',
        "",
        "[bus.pcie]",
    ]
    gts = dump.link_gts.value if dump.link_gts else None
    if gts in GENERATION_GTS and dump.link_gts:
        lines.append(_line("generation", GENERATION_GTS[gts], "inspected", dump.link_gts.where))
    else:
        lines.append(
            _line(
                "generation",
                3,
                "assumed",
                "the link's speed is not in the dump; Gen3, "
                "the generation of these CPUs' root ports; range 1 to 3",
                [1, 3],
            )
        )
    if dump.link_width:
        lines.append(_line("lanes", dump.link_width.value, "inspected", dump.link_width.where))
    else:
        lines.append(_line("lanes", 8, "assumed", "width not in the dump; range 1 to 16", [1, 16]))
    if dump.mps:
        lines.append(_line("max_payload_bytes", dump.mps.value, "inspected", dump.mps.where))
    else:
        lines.append(
            _line(
                "max_payload_bytes",
                256,
                "assumed",
                "not in the dump: the Max_Payload_Size "
                "Xeon root ports of the time settle on; range 128 to 256",
                [128, 256],
            )
        )
    if dump.rcb:
        lines.append(
            _line("read_completion_boundary_bytes", dump.rcb.value, "inspected", dump.rcb.where)
        )
    else:
        lines.append(
            _line(
                "read_completion_boundary_bytes",
                64,
                "assumed",
                "not in the dump: Intel root ports report RCB 64; range 64 to 128",
                [64, 128],
            )
        )
    lines += [
        _line(
            "ecrc",
            "off",
            "assumed",
            "ECRC is optional and Linux leaves it off unless asked "
            "(no pci=ecrc on the command line); range off or on",
            ["off", "on"],
        ),
        _line(
            "tlps_per_ack",
            4,
            "assumed",
            "the root port's data link layer coalesces an Ack over a few TLPs; range 1 to 8",
            [1, 8],
        ),
        _line(
            "tlps_per_fc_update",
            4,
            "assumed",
            "credits returned every few TLPs; range 1 to 8",
            [1, 8],
        ),
    ]
    if dump.line_bytes:
        lines.append(
            _line("cache_line_bytes", dump.line_bytes.value, "inspected", dump.line_bytes.where)
        )
    else:
        lines.append(_line("cache_line_bytes", 64, "source", "x86 cache line (Intel SDM)"))
    lines.append(
        _line(
            "read_modify_write_ns",
            90,
            "assumed",
            "a partial-line DMA write reads the line "
            "from DRAM first (about 80 ns with the controller's queue) and merges it; range "
            "60 to 180 ns",
            [60, 180],
        )
    )
    fit = host_fit(name) if calibrated else None
    lines += ["", "[memory]", *_memory_lines(dump, g, fit)]
    lines += ["", "[iommu_hw]", *_iommu_lines(dump, g, calibrated)]
    return "\n".join(lines) + "\n"


def _host_line(
    fit: HostFit | None, key: str, value: int, kind: str, note: str, rng: list[int]
) -> str:
    """A memory value: fitted on the host's own directories where :data:`HOST_FITS` has it,
    else as ``_line`` writes it."""
    if fit is None or key not in fit.values:
        return _line(key, value, kind, note, rng)
    why = HOST_FIT_NOTE.format(points=fit.points, how=fit.how)
    return _line_fitted(
        key, fit.values[key], f"{why} (before the fit: {value}, {kind}: {note})", rng
    )


def _memory_lines(dump: Dump, g: Generation | None, fit: HostFit | None = None) -> list[str]:
    sockets = dump.sockets.value if dump.sockets else 1
    nodes = dump.numa_nodes.value if dump.numa_nodes else sockets
    out = [
        _host_line(
            fit,
            "root_complex_ns",
            200,
            "assumed",
            "a request's fixed time through the root port "
            "and integrated I/O and the ring trip to the caching agent and back; range 100 "
            "to 400 ns",
            [100, 400],
        ),
        _line(
            "line_ns",
            2,
            "assumed",
            "the integrated I/O moves a 64-byte line in about 2 ns, "
            "more than one x8 Gen3 link carries; range 1 to 3 ns",
            [1, 3],
        ),
        _line(
            "request_ns",
            2,
            "assumed",
            "one inbound TLP header decoded and queued in about "
            "two uncore clocks; range 1 to 10 ns",
            [1, 10],
        ),
        _host_line(
            fit,
            "partial_line_ns",
            4,
            "assumed",
            "a line touched only in part takes a read-"
            "current or an ownership read: about two line slots more; range 0 to 20 ns",
            [0, 20],
        ),
        _line(
            "llc_ns",
            20,
            "assumed",
            "a ring hop to the owning LLC slice and its lookup; range 10 to 40 ns",
            [10, 40],
        ),
        _host_line(
            fit,
            "dram_ns",
            80,
            "assumed",
            "an LLC miss to the memory controller, activate and "
            "CAS, and back: about 80 ns; range 70 to 120 ns",
            [70, 120],
        ),
    ]
    dimms = dump.dimms.value if dump.dimms else []
    speeds = [s for _, s in dimms if s]
    if dimms and speeds and g is not None and dump.dimms:
        per_socket = max(1, len(dimms) // max(1, nodes))
        channels = min(g.channels, per_socket)
        mts = min(speeds)
        out.append(
            _line(
                "dram_bytes_per_us",
                channels * mts * 8,
                "inspected",
                f"{dump.dimms.where}: {len(dimms)} DIMMs over {nodes} node(s) at {mts} MT/s, "
                f"{channels} of the {g.name}'s {g.channels} channels a socket (one DIMM a "
                f"channel taken) x 8 bytes",
            )
        )
    else:
        out.append(
            _line(
                "dram_bytes_per_us",
                51_200,
                "assumed",
                "memory not in the dump: 4 channels "
                "of DDR3-1600; range 12,800 to 76,800 (one DDR3-1600 channel to four of "
                "DDR4-2400)",
                [12_800, 76_800],
            )
        )
    llc = dump.llc_bytes.value if dump.llc_bytes else 15 << 20
    if dump.llc_bytes:
        out.append(_line("llc_bytes", llc, "inspected", dump.llc_bytes.where))
    else:
        out.append(
            _line(
                "llc_bytes",
                llc,
                "assumed",
                "not in the dump: 15 MiB; range 4 to 45 MiB",
                [4 << 20, 45 << 20],
            )
        )
    io = llc // 10
    out.append(
        _line(
            "llc_io_bytes",
            io,
            "assumed",
            "I/O writes allocate in 2 of the LLC's 20 ways "
            "(DDIO's default way mask, as on the Broadwell-EP reference); range 1 to 4 ways",
            [llc // 20, llc // 5],
        )
    )
    if g is not None:
        out.append(_line("write_allocate", "on" if g.ddio else "off", "source", g.source))
    else:
        out.append(
            _line(
                "write_allocate",
                "on",
                "assumed",
                "unknown CPU: DDIO taken as on; range on or off",
                ["on", "off"],
            )
        )
    out.append(
        _host_line(
            fit,
            "socket_link_ns",
            50,
            "assumed",
            "a line homed on the other socket crosses QPI "
            "out and back, about 50 ns added (unused where the host has one socket); range "
            "40 to 80 ns",
            [40, 80],
        )
    )
    if g is not None and g.socket_link_gts:
        bw = int(g.socket_link_gts * 2 * 1000 * g.socket_links)
        out.append(
            _line(
                "socket_link_bytes_per_us",
                bw,
                "source",
                f"{g.source}: {g.socket_links} links x {g.socket_link_gts} GT/s x 2 bytes a "
                "transfer each way (raw, before flit headers)",
            )
        )
    else:
        out.append(
            _line(
                "socket_link_bytes_per_us",
                25_600,
                "assumed",
                "one socket: no socket link; "
                "a nominal QPI-class rate, unused; range 12,800 to 38,400",
                [12_800, 38_400],
            )
        )
    out.append(
        _line(
            "posted_writes",
            32,
            "assumed",
            "the root port's posted buffer, about 8 KiB (32 TLPs of 256 bytes); range 16 to 64",
            [16, 64],
        )
    )
    return out


WALK_GRID = (
    "by dmalab validate on the pcie-bench corpus's {host} IOMMU directories, 2026-12-07 "
    "(docs/results/2026-12-07-device-refit.md): a grid of IOTLB sizes 64 and 128, 1 to 12 "
    "walkers and steps of 30 to 360 ns, the best share of points within 10%; fit_range: the "
    "span of each value over the grid points whose share is within one point of it. Past the "
    "IOTLB's reach with 4 KiB pages every DMA of 64 to 256 bytes takes {per_dma} whatever its "
    "size, yet a lone 64-byte read takes {miss} longer than within reach: each walk's table "
    "read crosses the uncore to the caching agent and back as a DMA's does, and several walks "
    "are in flight"
)
"""Where a generation's fitted walk values come from."""


@dataclass(frozen=True)
class WalkFit:
    """A generation's IOTLB and walk values fitted on its corpus host (``WALK_GRID``)."""

    host: str
    per_dma: str
    miss: str
    iotlb_entries: tuple[int, int, int]
    walkers: tuple[int, int, int]
    walk_step_ns: tuple[int, int, int]
    """Each: (value, fit_range low, fit_range high)."""


WALK_FITS = {
    "Haswell-EP": WalkFit(
        "Haswell-EP host (hsw-Xeon-E5-2620v3_dell-t630, 3,292 points)",
        "44 to 61 ns",
        "213 to 227 ns",
        (128, 64, 128),
        (7, 3, 8),
        (320, 120, 360),
    ),
    "Ivy Bridge-EP": WalkFit(
        "Ivy Bridge-EP host (ib-Xeon-E5-2620v2_dell-t620, local and remote, 6,584 points)",
        "50 to 65 ns",
        "280 to 293 ns",
        (128, 64, 128),
        (8, 5, 8),
        (360, 200, 360),
    ),
}
"""The generations whose walks the corpus fixes. Not Sandy Bridge-EP: its one IOMMU directory
falls past the IOTLB's reach as 4 KiB pages do though its dump says 2 MiB pages map the
buffers, so the grid cannot tell its values apart (every one gives the same share); its
values stay assumed."""


HOST_FIT_NOTE = (
    "fitted by {how} on this host's own pcie-bench directories ({points} "
    "points, the NFP-6000 as shipped), 2026-12-07 (docs/results/2026-12-07-device-refit.md); "
    "fit_range: the values, each moved alone, with which its share of points within 10% stays "
    "within one point"
)
"""Where a corpus host's own fitted memory values come from."""


@dataclass(frozen=True)
class HostFit:
    """A corpus host's memory values fitted on its own directories (``HOST_FIT_NOTE``)."""

    points: str
    values: dict[str, tuple[int, int, int]]
    """``[memory]`` key to (value, fit_range low, fit_range high)."""
    how: str = "dmalab validate --fit-hosts"


HOST_FITS: dict[str, HostFit] = {
    "hsw-Xeon-E5-2620v3_dell-t630": HostFit(
        "1,318",
        {
            "root_complex_ns": (195, 160, 218),
            "partial_line_ns": (4, 0, 7),
            "dram_ns": (70, 70, 93),
        },
    ),
    "ib-Xeon-E5-2620v2_dell-t620": HostFit(
        "2,424",
        {
            "root_complex_ns": (204, 192, 211),
            "partial_line_ns": (5, 0, 7),
            "dram_ns": (84, 70, 93),
            "socket_link_ns": (63, 52, 72),
        },
    ),
    "snb-Xeon-E5-2630_dell-t620": HostFit(
        "1,020",
        {"root_complex_ns": (223, 159, 258), "partial_line_ns": (4, 0, 6)},
        "dmalab.corpusfit.fit_device (the root complex and a partial line, DRAM held at its "
        "assumed 80 ns)",
    ),
}
"""The measured machines of the corpus, by host name (a directory's host part), with the
memory values the corpus fixes for each: the root complex's fixed time, a partial line's
extra cost and a DRAM access (and on the two-socket host, the socket link). Only values the
host's own points fix (a standard uncertainty below half the stated range) are kept; the rest
stay assumed. On the Sandy Bridge-EP host the root complex and a DRAM access trade off (a fit
of all three put DRAM at the top of its range with an uncertainty of 61 ns), so DRAM stays assumed
at 80 ns and the root complex and partial line were fitted with it there. Not the
desktop-class host: its root complex's fit runs to the top of its range and still leaves its
latencies 22% short, a gap no value in range closes. A host built from a dump of any other
machine, or with ``calibrated`` false (leave-one-host-out), has none of these."""


def host_fit(name: str) -> HostFit | None:
    """The corpus's fit for the host named ``name``: a directory's name is its host's, then
    its configuration (``-iommu``, ``-s0-s1-s1``, ...)."""
    for host, fit in HOST_FITS.items():
        if name == host or name.startswith(host + "-"):
            return fit
    return None


def _line_fitted(key: str, fit: tuple[int, int, int], note: str, rng: list[int]) -> str:
    value, lo, hi = fit
    return (
        f'{key} = {{ value = {value}, fitted = {_q(note)}, claims = ["pcie-bench corpus"], '
        f"range = {_v(rng)}, fit_range = {_v([lo, hi])} }}"
    )


def _walk_lines(g: Generation | None, calibrated: bool) -> list[str]:
    """The IOTLB's size, the walkers and a walk's step: fitted on the corpus for the
    generations in :data:`WALK_FITS` (unless ``calibrated`` is false: the host from its dump
    alone), else assumed."""
    fit = WALK_FITS.get(g.name) if g is not None and calibrated else None
    if fit is not None:
        why = WALK_GRID.format(host=fit.host, per_dma=fit.per_dma, miss=fit.miss)
        return [
            _line_fitted(
                "iotlb_entries",
                fit.iotlb_entries,
                f"fitted {why} (before the fit: 64, assumed)",
                [32, 128],
            ),
            _line_fitted(
                "walkers", fit.walkers, f"fitted {why} (before the fit: 4, assumed)", [1, 12]
            ),
            _line_fitted(
                "walk_step_ns",
                fit.walk_step_ns,
                f"fitted {why} (before the fit: 200 ns, assumed)",
                [10, 400],
            ),
        ]
    return [
        _line(
            "iotlb_entries",
            64,
            "assumed",
            "Intel does not publish the IOTLB's size; 64 "
            "entries, the size of the same era's core DTLB for 4 KiB pages; range 32 to 128",
            [32, 128],
        ),
        _line("walkers", 4, "assumed", "a few walks in flight; range 1 to 12", [1, 12]),
        _line(
            "walk_step_ns",
            200,
            "assumed",
            "the IOMMU sits in the integrated I/O, so each table read crosses the uncore to the "
            "caching agent and back as a DMA's read does (the root complex's assumed 200 ns, "
            "which holds that trip), besides a few IOMMU clocks; range 10 to 400 ns",
            [10, 400],
        ),
    ]


def _iommu_lines(dump: Dump, g: Generation | None, calibrated: bool) -> list[str]:
    cap = dump.vtd_cap.value if dump.vtd_cap else None
    ecap = dump.vtd_ecap.value if dump.vtd_ecap else None
    iotlb, *walks = _walk_lines(g, calibrated)
    out = []
    if cap is not None and dump.vtd_cap:
        sagaw = (cap >> 8) & 0x1F
        levels = 5 if sagaw & 0x8 else 4 if sagaw & 0x4 else 3
        out.append(
            _line(
                "levels",
                levels,
                "inspected",
                f"{dump.vtd_cap.where}: SAGAW {sagaw:#x} (VT-d 10.4.2)",
            )
        )
        sllps = (cap >> 34) & 0xF
        top = 1 << 30 if sllps & 2 else 2 << 20 if sllps & 1 else 4096
        out.append(
            _line(
                "max_page_bytes",
                top,
                "inspected",
                f"{dump.vtd_cap.where}: SLLPS {sllps:#x} (VT-d 10.4.2)",
            )
        )
    else:
        out.append(
            _line(
                "levels",
                4,
                "assumed",
                "no VT-d unit in the dump: 4 levels for a 48-bit address; range 3 to 4",
                [3, 4],
            )
        )
        out.append(
            _line(
                "max_page_bytes",
                2 << 20,
                "assumed",
                "no VT-d unit in the dump; range 4 KiB to 1 GiB",
                [4096, 1 << 30],
            )
        )
    out += [
        iotlb,
        _line("iotlb_ways", 4, "assumed", "4-way, like that core TLB; range 2 to 8", [2, 8]),
        _line(
            "iotlb_replacement",
            "lru",
            "assumed",
            "pseudo-LRU taken as LRU; range lru, fifo or round-robin",
            ["lru", "fifo", "round-robin"],
        ),
        _line(
            "walk_cache_entries",
            32,
            "assumed",
            "paging-structure caches of unpublished size, 32 entries per level; range 8 to 64",
            [8, 64],
        ),
        *walks,
    ]
    if ecap is not None and dump.vtd_ecap:
        out.append(
            _line(
                "walk_coherent",
                "on" if ecap & 1 else "off",
                "inspected",
                f"{dump.vtd_ecap.where}: ECAP.C = {ecap & 1} (VT-d 10.4.3)",
            )
        )
        out.append(
            _line(
                "invalidation",
                "queued" if ecap & 2 else "register",
                "inspected",
                f"{dump.vtd_ecap.where}: ECAP.QI = {(ecap >> 1) & 1} (VT-d 10.4.3)",
            )
        )
    else:
        out.append(
            _line(
                "walk_coherent",
                "on",
                "assumed",
                "no ECAP in the dump; range on or off",
                ["on", "off"],
            )
        )
        out.append(
            _line(
                "invalidation",
                "queued",
                "assumed",
                "no ECAP in the dump; range queued or register",
                ["queued", "register"],
            )
        )
    out.append(
        _line(
            "invalidation_submit_ns",
            40,
            "assumed",
            "two descriptors written to the queue "
            "and its tail register under the queue's lock; range 20 to 100 ns",
            [20, 100],
        )
    )
    return out
