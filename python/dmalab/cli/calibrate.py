"""``dmalab calibrate copy`` (this machine's memcpy) and ``dmalab calibrate fit`` (platform
parameters fitted to a user's own measurements)."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from dmalab import ScenarioError
from dmalab.cli import options


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``calibrate copy`` and ``calibrate fit``."""
    cal = sub.add_parser(
        "calibrate",
        help="measure this machine's memcpy, or fit platform parameters to your measurements",
        description="`copy` times this machine's memcpy; `fit` fits a platform's parameters to "
        "measurements of yours. Each takes --help.",
    )
    what = cal.add_subparsers(dest="what", required=True, metavar="WHAT")
    cp = what.add_parser(
        "copy",
        help="time memcpy and write a [copy] platform section",
        description="Time memcpy by length (64 B to 4 MiB) in cache and out of cache, aligned "
        "and not, fit set-up plus rate to each, and print (or --out) a [copy] platform section "
        "carrying this machine's description and the date. A fit whose largest error passes "
        f"{COPY_WARN:.0%} is flagged.",
    )
    cp.add_argument("--quick", action="store_true", help="fewer lengths and shorter trials")
    cp.add_argument(
        "--out",
        type=options.nonempty,
        metavar="FILE.toml",
        help="write the platform section (or, with --platform, the platform), whole (a "
        "temporary file, then renamed); a file there that is not a platform file or a [copy] "
        "section is refused unless --force",
    )
    options.add_force(cp, "--out", "a platform file or a [copy] section")
    cp.add_argument(
        "--platform",
        type=options.nonempty,
        help="write a whole platform: this one (a name or file with a [copy] section) with its "
        "[copy] section replaced by the measurement, loadable as it is",
    )
    options.add_format(cp)
    cp.set_defaults(func=run)
    ft = what.add_parser(
        "fit",
        help="fit platform parameters to measurements (CSV, fio JSON, dma_map_benchmark)",
        description="Fit the named parameters of a platform to measurements by bounded least "
        "squares on the relative errors, running the model for each measurement: a CSV "
        "(metric, measured, an optional sigma (relative uncertainty, default 0.02), and the "
        "inputs: model run|bench-map|bench-dma|bench-copy, scenario (runs), TABLE.KEY columns, "
        "or the benchmark's own columns as its JSON names them: threads, granule_pages, "
        "direction, flush for bench-map; direction, size_bytes, offset_bytes, window_bytes, "
        "access, memory, cache, iommu, page_bytes for bench-dma with metric bandwidth_gbit_s, "
        "latency_ns or transactions_per_s; size_bytes, placement for bench-copy with cpu_ns or "
        "engine_ns), fio's JSON output (with --scenario) or the kernel's dma_map_benchmark "
        "output. The platform may be HOST+DEVICE. Prints each parameter with its standard "
        "uncertainty, every residual and (--loo) each measurement predicted by a fit to the "
        "others; --posterior samples the parameters' posterior; --out writes the platform (or, "
        "when every parameter is the device's, the device) with the fitted values marked, each "
        "with a fit_range (three standard uncertainties, or the posterior's central 99%%) inside "
        "its physical range, refused when the rms relative error passes --max-error unless "
        "--force. A parameter the measurements cannot determine (the model does not move with "
        "it, or its standard uncertainty from the fit's covariance is wider than its whole "
        "range, the bounds: only a sum of it and another shows, say) is warned of and left as "
        "it was in --out, value and fit_range. Exit status 1 when the fit is REFUSED (with "
        "--force too), 2 on a measurement file it cannot read (named with its line).",
    )
    options.add_platform(ft, default="intel-vtd-2008-server")
    ft.add_argument(
        "--params",
        required=True,
        type=_params,
        metavar="TABLE.KEY[,...]",
        help="comma-separated TABLE.KEY parameters",
    )
    ft.add_argument(
        "--measurements",
        required=True,
        type=options.nonempty,
        metavar="FILE",
        help="the measurements",
    )
    ft.add_argument(
        "--kind",
        choices=["csv", "fio", "dma-map-benchmark"],
        default=None,
        help="the measurements' format (default: by the file's name: .csv, .json is fio, "
        "anything else dma_map_benchmark output)",
    )
    ft.add_argument(
        "--scenario", type=options.nonempty, help="the scenario fio's jobs ran against (fio only)"
    )
    ft.add_argument(
        "--flush",
        choices=["strict", "lazy"],
        default="strict",
        help="the domain's policy for dma_map_benchmark rows: strict or lazy (default strict)",
    )
    ft.add_argument(
        "--bounds",
        action="append",
        metavar="TABLE.KEY=LO:HI",
        help="a fitted parameter's bounds (default its stated range, else a tenth to ten times "
        "its value; repeatable, each parameter once; one of --params only)",
    )
    ft.add_argument(
        "--loo",
        action="store_true",
        help="also predict each measurement from a fit to all the others (leave-one-out: one "
        "more fit per measurement)",
    )
    ft.add_argument(
        "--posterior",
        type=options.integer(20, 100_000, "20..=100000"),
        default=None,
        metavar="STEPS",
        help="also sample the parameters' posterior with emcee (STEPS steps of 4 walkers per "
        "parameter, the first half dropped; pip install 'dmalab[posterior]'): each "
        "parameter's 5th, 50th and 95th percentile, and the written fit_range spans its "
        "central 99%% instead of three standard uncertainties. For a model that is piecewise "
        "in a parameter or pins it from one side only (default: off)",
    )
    ft.add_argument(
        "--seed",
        type=options.integer(0, (1 << 32) - 1, "0..=4294967295"),
        default=None,
        help="seed of --posterior's sampler (default 1): the same seed gives the same samples",
    )
    ft.add_argument(
        "--max-error",
        type=_max_error,
        default=0.10,
        help="refuse to write a fit whose rms relative error passes this, in (0, 1] (default "
        "0.10: 10%%)",
    )
    ft.add_argument(
        "--force",
        action="store_true",
        help="write the platform even so (the fit is still REFUSED: exit status 1), and over an "
        "--out file that holds something other than a platform file (refused before the fit "
        "without --force)",
    )
    ft.add_argument(
        "--out",
        type=options.nonempty,
        metavar="FILE.toml",
        help="write the fitted platform here, whole (a temporary file, then renamed)",
    )
    ft.add_argument(
        "--name", type=options.nonempty, help="the fitted platform's name (default: the base's)"
    )
    options.add_format(ft)
    ft.set_defaults(func=run_fit)


COPY_WARN = 0.25
"""A memcpy fit whose largest error passes this is flagged as poor."""


def _max_error(text: str) -> float:
    """An argparse ``type`` for ``--max-error``: an rms relative error above 0, at most 1
    (100%: a fit further off than that describes nothing; --force writes it anyway)."""
    x = options.finite(text)
    if not 0 < x <= 1:
        raise argparse.ArgumentTypeError(f"{text} is outside (0, 1] (an rms relative error)")
    return x


def _params(text: str) -> list[str]:
    """An argparse ``type`` for ``--params``: one or more comma-separated TABLE.KEY names, each
    named once (a parameter named twice would be fitted twice and written once)."""
    params = [p.strip() for p in text.split(",") if p.strip()]
    if not params or not all("." in p for p in params):
        raise argparse.ArgumentTypeError(
            f"expected TABLE.KEY[,TABLE.KEY...] (such as iommu.invalidate_ns), got {text!r}"
        )
    twice = sorted({p for p in params if params.count(p) > 1})
    if twice:
        raise argparse.ArgumentTypeError(
            f"{', '.join(twice)} is named twice in {text!r}; name each parameter once"
        )
    return params


def run(args: argparse.Namespace) -> int:
    """Measure memcpy, fit it, and print the points, the fits and the platform section."""
    from dmalab import calibrate, files

    # Refuse a bad --out or --platform before the measurement, not after it.
    _toml_out(args, (files.PLATFORM, files.COPY), "a platform file or a [copy] section")
    if not args.out:
        options.refuse(args, ("force",), "applies to the file written with --out")
    if args.platform:
        _whole_platform(args.platform, None)
    err = options.console(stderr=True)
    with err.status("measuring memcpy ..."):
        result = calibrate.copy(quick=args.quick)
    section = calibrate.platform_section(result)
    if args.platform:
        section = _whole_platform(args.platform, section)
    poor = [f for f in result["fits"] if f["max_relative_error"] > COPY_WARN]
    for f in poor:
        where = "in cache" if f["in_cache"] else "out of cache"
        err.print(
            f"warning: the {where}, {'aligned' if f['aligned'] else 'unaligned'} fit is poor "
            f"(largest error {f['max_relative_error']:.0%}): set-up plus rate does not describe "
            "this machine's memcpy well; rerun without --quick on a quiet machine"
        )
    if args.out:
        files.write_atomic(args.out, section)
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


def _bounds(specs: list[str] | None, params: list[str]) -> dict[str, tuple[float, float]]:
    """``--bounds`` as each parameter's (LO, HI); a parameter not among ``params`` (not
    fitted, so its bounds would bound nothing) is refused."""
    out = {}
    options.once("--bounds", (s.partition("=")[::2] for s in specs or []))
    for spec in specs or []:
        name, _, span = spec.partition("=")
        lo, _, hi = span.partition(":")
        try:
            lo_hi = (options.finite(lo), options.finite(hi))
        except argparse.ArgumentTypeError:
            raise ScenarioError(
                f"--bounds {spec}: expected TABLE.KEY=LO:HI with LO and HI finite numbers"
            ) from None
        if not name or lo_hi[0] >= lo_hi[1]:
            raise ScenarioError(f"--bounds {spec}: expected TABLE.KEY=LO:HI with LO below HI")
        if name not in params:
            raise ScenarioError(
                f"--bounds {spec}: {name} is not fitted (--params {','.join(params)}); bound "
                "only a parameter that is fitted"
            )
        out[name] = lo_hi
    return out


def run_fit(args: argparse.Namespace) -> int:
    """Read the measurements, fit, print, and write the platform if asked and accepted."""
    from dmalab import files, fit

    _toml_out(args, (files.PLATFORM,), "a platform file")
    path = args.measurements
    kind = args.kind or (
        "csv" if path.endswith(".csv") else "fio" if path.endswith(".json") else "dma-map-benchmark"
    )
    if not args.out:
        options.refuse(args, ("force", "name"), "applies to the platform written with --out")
    if args.posterior is None:
        options.refuse(args, ("seed",), "seeds --posterior's sampler")
    if kind != "fio":
        options.refuse(args, ("scenario",), f"applies to fio's measurements, not {kind}")
    if kind != "dma-map-benchmark":
        options.refuse(args, ("flush",), f"applies to dma_map_benchmark's measurements, not {kind}")
    if kind == "csv":
        ms = fit.read_csv(path)
    elif kind == "fio":
        if not args.scenario:
            raise ScenarioError("--scenario: fio's measurements need the scenario they ran against")
        ms = fit.read_fio(path, args.scenario)
    else:
        ms = fit.read_dma_map_benchmark(path, args.flush)
    params = args.params
    bounds = _bounds(args.bounds, params)
    err = options.console(stderr=True)
    with err.status(f"fitting {', '.join(params)} to {len(ms)} measurements ..."):
        result = fit.fit(
            args.platform,
            params,
            ms,
            bounds=bounds,
            max_error=args.max_error,
            source=Path(path).name,
            loo=args.loo,
        )
    if args.posterior is not None:
        with options.ProgressLine(err) as line:
            fit.posterior(
                result,
                ms,
                steps=args.posterior,
                seed=1 if args.seed is None else args.seed,
                progress=lambda i, n: line.update(i, n, "posterior steps"),
            )
    wrote = False
    if args.out and (result.accepted or args.force):
        files.write_atomic(args.out, fit.fitted_platform(result, args.name))
        wrote = True
    if args.format != "table":
        options.emit(result.as_dict(), args.format, rows=result.residuals, command=args.argv)
    else:
        _print_fit(result)
    for p in result.parameters:
        if not p.determined:
            why = (
                "the model does not move with it, or not apart from the others (no uncertainty "
                "can be computed)"
                if p.sigma is None
                else f"its uncertainty +- {p.sigma:.3g} is wider than its whole range "
                f"{p.lower:g}..{p.upper:g}"
            )
            kept = "; --out leaves it as it was (value and fit_range)" if args.out else ""
            err.print(
                f"warning: {p.name}: the measurements cannot determine it: {why}{kept}; fit "
                "fewer parameters, or add measurements that move it",
                markup=False,
                soft_wrap=True,
            )
    if args.out and not wrote:
        err.print(
            f"not written: rms relative error {result.rms_error:.1%} passes --max-error "
            f"{result.threshold:.0%} (--force writes it anyway)"
        )
    if wrote:
        err.print(f"wrote {args.out}")
    return 0 if result.accepted else 1


def _rows_table(title: str, model: str, rows: list[dict[str, Any]]) -> Any:  # noqa: ANN401
    """A table of measurements against the model's ``model`` figure, with the relative error."""
    from rich.table import Table

    t = Table(title=title)
    for c in ("measurement", "metric", "measured", model, "error"):
        t.add_column(c, justify="left" if c in ("measurement", "metric") else "right")
    for x in rows:
        t.add_row(
            x["label"],
            x["metric"],
            f"{x['measured']:.6g}",
            f"{x[model]:.6g}",
            f"{x['error']:+.2%}",
        )
    return t


def _print_fit(result: Any) -> None:  # noqa: ANN401 - a dmalab.fit.Fit
    from rich.table import Table

    out = options.console()
    t = Table(title=f"{result.platform}: fitted parameters")
    for c in ("parameter", "start", "fitted", "+-", "bounds"):
        t.add_column(c, justify="left" if c == "parameter" else "right")
    for p in result.parameters:
        sigma = "-" if p.sigma is None else f"{p.sigma:.3g}"
        if not p.determined:
            sigma += " (undetermined)"
        t.add_row(p.name, f"{p.start:g}", f"{p.value:.6g}", sigma, f"{p.lower:g}..{p.upper:g}")
    out.print(t)
    out.print(_rows_table("residuals", "modelled", result.residuals))
    if result.posterior:
        post = result.posterior
        t = Table(
            title=f"posterior: {post['walkers']} walkers x {post['steps']} steps (half burn-in), "
            f"acceptance {post['acceptance']:.2f}"
        )
        for c in ("parameter", "5th", "50th", "95th", "fit_range written"):
            t.add_column(c, justify="left" if c == "parameter" else "right")
        for name, q in post["params"].items():
            t.add_row(
                name,
                f"{q['p5']:.6g}",
                f"{q['p50']:.6g}",
                f"{q['p95']:.6g}",
                f"{math.floor(q['lo'])}..{math.ceil(q['hi'])}",
            )
        out.print(t)
    if result.loo:
        title = "leave-one-out: each measurement predicted by a fit to the others"
        out.print(_rows_table(title, "predicted", result.loo))
    verdict = "accepted" if result.accepted else "REFUSED"
    out.print(
        f"rms relative error {result.rms_error:.2%} (largest {result.max_error:.2%}), "
        f"{result.evaluations} model evaluations: {verdict} at --max-error {result.threshold:.0%}"
    )


def _toml_out(args: argparse.Namespace, kinds: tuple[str, ...], what: str) -> None:
    """Refuse an --out that is not a .toml file in a folder that exists, or that holds
    something other than ``kinds`` (unless --force)."""
    path = args.out
    if path is not None and not path.endswith(".toml"):
        raise ScenarioError(f"--out {path}: the file must end in .toml")
    options.output_file(args, "out", kinds, what)


def _whole_platform(platform: str, section: str | None) -> str:
    """``platform`` with its ``[copy]`` section replaced by ``section``: a file that loads
    (with no section, only the check that it can be done)."""
    import tomllib

    from dmalab import fit
    from dmalab.extras import require

    tomli_w = require("tomli_w", "fit", "calibrate copy --platform")
    try:
        table = tomllib.loads(fit.platform_text(platform))
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(f"--platform {platform}: {e}") from None
    if "copy" not in table:
        raise ScenarioError(f"--platform {platform}: it has no [copy] section to replace")
    if section is None:
        return ""
    table["copy"] = tomllib.loads(section)["copy"]
    comments = [line for line in section.splitlines() if line.startswith("#")]
    return "\n".join([*comments, f"# the rest of the platform is {platform}'s", ""]) + str(
        tomli_w.dumps(table)
    )
