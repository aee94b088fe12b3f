"""``dmalab sweep``: a grid of scenario keys, run on threads or on Ray, resumable."""

from __future__ import annotations

import argparse

from dmalab.cli import options


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``sweep``."""
    p = sub.add_parser(
        "sweep",
        help="run a grid or sample of scenario keys on threads or Ray; resumable Parquet/CSV",
        description=(
            "Expand a sweep file (a scenario, a [grid] of TABLE.KEY lists, optionally [set] and "
            "a [sample] count and seed) into cells, run each on local threads (default) or on "
            "Ray (--ray: a local Ray started here, or --ray ADDRESS for a cluster whose nodes "
            "have dmalab installed), and write one tidy row per cell to --out (.parquet or "
            ".csv): inputs as columns, results, breakdown, cell_id, and spec_hash (a hash of the "
            "resolved sweep file; also in a Parquet file's metadata). Cells already in --out "
            "are skipped, so an interrupted sweep resumes; progress is saved every 5 s and on "
            "Ctrl-C (exit status 130), each save to a temporary file then renamed, so the file "
            "is never left half written. An --out holding another sweep's results, or that is "
            "not a sweep's results, is refused and left as it is, unless --replace or --append "
            "says what to do with it. The same cell gives the same row on any worker. Each "
            "figure comes with its interval (KEY_lo, KEY_hi: the 5th to 95th percentile over "
            "--samples draws of the platform's uncertain parameters, 16 by default; "
            "the draws and --seed enter spec_hash); --no-intervals runs each cell once."
        ),
    )
    p.add_argument("spec", metavar="SWEEP.toml", help="the sweep file")
    p.add_argument(
        "--out",
        type=options.nonempty,
        required=True,
        help="results file, .parquet or .csv; this sweep's own file is resumed, any other refused",
    )
    existing = p.add_mutually_exclusive_group()
    existing.add_argument(
        "--replace",
        action="store_true",
        help="overwrite --out, whatever it holds, with this sweep's rows (the old file stays "
        "until the first save); rerun without --replace to resume",
    )
    existing.add_argument(
        "--append",
        action="store_true",
        help="keep the rows --out holds from other sweeps and add this sweep's, each row "
        "tagged with its sweep's spec_hash; rerun with --append to resume",
    )
    p.add_argument(
        "--ray",
        nargs="?",
        type=options.nonempty,
        const="local",
        default=None,
        metavar="ADDRESS",
        help="run on Ray: a local instance started here (no ADDRESS) or the cluster at ADDRESS "
        "(such as ray://head:10001); pip install 'dmalab[ray]'",
    )
    p.add_argument(
        "--workers",
        type=options.integer(1, 4096),
        default=None,
        help="threads, or a local Ray's CPUs (default: this machine's CPUs)",
    )
    options.add_intervals(p, samples=16)
    options.add_no_progress(p)
    options.add_format(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Load, run, report."""
    from dmalab import sweep

    options.writable(args.out, "--out")
    options.refuse_draws(args)
    spec = sweep.load(args.spec)
    if not args.no_intervals:
        spec.intervals, spec.interval_seed = args.samples, args.seed
    line = options.ProgressLine(enabled=not args.no_progress)
    mode: sweep.Mode = "replace" if args.replace else "append" if args.append else "resume"
    try:
        with line:
            result = sweep.run(
                spec,
                args.out,
                workers=args.workers,
                use_ray=args.ray is not None,
                ray_address=None if args.ray == "local" else args.ray,
                progress=lambda done, total: line.update(done, total, "cells"),
                mode=mode,
            )
    except sweep.Interrupted as e:
        again = (
            "run it again without --replace to resume"
            if e.mode == "replace" and e.kept
            else "run the same command to resume"
        )
        raise KeyboardInterrupt(f"{e}; {again}") from None
    summary = {
        "sweep": args.spec,
        "out": result.out,
        "cells": result.cells,
        "skipped": result.skipped,
        "ran": result.ran,
        "wall_s": result.wall_s,
        "engine": "ray" if args.ray is not None else "threads",
    }
    if args.format != "table":
        options.emit(summary, args.format, command=args.argv)
        return 0
    options.console().print(
        f"{result.cells:,} cells: {result.ran:,} run, {result.skipped:,} already in "
        f"{result.out}; {result.wall_s:.1f} s on {summary['engine']}"
    )
    return 0
