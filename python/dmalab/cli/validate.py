"""``dmalab validate``: real measurements beside the model, host by host and experiment by
experiment (see :mod:`dmalab.validate`)."""

from __future__ import annotations

import argparse
import time
from typing import Any

from dmalab.cli import options


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``validate``."""
    p = sub.add_parser(
        "validate",
        help="real measurements beside the model: the share within 10%, the median error, "
        "the interval's coverage",
        description=(
            "Run every measured point of pcie-bench result directories through the device DMA "
            "model and set the measurement beside the modelled value and its interval. With no "
            "--pcie-bench, the shipped corpus (validation/pcie-bench: an NFP-6000 on four "
            "Intel hosts) runs, every directory, files as shipped. Each directory's host is "
            "built from its own system dump (as `dmalab inspect --dumps` builds it), with the "
            "NFP-6000's device file in its slot, unless --platform names one. Prints the "
            "summary by host and by experiment: points run, the share within 10%, the median "
            "error, the interval's coverage of the measurement and its median half-width; and "
            "the rows the model cannot express yet, by reason. --format json or csv gives "
            "every point: its inputs, measured, modelled, the error and the interval "
            "(modelled_lo, modelled_hi)."
        ),
    )
    p.add_argument(
        "--pcie-bench",
        type=options.nonempty,
        action="append",
        metavar="DIR",
        help="a pcie-bench result directory (its bw_dma_*.csv, lat_dma_*.csv and sys-*.txt); "
        "give it again for more (default: every directory of the shipped corpus)",
    )
    p.add_argument(
        "--platform",
        type=options.nonempty,
        help="run every directory on this platform (a name, file or HOST+DEVICE) instead of "
        "the host built from its dump",
    )
    options.add_intervals(p, samples=16)
    options.add_format(p)
    options.add_no_progress(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Validate and print the summaries, or every point."""
    from dmalab import validate

    if args.no_intervals:
        options.refuse(
            args, ("samples", "seed"), "sets the interval's draws; --no-intervals draws none"
        )
    if args.pcie_bench:
        seen = set()
        for d in args.pcie_bench:
            if d in seen:
                from dmalab import ScenarioError

                raise ScenarioError(f"--pcie-bench {d}: given twice")
            seen.add(d)
        dirs = [validate.directory(d) for d in args.pcie_bench]
    else:
        dirs = validate.corpus_dirs()
    samples = 0 if args.no_intervals else args.samples
    start = time.monotonic()
    with options.ProgressLine(enabled=not args.no_progress) as line:

        def progress(done: int, total: int, what: str) -> None:
            line.update(done, total, what)

        result = validate.run(
            dirs, platform=args.platform, samples=samples, seed=args.seed, progress=progress
        )
    seconds = time.monotonic() - start
    err = options.console(stderr=True)
    for w in result.warnings:
        err.print(f"warning: {w}", markup=False)
    if args.format != "table":
        rows = [p.as_dict() for p in result.points]
        options.emit(rows, args.format, rows=rows, command=args.argv)
        return 0
    _print(result, seconds)
    return 0


def _pct(x: Any) -> str:  # noqa: ANN401 - a float or None
    return "-" if x is None else f"{x:.0%}"


def _signed(x: Any) -> str:  # noqa: ANN401 - a float or None
    return "-" if x is None else f"{x:+.1%}"


def _table(rows: list[dict[str, Any]], first: list[str], title: str) -> None:
    numbers = [
        "points",
        "within 10%",
        "median error",
        "median |error|",
        "coverage",
        "half-width",
        "not expressible",
    ]
    t = options.plain_table([*first, *numbers], numbers)
    t.title = title
    for r in rows:
        t.add_row(
            *[str(r[k]) for k in first],
            str(r["points"]),
            _pct(r["within_10pct"]),
            _signed(r["median_error"]),
            _pct(r["median_abs_error"]),
            _pct(r["coverage"]),
            _pct(r["median_half_width"]),
            str(r["not_expressible"]),
        )
    options.console().print(t)


def _print(result: Any, seconds: float) -> None:  # noqa: ANN401 - a validate.Result
    from dmalab import validate

    console = options.console()
    ran = sum(p.modelled is not None for p in result.points)
    draws = f", {result.samples} draws each" if result.samples else ", no intervals"
    console.print(
        f"{ran} of {len(result.points)} measured rows run through the model "
        f"({len(result.platforms)} director{'y' if len(result.platforms) == 1 else 'ies'}"
        f"{draws}) in {seconds:.1f} s"
    )
    _table(validate.summarise(result, ["host", "unit"]), ["host", "unit"], "by host")
    _table(validate.summarise(result, ["experiment"]), ["experiment"], "by experiment (all hosts)")
    rows = validate.not_expressible(result)
    if rows:
        t = options.plain_table(["rows", "experiment", "why not expressible"], ["rows"])
        t.title = "not expressible yet"
        for r in rows:
            t.add_row(str(r["rows"]), r["experiment"], r["why"])
        console.print(t)
    console.print(
        "error: modelled / measured - 1 (median over the points); within 10%: |error| <= 10%; "
        "coverage: the share of points whose measurement lies in the modelled interval (5th "
        "to 95th percentile of the draws); half-width: the interval's half-width over the "
        "modelled value (median).",
        markup=False,
    )
