"""``dmalab copybreak``: copy small frames into pre-mapped buffers, or map them where they lie?"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from dmalab import sim
from dmalab.cli import options

if TYPE_CHECKING:
    from rich.console import Console


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``copybreak``."""
    cb = sub.add_parser(
        "copybreak",
        help="copy small frames into aligned pre-mapped buffers, or map them where they lie?",
        description=(
            "For a platform's TCP stream, compare per frame the two transmit policies: map the "
            "frame where it lies (unaligned DMA plus a TCE map and unmap) or copy it into a "
            "pre-mapped, cache-line-aligned buffer. Prints each policy's host, bus and wire time "
            "per frame, the throughput each reaches and the winner; without --frame-bytes also "
            "sweeps every frame size up to the MTU and gives where the costs cross."
        ),
    )
    options.add_format(cb)
    options.add_platform(cb)
    options.add_choice(cb)
    cb.add_argument(
        "--frame-bytes", type=options.u64, help="one frame size (default: sweep all sizes)"
    )
    cb.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Compare the policies at one frame size, or sweep them all."""
    out = sim.copybreak(args.platform, args.frame_bytes, options.choices(args.choice))
    if args.format != "table":
        options.output(args, out, rows=_csv_rows(out))
        return 0
    console = options.console()
    point = out["point"] if "point" in out else out["answer"]["full_frame"]
    _print_point(point, console)
    if "answer" in out:
        a = out["answer"]
        lo, hi = a["copy_wins_bytes"]
        where = "every frame size" if a["copy_wins_everywhere"] else f"frames of {lo} to {hi} bytes"
        console.print(
            f"Copying wins for {where} up to the MTU. On the CPU alone, a copy costs less than a "
            f"TCE map plus unmap up to {a['cpu_crossover_bytes']} bytes; aligned DMA also saves "
            "bus commands on top of that."
        )
    return 0


def _print_point(point: dict[str, Any], console: Console) -> None:
    from rich.table import Table

    table = Table(title=f"{point['frame_bytes']}-byte frames: cost per frame, by stage (us)")
    table.add_column("policy")
    table.add_column("stage")
    table.add_column("us/frame", justify="right")
    table.add_column("costs")
    for name in ("map", "copy"):
        r = point[name]
        label = {"map": "map in place", "copy": "copy-break"}[name]
        for s in r["stages"]:
            mark = " <- sets the pace" if s["name"] == r["bottleneck"] else ""
            costs = "; ".join(f"{c['what']} {c['per_send_ps'] / 1e6:.3f}" for c in s["costs"])
            table.add_row(label, s["name"] + mark, f"{s['per_send_ps'] / 1e6:.3f}", costs)
        table.add_row(label, "throughput", f"{r['throughput_bits_per_s'] / 1e6:.1f} Mbit/s", "")
    console.print(table)
    console.print(f"Winner at {point['frame_bytes']} bytes: {point['winner']}")


def _csv_rows(out: dict[str, Any]) -> list[dict[str, Any]]:
    """One CSV row per policy at the frame size shown (the full frame for a sweep): its
    throughput, time per send, bottleneck and each stage's time (its costs stay in JSON)."""
    point = out["point"] if "point" in out else out["answer"]["full_frame"]
    rows = []
    for policy in ("copy", "map"):
        r = point[policy]
        row: dict[str, Any] = {
            "frame_bytes": point["frame_bytes"],
            "policy": policy,
            "winner": point["winner"],
            "throughput_bits_per_s": r["throughput_bits_per_s"],
            "per_send_ps": r["per_send_ps"],
            "bottleneck": r["bottleneck"],
        }
        row.update({f"{s['name']}_per_send_ps": s["per_send_ps"] for s in r["stages"]})
        rows.append(row)
    return rows
