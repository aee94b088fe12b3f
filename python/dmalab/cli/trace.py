"""``dmalab trace``: the bus commands of one DMA transfer, as a bus analyzer shows them."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from dmalab import ScenarioError, sim
from dmalab.cli import options

if TYPE_CHECKING:
    from rich.console import Console

    from dmalab.types import Trace

# A table longer than this shows its first and last rows; JSON always lists every command.
TABLE_ROWS = 64


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``trace``."""
    tr = sub.add_parser(
        "trace",
        help="the bus commands of one DMA transfer, as a bus analyzer shows them",
        description=(
            "Turn one DMA transfer into the bus commands a device issues on the platform's bus "
            "(PCI: MR/MRL/MRM reads, MW/MWI writes), with start and end times, delayed-read "
            "retries and partially written cache lines; then the totals. Give a trace scenario "
            f"(a TOML file, or a built-in name: {', '.join(sim.trace_scenarios())}) or "
            "--direction, --address and --length (at most 2^24 bytes: a trace lists every "
            f"command; tables longer than {TABLE_ROWS} rows show the first and last ones)."
        ),
    )
    tr.add_argument("scenario", nargs="?", help="scenario file or name (optional)")
    options.add_format(tr)
    options.add_platform(tr)
    options.add_device(tr)
    options.add_choice(tr)
    tr.add_argument(
        "--direction",
        choices=["read", "write", "tx", "rx"],
        help="read = device reads memory (transmit)",
    )
    tr.add_argument(
        "--address", type=options.u64, help="bus address of the first byte (0x... allowed)"
    )
    tr.add_argument("--length", type=options.u64, help="bytes to move")
    tr.add_argument(
        "--mapping",
        choices=["streaming", "consistent"],
        default="streaming",
        help="reads through a hinted host bridge (hp-rx2600-zx1): the mapping whose hints apply "
        "(default streaming)",
    )
    tr.add_argument(
        "--hint",
        action="append",
        type=_hint,
        metavar="NAME=VALUE",
        help="change a firmware DMA hint for the mapping: prefetch_lines=0..3, "
        "block_bytes=512|1024|2048|4096, relaxed_ordering=on|off, read_current=on|off, "
        "commands=MR,MRL,MRM (which reads the changes apply to; default all); repeatable, "
        "each hint once",
    )
    tr.add_argument(
        "--pio-write-ns",
        type=options.int_list(options.integer(0, 10**9, "0..=1000000000")),
        default=None,
        metavar="NS[,NS...]",
        help="PIO writes reaching the host bridge at these times from the transfer's start "
        "(ascending): with ordering enforced they stop a read burst",
    )
    tr.set_defaults(func=run)


_HINT_NAMES = ("prefetch_lines", "block_bytes", "relaxed_ordering", "read_current", "commands")


def _hint(text: str) -> tuple[str, Any]:
    """An argparse ``type`` for ``--hint NAME=VALUE``: the value typed as the hint wants it."""
    name, sep, value = text.partition("=")
    if not sep or name not in _HINT_NAMES:
        raise argparse.ArgumentTypeError(
            f"expected NAME=VALUE with NAME one of {', '.join(_HINT_NAMES)}, got {text!r}"
        )
    if name == "commands":
        return name, [c.strip().upper() for c in value.split(",") if c.strip()]
    if name in ("relaxed_ordering", "read_current"):
        if value not in ("on", "off"):
            raise argparse.ArgumentTypeError(f"{name}: {value!r} is not on or off")
        return name, value == "on"
    return name, options.integer(0, None)(value)


def _hints(pairs: list[tuple[str, Any]] | None) -> dict[str, Any] | None:
    """The ``--hint`` settings as a mapping (None for none); a hint given twice is refused."""
    options.once("--hint", pairs or [])
    return dict(pairs) if pairs else None


def run(args: argparse.Namespace) -> int:
    """Trace the scenario or the transfer given, as a table or JSON."""
    choices = options.choices(args.choice)
    if args.scenario:
        if args.device:
            raise ScenarioError(
                "--device: applies to a transfer given by --direction, --address and --length; "
                "a scenario names its device with its own `device` key"
            )
        options.refuse(
            args,
            ("direction", "address", "length", "platform", "mapping", "hint", "pio_write_ns"),
            f"applies to a transfer given by --direction, --address and --length, not to a "
            f"scenario ({args.scenario} sets its own transfer, platform and hints)",
        )
        t: Trace = sim.trace_scenario(args.scenario, choices)
    else:
        missing = [f for f in ("direction", "address", "length") if getattr(args, f) is None]
        if missing:
            raise ScenarioError(
                f"give a scenario, or all of --direction, --address and --length (missing: "
                f"{', '.join('--' + m for m in missing)})"
            )
        platform = sim.with_device(args.platform, args.device)
        if options.given(args, "mapping"):
            fields = [p["field"] for p in sim.platform_info(platform, choices)["params"]]
            if not any(f.startswith("bus.pci.lba.") for f in fields):
                raise ScenarioError(
                    f"--mapping: applies to reads through a hinted PCI host bridge "
                    f"([bus.pci.lba], such as hp-rx2600-zx1's); {args.platform} has none"
                )
        t = sim.trace(
            platform,
            args.direction,
            args.address,
            args.length,
            choices,
            mapping=args.mapping,
            hints=_hints(args.hint),
            pio_writes_ns=args.pio_write_ns,
        )
    if args.format != "table":
        options.output(args, {k: v for k, v in t.items() if k != "text"}, rows=t["entries"])
    else:
        _print_trace(t, options.console())
    return 0


def _print_trace(t: Trace, console: Console) -> None:
    from rich.table import Table

    title = f"{t['bus']}: {t['direction']} of {t['length_bytes']} bytes at 0x{t['addr']:X}"
    table = Table(title=f"{t['platform']}, {title}")
    for c in ("address", "command", "bytes", "start us", "end us", "retries", "partial lines"):
        table.add_column(c, justify="left" if c == "command" else "right")
    entries = t["entries"]
    shown = entries
    if len(entries) > TABLE_ROWS:
        head, tail = TABLE_ROWS - 8, 8
        shown = entries[:head] + entries[-tail:]
        table.caption = (
            f"rows {head + 1} to {len(entries) - tail} of {len(entries)} left out; "
            "--format json lists every command"
        )
    for e in shown:
        table.add_row(
            f"0x{e['addr']:X}",
            e["command"],
            str(e["bytes"]),
            f"{e['start_ps'] / 1e6:.3f}",
            f"{e['end_ps'] / 1e6:.3f}",
            str(e["retries"]),
            str(e["partial_lines"]),
        )
    console.print(table)
    tot = t["totals"]
    console.print(
        f"{tot['commands']} commands, {tot['bytes']} bytes, {tot['bus_time_ps'] / 1e6:.3f} us from "
        f"first command to last byte; {tot['retries']} retries; {tot['partial_lines']} partial "
        f"lines = {tot['read_modify_writes']} read-modify-writes "
        f"({tot['read_modify_write_ps'] / 1e6:.3f} us of memory time)"
    )
