"""The device's parameters fitted once across the hosts of a validation corpus
(``dmalab validate --fit-device``): one device file that serves every host, which is the test of
"devices apart from hosts".

A deterministic sample of each directory's expressible points (every :data:`EVERY`-th point
of each experiment, cache state and access pattern, in file order, so that the sample weighs
the experiments as ``validate`` counts them) is run on every host, each built from its own dump
(:mod:`dmalab.validate`), with the trial values of the device's parameters read in place of the
file's. scipy's ``least_squares`` (trust-region reflective, within each parameter's stated
range) minimises the relative residuals ``modelled / measured - 1`` over all hosts at once,
under a robust loss (:data:`LOSS`, :data:`F_SCALE`): a point the model misses by a factor (a
mechanism it lacks) weighs about as much as one it misses by 20%, so it cannot pull the values
that the rest of the corpus fixes. The fit starts from the best of the file's values and a Sobol
design over the ranges, as :func:`dmalab.fit.fit` does for one platform. Each value's standard
uncertainty comes from the Jacobian at the solution, each point weighted as the loss weighs it,
in a cluster-robust (sandwich) covariance with each directory's sweep a cluster; the
``fit_range`` written is each value's profile (:data:`PROFILE_SHARE`: the values, each moved
alone with the others held, that keep the sample's share within 10% within one point; so
narrower than a joint range where values trade off), inside the stated range.

Leave-one-host-out: the same fit without one host's directories, and that host's points
predicted by it (its host file from its dump alone).
"""

from __future__ import annotations

import datetime
import functools
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

EVERY = 4
"""A fit samples every this-many-th point of each directory's experiment, cache state and
access pattern (at least one of each). Until 2026-12-07 it took four points of each, whatever
the experiment's size: 4 of an offset sweep's 210, 4 of a size sweep's 40, so the many in-line
offsets weighed almost nothing and the fit settled on a data port that charges a whole beat for
a partial one, which the offset sweeps (a quarter of the corpus) contradict."""

LOSS = "soft_l1"
"""The fit's loss (scipy's ``least_squares``): smooth, quadratic for small residuals and
linear for large ones."""

F_SCALE = 0.1
"""Where :data:`LOSS` turns from quadratic to linear: a 10% error, the corpus's line for a
point the model gets right. With plain least squares the Sandy Bridge-EP host's IOMMU window
sweeps, which the model misses by up to 11 times (it has no mechanism for that host's collapse
past 1 MiB), made up most of the sum."""

CLAIM = "pcie-bench corpus"
"""What a value fitted here names as fitted to (a fitted parameter's ``claims``): the
validation corpus, not one of the published claims."""

SPAN_SIGMAS = 3.0
"""A fitted value's ``fit_range`` where no profile was taken: this many standard
uncertainties either side."""

PROFILE_SHARE = 0.01
"""A fitted value's ``fit_range``: the values, each moved alone from the solution, with which
the sample's share within 10% stays within this much (one point) of the solution's, as a
claim's fit keeps the values with which its claims still pass. It is conditional: one value at
a time with the others held, so narrower than the walk grid's joint span
(:data:`dmalab.dumps.WALK_GRID`) where values trade off. The standard uncertainty says how
precisely the loss's minimum sits; it is small where thousands of points agree, even where
the model misses a whole sweep, so three of them made intervals that covered 57% of the
corpus's bandwidth points at a half-width of 7% (2026-12-07). The profile says which values
the corpus cannot tell apart by the measure ``validate`` reports."""


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


def _group(p: validate.Point) -> tuple[str, str, str]:
    """A point's sweep within its directory: its experiment, cache state and access
    pattern."""
    return (p.experiment, p.cache, p.pattern)


def sample(points: Sequence[validate.Point], every: int = EVERY) -> list[validate.Point]:
    """Every ``every``-th expressible point of each (directory, experiment, cache, access
    pattern) in file order, from the first, none of :data:`FIT_EXCLUDES`: deterministic."""
    if every < 1:
        raise ScenarioError(f"every: {every}; valid: 1 or more")
    groups: dict[tuple[str, str, str, str], list[validate.Point]] = defaultdict(list)
    for p in points:
        if p.model is not None and p.test not in FIT_EXCLUDES:
            groups[(p.dir, *_group(p))].append(p)
    out = []
    for k in sorted(groups):
        out += groups[k][::every]
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
    profile: tuple[int, int] | None = None
    """The values the sample cannot tell from the solution's (:data:`PROFILE_SHARE`)."""

    @property
    def fixed(self) -> bool:
        """Whether the measurements fix the value: its standard uncertainty is known and less
        than half its bounds' span."""
        return self.sigma is not None and self.sigma < (self.upper - self.lower) / 2

    @property
    def fit_range(self) -> tuple[int, int] | None:
        """The profiled range where one was taken (:data:`PROFILE_SHARE`), else three standard
        uncertainties either side, inside the bounds (none without either)."""
        if self.profile is not None:
            return self.profile
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
    cost: float = 0.0
    """The mean robust loss over the sample (what the fit minimises)."""
    within: float = 0.0
    """The share of the sample within 10%."""
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
            "cost": self.cost,
            "within_10pct": self.within,
            "evaluations": self.evaluations,
            "left_out": self.left_out,
        }


def fit_device(
    dirs: Sequence[validate.Directory],
    params: Sequence[str] = PARAMS,
    *,
    every: int = EVERY,
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
        clusters: list[int] = []
        cluster_ids: dict[tuple[str, ...], int] = {}
        for d in dirs:
            pts, _ = validate.read_points(d, validate.page_for(d))
            chosen = sample(pts, every)
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
                clusters.append(cluster_ids.setdefault((d.name, *_group(p)), len(cluster_ids)))
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
                r = np.array(out)
                progress(
                    evaluations,
                    f"{share_within(r):.0%} within 10%, "
                    f"rms {math.sqrt(float(np.mean(np.square(r)))):.1%}",
                )
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
        costs = [robust_cost(residuals(c)) for c in cands]
        begin = cands[int(np.argmin(costs))]
        sol = optimize.least_squares(
            residuals,
            begin,
            bounds=(lo, hi),
            method="trf",
            diff_step=0.05,
            x_scale="jac",
            loss=LOSS,
            f_scale=F_SCALE,
        )
        x = np.round(sol.x)
        at = residuals(x)
        # Rounding may land past the best candidate; never end worse than the start.
        if robust_cost(at) > min(costs):
            x = np.round(begin)
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
        # Each point weighted as the soft-L1 loss weighs it at the solution (its influence
        # falls as 1 / sqrt(1 + (r / f)^2)), as iteratively reweighted least squares would.
        w = (1.0 + np.square(at / F_SCALE)) ** -0.25
        wj, wr = jac * w[:, None], at * w
        sigmas: list[float | None] = [None] * n
        try:
            # Cluster-robust (sandwich) covariance, a sweep a cluster: a mechanism the model
            # lacks moves a whole sweep one way, so its points are one piece of evidence, not
            # many (with independent errors assumed, 4,762 points gave half the uncertainty of
            # 1,256 and intervals that covered fewer measurements).
            bread = np.linalg.inv(wj.T @ wj)
            ids = np.array(clusters)
            g = len(cluster_ids)
            scores = np.zeros((g, n))
            np.add.at(scores, ids, wj * wr[:, None])
            meat = scores.T @ scores * (g / max(1, g - 1)) * ((m - 1) / max(1, m - n))
            cov = bread @ meat @ bread
            sigmas = [math.sqrt(c) if c > 0 else None for c in np.diag(cov)]
        except np.linalg.LinAlgError:
            pass
        best = share_within(at)

        def holds(j: int, v: float) -> bool:
            trial = x.copy()
            trial[j] = v
            return share_within(residuals(trial)) >= best - PROFILE_SHARE

        profiles = [_profile(x[j], lo[j], hi[j], functools.partial(holds, j)) for j in range(n)]
        return DeviceFit(
            [
                FitParam(
                    p,
                    float(x0[i]),
                    float(x[i]),
                    sigmas[i],
                    float(lo[i]),
                    float(hi[i]),
                    profiles[i],
                )
                for i, p in enumerate(params)
            ],
            sorted({d.host for d in dirs}),
            m,
            float(math.sqrt(float(at @ at) / m)),
            evaluations,
            robust_cost(at),
            share_within(at),
        )


def _profile(
    value: float, lower: float, upper: float, holds: Callable[[float], bool]
) -> tuple[int, int]:
    """The whole values about ``value`` (inside the bounds) for which ``holds`` is true,
    found each way in doubling steps from 1% of the value (at least 1) and then halved back
    to the last step that holds: a bracket of the profile, not every value in it tested."""
    v0 = round(value)
    ends = []
    for sign in (-1, 1):
        bound = math.floor(lower) if sign < 0 else math.ceil(upper)
        step = max(1, round(0.01 * abs(v0)))
        good = v0
        bad = None
        while good != bound:
            trial = v0 + sign * step
            trial = max(trial, bound) if sign < 0 else min(trial, bound)
            if holds(trial):
                good = trial
                step *= 2
            else:
                bad = trial
                break
        # Bisect between the last value that holds and the first that does not.
        while bad is not None and abs(bad - good) > 1:
            mid = (good + bad) // 2 if sign > 0 else -((-good - bad) // 2)
            if holds(mid):
                good = mid
            else:
                bad = mid
        ends.append(good)
    return ends[0], ends[1]


def share_within(residuals: Any) -> float:  # noqa: ANN401 - a numpy array
    """The share of relative residuals within ``validate``'s line (:data:`validate.WITHIN`)."""
    import numpy as np

    return float(np.mean(np.abs(np.asarray(residuals)) <= validate.WITHIN))


def robust_cost(residuals: Any) -> float:  # noqa: ANN401 - a numpy array
    """The mean soft-L1 loss of relative residuals at :data:`F_SCALE` (what the fit
    minimises, per point): ``2 f^2 (sqrt(1 + (r / f)^2) - 1)``, ``r^2`` near zero."""
    import numpy as np

    z = np.square(np.asarray(residuals) / F_SCALE)
    return float(np.mean(2.0 * F_SCALE**2 * (np.sqrt(1.0 + z) - 1.0)))


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
        f"({', '.join(result.hosts)}; {result.points} points) on {today} under a soft-L1 loss: "
        f"{result.within:.0%} of them within 10%, rms relative error {result.rms_error:.1%}"
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
