"""The device's parameters fitted once across the hosts of a validation corpus
(``dmalab validate --fit-device``): one device file that serves every host, which is the test of
"devices apart from hosts".

A deterministic sample of each directory's expressible points (evenly spaced within each
experiment, cache state and access pattern) is run on every host, each built from its own dump
(:mod:`dmalab.validate`), with the trial values of the device's parameters read in place of the
file's. scipy's ``least_squares`` (trust-region reflective, within each parameter's stated
range) minimises the relative residuals ``modelled / measured - 1`` over all hosts at once,
started from the best of the file's values and a Sobol design over the ranges, as
:func:`dmalab.fit.fit` does for one platform. Each value's standard uncertainty comes from the
Jacobian at the solution; the ``fit_range`` written is three of them either side, inside the
stated range.

Leave-one-host-out: the same fit without one host's directories, and that host's points
predicted by it (its host file from its dump alone).
"""

from __future__ import annotations

import datetime
import math
import tempfile
import tomllib
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dmalab import ScenarioError, _native, devdma, validate

PARAMS = (
    "device_dma.contexts",
    "device_dma.setup_ns",
    "device_dma.data_bytes_per_us",
    "device_dma.data_transfer_ns",
    "device_dma.data_beat_whole_pct",
    "device_dma.write_hold_ns",
    "device_dma.misaligned_store_ns",
    "device_dma.misaligned_fetch_ns",
)
"""The device's parameters fitted by default: what the NFP's engine keeps in flight, its
set-up, its data port's rate and fixed time a transfer, how long a write's command holds its
slot after its data has left, and a read's store and a write's fetch at a misaligned device
offset. Not its paths to and from the link: a read's latency and its slot's hold see the
set-up plus both paths together, so a fit of the set-up and the paths leaves a direction the
measurements do not fix (a fit of set-up, completion path and a write's fetch did so on
2026-12-07); the paths keep their assumed values. Nor the number of data ports: a whole
number the solver steps over poorly (a fit with it free ended at 2 ports and a worse error
than 1 port's, on 2026-12-07). Nor the port's beat: a power of two, assumed at the host's
line. Its link facts are read from the dumps, not fitted."""

HOST_PARAMS = (
    "memory.root_complex_ns",
    "memory.partial_line_ns",
    "memory.dram_ns",
    "memory.socket_link_ns",
)
"""A host's parameters fitted to its own directories (``validate --fit-hosts``): the root
complex's fixed time, a partial line's extra cost, a DRAM access, and (where the host has
remote memory) the socket link's; every other host value is read from its dump or assumed."""

FILE_KEYS = {"bus.pcie.max_outstanding_read_requests": "link.max_outstanding_read_requests"}
"""A parameter's path in the device file where it differs from its path on a platform."""

PER_GROUP = 4
"""Points a fit samples from each directory's experiment, cache state and access pattern."""

CLAIM = "pcie-bench corpus"
"""What a value fitted here names as fitted to (a fitted parameter's ``claims``): the
validation corpus, not one of the published claims."""

SPAN_SIGMAS = 3.0
"""A fitted value's ``fit_range``: this many standard uncertainties either side."""


def server_class(d: validate.Directory) -> bool:
    """Whether the directory's host is a server (a Xeon E5 generation): the device is fitted on
    those; a desktop-class host is predicted, not fitted on (its dump cannot say what sets its
    root port's latency, and a fit would take it up in the device's values)."""
    from dmalab import dumps

    dump = dumps.read_dumps(d.path)
    g = dumps.generation(dump.cpu.value if dump.cpu else None)
    return g is not None and g.name.endswith("-EP")


FIT_EXCLUDES = ("BW_DMA_RW",)
"""Tests a fit does not sample: reads and writes in turn measure slower than either direction
alone, which the model does not yet reproduce (median +12%); fitted on, that shortfall would
go into the device's values."""


def sample(points: Sequence[validate.Point], per_group: int = PER_GROUP) -> list[validate.Point]:
    """Up to ``per_group`` expressible points of each (directory, experiment, cache, access
    pattern), evenly spaced in file order, none of :data:`FIT_EXCLUDES`: deterministic."""
    groups: dict[tuple[str, str, str, str], list[validate.Point]] = defaultdict(list)
    for p in points:
        if p.model is not None and p.test not in FIT_EXCLUDES:
            groups[(p.dir, p.experiment, p.cache, p.pattern)].append(p)
    out = []
    for k in sorted(groups):
        g = groups[k]
        step = max(1, len(g) // per_group)
        out += g[::step][:per_group]
    return out


@dataclass
class FitParam:
    """One fitted parameter."""

    name: str
    start: float
    value: float
    sigma: float | None
    lower: float
    upper: float

    @property
    def fixed(self) -> bool:
        """Whether the measurements fix the value: its standard uncertainty is known and less
        than half its bounds' span."""
        return self.sigma is not None and self.sigma < (self.upper - self.lower) / 2

    @property
    def fit_range(self) -> tuple[int, int] | None:
        """Three standard uncertainties either side, inside the bounds (none without one)."""
        if self.sigma is None:
            return None
        lo = max(math.floor(self.value - SPAN_SIGMAS * self.sigma), math.floor(self.lower))
        hi = min(math.ceil(self.value + SPAN_SIGMAS * self.sigma), math.ceil(self.upper))
        return min(lo, round(self.value)), max(hi, round(self.value))


@dataclass
class DeviceFit:
    """A fit across hosts: the values, the hosts and points it used, its error."""

    params: list[FitParam]
    hosts: list[str]
    points: int
    rms_error: float
    evaluations: int
    left_out: list[str] = field(default_factory=list)

    @property
    def values(self) -> dict[str, int]:
        """The fitted values, as draws (parameter path to value)."""
        return {p.name: round(p.value) for p in self.params}

    def as_dict(self) -> dict[str, Any]:
        """Plain data, for JSON."""
        return {
            "params": [
                {
                    "name": p.name,
                    "start": p.start,
                    "value": p.value,
                    "sigma": p.sigma,
                    "bounds": [p.lower, p.upper],
                    "fit_range": list(p.fit_range) if p.fit_range else None,
                    "fixed_by_data": p.fixed,
                }
                for p in self.params
            ],
            "hosts": self.hosts,
            "points": self.points,
            "rms_error": self.rms_error,
            "evaluations": self.evaluations,
            "left_out": self.left_out,
        }


def fit_device(
    dirs: Sequence[validate.Directory],
    params: Sequence[str] = PARAMS,
    *,
    per_group: int = PER_GROUP,
    progress: Callable[[int, str], None] | None = None,
) -> DeviceFit:
    """Fit ``params`` (the corpus's device's by default, or a host's) across every directory
    of ``dirs`` at once (see the module's description)."""
    import numpy as np

    from dmalab.extras import require
    from dmalab.intervals import design

    optimize = require("scipy.optimize", "fit", "dmalab validate --fit-device")
    if not dirs:
        raise ScenarioError("--fit-device: no directory to fit on")
    with tempfile.TemporaryDirectory(prefix="dmalab-fit-") as work:
        jobs: list[tuple[str, list[dict[str, Any]], list[tuple[int, float]]]] = []
        total = 0
        for d in dirs:
            pts, _ = validate.read_points(d, validate.page_for(d))
            chosen = sample(pts, per_group)
            host = str(validate.host_file(d, Path(work)))
            unique: dict[tuple[Any, ...], int] = {}
            models: list[dict[str, Any]] = []
            refs: list[tuple[int, float]] = []
            for p in chosen:
                assert p.model is not None
                key = (*sorted(p.model.items()), p.unit)
                if key not in unique:
                    unique[key] = len(models)
                    models.append(p.model)
                sign = 1.0 if p.unit == "Gbit/s" else -1.0
                refs.append((unique[key], sign * p.measured))
            jobs.append((host, models, refs))
            total += len(refs)
        info = {r["field"]: r for r in _native_params(jobs[0][0])}
        missing = [p for p in params if p not in info]
        if missing:
            raise ScenarioError(f"--fit-device: the device has no parameter {missing[0]}")
        x0 = np.array([float(info[p]["value"]) for p in params])
        lo = np.array([float(info[p]["range"]["lo"]) for p in params])
        hi = np.array([float(info[p]["range"]["hi"]) for p in params])
        evaluations = 0

        def residuals(x: Any) -> Any:  # noqa: ANN401 - numpy arrays
            nonlocal evaluations
            evaluations += 1
            draws = {p: round(float(v)) for p, v in zip(params, x, strict=True)}
            out = []
            for host, models, refs in jobs:
                recs = devdma.measure(host, models, draws=draws)
                for i, signed in refs:
                    key = "bandwidth_gbit_s" if signed > 0 else "latency_ns"
                    out.append(float(recs[i][key]) / abs(signed) - 1.0)  # type: ignore[literal-required]
            if progress:
                progress(evaluations, f"rms {math.sqrt(float(np.mean(np.square(out)))):.1%}")
            return np.array(out)

        u = np.array(design(len(params), 16, seed=1))
        logs = (lo > 0) & (hi > 2 * lo)
        safe = np.where(logs, lo, 1.0)
        grid = np.where(
            logs,
            np.exp(np.log(safe) + u * (np.log(np.maximum(hi, 1.0)) - np.log(safe))),
            lo + u * (hi - lo),
        )
        cands = [x0, *grid]
        costs = [float(np.sum(residuals(c) ** 2)) for c in cands]
        begin = cands[int(np.argmin(costs))]
        sol = optimize.least_squares(
            residuals, begin, bounds=(lo, hi), method="trf", diff_step=0.05, x_scale="jac"
        )
        x = np.round(sol.x)
        at = residuals(x)
        jac = np.zeros((len(at), len(params)))
        for j in range(len(params)):
            h = max(1.0, round(0.05 * abs(x[j])))
            up, down = x.copy(), x.copy()
            up[j], down[j] = min(x[j] + h, hi[j]), max(x[j] - h, lo[j])
            if up[j] == down[j]:
                continue
            ru = at if up[j] == x[j] else residuals(up)
            rd = at if down[j] == x[j] else residuals(down)
            jac[:, j] = (ru - rd) / (up[j] - down[j])
        m, n = len(at), len(params)
        sigmas: list[float | None] = [None] * n
        try:
            cov = np.linalg.inv(jac.T @ jac) * float(at @ at) / max(1, m - n)
            sigmas = [math.sqrt(c) if c > 0 else None for c in np.diag(cov)]
        except np.linalg.LinAlgError:
            pass
        return DeviceFit(
            [
                FitParam(p, float(x0[i]), float(x[i]), sigmas[i], float(lo[i]), float(hi[i]))
                for i, p in enumerate(params)
            ],
            sorted({d.host for d in dirs}),
            m,
            float(math.sqrt(float(at @ at) / m)),
            evaluations,
        )


def _native_params(platform: str) -> list[dict[str, Any]]:
    from dmalab import sim

    return list(sim.platform_info(platform)["params"])


def device_file(result: DeviceFit, base: str = validate.DEVICE) -> str:
    """The device file ``base`` (a built-in name), its text kept, with each fitted value's line
    rewritten: the value, ``fitted`` (the hosts, the points, the date and what the value
    rested on before), its stated ``range`` and a ``fit_range``."""
    import re

    today = datetime.date.today().isoformat()
    text = _native.device_text(base)
    table = tomllib.loads(text)
    note = (
        f"fitted by dmalab validate --fit-device across the pcie-bench corpus's hosts "
        f"({', '.join(result.hosts)}; {result.points} points) on {today}: rms relative error "
        f"{result.rms_error:.1%}"
    )
    lines = text.splitlines()
    for p in result.params:
        section, key = FILE_KEYS.get(p.name, p.name).split(".", 1)
        entry = table[section][key]
        why = entry.get("assumed") or entry.get("source") or entry.get("fitted") or ""
        why = why.split("; before the fit: ", 1)[-1]
        v = round(p.value)
        stated = entry.get("range")
        rng = [v, v]
        if isinstance(stated, list) and len(stated) == 2:
            rng = [min(int(stated[0]), v), max(int(stated[1]), v)]
        parts = [f"value = {v}", f"fitted = {_q(f'{note}; before the fit: {why}')}"]
        # What it was fitted to: the validation corpus, not a published claim.
        parts.append(f"claims = [{_q(CLAIM)}]")
        parts.append(f"range = [{rng[0]}, {rng[1]}]")
        if p.fit_range is not None:
            parts.append(f"fit_range = [{p.fit_range[0]}, {p.fit_range[1]}]")
        here = None
        for i, line in enumerate(lines):
            m = re.match(r"^\[([^\]]+)\]\s*$", line)
            if m:
                here = m.group(1)
            elif here == section and re.match(rf"^{re.escape(key)}\s*=", line):
                lines[i] = f"{key} = {{ {', '.join(parts)} }}"
                break
        else:
            raise ScenarioError(f"--fit-device: {base} has no line for {section}.{key}")
    head = [f"# {note}"] + [
        f"# {p.name} = {p.value:g}" + (f" +- {p.sigma:.3g}" if p.sigma else "")
        for p in result.params
    ]
    return "\n".join(_strip_fit_header(lines, head)) + "\n"


def _q(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _strip_fit_header(lines: list[str], head: list[str]) -> list[str]:
    """The file's lines under a new fit header (an earlier fit's header, the lines before the
    first blank line that start with ``# fitted by``, replaced)."""
    if lines and lines[0].startswith("# fitted by dmalab validate --fit-device"):
        end = lines.index("") if "" in lines else 0
        lines = lines[end + 1 :]
    return [*head, "", *lines]
