"""``dmalab run``: run a scenario; metrics, where the time goes, what protection is left."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from dmalab import sim
from dmalab.cli import options

if TYPE_CHECKING:
    from rich.console import Console

    from dmalab.types import RunReport


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``run``."""
    names = ", ".join(sim.scenarios())
    rn = sub.add_parser(
        "run",
        help="run a scenario: metrics, where the time goes, what protection is left",
        description=(
            "Run a scenario (a TOML file, or a built-in name: " + names + ") on the event "
            "engine with a real IOVA allocator inside: throughput, latency, CPU, the time per "
            "operation by component (map, unmap, allocator, IOTLB, hypervisor calls, device), "
            "the IOTLB hit rate and the exposure the mapping configuration leaves."
        ),
    )
    rn.add_argument("scenario", help="scenario file or built-in name")
    options.add_set(rn)
    options.add_device(rn)
    options.add_intervals(rn, samples=32)
    options.add_format(rn)
    options.add_no_progress(rn)
    options.add_choice(
        rn,
        help="pick a platform option on top of the scenario's, such as slot=64bit or "
        "tce_lock=table-lock (repeatable, each NAME once)",
    )
    rn.add_argument(
        "--timeline",
        type=options.nonempty,
        metavar="FILE",
        help="write the run's timeline to FILE as trace-event JSON, which Perfetto "
        "(ui.perfetto.dev, works offline) and chrome://tracing open: block workloads get a "
        "track per CPU, device, data path and IOMMU invalidation unit (a slice per submit, "
        "map, unmap, wait, translation, transfer and invalidation); network workloads a track "
        "per host's core (stack, driver, mapping), wire (frames) and NIC link direction (DMA "
        "reads and writes). Written whole (a temporary file, then renamed); a FILE that holds "
        "something else (such as a sweep's results) is refused before the run unless --force",
    )
    options.add_force(rn, "--timeline", "trace-event JSON")
    rn.add_argument(
        "--timeline-limit",
        type=options.integer(1, sim.TIMELINE_LIMIT_MAX, f"1..={sim.TIMELINE_LIMIT_MAX:_}"),
        default=DEFAULT_TIMELINE_LIMIT,
        metavar="N",
        help=f"keep at most N slices, the run's first (default {DEFAULT_TIMELINE_LIMIT:_}, about "
        "100 bytes each in the file); the rest are counted as dropped",
    )
    rn.set_defaults(func=run)


DEFAULT_TIMELINE_LIMIT = 1_000_000


def run(args: argparse.Namespace) -> int:
    """Run the scenario (with a progress bar on stderr unless --no-progress) and report."""
    from dmalab import files

    options.output_file(args, "timeline", (files.TRACE,), "trace-event JSON")
    if not args.timeline:
        options.refuse(
            args, ("timeline_limit", "force"), "applies to the timeline written with --timeline"
        )
    options.refuse_draws(args)
    choices = options.choices(args.choice)
    changes = options.overrides(args.set)
    if args.device:
        # The scenario's `device` key: the device for its platform's PCIe slot.
        changes = (changes or {}) | {"device": args.device}
    limit = args.timeline_limit if args.timeline else None
    err = options.console(stderr=True)
    if args.no_progress:
        report = sim.run(args.scenario, choices=choices, overrides=changes, timeline_limit=limit)
    else:
        if err.is_terminal:
            report = _run_with_progress(args.scenario, choices, changes, limit, err)
        else:
            # No bar for a file or a pipe (rich would leave an empty line there): the summary.
            report = sim.run(
                args.scenario, choices=choices, overrides=changes, timeline_limit=limit
            )
        err.print(
            f"{args.scenario}: {report['dma_transfers']} DMA transfers simulated in "
            f"{report['wall_s']:.3f} s "
            f"({report['dma_transfers_per_wall_s'] / 1e6:.2f} M per second)"
        )
    if not args.no_intervals:
        from dmalab import intervals

        drawn = intervals.attach_run(
            report,
            lambda d: sim.run(args.scenario, choices=choices, overrides=changes, draws=d),
            samples=args.samples,
            seed=args.seed,
        )
        note = options.drawn_note(report["platform"], drawn)
    if args.timeline:
        _write_timeline(report, args.timeline, err)
    if args.format in ("csv", "parquet"):
        from dmalab import tidy

        options.output(args, report, rows=[tidy.run_row(report)])
        return 0
    if args.format == "json":
        options.output(args, report)
        return 0
    _print_report(report, options.console())
    if not args.no_intervals:
        options.intervals_note(args, [note])
    return 0


def _run_with_progress(
    scenario: str,
    choices: dict[str, str] | None,
    changes: dict[str, Any] | None,
    limit: int | None,
    err: Console,
) -> RunReport:
    """Run in a worker thread and draw its progress."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (
        TextColumn("{task.description}"),
        BarColumn(),
        TextColumn("{task.completed:,.0f}/{task.total:,.0f} operations"),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=err, transient=True) as bar:
        task = bar.add_task(f"running {scenario}", total=1)

        def show(done: int, total: int) -> None:
            if total:
                bar.update(task, completed=done, total=total)

        return options.poll(
            lambda p: sim.run(scenario, "scenario", choices, p, changes, timeline_limit=limit), show
        )


def _write_timeline(report: RunReport, path: str, err: Console) -> None:
    """Write the timeline, say what is in it, and take it out of the report."""
    from dmalab import timeline

    cut = report.get("timeline", {}).get("dropped", 0)
    if cut:
        # Said before the file is written, so that a user who wanted all of it can stop here.
        kept = len(report["timeline"].get("slices", []))
        err.print(
            f"--timeline-limit cut the run: {kept:,} slices kept, {cut:,} past the limit "
            "left out (raise --timeline-limit, or lower workload.ios, to keep them all)"
        )
    trace = timeline.write(report, path)
    other = trace["otherData"]
    tracks = sum(1 for e in trace["traceEvents"] if e.get("name") == "thread_name")
    dropped = (
        f", {other['dropped_slices']:,} dropped past the limit" if other["dropped_slices"] else ""
    )
    err.print(f"wrote {path}: {other['slices']:,} slices on {tracks} tracks{dropped}")
    report.pop("timeline", None)


DRIVEN = {
    "operations per second": "ops_per_s",
    "throughput, Mbit/s": "bits_per_s",
    "latency mean, us": "latency_mean_us",
    "latency p99, us": "latency_p99_us",
    "CPU utilization": "cpu_utilization",
}
"""The metrics rows that show what drives their interval, and their figure."""


def _print_report(r: RunReport, console: Console) -> None:
    from rich.table import Table

    window = f" ({r['window']})" if r.get("window") else ""
    console.print(f"{r['scenario']} on {r['platform']} {r['choices']}: {r['translation']}{window}")
    from dmalab import intervals

    spans = "top_params" in r
    t = Table(title="metrics")
    t.add_column("metric")
    t.add_column("value", justify="right")
    if spans:
        t.add_column("driven by")
    m = r["mapper"]
    e = m["exposure"]
    for k, v in (
        ("operations per second", intervals.figure(r, "ops_per_s", ",.0f")),
        ("throughput, Mbit/s", intervals.figure(r, "bits_per_s", ",.1f", 1e6)),
        ("latency mean, us", intervals.figure(r, "latency_mean_us", ".2f")),
        ("latency p99, us", intervals.figure(r, "latency_p99_us", ".2f")),
        (
            "latency p50 / p90 / p99, us",
            f"{r['latency_p50_us']:.2f} / {r['latency_p90_us']:.2f} / {r['latency_p99_us']:.2f}",
        ),
        (
            "latency p99.9 / p99.99 / max, us",
            f"{r['latency_p99_9_us']:.2f} / {r['latency_p99_99_us']:.2f} / "
            f"{r['latency_max_us']:.2f}",
        ),
        ("CPU utilization", intervals.figure(r, "cpu_utilization", ".3f")),
        ("IOTLB hit rate", f"{r['iotlb_hit_rate']:.3f}"),
        (
            "allocator nodes / words / locks",
            "{nodes_visited} / {words_scanned} / {lock_acquisitions}".format(**m["allocator_work"]),
        ),
        (
            "pages reachable after unmap",
            f"{e['pages_exposed']} (longest {e['max_window_ps'] / 1e6:.1f} us)",
        ),
        ("bytes mapped beyond buffers (whole pages)", f"{m['sub_page_bytes_exposed']:,}"),
        ("all memory reachable by the device", "yes" if m["all_memory_reachable"] else "no"),
    ):
        key = DRIVEN.get(k)
        t.add_row(k, v, *([intervals.drivers(r, key) if key else ""] if spans else []))
    console.print(t)
    b = Table(title="time per operation, by component (us)")
    b.add_column("component")
    b.add_column("us", justify="right")
    for component, us in sorted(r["breakdown_us"].items(), key=lambda kv: -kv[1]):
        b.add_row(component, f"{us:.3f}")
    console.print(b)
