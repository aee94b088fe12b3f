"""``dmalab platforms``: the built-in platforms, or one's parameters and their sources."""

from __future__ import annotations

import argparse
from typing import Any

from dmalab import sim
from dmalab.cli import options
from dmalab.types import DeviceCheckLine


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``platforms``."""
    pl = sub.add_parser(
        "platforms",
        help="list the built-in platforms and devices, or show one's parameters and their sources",
        description="Without a name, list the platforms (hosts, and the seeds' machines) and the "
        "devices a host's PCIe slot can take; with one, every parameter with its unit (in its "
        "name) and provenance (cited source, fitted, or assumed). A name may be HOST+DEVICE: "
        "the host with that device (a built-in name or a device file) in its slot.",
    )
    pl.add_argument(
        "name",
        nargs="?",
        help="platform name, TOML file, or HOST+DEVICE (with --check: or a device)",
    )
    pl.add_argument(
        "--check",
        action="store_true",
        help="the datasheet check: does each device reach what its datasheet rates it for (a "
        "NIC's line rate with its smallest frames, a drive's rated IOPS, an engine's rated "
        "throughput) where the host's link allows it? Without a name every built-in device on "
        "every host with a PCIe slot; with a device, that device on every such host. A device "
        "that falls short by its own parts FAILs (exit status 1); a host that limits it, and "
        "a link that trains down, are noted",
    )
    pl.add_argument(
        "--sensitivity",
        choices=SENSITIVITY,
        metavar="FIGURE",
        help="rank the named platform's uncertain parameters (assumed, fitted, or cited to a "
        "precision) by how much each moves FIGURE when taken alone from the low to the high "
        "end of its span (range, fit range or precision), the others "
        "at their files' values (a one-at-a-time swing: what to measure first): "
        f"{', '.join(SENSITIVITY)} (bench dma at --size and --direction; bench map with one "
        "CPU, strict)",
    )
    pl.add_argument(
        "--size",
        type=options.integer(1, 1 << 24, "1..=16777216"),
        default=64,
        metavar="BYTES",
        help="with --sensitivity: bytes per DMA of the bench dma point, 1..=16777216 (default 64)",
    )
    pl.add_argument(
        "--direction",
        choices=("read", "write"),
        default="read",
        help="with --sensitivity: the bench dma point's direction (default read)",
    )
    options.add_format(pl)
    options.add_choice(pl)
    pl.set_defaults(func=run)


SENSITIVITY = ("bandwidth_gbit_s", "latency_ns", "transactions_per_s", "map_us", "unmap_us")
"""The figures --sensitivity ranks parameters by."""


def run(args: argparse.Namespace) -> int:
    """List the platforms, or show the one named, or run the datasheet check."""
    if not args.sensitivity:
        options.refuse(args, ("size", "direction"), "sets the bench dma point of --sensitivity")
    if args.check:
        options.refuse(
            args,
            ("sensitivity",),
            "ranks one platform's parameters; --check runs each device's datasheet rating",
        )
        return _check(args)
    if args.sensitivity:
        return _sensitivity(args)
    console = options.console()
    if not args.name:
        names = sim.platforms()
        devices = {d: sim.device_info(d) for d in sim.devices()}
        if args.format != "table":
            rows = [{"name": n, "kind": "platform"} for n in names]
            rows += [{"name": d, "kind": i["kind"]} for d, i in devices.items()]
            options.output(args, {"platforms": names, "devices": list(devices)}, rows=rows)
        else:
            console.print("platforms:")
            for n in names:
                console.print(f"  {n}: {sim.platform_info(n)['description']}")
            for kind, slot in (("pcie", "PCIe slot"), ("copy-engine", "copy-engine slot")):
                console.print(f"devices for a host's {slot} (--device NAME, or HOST+NAME):")
                for d, i in devices.items():
                    if i["kind"] == kind:
                        console.print(f"  {d}: {i['description']}")
        return 0
    info = sim.platform_info(args.name, options.choices(args.choice))
    if args.format != "table":
        picks = options.choices(args.choice)
        options.emit(
            info,
            args.format,
            rows=info["params"],
            platform=args.name,
            choices=picks,
            command=args.argv,
        )
        return 0
    from rich.table import Table

    console.print(
        f"{info['name']}: {info['description']}\nbus: {info['bus']}; options: {info['choices']}"
    )
    t = Table()
    for c in ("parameter", "value", "range", "provenance", "note"):
        t.add_column(c, overflow="fold")
    for rec in info["params"]:
        kind, note = rec["provenance"]["kind"], rec["provenance"]["note"]
        shown = "exact" if rec.get("exact") else range_text(rec.get("range"))
        if rec.get("fit_range") is not None:
            shown += f" (fit {range_text(rec['fit_range'])})"
        t.add_row(rec["field"], rec["value"], shown, kind, note)
    console.print(t)
    return 0


def _sensitivity(args: argparse.Namespace) -> int:
    """The one-at-a-time swing of every uncertain parameter on one figure, largest first."""
    from dmalab import DmalabError, devdma, intervals, mapbench

    if not args.name:
        raise DmalabError("--sensitivity: name a platform (or HOST+DEVICE)")
    choices = options.choices(args.choice)
    figure = args.sensitivity
    if figure in devdma.FIGURES:
        point = devdma.points(sizes=[args.size], direction=[args.direction])

        def value(d: dict[str, Any] | None) -> float:
            (rec,) = devdma.measure(args.name, point, choices, draws=d)
            return float(rec[figure])  # type: ignore[literal-required]
    else:

        def value(d: dict[str, Any] | None) -> float:
            rec = mapbench.run(args.name, maps_per_thread=512, choices=choices, draws=d)
            return float(rec[figure])  # type: ignore[literal-required]

    rows = intervals.swings(args.name, value, choices)
    if args.format != "table":
        options.output(args, rows)
        return 0
    t = options.plain_table(["parameter", "range", "at lo", "at hi", "swing"], ["swing"])
    for r in rows:
        t.add_row(
            r["param"],
            f"{r['lo']}..{r['hi']}" if not isinstance(r["lo"], str) else f"{r['lo']}|{r['hi']}",
            f"{r['at_lo']:.4g}",
            f"{r['at_hi']:.4g}",
            f"{r['swing']:+.1%}",
        )
    console = options.console()
    nominal = rows[0]["nominal"] if rows else float("nan")
    console.print(
        f"{args.name}: {figure} = {nominal:.4g} with every parameter at its file's value; each "
        "parameter alone from the low to the high end of its range:",
        markup=False,
        soft_wrap=True,
    )
    console.print(t)
    return 0


def range_text(r: object) -> str:
    """A parameter's stated range as a table shows it: `lo..hi`, `a|b`, or `-` where none."""
    if isinstance(r, dict):
        return f"{r['lo']}..{r['hi']}"
    if isinstance(r, list):
        return "|".join(str(o) for o in r)
    return "-"


def _rate(line: DeviceCheckLine, per_s: float) -> str:
    """A check line's rate ``per_s``: transfers a second, or for a copy engine bytes copied a
    second."""
    if line["what"] == "copy":
        return f"{per_s * line['size_bytes'] / 1e9:.1f} GB/s"
    return f"{per_s / 1e6:.2f} M/s"


def _check(args: argparse.Namespace) -> int:
    """The datasheet check of the platforms asked for; 1 if any device fails its own rating."""
    from dmalab import _native

    # A host with a device in its PCIe slot is one whose device came from a device file; a
    # host takes a copy engine if it states the core's side of one ([dma_engine]).
    slots = {
        "pcie": sim.platforms_with("device_link"),
        "copy-engine": sim.platforms_with("dma_engine"),
    }
    if not args.name:
        # Every rated device on every host with a slot for it.
        rated = [d for d in sim.devices() if sim.device_info(d)["rated"] == "yes"]
        pairs = [(h, d) for d in rated for h in slots[sim.device_info(d)["kind"]]]
    elif _native.is_device(args.name):
        pairs = [(h, args.name) for h in slots[sim.device_info(args.name)["kind"]]]
    else:
        pairs = [(args.name, "")]
    choices = options.choices(args.choice)
    lines = []
    for host, dev in pairs:
        mine = _native.device_check(f"{host}+{dev}" if dev else host, choices)
        if dev:
            # Only the named device's lines: the host's other slot keeps its own device.
            engine = sim.device_info(dev)["kind"] == "copy-engine"
            mine = [ln for ln in mine if (ln["what"] == "copy") == engine]
        lines += mine
    if args.format != "table":
        options.output(args, lines, rows=lines)
    else:
        numbers = ["size", "needed", "model"]
        t = options.plain_table(["platform", "what", *numbers, "limit", "verdict", "why"], numbers)
        for ln in lines:
            note = ln["what"] in ("link", "rating")
            t.add_row(
                ln["platform"],
                ln["what"],
                "" if note else str(ln["size_bytes"]),
                "" if note else _rate(ln, ln["needed_per_s"]),
                "" if note else _rate(ln, ln["modelled_per_s"]),
                "" if note else ln["limit"],
                ln["verdict"].upper() if ln["verdict"] == "fail" else ln["verdict"],
                ln["reason"],
            )
        options.console().print(t)
    failed = [ln for ln in lines if ln["verdict"] == "fail"]
    if failed:
        options.console(stderr=True).print(
            f"{len(failed)} of {len(lines)} lines FAIL: a device cannot reach its own rating"
        )
        return 1
    return 0
