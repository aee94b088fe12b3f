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
            "error, the interval's coverage of the measurement and its median half-width; the "
            "same for each interval widened by the model's error on the corpus's other hosts "
            "(what no parameter moves, taken from other machines only); and the rows the model "
            "cannot express yet, by reason. --format json or csv gives every point: its inputs, "
            "measured, modelled, the error, the interval (modelled_lo, modelled_hi) and the "
            "widened one (track_lo, track_hi)."
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
        "--measurements",
        type=options.nonempty,
        metavar="FILE",
        help="validate your own measurements instead, read as `calibrate fit` reads them (a "
        "CSV of runs and bench points, fio JSON with --scenario, or dma_map_benchmark "
        "output), on --platform: each measurement beside the model, no intervals",
    )
    p.add_argument(
        "--kind",
        choices=["csv", "fio", "dma-map-benchmark"],
        default=None,
        help="with --measurements: the file's format (default by its name: .csv, .json is "
        "fio, anything else dma_map_benchmark output)",
    )
    p.add_argument(
        "--scenario",
        type=options.nonempty,
        help="with --measurements of fio: the scenario its jobs ran against",
    )
    p.add_argument(
        "--published",
        nargs="?",
        const="",
        metavar="FILE",
        help="validate the IOMMU's software path instead: every row of the published numbers "
        "(validation/iommu-software/published.csv, or FILE in its form: dma_map_benchmark's "
        "map and unmap averages, a storage server's IOPS, one VT-d invalidation) on the host "
        "file that stands for its machine, measured beside modelled with the interval; a "
        "row is within where the model is within 25%% of it or, for dma_map_benchmark, "
        "within its 0.1 us resolution",
    )
    p.add_argument(
        "--fit",
        action="store_true",
        help="with --published: fit each host's fitted parameters (the SMMU's wait and time a "
        "command, the CPU's time writing one, a page-table entry's) to its own rows, and "
        "predict each row from a fit to the others (leave-one-out); no intervals",
    )
    p.add_argument(
        "--platform",
        type=options.nonempty,
        help="run every directory on this platform (a name, file or HOST+DEVICE) instead of "
        "the host built from its dump",
    )
    p.add_argument(
        "--fit-device",
        action="store_true",
        help="fit the NFP-6000's engine parameters (contexts, set-up, the data port's rate "
        "and fixed time a transfer, a write's hold, the misaligned store and fetch) once "
        "across the server-class hosts of the directories, then "
        "print the validation as shipped beside the validation with the fitted values (no "
        "intervals); a desktop-class host is predicted, never fitted on",
    )
    p.add_argument(
        "--fit-hosts",
        action="store_true",
        help="fit each host's own parameters (root complex, partial line, DRAM, socket link) to "
        "its own directories, the device as shipped, and print the validation as shipped "
        "beside it, host by host (no intervals): how much of the error is the host's",
    )
    p.add_argument(
        "--leave-out",
        type=options.nonempty,
        metavar="HOST",
        help="with --fit-device: fit without this host's directories (a host part such as "
        "hsw-Xeon-E5-2620v3_dell-t630) and predict them, the host built from its dump alone",
    )
    p.add_argument(
        "--out",
        type=options.nonempty,
        metavar="FILE.toml",
        help="with --fit-device: write the device file with the fitted values (each marked "
        "fitted, with its fit_range), whole (a temporary file, then renamed); a file there "
        "that is not a device file is refused before the fit unless --force",
    )
    options.add_force(p, "--out", "a device file")
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
    if args.published is not None:
        return _published(args)
    options.refuse(args, ("fit",), "applies with --published")
    if args.measurements:
        return _measurements(args)
    options.refuse(args, ("kind", "scenario"), "applies with --measurements")
    if args.fit_hosts:
        options.refuse(
            args,
            ("fit_device", "leave_out", "out", "samples", "seed", "platform"),
            "--fit-hosts fits each host from its dump on its own directories, no intervals",
        )
    if not args.fit_device:
        options.refuse(args, ("leave_out", "out"), "applies with --fit-device")
    if not args.out:
        options.refuse(args, ("force",), "applies to the device file written with --out")
    else:
        options.refuse(
            args,
            ("samples", "seed", "platform"),
            "--fit-device runs the hosts from their dumps with the fitted values, no intervals",
        )
        if args.out and not args.out.endswith(".toml"):
            from dmalab import ScenarioError

            raise ScenarioError(f"--out {args.out}: the file must end in .toml")
        from dmalab import files

        options.output_file(args, "out", (files.DEVICE,), "a device file")
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
    if args.fit_device:
        return _fit(args, dirs)
    if args.fit_hosts:
        return _fit_hosts(args, dirs)
    samples = 0 if args.no_intervals else args.samples
    start = time.monotonic()
    with options.ProgressLine(enabled=not args.no_progress) as line:

        def progress(done: int, total: int, what: str) -> None:
            line.update(done, total, what)

        result = validate.run(
            dirs, platform=args.platform, samples=samples, seed=args.seed, progress=progress
        )
        if samples:
            line.update(0, 0, "the model's track record on the corpus's other hosts")
            validate.track(result, _own_record(result, dirs) if not args.platform else None)
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


def _published(args: argparse.Namespace) -> int:
    """``--published [FILE]``: the published numbers of the IOMMU's software path beside the
    model, host by host; with ``--fit``, each host fitted to its rows and leave-one-out."""
    from dmalab import published

    options.refuse(
        args,
        (
            "pcie_bench",
            "measurements",
            "kind",
            "scenario",
            "platform",
            "fit_device",
            "fit_hosts",
            "leave_out",
            "out",
        ),
        "does not apply with --published (each row runs on its own host file)",
    )
    if args.fit:
        options.refuse(args, ("samples", "seed"), "--fit runs without intervals")
    rows = published.read(args.published or None)
    samples = 0 if args.no_intervals or args.fit else args.samples
    start = time.monotonic()
    fits = []
    with options.ProgressLine(enabled=not args.no_progress) as line:

        def progress(done: int, total: int, what: str) -> None:
            line.update(done, total, what)

        published.run(rows, samples=samples, seed=args.seed, progress=progress)
        if args.fit:
            # Each host the file has rows of to fit on (a user's file may have none of one).
            hosts = [h for h in published.FIT_PARAMS if published.measurements_of(h, rows)]
            for i, host in enumerate(hosts):
                line.update(i, len(hosts), f"fitting {host}")
                fits.append(published.fit_host(host, rows))
    seconds = time.monotonic() - start
    loo = published.loo_rows(rows, fits)
    if args.format != "table":
        recs = [r.as_dict() for r in rows]
        if args.fit:
            data: dict[str, Any] = {
                "rows": recs,
                "fits": [f.as_dict() for f in fits],
                "loo": loo,
            }
            options.emit(data, args.format, rows=loo, command=args.argv)
        else:
            options.emit(recs, args.format, rows=recs, command=args.argv)
        return 0
    console = options.console()
    ran = [r for r in rows if r.modelled is not None]
    within = sum(bool(r.within) for r in rows)
    inside = sum(bool(r.inside) for r in rows)
    platforms = {r.platform for r in ran}
    draws = f", {samples} draws each" if samples else ", no intervals"
    console.print(
        f"{len(rows)} published rows, {len(ran)} run on {len(platforms)} host files{draws}, in "
        f"{seconds:.1f} s: {within} of {len(rows)} within 25% (or 0.1 us), "
        + (f"{inside} of {len(ran)} inside their intervals" if samples else "no intervals")
    )
    numbers = ["threads", "pages", "measured", "modelled", "interval", "error"]
    t = options.plain_table(["id", "host file", "metric", *numbers, "within", "inside"], numbers)
    for r in rows:
        b = r.bench
        t.add_row(
            r.id,
            r.platform or "-",
            r.metric,
            str(b.get("threads", "-")),
            str(b.get("granule_pages", "-")),
            f"{r.measured:g}",
            "-" if r.modelled is None else f"{r.modelled:.4g}",
            "-" if r.lo is None or r.hi is None else f"{r.lo:.4g}..{r.hi:.4g}",
            "-" if r.error is None else f"{r.error:+.0%}",
            "-" if r.within is None else ("yes" if r.within else "no"),
            "-" if r.inside is None else ("yes" if r.inside else "no"),
        )
    console.print(t)
    for r in rows:
        if r.why:
            console.print(f"not expressible: {r.id}: {r.why}", markup=False)
    if args.fit:
        _published_fits(fits, loo)
    console.print(
        "error: modelled / measured - 1; within: |error| <= 25%, or within 0.1 us (its unit) "
        "for dma_map_benchmark; inside: the interval (5th to 95th percentile of the draws) "
        "meets what the measurement stands for (dma_map_benchmark cuts each operation to 100 "
        "ns and the mean again, so 0.6 stands for 0.6 to 0.8 us).",
        markup=False,
    )
    return 0


def _published_fits(fits: list[Any], loo: list[dict[str, Any]]) -> None:
    console = options.console()
    t = options.plain_table(
        ["host file", "parameter", "start", "fitted", "+-", "range"],
        ["start", "fitted", "+-"],
    )
    t.title = (
        "each host's parameters fitted to its own rows (start: the geometric middle of the range)"
    )
    for f in fits:
        for p in f.parameters:
            t.add_row(
                f.platform,
                p.name,
                f"{p.start:g}",
                f"{p.value:g}",
                "-" if p.sigma is None else f"{p.sigma:.3g}",
                f"{p.lower:g}..{p.upper:g}",
            )
    console.print(t)
    numbers = ["measured", "predicted", "error"]
    t = options.plain_table(["id", "host file", "metric", *numbers, "within"], numbers)
    hit = sum(bool(r["within"]) for r in loo)
    none = sum(r["predicted"] is None for r in loo)
    t.title = f"leave-one-out: {hit} of {len(loo)} rows within 25% (or 0.1 us)" + (
        f"; {none} not predictable (the other rows cannot fit the parameters it pins)"
        if none
        else ""
    )
    for r in loo:
        t.add_row(
            r["id"],
            r["platform"],
            r["metric"],
            f"{r['measured']:g}",
            "-" if r["predicted"] is None else f"{r['predicted']:.4g}",
            "-" if r["error"] is None else f"{r['error']:+.0%}",
            "yes" if r["within"] else ("-" if r["predicted"] is None else "no"),
        )
    console.print(t)


def _measurements(args: argparse.Namespace) -> int:
    """``--measurements FILE``: a user's own measurements beside the model on ``--platform``."""
    import statistics

    from dmalab import ScenarioError, fit

    options.refuse(
        args,
        ("pcie_bench", "fit_device", "fit_hosts", "leave_out", "out", "samples", "seed"),
        "applies to the pcie-bench corpus, not to --measurements",
    )
    if not args.platform:
        raise ScenarioError("--measurements: give the --platform they were measured on")
    path = args.measurements
    kind = args.kind or (
        "csv" if path.endswith(".csv") else "fio" if path.endswith(".json") else "dma-map-benchmark"
    )
    if kind != "fio":
        options.refuse(args, ("scenario",), f"applies to fio's measurements, not {kind}")
    if kind == "csv":
        ms = fit.read_csv(path)
    elif kind == "fio":
        if not args.scenario:
            raise ScenarioError("--scenario: fio's measurements need the scenario they ran against")
        ms = fit.read_fio(path, args.scenario)
    else:
        ms = fit.read_dma_map_benchmark(path)
    modelled = fit.model_values(args.platform, ms)
    rows = [
        {
            "label": m.label,
            "model": m.model,
            "metric": m.metric,
            **{k: v for k, v in m.keys.items()},
            "measured": m.measured,
            "modelled": v,
            "error": v / m.measured - 1.0,
        }
        for m, v in zip(ms, modelled, strict=True)
    ]
    if args.format != "table":
        options.emit(rows, args.format, rows=rows, command=args.argv)
        return 0
    errs = [abs(r["error"]) for r in rows]
    console = options.console()
    console.print(
        f"{len(rows)} measurements on {args.platform}: {sum(e <= 0.1 for e in errs)} within "
        f"10%, median |error| {statistics.median(errs):.1%}"
    )
    numbers = ["measured", "modelled", "error"]
    t = options.plain_table(["measurement", "model", "metric", *numbers], numbers)
    for r in rows:
        t.add_row(
            r["label"],
            r["model"],
            r["metric"],
            f"{r['measured']:.4g}",
            f"{r['modelled']:.4g}",
            f"{r['error']:+.1%}",
        )
    console.print(t)
    return 0


def _fit(args: argparse.Namespace, dirs: list[Any]) -> int:
    """``--fit-device``: fit across the server-class hosts (less ``--leave-out``), then the
    validation as shipped beside the validation with the fitted values."""
    from dmalab import ScenarioError, corpusfit, files, validate

    hosts = sorted({d.host for d in dirs})
    if args.leave_out and args.leave_out not in hosts:
        raise ScenarioError(
            f"--leave-out {args.leave_out}: no such host; these: {', '.join(hosts)}"
        )
    fit_on = [d for d in dirs if d.host != args.leave_out and corpusfit.server_class(d)]
    if not fit_on:
        raise ScenarioError("--fit-device: no server-class host left to fit on")
    shown = [d for d in dirs if d.host == args.leave_out] if args.leave_out else dirs
    err = options.console(stderr=True)
    skipped = sorted({d.host for d in dirs} - {d.host for d in fit_on} - {args.leave_out})
    if skipped:
        err.print(f"not fitted on (desktop-class, predicted only): {', '.join(skipped)}")
    with options.ProgressLine(enabled=not args.no_progress) as line:

        def progress(i: int, what: str) -> None:
            line.update(i, 0, f"fit evaluation {i}: {what}")

        result = corpusfit.fit_device(fit_on, progress=progress)
        # The left-out host from its dump alone: no value the corpus fitted on it.
        alone = {args.leave_out} if args.leave_out else set()
        before = validate.run(shown, uncalibrated=alone)
        after = validate.run(shown, draws=result.values, uncalibrated=alone)
    if args.out:
        files.write_atomic(args.out, corpusfit.device_file(result))
        err.print(f"wrote {args.out}")
    if args.format != "table":
        data: dict[str, Any] = {
            "fit": result.as_dict(),
            "shipped": validate.summarise(before, ["host", "unit"]),
            "fitted": validate.summarise(after, ["host", "unit"]),
        }
        rows = [{"mode": m, **r} for m in ("shipped", "fitted") for r in data[m]]
        options.emit(data, args.format, rows=rows, command=args.argv)
        return 0
    console = options.console()
    t = options.plain_table(
        ["parameter", "before", "fitted", "+-", "fit_range", "range"], ["before", "fitted", "+-"]
    )
    t.title = (
        f"the device fitted on {', '.join(result.hosts)}: {result.points} points, "
        f"{result.within:.0%} within 10%, rms error {result.rms_error:.1%}, "
        f"{result.evaluations} evaluations"
    )
    for p in result.params:
        t.add_row(
            p.name,
            f"{p.start:g}",
            f"{p.value:g}",
            "not fixed" if not p.fixed else f"{p.sigma:.3g}",
            "-" if p.fit_range is None else f"{p.fit_range[0]}..{p.fit_range[1]}",
            f"{p.lower:g}..{p.upper:g}",
        )
    console.print(t)
    loose = [p.name for p in result.params if not p.fixed]
    if loose:
        err.print(
            f"warning: the measurements do not fix {', '.join(loose)} (its uncertainty spans "
            "more than half its range): its fit_range is its whole range"
        )
    _side_by_side(
        validate.summarise(before, ["host", "unit"]),
        validate.summarise(after, ["host", "unit"]),
        f"{args.leave_out} left out of the fit, predicted"
        if args.leave_out
        else "every host, as shipped and with the fitted device",
    )
    return 0


def _fit_hosts(args: argparse.Namespace, dirs: list[Any]) -> int:
    """``--fit-hosts``: each host's parameters fitted to its own directories; the validation
    as shipped beside it, host by host."""
    from dmalab import corpusfit, validate

    by_host: dict[str, list[Any]] = {}
    for d in dirs:
        by_host.setdefault(d.host, []).append(d)
    fits = []
    befores, afters = [], []
    with options.ProgressLine(enabled=not args.no_progress) as line:
        for host, mine in sorted(by_host.items()):
            params = [
                p
                for p in corpusfit.HOST_PARAMS
                if p != "memory.socket_link_ns" or any(d.memory == "remote" for d in mine)
            ]

            def progress(i: int, what: str, host: str = host) -> None:
                line.update(i, 0, f"{host}: fit evaluation {i}: {what}")

            result = corpusfit.fit_device(mine, params, progress=progress)
            fits.append(result)
            befores.append(validate.run(mine))
            afters.append(validate.run(mine, draws=result.values))
    shipped = [r for b in befores for r in validate.summarise(b, ["host", "unit"])]
    fitted = [r for a in afters for r in validate.summarise(a, ["host", "unit"])]
    if args.format != "table":
        data: dict[str, Any] = {
            "fits": [f.as_dict() for f in fits],
            "shipped": shipped,
            "fitted": fitted,
        }
        rows = [{"mode": m, **r} for m in ("shipped", "fitted") for r in data[m]]
        options.emit(data, args.format, rows=rows, command=args.argv)
        return 0
    console = options.console()
    t = options.plain_table(
        ["host", "parameter", "before", "fitted", "+-"], ["before", "fitted", "+-"]
    )
    t.title = "each host's parameters fitted to its own directories"
    for f in fits:
        for p in f.params:
            t.add_row(
                f.hosts[0],
                p.name,
                f"{p.start:g}",
                f"{p.value:g}",
                "not fixed" if not p.fixed else f"{p.sigma:.3g}",
            )
    console.print(t)
    _side_by_side(shipped, fitted, "every host, as shipped and with its own parameters fitted")
    return 0


def _side_by_side(shipped: list[dict[str, Any]], fitted: list[dict[str, Any]], title: str) -> None:
    a = {(r["host"], r["unit"]): r for r in shipped}
    numbers = [
        "points",
        "shipped within 10%",
        "shipped median error",
        "fitted within 10%",
        "fitted median error",
    ]
    t = options.plain_table(["host", "unit", *numbers], numbers)
    t.title = title
    for r in fitted:
        s = a[(r["host"], r["unit"])]
        t.add_row(
            r["host"],
            r["unit"],
            str(r["points"]),
            _pct(s["within_10pct"]),
            _signed(s["median_error"]),
            _pct(r["within_10pct"]),
            _signed(r["median_error"]),
        )
    options.console().print(t)


def _own_record(result: Any, dirs: list[Any]) -> list[Any] | None:  # noqa: ANN401
    """The run's own points as the track record, where it ran the whole shipped corpus on
    the hosts from their dumps (the same values a fresh run would give), else none (the
    record is run afresh)."""
    from dmalab import corpusfit, validate

    if validate.CORPUS is None:
        return None
    corpus = {d.path.resolve() for d in validate.corpus_dirs()}
    if {d.path.resolve() for d in dirs} != corpus:
        return None
    servers = {d.host for d in dirs if corpusfit.server_class(d)}
    return [p for p in result.points if p.host in servers]


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
        "stretched",
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
            "-" if r["beyond_draws"] is None else str(r["beyond_draws"]),
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
    tracked = [
        r for r in validate.summarise(result, ["host", "unit"]) if r["track_coverage"] is not None
    ]
    if tracked:
        t = options.plain_table(
            ["host", "unit", "coverage", "half-width"], ["coverage", "half-width"]
        )
        t.title = "by host, each interval widened by the model's error on the other hosts"
        for r in tracked:
            t.add_row(r["host"], r["unit"], _pct(r["track_coverage"]), _pct(r["track_half_width"]))
        console.print(t)
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
        "modelled value (median); stretched: modelled values that lay beyond their draws' "
        "5th to 95th percentile (a figure at a knee, where every drawn deviation moves it one "
        "way), their interval stretched to reach them. Widened by the model's error on the "
        "other hosts: the interval spans, besides the draws, where the measurement lies if the "
        "model errs as it did at the 5th and 95th percentile on the same experiment on the "
        "corpus's other server-class hosts (files as shipped): what the parameters cannot say, "
        "from other machines only.",
        markup=False,
    )
