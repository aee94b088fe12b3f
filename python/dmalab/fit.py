"""Fit platform parameters to a user's own measurements, by bounded least squares.

A measurement is a model input and what was measured:

- a **run** (``model = run``): a scenario with its keys set (``workload.queue_depth = 32``) and a
  report metric (``ops_per_s``, ``latency_mean_us``, ...);
- a **map benchmark** (``model = bench-map``): the kernel's DMA map benchmark's set-up
  (``threads``, ``granule_pages``, ``direction``, ``flush``, ``dma_bits``, ``allocator``) and
  ``map_us`` or ``unmap_us``.

The measurements come from a CSV file (one row per measurement: ``model``, ``scenario``, any
``TABLE.KEY`` or benchmark columns, ``metric``, ``measured``), from fio's JSON output, or from
the kernel's ``dma_map_benchmark`` output (see the ``read_*`` functions).

For a trial value of the parameters the platform file is rewritten with them and every
measurement is run on it; scipy's ``least_squares`` (trust-region reflective, bounds) minimises
the relative residuals ``model / measured - 1``. Each parameter's standard uncertainty comes
from the Jacobian at the solution (``cov = s^2 (J^T J)^-1``, ``s^2`` the residual variance). A
fit whose root-mean-square relative error passes a threshold is refused unless forced: a poor
fit written into a platform would be trusted later.
"""

from __future__ import annotations

import csv
import datetime
import json
import math
import re
import tempfile
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dmalab import ScenarioError, _native, mapbench, sim
from dmalab.keys import nest, toml_value

BENCH_KEYS = ("threads", "granule_pages", "dma_bits", "direction", "flush", "allocator")
BENCH_METRICS = ("map_us", "unmap_us")
DEFAULT_MAX_ERROR = 0.10
"""The root-mean-square relative error above which a fit is refused unless forced."""


@dataclass
class Measurement:
    """One measured number and the model input that should give it."""

    model: str
    metric: str
    measured: float
    scenario: str | None = None
    keys: dict[str, Any] = field(default_factory=dict)
    label: str = ""


@dataclass
class Parameter:
    """A fitted parameter: its value, its standard uncertainty and its bounds."""

    name: str
    start: float
    value: float
    sigma: float | None
    lower: float
    upper: float
    integer: bool


@dataclass
class Fit:
    """What :func:`fit` found."""

    platform: str
    parameters: list[Parameter]
    residuals: list[dict[str, Any]]
    rms_error: float
    max_error: float
    evaluations: int
    accepted: bool
    threshold: float
    source: str

    def as_dict(self) -> dict[str, Any]:
        """Plain data, for JSON."""
        from dataclasses import asdict

        return asdict(self)


def read_csv(path: str | Path) -> list[Measurement]:
    """Measurements from a CSV file with a header: ``metric`` and ``measured`` are required;
    ``model`` (``run``, the default, or ``bench-map``), ``scenario`` (for runs), ``label``, and
    any ``TABLE.KEY`` (a scenario key) or benchmark column (``threads``, ...) are the inputs."""
    out = []
    with Path(path).open(newline="") as f:
        for line, row in enumerate(csv.DictReader(f), start=2):
            where = f"{path}:{line}"
            if not row.get("metric") or not row.get("measured"):
                raise ScenarioError(f"{where}: every row needs metric and measured")
            model = row.get("model") or "run"
            keys = {
                k: toml_value(v)
                for k, v in row.items()
                if k not in ("model", "scenario", "metric", "measured", "label")
                and v not in ("", None)
            }
            try:
                measured = float(row["measured"])
            except ValueError:
                raise ScenarioError(
                    f"{where}: measured is {row['measured']!r}, not a number"
                ) from None
            out.append(
                Measurement(
                    model,
                    row["metric"],
                    measured,
                    row.get("scenario") or None,
                    keys,
                    row.get("label") or f"{Path(path).name}:{line}",
                )
            )
    _check(out, str(path))
    return out


def _size(text: str) -> int:
    """fio's block size (``4k``, ``1M``, ``4096``) in bytes."""
    m = re.fullmatch(r"(\d+)([kKmMgG]?)[iI]?[bB]?", text.strip())
    if not m:
        raise ScenarioError(f"fio bs {text!r}: not a size")
    return int(m[1]) << {"": 0, "k": 10, "m": 20, "g": 30}[m[2].lower()]


def read_fio(path: str | Path, scenario: str) -> list[Measurement]:
    """Measurements from fio's ``--output-format=json``: each job's IOPS (read and write
    summed) and mean completion latency, as ``ops_per_s`` and ``latency_mean_us`` of
    ``scenario`` with the job's ``bs``, ``iodepth`` and ``numjobs`` as ``workload.io_bytes``,
    ``workload.queue_depth`` and ``workload.threads``."""
    try:
        data = json.loads(Path(path).read_text())
    except json.JSONDecodeError as e:
        raise ScenarioError(f"{path}: not fio JSON ({e})") from None
    glob = data.get("global options", {})
    out = []
    for job in data.get("jobs", []):
        opts = glob | job.get("job options", {})
        keys: dict[str, Any] = {}
        if "bs" in opts:
            keys["workload.io_bytes"] = _size(opts["bs"])
        if "iodepth" in opts:
            keys["workload.queue_depth"] = int(opts["iodepth"])
        if "numjobs" in opts:
            keys["workload.threads"] = int(opts["numjobs"])
        sides = [job[d] for d in ("read", "write") if job.get(d, {}).get("iops", 0) > 0]
        if not sides:
            continue
        name = job.get("jobname", "job")
        iops = sum(s["iops"] for s in sides)
        out.append(Measurement("run", "ops_per_s", iops, scenario, keys, f"{name} iops"))
        lat = [s.get("clat_ns", {}).get("mean") for s in sides]
        if all(v is not None for v in lat):
            mean_us = sum(v * s["iops"] for v, s in zip(lat, sides, strict=True)) / iops / 1e3
            out.append(
                Measurement("run", "latency_mean_us", mean_us, scenario, keys, f"{name} clat")
            )
    _check(out, str(path))
    return out


_DMA_HEAD = re.compile(r"threads:\s*(\d+).*?dir:\s*(\w+).*?granule:\s*(\d+)", re.IGNORECASE)
_DMA_LAT = re.compile(r"average (map|unmap) latency\(us\):\s*([\d.]+)", re.IGNORECASE)


def read_dma_map_benchmark(path: str | Path, flush: str = "strict") -> list[Measurement]:
    """Measurements from the output of the kernel's ``dma_map_benchmark`` tool (one or more
    runs, each a line with ``threads:N ... dir:DIR granule: G`` followed by its ``average map
    latency(us):X`` and ``average unmap latency(us):Y`` lines), as ``bench-map`` runs with
    ``flush`` (the tool does not print the domain's policy)."""
    out = []
    keys: dict[str, Any] | None = None
    for n, line in enumerate(Path(path).read_text().splitlines(), start=1):
        if m := _DMA_HEAD.search(line):
            direction = m[2].lower().replace("_", "-")
            if direction not in ("bidirectional", "to-device", "from-device"):
                raise ScenarioError(f"{path}:{n}: dir {m[2]!r} is not one the model takes")
            keys = {
                "threads": int(m[1]),
                "granule_pages": int(m[3]),
                "direction": direction,
                "flush": flush,
            }
        elif (m := _DMA_LAT.search(line)) and keys is not None:
            out.append(
                Measurement(
                    "bench-map",
                    f"{m[1].lower()}_us",
                    float(m[2]),
                    None,
                    dict(keys),
                    f"{Path(path).name}:{n}",
                )
            )
    _check(out, str(path))
    return out


def _check(ms: list[Measurement], where: str) -> None:
    if not ms:
        raise ScenarioError(f"{where}: no measurements found")
    for m in ms:
        if m.model not in ("run", "bench-map"):
            raise ScenarioError(f"{m.label}: model {m.model!r}; valid: run, bench-map")
        if m.model == "run" and not m.scenario:
            raise ScenarioError(f"{m.label}: a run needs a scenario")
        if m.model == "bench-map" and m.metric not in BENCH_METRICS:
            raise ScenarioError(f"{m.label}: metric {m.metric!r}; valid: map_us, unmap_us")
        if not m.measured > 0:
            raise ScenarioError(f"{m.label}: measured must be above 0, got {m.measured}")


def platform_text(platform: str) -> str:
    """A platform's TOML: a built-in's text, or the file's."""
    if platform in _native.platform_names():
        return _native.platform_text(platform)
    try:
        return Path(platform).read_text()
    except OSError as e:
        raise ScenarioError(f"platform {platform}: {e.strerror or e}") from None


def _entry(table: dict[str, Any], name: str) -> dict[str, Any]:
    node: Any = table
    for part in name.split("."):
        if not isinstance(node, dict) or part not in node:
            raise ScenarioError(f"--params {name}: the platform has no such parameter")
        node = node[part]
    if (
        not isinstance(node, dict)
        or not isinstance(node.get("value"), int | float)
        or isinstance(node.get("value"), bool)
    ):
        raise ScenarioError(f"--params {name}: not a numeric parameter (TABLE.KEY with a value)")
    return node


def with_values(text: str, values: Mapping[str, float], note: str | None = None) -> str:
    """The platform TOML ``text`` with ``values`` put in (integers where the file has one);
    with ``note``, each marked ``fitted = note`` (and ``claims = [note]``)."""
    import tomli_w

    table = tomllib.loads(text)
    for name, v in values.items():
        entry = _entry(table, name)
        entry["value"] = round(v) if isinstance(entry["value"], int) else float(v)
        if note is not None:
            for k in ("source", "fitted", "assumed", "inspected", "claims"):
                entry.pop(k, None)
            entry["fitted"] = note
            entry["claims"] = [note]
    return tomli_w.dumps(table)


def model_values(platform_file: str, ms: Iterable[Measurement]) -> list[float]:
    """What the model gives for each measurement on ``platform_file``."""
    out = []
    for m in ms:
        if m.model == "run":
            assert m.scenario is not None
            overrides = nest(m.keys) | {"platform": platform_file}
            r = sim.run(m.scenario, overrides=overrides)
            value = r.get(m.metric)
            if not isinstance(value, int | float):
                raise ScenarioError(f"{m.label}: metric {m.metric!r} is not a number of a run")
            out.append(float(value))
        else:
            kw = {k: v for k, v in m.keys.items() if k in BENCH_KEYS}
            rec = mapbench.run(platform_file, maps_per_thread=256, **kw)
            out.append(float(rec[m.metric]))  # type: ignore[literal-required]
    return out


def fit(
    platform: str,
    params: list[str],
    ms: list[Measurement],
    *,
    bounds: Mapping[str, tuple[float, float]] | None = None,
    start: Mapping[str, float] | None = None,
    max_error: float = DEFAULT_MAX_ERROR,
    source: str = "",
) -> Fit:
    """Fit ``params`` of ``platform`` to ``ms`` (see the module's description). Bounds default
    to a tenth and ten times the platform's value; ``start`` overrides the starting point."""
    import numpy as np

    from dmalab.extras import require

    optimize = require("scipy.optimize", "fit", "dmalab calibrate fit")
    text = platform_text(platform)
    table = tomllib.loads(text)
    entries = {p: _entry(table, p) for p in params}
    x0 = np.array([float((start or {}).get(p, entries[p]["value"])) for p in params])

    def default_bounds(v: float) -> tuple[float, float]:
        return (0.1 * abs(v), 10 * abs(v)) if v else (0.0, 1e6)

    spans = [(bounds or {}).get(p, default_bounds(v)) for p, v in zip(params, x0, strict=True)]
    lo, hi = np.array([s[0] for s in spans]), np.array([s[1] for s in spans])
    if np.any(lo >= hi) or np.any(x0 < lo) or np.any(x0 > hi):
        raise ScenarioError("--bounds: each parameter needs lower < start < upper")
    measured = np.array([m.measured for m in ms])
    source = source or ", ".join(sorted({m.label.split(":")[0] for m in ms}))
    evaluations = 0
    with tempfile.TemporaryDirectory(prefix="dmalab-fit-") as tmp:
        path = str(Path(tmp) / "trial.toml")

        def residuals(x: Any) -> Any:  # noqa: ANN401 - numpy arrays
            nonlocal evaluations
            evaluations += 1
            Path(path).write_text(with_values(text, dict(zip(params, x, strict=True))))
            return np.array(model_values(path, ms)) / measured - 1.0

        # Steps of 2% of a value: many parameters are whole nanoseconds, and a smaller step
        # would round to no change.
        sol = optimize.least_squares(
            residuals, x0, bounds=(lo, hi), method="trf", diff_step=0.02, x_scale="jac"
        )
        final = residuals(sol.x)
    m, n = len(ms), len(params)
    sigmas: list[float | None] = [None] * n
    jac = np.asarray(sol.jac)
    if m > n:
        s2 = float(final @ final) / (m - n)
        try:
            cov = np.linalg.inv(jac.T @ jac) * s2
            sigmas = [math.sqrt(c) if c >= 0 else None for c in np.diag(cov)]
        except np.linalg.LinAlgError:
            pass
    rms = float(math.sqrt(float(final @ final) / m))
    worst = float(np.max(np.abs(final)))
    model = (final + 1.0) * measured
    return Fit(
        platform=platform,
        parameters=[
            Parameter(
                p,
                float(x0[i]),
                float(sol.x[i]),
                sigmas[i],
                float(lo[i]),
                float(hi[i]),
                isinstance(entries[p]["value"], int),
            )
            for i, p in enumerate(params)
        ],
        residuals=[
            {
                "label": ms_.label,
                "metric": ms_.metric,
                "measured": ms_.measured,
                "modelled": float(model[i]),
                "error": float(final[i]),
            }
            for i, ms_ in enumerate(ms)
        ],
        rms_error=rms,
        max_error=worst,
        evaluations=evaluations,
        accepted=rms <= max_error,
        threshold=max_error,
        source=source,
    )


def fitted_platform(result: Fit, name: str | None = None) -> str:
    """The platform with the fitted values, each marked ``fitted`` with the measurements' file
    and the date; loads as is."""
    today = datetime.date.today().isoformat()
    values = {p.name: p.value for p in result.parameters}
    sig = {p.name: p.sigma for p in result.parameters}
    text = platform_text(result.platform)
    out = []
    for p, v in values.items():
        s = sig[p]
        out.append(f"{p} = {v:.6g}" + (f" +- {s:.3g}" if s is not None else ""))
    note = (
        f"fitted by dmalab calibrate fit to {result.source or 'measurements'} on {today}: "
        f"rms relative error {result.rms_error:.2%}"
    )
    body = with_values(text, values, note)
    table = tomllib.loads(body)
    if name:
        table["name"] = name
    import tomli_w

    header = [f"# {note}", *(f"# {line}" for line in out), ""]
    return "\n".join(header) + tomli_w.dumps(table)
