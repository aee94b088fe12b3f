"""``dmalab platforms``: the built-in platforms, or one's parameters and their sources."""

from __future__ import annotations

import argparse

from dmalab import sim
from dmalab.cli import options


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
    pl.add_argument("name", nargs="?", help="platform name, TOML file, or HOST+DEVICE")
    options.add_format(pl)
    options.add_choice(pl)
    pl.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """List the platforms, or show the one named."""
    console = options.console()
    if not args.name:
        names = sim.platforms()
        devices = sim.devices()
        if args.format != "table":
            rows = [{"name": n, "kind": "platform"} for n in names]
            rows += [{"name": d, "kind": "device"} for d in devices]
            options.output(args, {"platforms": names, "devices": devices}, rows=rows)
        else:
            console.print("platforms:")
            for n in names:
                console.print(f"  {n}: {sim.platform_info(n)['description']}")
            console.print("devices (for a host's PCIe slot: --device NAME, or HOST+NAME):")
            for d in devices:
                console.print(f"  {d}: {sim.device_info(d)['description']}")
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
    for c in ("parameter", "value", "provenance", "note"):
        t.add_column(c, overflow="fold")
    for rec in info["params"]:
        t.add_row(rec["field"], rec["value"], rec["provenance"]["kind"], rec["provenance"]["note"])
    console.print(t)
    return 0
