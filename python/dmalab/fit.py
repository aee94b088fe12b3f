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
import io
import json
import math
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dmalab import DmalabError, MeasurementError, ScenarioError, _native, mapbench, sim
from dmalab.keys import all_finite, nest, toml_value

BENCH_KEYS = ("threads", "granule_pages", "dma_bits", "direction", "flush", "allocator", "node")
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
    sigma: float | None = None


@dataclass
class Parameter:
    """A fitted parameter: its value, its standard uncertainty and its bounds, and whether the
    measurements determine it (:func:`determined`)."""

    name: str
    start: float
    value: float
    sigma: float | None
    lower: float
    upper: float
    integer: bool
    determined: bool = True


def determined(sigma: float | None, lower: float, upper: float) -> bool:
    """Whether the measurements determine a parameter fitted between ``lower`` and ``upper``
    with standard uncertainty ``sigma`` (from the fit's own covariance, ``(J^T W J)^-1`` scaled
    by the residuals' spread). Not where its uncertainty cannot be computed (``None``: the
    model does not move with it, or the parameters' columns are not independent), nor where one
    standard uncertainty is wider than its whole span of allowed values (``upper - lower``, its
    bounds): then the measurements put no bound on it inside its range, and its fitted value is
    wherever the solver stopped (two parameters of which only the sum shows, say)."""
    return sigma is not None and sigma <= upper - lower


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
    loo: list[dict[str, Any]] = field(default_factory=list)
    """Leave-one-out: each measurement predicted by a fit to all the others."""
    posterior: dict[str, Any] | None = None
    """With :func:`posterior`: the sampled posterior's percentiles of each parameter."""

    def as_dict(self) -> dict[str, Any]:
        """Plain data, for JSON."""
        from dataclasses import asdict

        return asdict(self)


def _read_text(path: str | Path, expected: str) -> str:
    """The text of measurements file ``path``; a :class:`MeasurementError` naming the file and
    line where it is empty (``expected`` says what it should hold) or is not text (a NUL byte,
    or bytes that are not UTF-8: a binary file)."""
    data = Path(path).read_bytes()

    def line_of(offset: int) -> int:
        return data.count(b"\n", 0, offset) + 1

    if b"\0" in data:
        at = data.index(b"\0")
        raise MeasurementError(
            f"{path}:{line_of(at)}: not a text file (a NUL byte at offset {at}); expected "
            f"{expected}"
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise MeasurementError(
            f"{path}:{line_of(e.start)}: not a text file (byte 0x{data[e.start]:02x} at offset "
            f"{e.start} is not UTF-8); expected {expected}"
        ) from None
    if not text.strip():
        raise MeasurementError(f"{path}:1: the file is empty; expected {expected}")
    return text.removeprefix("\ufeff")


INT_COLUMNS: dict[str, dict[str, int]] = {
    "bench-dma": {"size_bytes": 1, "offset_bytes": 0, "window_bytes": 1, "page_bytes": 1},
    "bench-map": {"threads": 1, "granule_pages": 1, "dma_bits": 1, "node": -1},
    "bench-copy": {"size_bytes": 1},
}
"""Each benchmark's whole-number columns and the least each may be: checked as the file is
read, with its line; the model checks the top of each range (and names the row)."""


def _whole(value: Any, least: int) -> int | None:  # noqa: ANN401 - a TOML or JSON value
    """``value`` as an integer of at least ``least`` (an integral float too), else ``None``."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, int) and not isinstance(value, bool) and value >= least:
        return value
    if isinstance(value, str) and re.fullmatch(r"[+-]?\d+", value.strip()):
        return _whole(int(value), least)
    return None


def read_csv(path: str | Path) -> list[Measurement]:
    """Measurements from a CSV file with a header: ``metric`` and ``measured`` are required;
    ``model`` (``run``, the default, or ``bench-map``), ``scenario`` (for runs), ``label``, and
    any ``TABLE.KEY`` (a scenario key) or benchmark column (``threads``, ...) are the inputs.
    A file that is empty or not text, or a value that is no number where one must be, is a
    :class:`MeasurementError` naming the file, the line and the column."""
    text = _read_text(path, "a CSV header (metric, measured and the inputs) and a row each")
    out = []
    reader = csv.DictReader(io.StringIO(text, newline=""))
    rows = iter(reader)
    while True:
        try:
            row = next(rows)
        except StopIteration:
            break
        except csv.Error as e:
            raise MeasurementError(f"{path}:{reader.line_num}: not CSV ({e})") from None
        line = reader.line_num
        where = f"{path}:{line}"
        if None in row:
            raise MeasurementError(
                f"{where}: more fields than the header's {len(reader.fieldnames or [])}"
            )
        if not row.get("metric") or not row.get("measured"):
            raise MeasurementError(f"{where}: every row needs metric and measured")
        model = row.get("model") or "run"
        keys = {
            k: toml_value(v)
            for k, v in row.items()
            if k not in ("model", "scenario", "metric", "measured", "label", "sigma")
            and v not in ("", None)
        }
        for k, v in keys.items():
            if not all_finite(v):
                raise MeasurementError(f"{where}: column {k} is {row[k]!r}, not a finite number")
        for k, least in INT_COLUMNS.get(model, {}).items():
            if k in keys:
                whole = _whole(keys[k], least)
                if whole is None:
                    raise MeasurementError(
                        f"{where}: column {k} is {row[k]!r}; valid: an integer >= {least}"
                    )
                keys[k] = whole
        try:
            measured = float(row["measured"])
            sigma = float(row["sigma"]) if row.get("sigma") else None
        except ValueError:
            raise MeasurementError(
                f"{where}: measured {row['measured']!r} or sigma {row.get('sigma')!r} is "
                "not a number"
            ) from None
        if not math.isfinite(measured):
            raise MeasurementError(
                f"{where}: column measured is {row['measured']!r}, not a finite number"
            )
        out.append(
            Measurement(
                model,
                row["metric"],
                measured,
                row.get("scenario") or None,
                keys,
                row.get("label") or f"{Path(path).name}:{line}",
                sigma,
            )
        )
    _check(out, str(path))
    return out


def _size(text: str) -> int | None:
    """fio's block size (``4k``, ``1M``, ``4096``) in bytes, or ``None`` if it is no size."""
    m = re.fullmatch(r"(\d+)([kKmMgG]?)[iI]?[bB]?", text.strip())
    if not m:
        return None
    return int(m[1]) << {"": 0, "k": 10, "m": 20, "g": 30}[m[2].lower()]


class _Located(dict[str, Any]):
    """A JSON object that knows the line of each of its values (:func:`_located_json`)."""

    lines: dict[str, int]
    line: int

    def line_of(self, key: str) -> int:
        """The line ``key``'s value starts on (the object's own where it has no such key)."""
        return self.lines.get(key, self.line)


def _located_json(text: str) -> Any:  # noqa: ANN401 - any JSON value
    """``text`` read as JSON, every object a :class:`_Located` that knows its values' lines.

    Python's scanner written in Python (``json.scanner.py_make_scanner``; the C one calls no
    hooks) calls the decoder's ``parse_object`` for each object with the function that reads
    each of its values; wrapping that function records where each value starts."""
    import bisect
    import json.decoder
    import json.scanner

    newlines = [i for i, ch in enumerate(text) if ch == "\n"]

    def line_at(offset: int) -> int:
        return bisect.bisect_left(newlines, offset) + 1

    def parse_object(
        s_and_end: tuple[str, int],
        strict: bool,  # json's own signature, as json.decoder.JSONObject takes it
        scan_once: Callable[[str, int], tuple[Any, int]],
        object_hook: Any,  # noqa: ANN401
        object_pairs_hook: Any,  # noqa: ANN401
        memo: dict[str, str] | None = None,
    ) -> tuple[Any, int]:
        starts: list[int] = []

        def traced(s: str, idx: int) -> tuple[Any, int]:
            starts.append(idx)
            return scan_once(s, idx)

        def located(pairs: list[tuple[str, Any]]) -> _Located:
            obj = _Located(pairs)
            obj.lines = {k: line_at(i) for (k, _), i in zip(pairs, starts, strict=True)}
            obj.line = line_at(s_and_end[1] - 1)
            return obj

        return json.decoder.JSONObject(  # type: ignore[attr-defined,no-any-return]
            s_and_end, strict, traced, None, located, memo
        )

    decoder = json.JSONDecoder()
    decoder.parse_object = parse_object  # type: ignore[attr-defined]
    decoder.scan_once = json.scanner.py_make_scanner(decoder)  # type: ignore[attr-defined]
    return decoder.decode(text)


def _number(value: Any) -> float | None:  # noqa: ANN401 - a JSON value
    """``value`` if it is a finite JSON number (not a bool), else ``None``."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


def read_fio(path: str | Path, scenario: str) -> list[Measurement]:
    """Measurements from fio's ``--output-format=json``: each job's IOPS (read and write
    summed) and mean completion latency, as ``ops_per_s`` and ``latency_mean_us`` of
    ``scenario`` with the job's ``bs``, ``iodepth`` and ``numjobs`` as ``workload.io_bytes``,
    ``workload.queue_depth`` and ``workload.threads``. A file that is empty, not text or not
    JSON, or a field of those that is not what fio writes there, is a :class:`MeasurementError`
    naming the file, the line and the field (``jobs[1].read.iops``) with its valid range."""
    text = _read_text(path, "fio's JSON output (fio --output-format=json)")
    try:
        data = _located_json(text)
    except json.JSONDecodeError as e:
        raise MeasurementError(f"{path}:{e.lineno}: not fio JSON ({e.msg})") from None

    def bad(obj: _Located, key: str, name: str, valid: str) -> MeasurementError:
        return MeasurementError(
            f"{path}:{obj.line_of(key)}: {name} is {obj[key]!r}; valid: {valid}"
        )

    def table(obj: _Located, key: str, name: str) -> _Located | None:
        if key not in obj:
            return None
        value = obj[key]
        if not isinstance(value, _Located):
            raise bad(obj, key, name, "an object")
        return value

    if not isinstance(data, _Located):
        raise MeasurementError(f"{path}:1: not fio JSON (no object at the top)")
    glob = table(data, "global options", "global options")
    jobs = data.get("jobs", [])
    if not isinstance(jobs, list):
        raise bad(data, "jobs", "jobs", "a list of fio's jobs")
    out = []
    for i, job in enumerate(jobs):
        if not isinstance(job, _Located):
            raise MeasurementError(
                f"{path}:{data.line_of('jobs')}: jobs[{i}] is {job!r}; valid: an object"
            )
        keys: dict[str, Any] = {}
        own = table(job, "job options", f"jobs[{i}].job options")
        for source, prefix in ((glob, "global options"), (own, f"jobs[{i}].job options")):
            if source is None:
                continue
            if "bs" in source:
                size = _size(str(source["bs"]))
                if size is None or size < 1:
                    raise bad(source, "bs", f"{prefix}.bs", "a size in bytes (4096, 4k, 1M)")
                keys["workload.io_bytes"] = size
            for opt, key in (("iodepth", "workload.queue_depth"), ("numjobs", "workload.threads")):
                if opt in source:
                    whole = _whole(source[opt], 1)
                    if whole is None:
                        raise bad(source, opt, f"{prefix}.{opt}", "an integer >= 1")
                    keys[key] = whole
        sides: list[tuple[float, _Located, str]] = []
        for d in ("read", "write"):
            side = table(job, d, f"jobs[{i}].{d}")
            if side is None or "iops" not in side:
                continue
            iops = _number(side["iops"])
            if iops is None or iops < 0:
                raise bad(side, "iops", f"jobs[{i}].{d}.iops", "a finite number >= 0")
            if iops > 0:
                sides.append((iops, side, d))
        if not sides:
            continue
        name = job.get("jobname", "job")
        name = name if isinstance(name, str) else f"job {i}"
        total = sum(iops for iops, _, _ in sides)
        out.append(Measurement("run", "ops_per_s", total, scenario, keys, f"{name} iops"))
        lat: list[float | None] = []
        for iops, side, d in sides:
            clat = table(side, "clat_ns", f"jobs[{i}].{d}.clat_ns")
            if clat is None or "mean" not in clat:
                lat.append(None)
                continue
            mean = _number(clat["mean"])
            if mean is None or mean <= 0:
                raise bad(clat, "mean", f"jobs[{i}].{d}.clat_ns.mean", "a finite number above 0")
            lat.append(mean * iops)
        if all(v is not None for v in lat):
            mean_us = sum(v for v in lat if v is not None) / total / 1e3
            out.append(
                Measurement("run", "latency_mean_us", mean_us, scenario, keys, f"{name} clat")
            )
    _check(out, str(path))
    return out


_DMA_HEAD = re.compile(r"threads:", re.IGNORECASE)
_DMA_FIELD = {
    name: re.compile(rf"{name}:\s*(\S*)", re.IGNORECASE)
    for name in ("threads", "dir", "granule", "node")
}
_DMA_LAT = re.compile(r"average (map|unmap) latency\(us\):\s*(\S*)", re.IGNORECASE)


KERNEL_UNIT_US = 0.1
"""``dma_map_benchmark`` cuts each operation's time to whole 100 ns units, sums them, and cuts
the average of those units to a whole unit again (``kernel/dma/map_benchmark.c``); it prints
that unit count over 10."""

KERNEL_SPAN_US = 2 * KERNEL_UNIT_US
"""Each of the tool's two cuts loses up to one unit: a printed ``m`` stands for a mean in
``[m, m + 0.2)`` us."""


def kernel_mean(printed_us: float) -> tuple[float, float]:
    """What a ``dma_map_benchmark`` average printed as ``printed_us`` stands for: the middle of
    the span its two cuts leave (:data:`KERNEL_SPAN_US`), and the relative standard uncertainty
    (5% run to run, and the span's, taken as uniform)."""
    centre = printed_us + KERNEL_SPAN_US / 2
    span = KERNEL_SPAN_US / math.sqrt(12) / centre
    return centre, min(0.9, math.sqrt(0.05**2 + span**2))


def read_dma_map_benchmark(path: str | Path, flush: str = "strict") -> list[Measurement]:
    """Measurements from the output of the kernel's ``dma_map_benchmark`` tool (one or more
    runs, each a line with ``threads:N ... dir:DIR granule: G`` followed by its ``average map
    latency(us):X`` and ``average unmap latency(us):Y`` lines), as ``bench-map`` runs with
    ``flush`` (the tool does not print the domain's policy). Each average is taken as the
    middle of the span the tool's cuts leave, with its uncertainty (:func:`kernel_mean`): the
    tool prints 0.0 for an operation under 100 ns. A header whose threads or granule is not a
    whole number of at least 1, a direction the model does not take, an average that is not a
    finite number of at least 0, or one before any header, is a :class:`MeasurementError`
    naming the file and line: none is skipped, so no average is filed under another run."""
    text = _read_text(path, "dma_map_benchmark's output (threads:N ... dir:DIR granule: G)")
    out = []
    keys: dict[str, Any] | None = None
    for n, line in enumerate(text.splitlines(), start=1):
        where = f"{path}:{n}"
        if _DMA_HEAD.search(line):
            got = {k: m[1] if (m := r.search(line)) else None for k, r in _DMA_FIELD.items()}
            for k in ("threads", "granule"):
                if got[k] is None:
                    raise MeasurementError(f"{where}: a run's header without {k}:")
                if _whole(got[k], 1) is None:
                    raise MeasurementError(f"{where}: {k} is {got[k]!r}; valid: an integer >= 1")
            raw = got["dir"]
            direction = (raw or "").lower().replace("_", "-")
            if direction not in ("bidirectional", "to-device", "from-device"):
                raise MeasurementError(
                    f"{where}: dir is {raw!r}; valid: BIDIRECTIONAL, TO_DEVICE or FROM_DEVICE"
                )
            node = -1
            if got["node"] is not None:
                try:
                    node = int(got["node"])
                except ValueError:
                    node = -2
                if node < -1:
                    raise MeasurementError(
                        f"{where}: node is {got['node']!r}; valid: -1 (unbound) or a node >= 0"
                    )
            keys = {
                "threads": _whole(got["threads"], 1),
                "granule_pages": _whole(got["granule"], 1),
                "direction": direction,
                "flush": flush,
                "node": node,
            }
        elif m := _DMA_LAT.search(line):
            what = f"average {m[1].lower()} latency"
            if keys is None:
                raise MeasurementError(
                    f"{where}: an average before any run's header (threads:N ... dir:DIR "
                    "granule: G)"
                )
            try:
                value = float(m[2])
            except ValueError:
                value = math.nan
            if not (math.isfinite(value) and value >= 0):
                raise MeasurementError(
                    f"{where}: {what} is {m[2]!r}; valid: a finite number of at least 0 (us)"
                )
            centre, sigma = kernel_mean(value)
            out.append(
                Measurement(
                    "bench-map",
                    f"{m[1].lower()}_us",
                    centre,
                    None,
                    dict(keys),
                    f"{Path(path).name}:{n}",
                    sigma,
                )
            )
    _check(out, str(path))
    return out


DMA_KEYS = (
    "direction",
    "size_bytes",
    "offset_bytes",
    "window_bytes",
    "access",
    "memory",
    "cache",
    "iommu",
    "page_bytes",
)
DMA_METRICS = ("bandwidth_gbit_s", "latency_ns", "transactions_per_s")
COPY_KEYS = ("size_bytes", "placement")
COPY_METRICS = ("cpu_ns", "engine_ns")
MODELS = ("run", "bench-map", "bench-dma", "bench-copy")
"""What a measurement may be of: a scenario's run, or a point of ``bench map``, ``bench dma``
or ``bench copy`` (its columns as the command's JSON names them)."""

SPAN_SIGMAS = 3.0
"""How many standard uncertainties either side of a fitted value its written range spans:
three (about 99.7% for a model linear in its parameters). Not two: the parameters are whole
units and a part that binds or not makes the model piecewise, so the linear estimate of the
uncertainty is optimistic."""

SEARCH = 16
"""Starting points a fit tries (besides the file's values) before its local solver."""

STARTS = 3
"""Of the search's candidates, how many best ones the local solver starts from."""

DEFAULT_SIGMA = 0.02
"""A measurement's relative standard uncertainty where its file gives none (a ``sigma``
column): ``assumed``, the run-to-run spread of a DMA or I/O microbenchmark on a quiet host is
commonly 1 to 3%. It sets the fitted values' uncertainty where there are no more measurements
than parameters, so that their spread cannot be estimated from the residuals."""


def _check(ms: list[Measurement], where: str) -> None:
    if not ms:
        raise ScenarioError(f"{where}: no measurements found")
    metrics = {"bench-map": BENCH_METRICS, "bench-dma": DMA_METRICS, "bench-copy": COPY_METRICS}
    for m in ms:
        if m.model not in MODELS:
            raise ScenarioError(f"{m.label}: model {m.model!r}; valid: {', '.join(MODELS)}")
        if m.model == "run" and not m.scenario:
            raise ScenarioError(f"{m.label}: a run needs a scenario")
        valid = metrics.get(m.model)
        if valid and m.metric not in valid:
            raise ScenarioError(f"{m.label}: metric {m.metric!r}; valid: {', '.join(valid)}")
        if not (math.isfinite(m.measured) and m.measured > 0):
            raise ScenarioError(f"{m.label}: measured must be a finite number above 0")
        if m.sigma is not None and not (math.isfinite(m.sigma) and 0 < m.sigma < 1):
            raise ScenarioError(f"{m.label}: sigma must be a relative uncertainty in (0, 1)")


def platform_text(platform: str) -> str:
    """A platform's TOML: a built-in's text, or the file's."""
    if platform in _native.platform_names():
        return _native.platform_text(platform)
    try:
        return Path(platform).read_text()
    except (OSError, ValueError) as e:  # ValueError: a NUL in the name, or not UTF-8 text
        raise ScenarioError(f"platform {platform}: {getattr(e, 'strerror', None) or e}") from None


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
        # The range another fit left it no longer holds a value set here.
        entry.pop("fit_range", None)
        if note is not None:
            for k in ("source", "fitted", "assumed", "inspected", "claims"):
                entry.pop(k, None)
            entry["fitted"] = note
            entry["claims"] = [note]
    return tomli_w.dumps(table)


def model_values(
    platform: str, ms: Iterable[Measurement], draws: Mapping[str, Any] | None = None
) -> list[float]:
    """What the model gives for each measurement on ``platform`` (a name, a file, or
    ``HOST+DEVICE``), with ``draws`` (parameter path to value) in place of its files' values."""
    d = dict(draws) if draws else None
    out = []
    for m in ms:
        try:
            out.append(_model_value(platform, m, d))
        except DmalabError as e:
            # The model names the field and its range; the row names where it came from.
            if str(e).startswith(f"{m.label}:"):
                raise
            raise type(e)(f"{m.label}: {e}") from None
    return out


def _model_value(platform: str, m: Measurement, d: dict[str, Any] | None) -> float:
    """What the model gives for measurement ``m`` (see :func:`model_values`)."""
    from dmalab import devdma, synccopy

    if m.model == "run":
        assert m.scenario is not None
        overrides = nest(m.keys) | {"platform": platform}
        r = sim.run(m.scenario, overrides=overrides, draws=d)
        value = r.get(m.metric)
        if not isinstance(value, int | float):
            raise ScenarioError(f"{m.label}: metric {m.metric!r} is not a number of a run")
        return float(value)
    if m.model == "bench-dma":
        point = devdma.points(sizes=[int(m.keys.get("size_bytes", 64))])[0]
        point |= {k: v for k, v in m.keys.items() if k in DMA_KEYS}
        (rec,) = devdma.measure(platform, [point], draws=d)
        return float(rec[m.metric])  # type: ignore[literal-required]
    if m.model == "bench-copy":
        size = int(m.keys.get("size_bytes", 4096))
        place = str(m.keys.get("placement", "local"))
        (crec,) = synccopy.measure(platform, [size], [place], draws=d)
        return float(crec[m.metric])  # type: ignore[literal-required]
    kw = {k: v for k, v in m.keys.items() if k in BENCH_KEYS}
    rec_m = mapbench.run(platform, maps_per_thread=256, draws=d, **kw)
    return float(rec_m[m.metric])  # type: ignore[literal-required]


def _param_records(platform: str, params: list[str]) -> dict[str, dict[str, Any]]:
    """Each of ``params`` as ``platform`` reads it (value, provenance, range), or an error
    naming one it has not or one that is no number."""
    recs = {r["field"]: r for r in sim.platform_info(platform)["params"]}
    out = {}
    for p in params:
        if p not in recs:
            raise ScenarioError(f"--params {p}: the platform has no such parameter")
        try:
            int(recs[p]["value"])
        except ValueError:
            raise ScenarioError(
                f"--params {p}: not a numeric parameter (TABLE.KEY with a value)"
            ) from None
        out[p] = dict(recs[p])
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
    loo: bool = False,
    prior: Mapping[str, float] | None = None,
) -> Fit:
    """Fit ``params`` of ``platform`` to ``ms`` (see the module's description). Bounds default
    to each parameter's stated range (else a tenth and ten times its value); ``start``
    overrides the starting point; ``prior`` replaces the file's values as the first candidate
    of the search (so that a file holding an earlier fit's values does not carry them into a
    leave-one-out fit that cannot determine them). With ``loo``, each measurement is also
    predicted by a fit to all the others (leave-one-out), in ``Fit.loo``."""
    import numpy as np

    from dmalab.extras import require

    optimize = require("scipy.optimize", "fit", "dmalab calibrate fit")
    twice = sorted({p for p in params if params.count(p) > 1})
    if twice:
        raise ScenarioError(
            f"--params: {', '.join(twice)} is named twice; name each parameter once"
        )
    stray = [b for b in bounds or {} if b not in params]
    if stray:
        raise ScenarioError(
            f"--bounds: {', '.join(stray)} is not fitted (--params {','.join(params)}); "
            "bound only a parameter that is fitted"
        )
    recs = _param_records(platform, params)
    first = {**(prior or {}), **(start or {})}
    x0 = np.array([float(first.get(p, int(recs[p]["value"]))) for p in params])

    def default_bounds(p: str, v: float) -> tuple[float, float]:
        r = recs[p].get("range")
        if isinstance(r, dict):
            return float(r["lo"]), float(r["hi"])
        return (0.1 * abs(v), 10 * abs(v)) if v else (0.0, 1e6)

    spans = [(bounds or {}).get(p, default_bounds(p, v)) for p, v in zip(params, x0, strict=True)]
    lo, hi = np.array([s[0] for s in spans]), np.array([s[1] for s in spans])
    if np.any(lo >= hi) or np.any(x0 < lo) or np.any(x0 > hi):
        raise ScenarioError("--bounds: each parameter needs lower < start < upper")
    source = source or ", ".join(sorted({m.label.split(":")[0] for m in ms}))
    evaluations = 0
    n_params = len(params)

    def solve(sub: list[Measurement]) -> tuple[Any, Any, Any]:
        """The solution over ``sub``: parameters, relative residuals, Jacobian."""
        nonlocal evaluations
        measured = np.array([m.measured for m in sub])
        # The solver weighs each residual by its measurement's uncertainty (all alike where
        # none is given, which leaves the solution as unweighted).
        sig = np.array([m.sigma or DEFAULT_SIGMA for m in sub])

        def residuals(x: Any) -> Any:  # noqa: ANN401 - numpy arrays
            nonlocal evaluations
            evaluations += 1
            draws = {p: round(float(v)) for p, v in zip(params, x, strict=True)}
            return np.array(model_values(platform, sub, draws)) / measured - 1.0

        # A part that does not bind leaves the model flat in a parameter (the bandwidth a
        # device's contexts allow, where the root complex limits): a local solver started
        # there never moves. So, unless a start is given, the solver starts from the best of
        # the file's values and a scrambled Sobol design over the bounds (log-spaced where
        # they span more than a factor of 2).
        begins = [x0]
        if start is None:
            from dmalab.intervals import design

            u = np.array(design(n_params, SEARCH, seed=1))
            logs = (lo > 0) & (hi > 2 * lo)
            safe_lo = np.where(logs, lo, 1.0)
            grid = np.where(
                logs,
                np.exp(np.log(safe_lo) + u * (np.log(np.maximum(hi, 1.0)) - np.log(safe_lo))),
                lo + u * (hi - lo),
            )
            cands = [x0, *grid]
            cost = [float(np.sum((residuals(c) / sig) ** 2)) for c in cands]
            # The local solver from the best few starts: a model with regimes (one CPU's
            # writing or the IOMMU bounds an unmap) has local minima a single start can
            # settle in.
            begins = [cands[i] for i in np.argsort(cost, kind="stable")[:STARTS]]
        best = None
        for begin in begins:
            # Steps of 2% of a value, and at least one whole unit: every parameter is whole
            # units (nanoseconds, entries), and a smaller step would round to no change.
            step = np.maximum(0.02, 1.0 / np.maximum(np.abs(begin), 1.0))
            sol = optimize.least_squares(
                lambda x: residuals(x) / sig,
                begin,
                bounds=(lo, hi),
                method="trf",
                diff_step=step,
                x_scale="jac",
            )
            tried = np.round(sol.x)
            c = float(np.sum((residuals(tried) / sig) ** 2))
            if best is None or c < best[0]:
                best = (c, tried)
        assert best is not None
        x = best[1]
        at = residuals(x)
        # The Jacobian for the uncertainty, by central differences of at least one whole unit
        # (the solver's own steps may round to no change), one-sided at a bound.
        jac = np.zeros((len(sub), n_params))
        for j in range(n_params):
            h = max(1.0, round(0.02 * abs(x[j])))
            up, down = x.copy(), x.copy()
            up[j], down[j] = min(x[j] + h, hi[j]), max(x[j] - h, lo[j])
            if up[j] == down[j]:
                continue
            ru = at if up[j] == x[j] else residuals(up)
            rd = at if down[j] == x[j] else residuals(down)
            jac[:, j] = (ru - rd) / (up[j] - down[j])
        return x, at, jac

    x, final, jac = solve(ms)
    m, n = len(ms), len(params)
    sigmas: list[float | None] = [None] * n
    known = [False] * n
    # Weighted by each measurement's relative uncertainty; with more measurements than
    # parameters the residuals' own spread scales it (cov = s^2 (J^T W J)^-1).
    w = np.array([1.0 / (mm.sigma or DEFAULT_SIGMA) ** 2 for mm in ms])
    # A parameter the model does not move with (a zero column) has no uncertainty to give and
    # is not determined; the others' uncertainty comes from their own columns.
    moved = [j for j in range(n) if np.any(jac[:, j] != 0)]
    try:
        if not moved:
            raise np.linalg.LinAlgError
        sub = jac[:, moved]
        base = np.linalg.inv(sub.T @ (sub * w[:, None]))
        scale = float(final @ (final * w)) / (m - len(moved)) if m > len(moved) else 1.0
        for j, b in zip(moved, np.diag(base), strict=True):
            c = b * scale
            sigmas[j] = math.sqrt(c) if c > 0 else None
            # An exact fit (no residual spread) has no scaled uncertainty: whether it pins the
            # parameter is then judged on the measurements' own stated uncertainty.
            # A diagonal that is not positive (rounding on a nearly singular matrix) pins
            # nothing: undetermined.
            exact = math.sqrt(b) if b > 0 and math.isfinite(b) else None
            judged = sigmas[j] if sigmas[j] is not None else exact
            known[j] = determined(judged, float(lo[j]), float(hi[j]))
    except np.linalg.LinAlgError:
        pass
    rms = float(math.sqrt(float(final @ final) / m))
    worst = float(np.max(np.abs(final)))
    model = (final + 1.0) * np.array([mm.measured for mm in ms])
    held_out: list[dict[str, Any]] = []
    if loo and m > n:
        for i, left in enumerate(ms):
            rest = ms[:i] + ms[i + 1 :]
            xi, _, _ = solve(rest)
            draws = {p: round(float(v)) for p, v in zip(params, xi, strict=True)}
            (pred,) = model_values(platform, [left], draws)
            held_out.append(
                {
                    "label": left.label,
                    "metric": left.metric,
                    "measured": left.measured,
                    "predicted": pred,
                    "error": pred / left.measured - 1.0,
                }
            )
    return Fit(
        platform=platform,
        parameters=[
            Parameter(
                p,
                float(x0[i]),
                float(round(x[i])),
                sigmas[i],
                float(lo[i]),
                float(hi[i]),
                True,
                known[i],
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
        loo=held_out,
    )


POSTERIOR_LEVELS = (0.5, 5.0, 50.0, 95.0, 99.5)
"""The percentiles of each parameter's posterior that :func:`posterior` reports; the outer two
bound the ``fit_range`` a written file gets."""


def posterior(
    result: Fit,
    ms: list[Measurement],
    *,
    steps: int = 200,
    seed: int = 1,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Sample the parameters' posterior around a least-squares ``result`` with emcee's affine
    invariant ensemble sampler (Foreman-Mackey et al. 2013): the likelihood is Gaussian in the
    relative residuals, each with its measurement's ``sigma`` (``DEFAULT_SIGMA`` where none),
    the prior uniform over the fit's bounds. Walkers (four per parameter, at least 8) start in a
    small ball around the fit; the first half of ``steps`` is dropped as burn-in. Where the
    model is piecewise (a part that binds or not) or a parameter is pinned only from one side,
    this gives the skewed or one-sided span that the linear estimate cannot. Seeded: the same
    seed gives the same samples. Sets ``result.posterior`` and returns it: per parameter the
    percentiles of ``POSTERIOR_LEVELS`` as ``p0.5`` to ``p99.5`` and the outer two as ``lo`` and
    ``hi``; the sampler's mean acceptance fraction; walkers, steps and evaluations."""
    import numpy as np

    from dmalab.extras import require

    emcee = require("emcee", "posterior", "dmalab calibrate fit --posterior")
    if steps < 20:
        raise ScenarioError(f"--posterior: {steps} steps; valid: 20 or more")
    names = [p.name for p in result.parameters]
    lo = np.array([p.lower for p in result.parameters])
    hi = np.array([p.upper for p in result.parameters])
    x0 = np.array([p.value for p in result.parameters])
    measured = np.array([m.measured for m in ms])
    w = np.array([1.0 / (m.sigma or DEFAULT_SIGMA) ** 2 for m in ms])
    evaluations = 0

    def log_prob(x: Any) -> float:  # noqa: ANN401 - a numpy row
        nonlocal evaluations
        if np.any(x < lo) or np.any(x > hi):
            return -math.inf
        evaluations += 1
        draws = {p: round(float(v)) for p, v in zip(names, x, strict=True)}
        try:
            r = np.array(model_values(result.platform, ms, draws)) / measured - 1.0
        except DmalabError:
            return -math.inf
        return float(-0.5 * np.sum(w * r * r))

    k = len(names)
    walkers = max(8, 4 * k)
    rng = np.random.default_rng(seed)
    # A ball of 2% of each value (at least one unit), inside the bounds.
    scale = np.maximum(np.abs(x0) * 0.02, 1.0)
    start = np.clip(x0 + rng.normal(size=(walkers, k)) * scale, lo, hi)
    sampler = emcee.EnsembleSampler(walkers, k, log_prob)
    sampler.random_state = np.random.RandomState(seed).get_state()
    for i, _ in enumerate(sampler.sample(start, iterations=steps)):
        if progress:
            progress(i + 1, steps)
    chain = sampler.get_chain(discard=steps // 2, flat=True)
    out: dict[str, Any] = {"params": {}}
    for j, n in enumerate(names):
        q = np.percentile(chain[:, j], POSTERIOR_LEVELS)
        entry = {f"p{lv:g}": float(v) for lv, v in zip(POSTERIOR_LEVELS, q, strict=True)}
        out["params"][n] = entry | {"lo": float(q[0]), "hi": float(q[-1])}
    out |= {
        "acceptance": float(np.mean(sampler.acceptance_fraction)),
        "walkers": walkers,
        "steps": steps,
        "evaluations": evaluations,
        "seed": seed,
    }
    result.posterior = out
    return out


DEVICE_SECTIONS = ("device_dma.", "device_rating.")
"""Parameters a PCIe device's file holds (a fit of only these writes that device's file)."""

ENGINE_PARAMS = tuple(f"dma_engine.{k}" for k in _native.engine_keys())
"""A copy engine's own parameters: its file's ``[copy_engine]``, read into the host's
``[dma_engine]`` (a fit of only these writes the engine's file)."""


def split_host_device(platform: str) -> tuple[str, str | None]:
    """``(host, device)`` of a ``HOST+DEVICE`` name, else ``(platform, None)``."""
    if "+" in platform and not Path(platform).exists():
        host, dev = platform.split("+", 1)
        return host, dev
    return platform, None


def _slot_of(param: str) -> str:
    """The file a parameter lives in: ``pcie`` (the PCIe device's), ``copy-engine`` or
    ``host``."""
    if param.startswith(DEVICE_SECTIONS):
        return "pcie"
    return "copy-engine" if param in ENGINE_PARAMS else "host"


def _slots(platform: str) -> tuple[str, dict[str, str]]:
    """The host of ``platform`` and the device in each of its slots (named or its default)."""
    host, rest = split_host_device(platform)
    named = [] if rest is None else [rest] if _native.is_device(rest) else rest.split("+")
    slots = {sim.device_info(d)["kind"]: d for d in named}
    table = tomllib.loads(platform_text(host))
    for key, kind in (("default_device", "pcie"), ("default_copy_engine", "copy-engine")):
        if isinstance(table.get(key), str):
            slots.setdefault(kind, table[key])
    return host, slots


def fitted_platform(result: Fit, name: str | None = None) -> str:
    """The platform (or, where every fitted parameter is its PCIe device's or its copy
    engine's, that device's file) with the fitted values, each marked ``fitted`` with the
    measurements' file and the date. Each keeps the physical ``range`` it had (widened to the
    fit's bounds) and gains a ``fit_range``: the posterior's central 99% where one was sampled,
    else ``SPAN_SIGMAS`` standard uncertainties either side, inside the range. Intervals draw a
    fitted parameter over its ``fit_range``, so they narrow after a fit; loads as is. A
    parameter the measurements do not determine (:func:`determined`) is left as it was, its
    value, provenance and ``fit_range`` untouched: the fit says nothing of it."""
    today = datetime.date.today().isoformat()
    host, slots = _slots(result.platform)
    kinds = {_slot_of(p.name) for p in result.parameters}
    if len(kinds) > 1:
        raise ScenarioError(
            "--params: fit a PCIe device's parameters (device_dma., device_rating.), a copy "
            "engine's (" + ", ".join(ENGINE_PARAMS) + ") and the host's in separate fits: each "
            "is written to its own file"
        )
    kind = kinds.pop() if kinds else "host"
    # A parameter's path in the file it is written to.
    path = {p.name: p.name for p in result.parameters}
    if kind == "host":
        text = platform_text(host)
    else:
        dev = slots.get(kind)
        if dev is None:
            raise ScenarioError(f"--params: {result.platform} has no {kind} device to fit")
        text = (
            _native.device_text(dev)
            if _native.is_device(dev) and not Path(dev).exists()
            else Path(dev).read_text()
        )
        if kind == "copy-engine":
            path = {n: n.replace("dma_engine.", "copy_engine.", 1) for n in path}
    kept = [p for p in result.parameters if p.determined]
    values = {path[p.name]: p.value for p in kept}
    out = []
    for p in result.parameters:
        s = p.sigma
        line = f"{p.name} = {p.value:.6g}" + (f" +- {s:.3g}" if s is not None else "")
        if not p.determined:
            line += ": not written, the measurements cannot determine it"
        out.append(line)
    note = (
        f"fitted by dmalab calibrate fit to {result.source or 'measurements'} on {today}: "
        f"rms relative error {result.rms_error:.2%}"
    )
    body = with_values(text, values, note)
    table = tomllib.loads(body)
    post = (result.posterior or {}).get("params", {})
    for p in kept:
        entry = _entry(table, path[p.name])
        stated = entry.get("range")
        lo, hi = math.floor(p.lower), math.ceil(p.upper)
        if isinstance(stated, list) and len(stated) == 2:
            lo, hi = min(lo, int(stated[0])), max(hi, int(stated[1]))
        v = round(p.value)
        entry["range"] = [min(lo, v), max(hi, v)]
        if p.name in post:
            f_lo, f_hi = math.floor(post[p.name]["lo"]), math.ceil(post[p.name]["hi"])
        elif p.sigma is not None:
            f_lo = math.floor(p.value - SPAN_SIGMAS * p.sigma)
            f_hi = math.ceil(p.value + SPAN_SIGMAS * p.sigma)
        else:
            continue
        f_lo, f_hi = max(f_lo, entry["range"][0]), min(f_hi, entry["range"][1])
        entry["fit_range"] = [min(f_lo, v), max(f_hi, v)]
    if name:
        table["name"] = name
    import tomli_w

    header = [f"# {note}", *(f"# {line}" for line in out), ""]
    return "\n".join(header) + tomli_w.dumps(table)
