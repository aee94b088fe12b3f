"""``dmalab plot``: write a plot to a PNG or SVG file."""

from __future__ import annotations

import argparse

from dmalab.cli import options


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``plot``."""
    pl = sub.add_parser(
        "plot",
        help="write a plot to a PNG or SVG file",
        description="Write a plot: `crossover` is the copy time by length of the CPU and of "
        "the platform's copy engine, local and remote, with the lengths where the engine wins.",
    )
    pl.add_argument("what", choices=["crossover"], help="which plot")
    options.add_platform(pl, default="xeon-8180-cbdma", help="platform name or file")
    pl.add_argument("--out", required=True, help="output file, .png or .svg")
    pl.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Write the plot; say where on stderr."""
    from dmalab import plot

    path = plot.crossover(args.platform, args.out)
    options.console(stderr=True).print(f"wrote {path}")
    return 0
