"""``dmalab iova-space``: the smallest IOVA window a workload needs, and its page tables."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from dmalab import sim
from dmalab.cli import options

if TYPE_CHECKING:
    from dmalab.types import SpaceReport


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``iova-space``."""
    p = sub.add_parser(
        "iova-space",
        help="the smallest IOVA window a scenario runs in without a refused mapping",
        description=(
            "How large must a domain's IOVA space be? For a run scenario (its devices, threads, "
            "queue depth, flush policy and allocator), find by bisection the smallest window, in "
            "whole pages, at which the run never has a mapping refused, and the bytes of "
            "translation tables that window and the scenario's own take. Every probe is a whole "
            "run (shorten it with --ios); the answer holds for that run, and the windows either "
            "side of it are both run and listed."
        ),
    )
    p.add_argument("scenario", help="scenario file or built-in name (a run scenario with an IOMMU)")
    options.add_allocators(p, None, "the scenario's")
    p.add_argument(
        "--ios",
        type=options.integer(1, 1 << 40),
        default=None,
        metavar="N",
        help="I/Os per probe for a block workload, 1..=2^40 (default: the scenario's)",
    )
    options.add_set(p)
    options.add_choice(p)
    options.add_format(p)
    options.add_no_progress(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Search for each allocator asked and print a table or JSON."""
    choices = options.choices(args.choice)
    results = []
    for allocator in args.allocator or [None]:
        overrides: dict[str, Any] = options.overrides(args.set) or {}
        if allocator:
            overrides.setdefault("mapping", {})["allocator"] = allocator
        if args.ios:
            overrides.setdefault("workload", {})["ios"] = args.ios
        results.append(_search(args, overrides, choices))
    if args.format != "table":
        options.output(args, results if args.allocator else results[0], rows=results)
        return 0
    _print(results)
    return 0


def _search(
    args: argparse.Namespace, overrides: dict[str, Any], choices: dict[str, str] | None
) -> SpaceReport:
    """One search, with a progress line on stderr (probes) unless --no-progress."""
    err = options.console(stderr=True)
    if args.no_progress or not err.is_terminal:
        return sim.iova_space(args.scenario, overrides, choices)
    what = (overrides.get("mapping") or {}).get("allocator", args.scenario)
    with err.status(f"searching ({what})") as status:

        def show(done: int, total: int) -> None:
            if total:
                status.update(f"searching ({what}): probe {done} of at most {total}")

        return options.poll(lambda p: sim.iova_space(args.scenario, overrides, choices, p), show)


def _print(results: list[SpaceReport]) -> None:
    from rich.table import Table

    console = options.console()
    first = results[0]
    console.print(
        f"{first['scenario']} on {first['platform']}: {first['translation']}, "
        f"{first['page_bytes']}-byte pages, scenario window {_size(first['scenario_window_bytes'])}"
    )
    t = Table(title="smallest IOVA window with no refused mapping")
    for name in ("allocator", "window", "pages", "refused at", "tables", "tables (scenario)"):
        t.add_column(name, justify="left" if name == "allocator" else "right")
    t.add_column("runs", justify="right")
    for r in results:
        refused = r["refused_at_bytes"]
        t.add_row(
            r["allocator"],
            _size(r["window_bytes"]),
            f"{r['window_pages']:,}",
            _size(refused) if refused is not None else "-",
            _size(r["table_bytes"]),
            _size(r["scenario_table_bytes"]),
            str(len(r["probes"])),
        )
    console.print(t)


def _size(n: int) -> str:
    """Bytes in the largest binary unit that keeps three significant figures readable."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift:
            return f"{n / (1 << shift):.4g} {unit}"
    return f"{n} B"
