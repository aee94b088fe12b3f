"""``dmalab calibrate copy``: measure this machine and write the result as a platform section."""

from __future__ import annotations

import argparse
from pathlib import Path

from dmalab.cli import options


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``calibrate``."""
    cal = sub.add_parser(
        "calibrate",
        help="measure this machine and write the result as a platform section",
        description="`copy`: time memcpy by length (64 B to 4 MiB) in cache and out of cache, "
        "aligned and not, fit set-up plus rate to each, and print (or --out) a [copy] platform "
        "section carrying this machine's description and the date.",
    )
    cal.add_argument("what", choices=["copy"], help="what to calibrate")
    cal.add_argument("--quick", action="store_true", help="fewer lengths and shorter trials")
    cal.add_argument("--out", help="write the platform section to this file")
    options.add_format(cal)
    cal.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Measure memcpy, fit it, and print the points, the fits and the platform section."""
    from dmalab import calibrate

    err = options.console(stderr=True)
    with err.status("measuring memcpy ..."):
        result = calibrate.copy(quick=args.quick)
    section = calibrate.platform_section(result)
    if args.out:
        Path(args.out).write_text(section)
        err.print(f"wrote {args.out}")
    if args.format != "table":
        options.output(args, result, rows=result["points"])
        return 0
    from rich.table import Table

    out = options.console()
    t = Table(title=f"memcpy on {result['machine']} ({result['date']}), ns per copy")
    for c in ("bytes", "in cache", "in cache, unaligned", "out of cache", "out, unaligned"):
        t.add_column(c, justify="right")
    by_len: dict[int, dict[tuple[bool, bool], float]] = {}
    for p in result["points"]:
        by_len.setdefault(p["len_bytes"], {})[(p["in_cache"], p["aligned"])] = p["ns_per_copy"]
    for n, v in sorted(by_len.items()):
        keys = ((True, True), (True, False), (False, True), (False, False))
        t.add_row(str(n), *(f"{v[k]:.1f}" for k in keys))
    out.print(t)
    for f in result["fits"]:
        where = "in cache" if f["in_cache"] else "out of cache"
        kind = "aligned" if f["aligned"] else "unaligned"
        out.print(
            f"{where}, {kind}: {f['setup_ns']:.1f} ns + bytes at "
            f"{f['bytes_per_us'] / 1000:.2f} GB/s (largest error {f['max_relative_error']:.0%})"
        )
    out.print(section, markup=False)
    return 0
