"""``dmalab bench iova``: every IOVA allocator on four workloads, then the default's targets;
``bench dma``, ``bench map`` and ``bench copy`` live in :mod:`dmalab.cli.bench_dma`,
:mod:`dmalab.cli.bench_map` and :mod:`dmalab.cli.bench_copy`."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from dmalab import DmalabError, ScenarioError
from dmalab.cli import bench_copy, bench_dma, bench_map, options


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``bench`` and its targets: ``iova``, ``dma``, ``map`` and ``copy``."""
    bench = sub.add_parser("bench", help="benchmarks of dmalab's real components")
    bench_sub = bench.add_subparsers(dest="target", required=True, metavar="TARGET")
    iova = bench_sub.add_parser(
        "iova",
        help="compare the IOVA allocators on four workloads",
        description=(
            "Run every IOVA allocator design, and two outside baselines (the vm-allocator crate, "
            "and linux-rcache: Linux 6.12's allocator with its per-CPU range cache, rebuilt from "
            "its design), on map-unmap-1page, mixed, fragmented-32bit and nic-ring, with 1 and 2 "
            "threads; print ops/s, latency percentiles (p50/p99/p99.9/p99.99 per call, raw, timer "
            "included) and heap bytes per live mapping, then the default design's ratios against "
            "each baseline. The allocators of one workload and thread count run together, their "
            "throughput passes taking turns, so that a shared machine's drifting speed falls on "
            "every design alike; ops/s is the median of a cell's passes."
        ),
    )
    iova.add_argument(
        "--quick", action="store_true", help="short runs: the whole table in under a minute"
    )
    options.add_format(iova)
    iova.add_argument(
        "--allocators",
        nargs="+",
        type=options.listed(str),
        action=options.Flatten,
        metavar="NAME[,NAME...]",
        help="subset of allocators, comma- or space-separated (default all)",
    )
    iova.add_argument(
        "--workloads",
        nargs="+",
        type=options.listed(str),
        action=options.Flatten,
        metavar="NAME[,NAME...]",
        help="subset of workloads, comma- or space-separated (default all)",
    )
    iova.add_argument(
        "--threads",
        nargs="+",
        type=options.listed(options.integer(1, 64)),
        action=options.Flatten,
        default=[1, 2],
        metavar="N[,N...]",
        help="thread counts to run, comma- or space-separated, each 1..=64 (default 1,2)",
    )
    iova.add_argument("--seed", type=options.u64, default=1, help="workload seed (default 1)")
    iova.add_argument(
        "--address-bits",
        type=options.integer(),
        default=36,
        help="IOVA space of the domain, in address bits (default 36: 2^24 pages of 4 KiB)",
    )
    options.add_no_progress(iova, help="no progress line on stderr")
    iova.add_argument(
        "--check",
        action="store_true",
        help="hold the default design's ratios against the project's targets: print pass or "
        "FAIL per target and exit with status 1 if any fails",
    )
    iova.set_defaults(func=run)
    bench_dma.register(bench_sub)
    bench_map.register(bench_sub)
    bench_copy.register(bench_sub)


def run(args: argparse.Namespace) -> int:
    """Run the cells asked for and print their records (table or JSON) and the checks."""
    from dmalab import bench

    known_allocators, known_workloads = bench.names()
    for field, given, known in (
        ("--allocators", args.allocators, known_allocators),
        ("--workloads", args.workloads, known_workloads),
    ):
        bad = [g for g in given or [] if g not in known]
        if bad:
            raise DmalabError(f"{field}: unknown {', '.join(bad)}; valid: {', '.join(known)}")
    allocators = args.allocators or known_allocators
    workloads = args.workloads or known_workloads
    _check_address_bits(args.address_bits, workloads, args.threads, args.seed)
    err = options.console(stderr=True)
    skip = []
    if args.quick:
        for (a, w), why in bench.SLOW_IN_QUICK.items():
            named = a in (args.allocators or []) and w in (args.workloads or [])
            if a in allocators and w in workloads and not named:
                skip.append((a, w))
                err.print(f"--quick leaves out {a} on {w}: {why}; name both to run it")
    if args.check and not bench.targets(allocators, workloads, args.threads, skip):
        raise ScenarioError(
            f"--check: no target applies to the cells asked for: the targets hold "
            f"{bench.DEFAULT_DESIGN} against magazines+rbtree, linux-rcache, rbtree and "
            f"vm-allocator, and on its own (fragmented-32bit tails, nic-ring memory, 2 threads "
            f"against 1); run {bench.DEFAULT_DESIGN} and what it is compared with"
        )
    with options.ProgressLine(err, enabled=not args.no_progress) as line:
        records = bench.run_cells(
            allocators,
            workloads,
            args.threads,
            quick=args.quick,
            seed=args.seed,
            address_bits=args.address_bits,
            progress=line.update,
            skip=skip,
        )
    checks = bench.checks(records)
    if args.format != "table":
        options.output(args, records)
    else:
        _print_tables(records, checks, check=args.check)
    if args.check and not all(c.passed for c in checks):
        failed = ", ".join(c.name for c in checks if not c.passed)
        err.print(f"targets missed: {failed}")
        return 1
    return 0


def _check_address_bits(
    address_bits: int, workloads: Sequence[str], threads: Sequence[int], seed: int
) -> None:
    """Refuse, before any cell runs, a width that some cell asked for cannot run in. The ranges
    come from the benchmark: the narrowest domain holds a workload's starting live set."""
    from dmalab import _native

    ranges = {
        (w, t): _native.bench_address_bits(w, t, seed=seed) for w in workloads for t in threads
    }
    (w, t), (lo, _) = max(ranges.items(), key=lambda cell: cell[1][0])
    hi = min(h for _, h in ranges.values())
    if not lo <= address_bits <= hi:
        raise DmalabError(
            f"--address-bits {address_bits} is outside the valid range {lo}..={hi} for the cells "
            f"asked for ({lo}: the narrowest domain that holds the starting live set of {w} "
            f"with {t} thread{'s' if t > 1 else ''})"
        )


def _print_tables(records: list[dict[str, Any]], checks: Sequence[Any], *, check: bool) -> None:
    from rich.table import Table

    out = options.console()
    table = Table(title="IOVA allocators (ops = one allocate or one free call)")
    cols = ["workload", "threads", "allocator", "Mops/s", "p50 ns", "p99 ns", "p99.9 ns"]
    cols += ["p99.99 ns", "B/live", "failures"]
    for c in cols:
        table.add_column(c, justify="left" if c in ("workload", "allocator") else "right")
    for r in records:
        name = r["allocator"] + (" *" if r.get("default") else "")
        table.add_row(
            r["workload"],
            str(r["threads"]),
            name,
            f"{r['ops_per_s'] / 1e6:.2f}",
            f"{r['p50_ns']:.0f}",
            f"{r['p99_ns']:.0f}",
            f"{r['p999_ns']:.0f}",
            f"{r['p9999_ns']:.0f}",
            f"{r['bytes_per_live_mapping']:.1f}",
            str(r["failures"]),
        )
    out.print(table)
    out.print("* the library's default design")
    if checks:
        t = Table(title="segtree against the project's targets (ratios from this run)")
        for c in ("ratio", "value", "target", *(["result"] if check else [])):
            t.add_column(c)
        for c in checks:
            result = ["pass" if c.passed else "FAIL"] if check else []
            t.add_row(c.name, f"{c.value:.2f}", c.target, *result)
        out.print(t)
        if not check:
            out.print("(--check marks each target pass or FAIL and sets the exit status)")
