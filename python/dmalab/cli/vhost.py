"""``dmalab vhost``: copy policies for a vhost backend, swept over sizes and placements."""

from __future__ import annotations

import argparse

from dmalab import _native
from dmalab.cli import options


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``vhost``."""
    vh = sub.add_parser(
        "vhost",
        help="copy policies for a vhost backend: CPU, engine, fixed thresholds, dmalab's planner",
        description="Sweep packet sizes (1 to 64 KiB), mbufs of 2, 4 and 8 KiB and four NUMA "
        "placements; print Gbit/s for CPU-only copies, engine-only, the seed's fixed thresholds "
        "(2048 B local, 3072 B remote) and dmalab's planner, which decides per copy from the "
        "modelled costs, each engine's backlog and placement, and may use either node's engine.",
    )
    options.add_platform(
        vh,
        default="xeon-8180-cbdma",
        help="a platform with [copy], [dma_engine] and [vhost] sections: a built-in name or a "
        "file (default xeon-8180-cbdma)",
    )
    vh.add_argument(
        "--packets",
        type=options.integer(1, 1 << 24, "1..=16777216"),
        default=20000,
        metavar="N",
        help="packets per cell, 1..=16777216 (default 20000)",
    )
    options.add_no_progress(vh)
    options.add_format(vh)
    vh.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Sweep and print Gbit/s by policy, with the planner's gain."""
    with options.ProgressLine(enabled=not args.no_progress) as line:
        rows = options.poll(
            lambda p: _native.vhost_sweep(args.platform, args.packets, progress=p),
            lambda done, total: line.update(done, total, "runs") if total else None,
        )
    if args.format != "table":
        options.output(args, rows)
        return 0
    from rich.table import Table

    t = Table(title=f"vhost backend on {args.platform}: Gbit/s by copy policy")
    cols = ("placement", "mbuf", "packet", "CPU", "engine", "threshold", "planner", "gain")
    for c in cols:
        t.add_column(c, justify="left" if c == "placement" else "right")
    for r in rows:
        best = max(r["cpu_only"], r["threshold"])
        t.add_row(
            r["placement"],
            str(r["mbuf_bytes"]),
            str(r["packet_bytes"]),
            f"{r['cpu_only']:.1f}",
            f"{r['engine_only']:.1f}",
            f"{r['threshold']:.1f}",
            f"{r['planner']:.1f}",
            f"{(r['planner'] / best - 1) * 100:+.1f}%",
        )
    out = options.console()
    out.print(t)
    out.print("gain: the planner against the better of CPU-only and the fixed thresholds")
    return 0
