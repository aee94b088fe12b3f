"""The model commands of the ``dmalab`` command line: trace, reproduce, copybreak, platforms."""

from __future__ import annotations

import argparse
import json
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dmalab import ScenarioError, _native, sim
from dmalab.types import RunReport, Trace

if TYPE_CHECKING:
    from rich.console import Console

DEFAULT_PLATFORM = "ibm-p660-m2plus"
SCENARIO_DIR = Path(__file__).resolve().parents[2] / "scenarios"


def _int(text: str) -> int:
    """A non-negative 64-bit integer in decimal or with a 0x/0o/0b prefix."""
    try:
        n = int(text, 0)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not 0 <= n < 2**64:
        raise argparse.ArgumentTypeError(f"{text} is outside 0..2^64-1")
    return n


def _choice(text: str) -> tuple[str, str]:
    name, sep, option = text.partition("=")
    if not sep or not name or not option:
        raise argparse.ArgumentTypeError(
            f"expected NAME=OPTION (such as firmware=2001), got {text!r}"
        )
    return name, option


def _choices(pairs: list[tuple[str, str]] | None) -> dict[str, str] | None:
    return dict(pairs) if pairs else None


def _dump(data: Any) -> None:  # noqa: ANN401 - any JSON value
    json.dump(data, sys.stdout, indent=1)
    sys.stdout.write("\n")


def load_scenario(name_or_path: str) -> dict[str, Any]:
    """A trace scenario: a TOML file, or the name of one in the repository's ``scenarios/``."""
    path = Path(name_or_path)
    if not path.exists():
        path = SCENARIO_DIR / f"{name_or_path}.toml"
    if not path.exists():
        found = SCENARIO_DIR.glob("*.toml") if SCENARIO_DIR.exists() else []
        known = ", ".join(sorted(p.stem for p in found)) or "none"
        raise ScenarioError(f"scenario {name_or_path!r}: no such file; named scenarios: {known}")
    try:
        data = tomllib.loads(path.read_text())
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(f"{path}: not valid TOML: {e}") from None
    for field, kind in (
        ("platform", str),
        ("direction", str),
        ("address", int),
        ("length_bytes", int),
    ):
        if not isinstance(data.get(field), kind):
            raise ScenarioError(
                f"{path}: field `{field}` must be {kind.__name__}, got {data.get(field)!r}"
            )
    return data


def _trace(args: argparse.Namespace, console: Console) -> int:
    choices = _choices(args.choice)
    if args.scenario:
        sc = load_scenario(args.scenario)
        platform, direction = sc["platform"], sc["direction"]
        address, length = sc["address"], sc["length_bytes"]
        choices = {**sc.get("choices", {}), **(choices or {})}
    else:
        missing = [f for f in ("direction", "address", "length") if getattr(args, f) is None]
        if missing:
            raise ScenarioError(
                f"give a scenario, or all of --direction, --address and --length (missing: "
                f"{', '.join('--' + m for m in missing)})"
            )
        platform, direction, address, length = (
            args.platform,
            args.direction,
            args.address,
            args.length,
        )
    t = sim.trace(platform, direction, address, length, choices)
    if args.format == "json":
        _dump({k: v for k, v in t.items() if k != "text"})
    else:
        _print_trace(t, console)
    return 0


def _print_trace(t: Trace, console: Console) -> None:
    from rich.table import Table

    title = f"{t['bus']}: {t['direction']} of {t['length_bytes']} bytes at 0x{t['addr']:X}"
    table = Table(title=f"{t['platform']}, {title}")
    for c in ("address", "command", "bytes", "start us", "end us", "retries", "partial lines"):
        table.add_column(c, justify="left" if c == "command" else "right")
    for e in t["entries"]:
        table.add_row(
            f"0x{e['addr']:X}",
            e["command"],
            str(e["bytes"]),
            f"{e['start_ps'] / 1e6:.3f}",
            f"{e['end_ps'] / 1e6:.3f}",
            str(e["retries"]),
            str(e["partial_lines"]),
        )
    console.print(table)
    tot = t["totals"]
    console.print(
        f"{tot['commands']} commands, {tot['bytes']} bytes, {tot['bus_time_ps'] / 1e6:.3f} us from "
        f"first command to last byte; {tot['retries']} retries; {tot['partial_lines']} partial "
        f"lines = {tot['read_modify_writes']} read-modify-writes "
        f"({tot['read_modify_write_ps'] / 1e6:.3f} us of memory time)"
    )


def _reproduce(args: argparse.Namespace, console: Console) -> int:
    known = sim.claim_ids()
    bad = [i for i in args.ids if i not in known]
    if bad:
        raise ScenarioError(f"unknown claim {', '.join(bad)}; known: {', '.join(known)}")
    rows, platforms = sim.reproduce(args.ids or None)
    if args.format == "json":
        _dump(rows)
    else:
        _print_claims(rows, platforms, console, verbose=args.verbose)
    return 0 if all(r["passed"] for r in rows) else 1


def _fmt_value(v: Any) -> str:  # noqa: ANN401
    return f"{v:g}" if isinstance(v, int | float) else str(v)


def _print_claims(
    rows: list[dict[str, Any]],
    platforms: list[dict[str, Any]],
    console: Console,
    *,
    verbose: bool,
) -> None:
    from rich.table import Table

    table = Table(title="Published claims reproduced (CLAIMS.md)")
    for c in ("id", "case", "published", "modelled", "unit", "error", "tolerance", "passed", "fit"):
        table.add_column(c, justify="right" if c in ("error",) else "left", overflow="fold")
    for r in rows:
        err = "" if r["error"] is None else f"{r['error'] * 100:+.1f}%"
        fit = "fitted here" if r["fitted_here"] else ""
        table.add_row(
            r["id"],
            r["case"],
            _fmt_value(r["published"]),
            _fmt_value(r["modelled"]),
            r["unit"],
            err,
            r["tolerance"],
            "pass" if r["passed"] else "FAIL",
            fit,
        )
    console.print(table)
    passed = sum(r["passed"] for r in rows)
    console.print(
        f"{passed} of {len(rows)} rows pass. 'fitted here': a platform parameter was "
        "fitted to this row's own published number, so its pass is a fit, not a prediction."
    )
    for p in platforms:
        t = Table(title=f"{p['platform']}: parameters not taken from a cited source")
        for c in ("parameter", "value", "kind", "option", "note"):
            t.add_column(c, overflow="fold")
        for rec in p["uncited"]:
            prov = rec["provenance"]
            t.add_row(rec["field"], rec["value"], prov["kind"], rec["option"] or "", prov["note"])
        console.print(t)
    if verbose:
        for r in rows:
            console.print(f"\n[bold]{r['id']}[/bold] {r['case']}")
            console.print(r["breakdown"], markup=False)
    else:
        console.print("(--verbose shows each claim's trace or stage breakdown)")


def _copybreak(args: argparse.Namespace, console: Console) -> int:
    out = sim.copybreak(args.platform, args.frame_bytes, _choices(args.choice))
    if args.format == "json":
        _dump(out)
        return 0
    point = out["point"] if "point" in out else out["answer"]["full_frame"]
    _print_copybreak_point(point, console)
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


def _print_copybreak_point(point: dict[str, Any], console: Console) -> None:
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


def _platforms(args: argparse.Namespace, console: Console) -> int:
    if not args.name:
        names = sim.platforms()
        if args.format == "json":
            _dump(names)
        else:
            for n in names:
                console.print(f"{n}: {sim.platform_info(n)['description']}")
        return 0
    info = sim.platform_info(args.name, _choices(args.choice))
    if args.format == "json":
        _dump(info)
        return 0
    from rich.table import Table

    console.print(
        f"{info['name']}: {info['description']}\nbus: {info['bus']}; options: {info['choices']}"
    )
    t = Table()
    for c in ("parameter", "value", "provenance", "note"):
        t.add_column(c, overflow="fold")
    for rec in info["params"]:
        t.add_row(rec["field"], rec["value"], rec["provenance"]["kind"], rec["provenance"]["note"])
    console.print(t)
    return 0


def add_commands(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    console: Callable[[bool], Console],
) -> None:
    """Add trace, reproduce, copybreak and platforms to the top-level subparsers."""

    def common(p: argparse.ArgumentParser, *, platform: bool = True) -> None:
        p.add_argument("--format", choices=["table", "json"], default="table", help="output format")
        if platform:
            p.add_argument(
                "--platform",
                default=DEFAULT_PLATFORM,
                help=f"built-in platform name or a platform TOML file (default {DEFAULT_PLATFORM}; "
                "`dmalab platforms` lists them)",
            )
        p.add_argument(
            "--choice",
            action="append",
            type=_choice,
            metavar="NAME=OPTION",
            help="pick an option the platform offers, such as firmware=2001 (repeatable)",
        )

    tr = sub.add_parser(
        "trace",
        help="the bus commands of one DMA transfer, as a bus analyzer shows them",
        description=(
            "Turn one DMA transfer into the bus commands a device issues on the platform's bus "
            "(PCI: MR/MRL/MRM reads, MW/MWI writes), with start and end times, delayed-read "
            "retries and partially written cache lines; then the totals. Give a scenario (a TOML "
            "file or a name in scenarios/, such as p1-tx-unaligned) or --direction, --address and "
            "--length."
        ),
    )
    tr.add_argument("scenario", nargs="?", help="scenario file or name (optional)")
    common(tr)
    tr.add_argument(
        "--direction",
        choices=["read", "write", "tx", "rx"],
        help="read = device reads memory (transmit)",
    )
    tr.add_argument("--address", type=_int, help="bus address of the first byte (0x... allowed)")
    tr.add_argument("--length", type=_int, help="bytes to move")
    tr.set_defaults(func=lambda a: _trace(a, console(False)))

    rp = sub.add_parser(
        "reproduce",
        help="run the published claims dmalab can model and check each against its tolerance",
        description=(
            "Run every claim of CLAIMS.md that dmalab models so far (or the ids given) on its "
            "machine's platform file and print: id, published, modelled, error, pass/fail, and "
            "whether a platform parameter was fitted to that very number; then every platform "
            "parameter that is fitted or assumed rather than cited. Exit status 1 if any fails."
        ),
    )
    rp.add_argument(
        "ids", nargs="*", metavar="ID", help="claim ids, such as P1-TX-UNALIGNED (default: all)"
    )
    rp.add_argument("--format", choices=["table", "json"], default="table", help="output format")
    rp.add_argument("--verbose", action="store_true", help="print each claim's trace or breakdown")
    rp.set_defaults(func=lambda a: _reproduce(a, console(False)))

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
    common(cb)
    cb.add_argument("--frame-bytes", type=_int, help="one frame size (default: sweep all sizes)")
    cb.set_defaults(func=lambda a: _copybreak(a, console(False)))

    pl = sub.add_parser(
        "platforms",
        help="list the built-in platforms, or show one's parameters and their sources",
        description="Without a name, list the platforms; with one, every parameter with its unit "
        "(in its name) and provenance (cited source, fitted, or assumed).",
    )
    pl.add_argument("name", nargs="?", help="platform name or TOML file")
    common(pl, platform=False)
    pl.set_defaults(func=lambda a: _platforms(a, console(False)))


def _run(args: argparse.Namespace, console: Console) -> int:
    err = _err_console()
    choices = _choices(args.choice)
    if args.no_progress:
        report = sim.run(args.scenario, choices=choices)
    else:
        report = _run_with_progress(args.scenario, choices, err)
        err.print(
            f"{args.scenario}: {report['dma_transfers']} DMA transfers simulated in "
            f"{report['wall_s']:.3f} s "
            f"({report['dma_transfers_per_wall_s'] / 1e6:.2f} M per second)"
        )
    if args.format == "json":
        _dump(report)
        return 0
    _print_report(report, console)
    return 0


def _run_with_progress(scenario: str, choices: dict[str, str] | None, err: Console) -> RunReport:
    """Run in a worker thread (the native run releases the GIL) and draw its progress."""
    import time
    from concurrent.futures import ThreadPoolExecutor

    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with ThreadPoolExecutor(max_workers=1) as pool:
        progress = _native.Progress()
        future = pool.submit(sim.run, scenario, "scenario", choices, progress)
        columns = (
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.completed:,.0f}/{task.total:,.0f} operations"),
            TimeElapsedColumn(),
        )
        with Progress(*columns, console=err, transient=True) as bar:
            task = bar.add_task(f"running {scenario}", total=1)
            while not future.done():
                done, total = progress.get()
                if total:
                    bar.update(task, completed=done, total=total)
                time.sleep(0.1)
        return future.result()


def _err_console() -> Console:
    from rich.console import Console

    return Console(stderr=True, highlight=False)


def _print_report(r: RunReport, console: Console) -> None:
    from rich.table import Table

    window = f" ({r['window']})" if r.get("window") else ""
    console.print(f"{r['scenario']} on {r['platform']} {r['choices']}: {r['translation']}{window}")
    t = Table(title="metrics")
    t.add_column("metric")
    t.add_column("value", justify="right")
    m = r["mapper"]
    e = m["exposure"]
    for k, v in (
        ("operations per second", f"{r['ops_per_s']:,.0f}"),
        ("throughput, Mbit/s", f"{r['bits_per_s'] / 1e6:,.1f}"),
        (
            "latency mean / p50 / p99, us",
            f"{r['latency_mean_us']:.2f} / {r['latency_p50_us']:.2f} / {r['latency_p99_us']:.2f}",
        ),
        ("CPU utilization", f"{r['cpu_utilization']:.1%}"),
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
        t.add_row(k, v)
    console.print(t)
    b = Table(title="time per operation, by component (us)")
    b.add_column("component")
    b.add_column("us", justify="right")
    for component, us in sorted(r["breakdown_us"].items(), key=lambda kv: -kv[1]):
        b.add_row(component, f"{us:.3f}")
    console.print(b)


def add_run_command(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    console: Callable[[bool], Console],
) -> None:
    """Add ``dmalab run``."""
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
    rn.add_argument("--format", choices=["table", "json"], default="table", help="output format")
    rn.add_argument("--no-progress", action="store_true", help="no progress on stderr")
    rn.add_argument(
        "--choice",
        action="append",
        type=_choice,
        metavar="NAME=OPTION",
        help="pick a platform option on top of the scenario's, such as slot=64bit or "
        "tce_lock=table-lock (repeatable)",
    )
    rn.set_defaults(func=lambda a: _run(a, console(False)))


def add_plot_command(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    console: Callable[[bool], Console],
) -> None:
    """Add ``dmalab plot``."""
    pl = sub.add_parser(
        "plot",
        help="write a plot to a PNG or SVG file",
        description="Write a plot: `crossover` is the copy time by length of the CPU and of "
        "the platform's copy engine, local and remote, with the lengths where the engine wins.",
    )
    pl.add_argument("what", choices=["crossover"], help="which plot")
    pl.add_argument("--platform", default="xeon-8180-cbdma", help="platform name or file")
    pl.add_argument("--out", required=True, help="output file, .png or .svg")

    def go(args: argparse.Namespace) -> int:
        from dmalab import plot

        path = plot.crossover(args.platform, args.out)
        console(True).print(f"wrote {path}")
        return 0

    pl.set_defaults(func=go)


def add_calibrate_command(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    console: Callable[[bool], Console],
) -> None:
    """Add ``dmalab calibrate copy``."""
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
    cal.add_argument("--format", choices=["table", "json"], default="table", help="output format")

    def go(args: argparse.Namespace) -> int:
        from dmalab import calibrate

        err = console(True)
        with err.status("measuring memcpy ..."):
            result = calibrate.copy(quick=args.quick)
        section = calibrate.platform_section(result)
        if args.out:
            Path(args.out).write_text(section)
            err.print(f"wrote {args.out}")
        if args.format == "json":
            _dump(result)
            return 0
        from rich.table import Table

        out = console(False)
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

    cal.set_defaults(func=go)


def add_vhost_command(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    console: Callable[[bool], Console],
) -> None:
    """Add ``dmalab vhost``."""
    vh = sub.add_parser(
        "vhost",
        help="copy policies for a vhost backend: CPU, engine, fixed thresholds, dmalab's planner",
        description="Sweep packet sizes (1 to 64 KiB), mbufs of 2, 4 and 8 KiB and four NUMA "
        "placements; print Gbit/s for CPU-only copies, engine-only, the seed's fixed thresholds "
        "(2048 B local, 3072 B remote) and dmalab's planner, which decides per copy from the "
        "modelled costs, each engine's backlog and placement, and may use either node's engine.",
    )
    vh.add_argument("--platform", default="xeon-8180-cbdma", help="platform name or file")
    vh.add_argument("--packets", type=_int, default=20000, help="packets per cell")
    vh.add_argument("--format", choices=["table", "json"], default="table", help="output format")

    def go(args: argparse.Namespace) -> int:
        rows = _native.vhost_sweep(args.platform, args.packets)
        if args.format == "json":
            _dump(rows)
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
        out = console(False)
        out.print(t)
        out.print("gain: the planner against the better of CPU-only and the fixed thresholds")
        return 0

    vh.set_defaults(func=go)
