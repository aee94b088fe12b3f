"""``dmalab bench copy``: one synchronous copy by the CPU and by a copy engine, by size."""

from __future__ import annotations

import argparse
from typing import Any

from dmalab.cli import options
from dmalab.types import SyncCopyRecord


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``bench copy``."""
    from dmalab.synccopy import PLACEMENTS

    p = sub.add_parser(
        "copy",
        help="one synchronous copy: the CPU against a copy engine, by size and placement",
        description=(
            "Model the latency of one synchronous copy: the core copying the bytes itself "
            "against the core handing them to a copy engine (CBDMA, DSA) and waiting for its "
            "completion. Nothing overlaps, so every part adds up: set-up, submission and "
            "doorbell, the first cold line from DRAM (across the socket link when remote, on "
            "platforms with a memory path), the bytes at each side's rate, the completion. "
            "Placements: local (all in one node), engine-remote (engine and buffers in the "
            "other node), min-remote (destination across), max-remote (both buffers across "
            "from the core and the engine). Lists are comma-separated (or `all`)."
        ),
    )
    p.add_argument(
        "--platform",
        default="xeon-broadwell-2s",
        help="a platform with CPU copy costs ([copy]) and a copy engine, or `all` for every "
        "such built-in one (default xeon-broadwell-2s); with --device, a host that states the "
        "core's side of an engine ([dma_engine])",
    )
    p.add_argument(
        "--size",
        type=options.int_list(options.integer(1, 1 << 30, "1..=1073741824")),
        default=None,
        metavar="BYTES[,BYTES...]",
        help="bytes per copy, 1..=1073741824 (default: powers of two, 64 B to 1 MiB)",
    )
    p.add_argument(
        "--placement",
        type=options.name_list(PLACEMENTS),
        default=["local", "max-remote"],
        help=f"{', '.join(PLACEMENTS)} or all (default local,max-remote)",
    )
    options.add_device(p, many=True, kind="copy-engine")
    options.add_intervals(p)
    options.add_choice(p)
    options.add_format(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Measure every size at every placement per platform; print a table or JSON."""
    from dmalab import sim, synccopy

    options.refuse_draws(args)
    platforms = synccopy.platforms() if args.platform == "all" else [args.platform]
    if args.device:
        # Each engine in each host's copy-engine slot.
        platforms = [sim.with_device(h, d) for h in platforms for d in args.device]
    sizes = args.size or list(synccopy.SIZES)
    records: list[SyncCopyRecord] = []
    notes = []
    choices = options.choices(args.choice)
    for name in platforms:
        mine = synccopy.measure(name, sizes, args.placement, choices)
        if not args.no_intervals:
            from dmalab import intervals

            def call(d: dict[str, Any], name: str = name) -> list[dict[str, Any]]:
                out = synccopy.measure(name, sizes, args.placement, choices, draws=d)
                return [dict(r) for r in out]

            drawn = intervals.over_draws(name, call, choices, samples=args.samples, seed=args.seed)
            drawn.attach(mine, synccopy.FIGURES)  # type: ignore[arg-type]
            notes.append(options.drawn_note(name, drawn))
        records += mine
    if args.format != "table":
        options.output(args, records)
    else:
        _print_table(records)
        if notes:
            options.intervals_note(args, notes)
    return 0


def _print_table(records: list[SyncCopyRecord]) -> None:
    from dmalab import intervals

    spans = bool(records) and "top_params" in records[0]
    numbers = ["cpu ns", "engine ns", "engine/cpu"]
    last = ["faster", "engine's largest part"] + (["engine driven by"] if spans else [])
    t = options.plain_table(["platform", "size", "placement", *numbers, *last], numbers)
    for r in records:
        part, ns = max(r["engine_parts"], key=lambda p: p[1])
        t.add_row(
            r["platform"],
            str(r["size_bytes"]),
            r["placement"],
            intervals.figure(r, "cpu_ns", ".0f"),
            intervals.figure(r, "engine_ns", ".0f"),
            f"{r['engine_ns'] / r['cpu_ns']:.2f}",
            r["faster"],
            f"{part} ({ns / r['engine_ns']:.0%})",
            *([intervals.drivers(r, "engine_ns")] if spans else []),
        )
    options.console().print(t)
