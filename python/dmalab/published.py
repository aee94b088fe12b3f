"""The IOMMU's software path against published numbers (``dmalab validate --published``).

``validation/iommu-software/published.csv`` holds what mapping and unmapping cost through the
Linux DMA API with an IOMMU, and what strict invalidation costs a storage server, as published
in patch series and commits (each row cites its source). Each row is run on the host file that
stands for its machine (:data:`HOSTS`) and set beside the model:

- a ``dma_map_benchmark`` row is ``bench map`` with the row's threads, granule (pages a map:
  a scatter-gather list of N pages is one IOVA range of N pages, as Linux's IOMMU DMA layer
  allocates it), direction (the tool's default, bidirectional, where the row gives none), the
  tool's default DMA mask (32 bits) and node (-1, unbound) and the row's invalidation (strict
  or not). The tool cuts each operation to 100 ns and then the average again, so a printed
  ``m`` stands for a mean in ``[m, m + 0.2)`` us: a row is within where the model is within
  25% of ``m`` or within 0.1 us (the tool's unit) of it, and inside its interval where that
  interval meets ``[m, m + 0.2]``;
- a ``kernel`` row of one invalidation and its wait is the ``invalidation`` part of a strict
  single-CPU unmap of one page;
- a ``fio`` row of a storage server is not expressible yet, with its reason (the source gives
  neither the I/O size nor the drives, and the model maps what it transfers).

:func:`fit_host` fits a host's parameters to its own rows (bounded least squares, each row
weighted by its uncertainty: the 100 ns truncation and 5% besides) and predicts each row from
a fit to the others (leave-one-out).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dmalab import MeasurementError, files, mapbench
from dmalab.fit import KERNEL_SPAN_US, KERNEL_UNIT_US, kernel_mean

__all__ = [
    "FIT_PARAMS",
    "HOSTS",
    "Row",
    "data_path",
    "fit_host",
    "loo_rows",
    "measurements_of",
    "read",
    "run",
]

HOSTS = (
    ("Arm Morello", "arm-morello"),
    ("HiSilicon server", "hisilicon-kunpeng920-2s"),
    ("HiSilicon storage server", "hisilicon-kunpeng920-2s"),
    ("Intel server with VT-d", "xeon-broadwell-2s"),
)
"""The host file for each row's ``host`` (the start of its text). The VT-d row's server is not
named; the Broadwell-EP server is the project's Intel host of that period with queued
invalidation."""

FIT_PARAMS = {
    "arm-morello": (
        (
            "iommu.invalidate_ns",
            "iommu.pte_write_ns",
            "iommu_hw.command_ns",
            "iommu_hw.command_write_ns",
        ),
        ("map_us", "unmap_us"),
    ),
    "hisilicon-kunpeng920-2s": (("iommu.invalidate_ns", "iommu_hw.command_ns"), ("unmap_us",)),
}
"""The parameters :func:`fit_host` fits on each host with rows of its own, and the metrics of
the rows it fits them on: the sync's wait (one page's unmap), the page-table writes (a large
map), the SMMU's time a command (many CPUs' large unmaps) and the CPU's time writing one (one
CPU's large unmap). The Kunpeng server's map rows move with none of its fitted parameters (its
modelled map is the IOVA cache and one entry written), so they are not fitted on."""

WITHIN = 0.25
"""A row is within where the model is within this share of the measurement..."""
RESOLUTION_US = KERNEL_UNIT_US
"""... or, for ``dma_map_benchmark``, within its resolution (it truncates to 100 ns)."""
MAPS = 512
"""Counted map-unmap pairs a CPU for each row (after the warm-up)."""


def data_path() -> Path | None:
    """The shipped file (``validation/iommu-software/published.csv`` in the source tree beside
    the package), or none where this installation does not have it."""
    here = Path(__file__).resolve().parent
    for base in (here.parent.parent, here):
        p = base / "validation" / "iommu-software" / "published.csv"
        if p.is_file():
            return p
    return None


@dataclass
class Row:
    """One published number, how the model expresses it, and what it gives."""

    id: str
    source: str
    host: str
    tool: str
    metric: str
    measured: float
    unit: str
    platform: str | None = None
    bench: dict[str, Any] = field(default_factory=dict)
    part: str | None = None
    why: str | None = None
    modelled: float | None = None
    lo: float | None = None
    hi: float | None = None

    @property
    def resolution(self) -> float:
        """The measurement's resolution in its unit (0 where it is exact as printed)."""
        return RESOLUTION_US if self.tool == "dma_map_benchmark" else 0.0

    @property
    def error(self) -> float | None:
        """modelled / measured - 1."""
        return None if self.modelled is None else self.modelled / self.measured - 1.0

    @property
    def within(self) -> bool | None:
        """Within 25% (or the tool's resolution) of the measurement."""
        if self.modelled is None:
            return None
        off = abs(self.modelled - self.measured)
        return off <= WITHIN * self.measured or off <= self.resolution + 1e-9

    @property
    def span(self) -> float:
        """How far above the printed figure the mean it stands for may lie (the tool's cuts)."""
        return KERNEL_SPAN_US if self.tool == "dma_map_benchmark" else 0.0

    @property
    def inside(self) -> bool | None:
        """The interval meets what the measurement stands for."""
        if self.lo is None or self.hi is None:
            return None
        return self.lo <= self.measured + self.span and self.hi >= self.measured

    @property
    def centre(self) -> float:
        """The middle of what the measurement stands for (a mean the tool cut twice)."""
        return kernel_mean(self.measured)[0] if self.span else self.measured

    @property
    def sigma(self) -> float:
        """Relative standard uncertainty: 5%, and the cuts' span (taken as uniform)."""
        return kernel_mean(self.measured)[1] if self.span else 0.05

    def as_dict(self) -> dict[str, Any]:
        """A flat record for JSON or CSV."""
        return {
            "id": self.id,
            "host": self.host,
            "platform": self.platform,
            "tool": self.tool,
            **{k: self.bench.get(k) for k in ("threads", "granule_pages", "direction", "flush")},
            "metric": self.metric,
            "unit": self.unit,
            "measured": self.measured,
            "modelled": self.modelled,
            "modelled_lo": self.lo,
            "modelled_hi": self.hi,
            "error": self.error,
            "within": self.within,
            "inside": self.inside,
            "not_expressible": self.why,
            "source": self.source,
        }


def _platform(host: str) -> str | None:
    best = None
    for start, name in HOSTS:
        if host.startswith(start) and (best is None or len(start) > len(best[0])):
            best = (start, name)
    return best[1] if best else None


def read(path: str | Path | None = None) -> list[Row]:
    """The rows of ``path`` (default: the shipped file), each with how the model expresses it;
    a file that is not of this form raises :class:`dmalab.MeasurementError` naming the line."""
    p = Path(path) if path is not None else data_path()
    if p is None:
        raise MeasurementError(
            "validation/iommu-software/published.csv is not in this installation (it ships "
            "with the source tree)"
        )
    text = files.read_text(p, "a published-numbers CSV")
    lines = list(csv.reader(io.StringIO(text)))
    header = lines[0] if lines else []
    need = {"id", "source", "host", "iommu", "tool", "mode", "threads", "granule_pages"}
    need |= {"direction", "metric", "value", "unit"}
    missing = sorted(need - set(header))
    if missing:
        raise MeasurementError(f"{p}: no column {', '.join(missing)}")
    rows: list[Row] = []
    source = ""
    for n, cells in enumerate(lines[1:], start=2):
        where = f"{p}:{n}"
        if not cells:
            continue
        cells = _mended(cells)
        if len(cells) != len(header):
            raise MeasurementError(
                f"{where}: {len(cells)} fields where the header has {len(header)}"
            )
        r = dict(zip(header, cells, strict=True))
        try:
            value = float(r["value"])
        except ValueError:
            raise MeasurementError(f"{where}: value {r['value']!r} is not a number") from None
        if not (math.isfinite(value) and value > 0):
            raise MeasurementError(f"{where}: value {value} must be a positive number")
        source = source if r["source"] == "same" else r["source"]
        row = Row(
            id=r["id"],
            source=source,
            host=r["host"],
            tool=r["tool"],
            metric=r["metric"],
            measured=value,
            unit=r["unit"],
            platform=_platform(r["host"]),
        )
        _express(row, r, where)
        rows.append(row)
    return rows


def _mended(cells: list[str]) -> list[str]:
    """The cells of a line whose unquoted text held a comma inside parentheses (the shipped
    file's ``SMMUv3 (strict, assumed: ...)``) joined back into one."""
    out: list[str] = []
    for c in cells:
        if out and out[-1].count("(") > out[-1].count(")"):
            out[-1] += "," + c
        else:
            out.append(c)
    return out


def _whole(text: str, where: str, name: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise MeasurementError(f"{where}: {name} {text!r} is not a whole number") from None
    if v < 1:
        raise MeasurementError(f"{where}: {name} {v} must be at least 1")
    return v


def _express(row: Row, r: dict[str, str], where: str) -> None:
    """Set how the model expresses ``row``, or why it cannot."""
    flush = "lazy" if "non-strict" in r["iommu"] else "strict"
    if row.platform is None:
        row.why = f"no host file stands for {row.host!r}"
    elif row.tool == "dma_map_benchmark":
        if row.metric not in ("map_us", "unmap_us"):
            raise MeasurementError(f"{where}: metric {row.metric!r}: map_us or unmap_us")
        row.bench = {
            "threads": _whole(r["threads"], where, "threads"),
            "granule_pages": _whole(r["granule_pages"], where, "granule_pages"),
            "direction": r["direction"] or "bidirectional",
            "flush": flush,
            "dma_bits": 32,
            # No row gives -n: the tool's default, unbound.
            "node": -1,
        }
    elif row.tool == "kernel" and row.metric == "invalidate_ns":
        row.bench = {"threads": 1, "granule_pages": 1, "flush": "strict", "dma_bits": 32}
        row.part = "invalidation"
    elif row.tool == "fio":
        row.bench = {"flush": flush}
        row.why = (
            "a storage server's IOPS: the source gives neither the I/O size nor the drives, "
            "and the model maps what it transfers (not a larger mapping than the I/O)"
        )
    else:
        row.why = f"tool {row.tool!r} with metric {row.metric!r} is not one the model runs"


def _value(row: Row, draws: dict[str, Any] | None) -> float:
    assert row.platform is not None
    rec = mapbench.run(row.platform, maps_per_thread=MAPS, draws=draws, **row.bench)
    if row.part is not None:
        parts = dict(rec["unmap_parts"])
        return float(parts[row.part]) * 1000.0  # us to ns
    return float(rec[row.metric])  # type: ignore[literal-required]


def run(
    rows: Sequence[Row],
    *,
    samples: int = 0,
    seed: int = 1,
    draws: dict[str, dict[str, Any]] | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> list[Row]:
    """Run every expressible row on its host (``draws``: per platform, values in place of its
    file's), with its interval over ``samples`` draws of the host's uncertain parameters
    (none where ``samples`` is 0)."""
    from dmalab import intervals

    by_host: dict[str, list[Row]] = {}
    for row in rows:
        if row.why is None and row.platform is not None:
            by_host.setdefault(row.platform, []).append(row)
    total = len(by_host) * (1 + samples)
    done = 0
    for platform, mine in sorted(by_host.items()):
        fixed = (draws or {}).get(platform)
        for row in mine:
            row.modelled = _value(row, fixed)
        done += 1
        if progress:
            progress(done, total, platform)
        if not samples:
            continue

        def call(d: dict[str, Any], mine: list[Row] = mine) -> list[dict[str, Any]]:
            return [{"value": _value(row, d)} for row in mine]

        def tick(i: int, n: int, platform: str = platform, base: int = done) -> None:
            if progress:
                progress(base + i, total, f"{platform}: draw {i} of {n}")

        drawn = intervals.over_draws(platform, call, samples=samples, seed=seed, progress=tick)
        recs: list[dict[str, Any]] = [{"value": row.modelled} for row in mine]
        drawn.attach(recs, ["value"])
        for row, rec in zip(mine, recs, strict=True):
            row.lo, row.hi = float(rec["value_lo"]), float(rec["value_hi"])
        done += samples
    return list(rows)


def measurements(rows: Sequence[Row]) -> list[Any]:
    """The expressible rows as :class:`dmalab.fit.Measurement` (``bench-map``), each at the
    middle of what it stands for, with its uncertainty."""
    from dmalab import fit

    out = []
    for row in rows:
        if row.why is not None or row.part is not None:
            continue
        out.append(
            fit.Measurement(
                model="bench-map",
                metric=row.metric,
                measured=row.centre,
                keys=dict(row.bench),
                label=row.id,
                sigma=row.sigma,
            )
        )
    return out


def measurements_of(platform: str, rows: Sequence[Row]) -> list[Any]:
    """The rows :func:`fit_host` fits ``platform`` on, as measurements (none where the rows
    have none of it, or it has no parameters to fit)."""
    if platform not in FIT_PARAMS:
        return []
    _, metrics = FIT_PARAMS[platform]
    return measurements([r for r in rows if r.platform == platform and r.metric in metrics])


def fit_host(platform: str, rows: Sequence[Row], *, loo: bool = True) -> Any:  # noqa: ANN401
    """Fit :data:`FIT_PARAMS` of ``platform`` to its own rows (the benchmark's), and with
    ``loo`` predict each row from a fit to the others; a :class:`dmalab.fit.Fit`."""
    from dmalab import ScenarioError, fit, sim

    if platform not in FIT_PARAMS:
        raise ScenarioError(
            f"--fit {platform}: no published rows to fit it on; these: {', '.join(FIT_PARAMS)}"
        )
    params, _ = FIT_PARAMS[platform]
    ms = measurements_of(platform, rows)
    if not ms:
        raise MeasurementError(f"--fit {platform}: no rows of it to fit on")
    # Each fit starts from the geometric middle of each parameter's range, not the file's
    # value (an earlier fit to every row): a left-out row is not to reach its own prediction.
    ranges: dict[str, Any] = {
        r["field"]: r.get("range") for r in sim.platform_info(platform)["params"]
    }
    prior = {p: round(math.sqrt(max(ranges[p]["lo"], 1) * ranges[p]["hi"])) for p in params}
    return fit.fit(
        platform,
        list(params),
        ms,
        max_error=1.0,
        source="validation/iommu-software/published.csv",
        loo=loo,
        prior=prior,
    )


def loo_rows(rows: Sequence[Row], fits: Sequence[Any]) -> list[dict[str, Any]]:
    """Each expressible row predicted without itself: from the leave-one-out fit of its host
    where it was fitted on (none where the others were too few to fit), else as its host file
    gives it (a row no fit used, such as a map row the fitted parameters do not move)."""
    import dataclasses

    held: dict[str, float | None] = {}
    for f in fits:
        fitted_on = {r["label"] for r in f.residuals}
        for label in fitted_on:
            held[label] = None
        for r in f.loo:
            held[r["label"]] = float(r["predicted"])
    out = []
    for row in rows:
        if row.why is not None:
            continue
        pred = held[row.id] if row.id in held else row.modelled
        p = dataclasses.replace(row, modelled=pred, lo=None, hi=None)
        out.append(
            {
                "id": row.id,
                "platform": row.platform,
                "metric": row.metric,
                "measured": row.measured,
                "predicted": pred,
                "error": p.error,
                "within": bool(p.within),
                "fitted_on": row.id in held,
            }
        )
    return out
