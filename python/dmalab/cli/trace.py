"""``dmalab trace``: the bus commands of one DMA transfer, as a bus analyzer shows them."""

from __future__ import annotations

import argparse
import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dmalab import ScenarioError, sim
from dmalab.cli import options

if TYPE_CHECKING:
    from rich.console import Console

SCENARIO_DIR = Path(__file__).resolve().parents[3] / "scenarios"


def load_scenario(name_or_path: str) -> dict[str, Any]:
    """A trace scenario: a TOML file, or the name of one in the repository's ``scenarios/``."""
    path = Path(name_or_path)
    if not path.exists():
        path = SCENARIO_DIR / f"{name_or_path}.toml"
    if not path.exists():
        found = SCENARIO_DIR.glob("*.toml") if SCENARIO_DIR.exists() else []
        known = ", ".join(sorted(p.stem for p in found)) or "none"
        raise ScenarioError(f"scenario {name_or_path!r}: no such file; named scenarios: {known}")
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(f"{path}: not valid TOML: {e}") from None
    for field, kind in (
        ("platform", str),
        ("direction", str),
        ("address", int),
        ("length_bytes", int),
    ):
        if not isinstance(data.get(field), kind):
            raise ScenarioError(
                f"{path}: field `{field}` must be {kind.__name__}, got {data.get(field)!r}"
            )
    return data


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``trace``."""
    tr = sub.add_parser(
        "trace",
        help="the bus commands of one DMA transfer, as a bus analyzer shows them",
        description=(
            "Turn one DMA transfer into the bus commands a device issues on the platform's bus "
            "(PCI: MR/MRL/MRM reads, MW/MWI writes), with start and end times, delayed-read "
            "retries and partially written cache lines; then the totals. Give a scenario (a TOML "
            "file or a name in scenarios/, such as p1-tx-unaligned) or --direction, --address and "
            "--length."
        ),
    )
    tr.add_argument("scenario", nargs="?", help="scenario file or name (optional)")
    options.add_format(tr)
    options.add_platform(tr)
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
    tr.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Trace the scenario or the transfer given, as a table or JSON."""
    choices = options.choices(args.choice)
    if args.scenario:
        try:
            sc = load_scenario(args.scenario)
        except UnicodeDecodeError as e:
            raise ScenarioError(
                f"scenario {args.scenario!r}: not UTF-8 text ({e.reason} at byte {e.start})"
            ) from None
        picked = sc.get("choices", {})
        if not isinstance(picked, dict) or not all(isinstance(v, str) for v in picked.values()):
            raise ScenarioError(
                f"scenario {args.scenario!r}: field `choices` must be a table of "
                f'NAME = "OPTION" strings, got {picked!r}'
            )
        platform, direction = sc["platform"], sc["direction"]
        address, length = sc["address"], sc["length_bytes"]
        choices = {**picked, **(choices or {})}
    else:
        missing = [f for f in ("direction", "address", "length") if getattr(args, f) is None]
        if missing:
            raise ScenarioError(
                f"give a scenario, or all of --direction, --address and --length (missing: "
                f"{', '.join('--' + m for m in missing)})"
            )
        platform, direction, address, length = (
            args.platform,
            args.direction,
            args.address,
            args.length,
        )
    t = sim.trace(platform, direction, address, length, choices)
    if args.format == "json":
        t.pop("text", None)
        options.dump(t)
    else:
        _print_trace(t, options.console())
    return 0


def _print_trace(t: dict[str, Any], console: Console) -> None:
    from rich.table import Table

    title = f"{t['bus']}: {t['direction']} of {t['length_bytes']} bytes at 0x{t['addr']:X}"
    table = Table(title=f"{t['platform']}, {title}")
    for c in ("address", "command", "bytes", "start us", "end us", "retries", "partial lines"):
        table.add_column(c, justify="left" if c == "command" else "right")
    for e in t["entries"]:
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
