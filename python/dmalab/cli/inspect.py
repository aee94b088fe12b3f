"""``dmalab inspect``: read a Linux host's DMA path and write it as a platform skeleton."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from dmalab import ScenarioError
from dmalab.cli import options

if TYPE_CHECKING:
    from dmalab.inspect import Host


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``inspect``."""
    p = sub.add_parser(
        "inspect",
        help="read a Linux host's PCI devices, links, NUMA nodes, IOMMU groups and policy",
        description=(
            "Read a Linux host (this one, or a copied tree with --root): its PCI devices and "
            "links (speed, width, Max_Payload_Size, Max_Read_Request_Size, Extended Tag, Relaxed "
            "Ordering and No Snoop enables from configuration space), each device's NUMA node "
            "and IOMMU group with its domain type, the IOMMU driver and the kernel parameters "
            "that set its invalidation policy, and POWER's 64-bit direct DMA window from the "
            "kernel log. Prints a summary, says what it could not read, and with --out writes a "
            "platform file whose every value is inspected (naming the file) or assumed (saying "
            "why), loadable with `dmalab platforms FILE`."
        ),
    )
    p.add_argument(
        "--root", type=options.nonempty, default="/", help="the host's filesystem root (default /)"
    )
    p.add_argument(
        "--dumps",
        type=options.nonempty,
        metavar="DIR",
        help="read a saved system dump instead of a live host: the sys-*.txt files of a "
        "pcie-bench result directory (lspci -vvv, /proc/cpuinfo, dmidecode, numactl --hardware, "
        "lstopo, the kernel command line, dmesg); with --out, write a whole host file (bus, "
        "memory path, VT-d unit) whose values name the file and line they came from or are "
        "assumed from the CPU's generation with a range; a missing or garbled file is a warning",
    )
    p.add_argument(
        "--out",
        type=options.nonempty,
        metavar="FILE",
        help="write a platform skeleton (.toml) here, and beside it one device file per PCI "
        "Express function (NAME-BDF.toml), the described one its default device; each written "
        "whole (a temporary file, then renamed), and a file there that is not a platform (or "
        "device) file refused unless --force",
    )
    options.add_force(p, "--out", "a platform or device file")
    p.add_argument(
        "--device", type=options.nonempty, metavar="BDF", help="the device the platform describes"
    )
    p.add_argument(
        "--name", type=options.nonempty, default="inspected-host", help="the platform's name"
    )
    options.add_format(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Inspect, print, and write the platform if asked."""
    from dmalab import files, inspect

    options.output_file(args, "out", (files.PLATFORM,), "a platform file")
    if not args.out:
        options.refuse(args, ("force",), "applies to the platform file written with --out")
    if args.dumps:
        return _dumps(args)
    if not args.out:
        options.refuse(args, ("device", "name"), "applies to the platform file written with --out")
    if not Path(args.root).is_dir():
        raise ScenarioError(f"--root {args.root}: not a directory")
    host = inspect.inspect(args.root)
    if args.out:
        if not args.out.endswith(".toml"):
            raise ScenarioError(f"--out {args.out}: the file must end in .toml")
        _write(host, args)
    data = host.as_dict()
    if args.format != "table":
        rows = [
            {k: v for k, v in d.items() if k != "pcie"} | (d["pcie"] or {}) for d in data["devices"]
        ]
        options.emit(data, args.format, rows=rows, command=args.argv)
        return 0
    _print(host)
    return 0


def _write(host: Host, args: argparse.Namespace) -> None:
    """The host file at --out and, beside it, one device file per PCI Express function; the
    function the host describes (--device, or the first network or storage one) is its
    default device."""
    from dmalab import files, inspect
    from dmalab.provenance import created_utc

    err = options.console(stderr=True)
    out = Path(args.out)
    picked = inspect._pick(host, args.device)
    default = None
    beside = [
        (d, out.parent / inspect.device_file_name(args.name, d))
        for d in host.devices
        if d.pcie is not None
    ]
    for _, file in beside:
        # Every file is checked before any is written.
        options.output_file(args, "out", (files.DEVICE,), "a device file", path=str(file))
    for d, file in beside:
        name = file.stem
        files.write_atomic(file, inspect.device_toml(d, name, date=created_utc()))
        err.print(f"wrote {file}")
        if picked is not None and d.bdf == picked.bdf:
            default = file.name
    text = inspect.platform_toml(
        host, args.name, args.device, date=created_utc(), device_file=default
    )
    files.write_atomic(out, text)
    err.print(f"wrote {out}")


def _dumps(args: argparse.Namespace) -> int:
    """``--dumps DIR``: read the dump, print what it says and where, write the host file."""
    from dmalab import dumps, files

    options.refuse(args, ("root", "device"), "reads a live host; --dumps reads a saved dump")
    if args.out and not args.out.endswith(".toml"):
        raise ScenarioError(f"--out {args.out}: the file must end in .toml")
    dump = dumps.read_dumps(args.dumps)
    name = args.name
    if name == "inspected-host":
        name = Path(args.dumps).resolve().name.split("_", 1)[-1] or name
    err = options.console(stderr=True)
    if args.out:
        files.write_atomic(args.out, dumps.platform_toml(dump, name))
        err.print(f"wrote {args.out}")
    data = dump.as_dict()
    g = dumps.generation(dump.cpu.value if dump.cpu else None)
    data["generation"] = g.name if g else None
    data["iommu_page_bytes"] = dumps.page_bytes(dump)
    if args.format != "table":
        rows = [
            {"fact": k, "value": v["value"] if v else None, "where": v["where"] if v else None}
            for k, v in data.items()
            if k in dumps.FACTS
        ]
        options.emit(data, args.format, rows=rows, command=args.argv)
        return 0
    t = options.plain_table(["fact", "value", "where"], [])
    for k in dumps.FACTS:
        f = getattr(dump, k)
        value = "-" if f is None else f.value
        if k in ("vtd_cap", "vtd_ecap") and f is not None:
            value = f"{f.value:#x}"
        t.add_row(k, str(value), "not in the dump" if f is None else f.where)
    console = options.console()
    console.print(f"{dump.root}: {data['generation'] or 'generation unknown'}")
    console.print(t)
    for w in dump.warnings:
        err.print(f"warning: {w}", markup=False)
    return 0


def _print(host: Host) -> None:
    from rich.table import Table

    console = options.console()
    console.print(f"{host.root}: {host.cpu or 'CPU unknown'}")
    units = f" (units {', '.join(host.iommu_units)})" if host.iommu_units else ""
    console.print(f"IOMMU: {host.iommu_driver or 'none found'}{units}")
    where = f" (from {host.flush_from})" if host.flush_from else ""
    console.print(f"invalidation: {host.flush or 'unknown'}{where}")
    params = " ".join(f"{k}={v}" for k, v in host.cmdline.items())
    console.print(f"kernel parameters: {params or 'none of the IOMMU ones'}")
    if host.direct_window_offset is not None:
        console.print(f"64-bit direct DMA window at offset {host.direct_window_offset:#x}")
    t = Table(title="PCI functions", box=None, pad_edge=False)
    for col in ("BDF", "id", "class", "driver", "NUMA", "link", "MPS/MRRS", "RO NS tag", "group"):
        t.add_column(col)
    for d in host.devices:
        link, sizes, bits = "-", "-", "-"
        if d.pcie is not None:
            p = d.pcie
            link = f"{p.speed_gts or '?'} GT/s x{p.width or '?'}"
            sizes = f"{p.mps}/{p.mrrs}"
            bits = " ".join("y" if b else "n" for b in (p.relaxed_ordering, p.no_snoop, p.ext_tags))
        ident = f"{d.vendor or 0:04x}:{d.device or 0:04x}"
        group = "-" if d.iommu_group is None else f"{d.iommu_group} {d.group_type or ''}".strip()
        numa = "-" if d.numa_node is None else str(d.numa_node)
        cls = f"{d.class_code or 0:06x}"
        t.add_row(d.bdf, ident, cls, d.driver or "-", numa, link, sizes, bits, group)
    console.print(t)
    if host.unreadable:
        console.print(f"could not read ({len(host.unreadable)}):")
        for miss in host.unreadable:
            console.print(f"  {miss}", markup=False)
