"""Validation against real machines (``dmalab validate``): every measured point of a pcie-bench
result directory run through the device DMA model (:mod:`dmalab.devdma`), measured beside
modelled, with the relative error and the modelled interval.

A pcie-bench directory is named ``<card>_<cpu>_<machine>[-sDEV-sMEM-sCTRL][-iommu|-iommu-nosp]``
(``validation/pcie-bench/UPSTREAM-README.md``); its ``bw_dma_*.csv`` and ``lat_dma_*.csv`` hold
the points. Each row's ``Test`` (what ran), ``PAT`` (access), ``Cache`` (the state the run
started from), ``HO``/``DO`` (host and device offsets), ``WinSZ`` (window) and ``SZ`` (size)
become a :class:`dmalab.devdma` point; the directory gives the memory's socket (local or
remote) and the IOMMU (off; on with superpages; on with 4 KiB pages). What the model cannot yet
express is counted, never dropped silently: each such row is reported with its reason.

Without a platform, each directory's host is built from its own system dump
(:mod:`dmalab.dumps`), with the NFP-6000's device file in its slot.
"""

from __future__ import annotations

import csv
import math
import re
import statistics
import tempfile
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "CORPUS",
    "Directory",
    "Point",
    "corpus_dirs",
    "directory",
    "read_points",
    "run",
    "summarise",
]

DEVICE = "netronome-nfp6000"
"""The device of the pcie-bench corpus, a built-in device file."""

WITHIN = 0.10
"""A point is close where the model is within this share of the measurement."""

TRACK_LEVEL = (5.0, 95.0)
"""The percentiles of the model's error on the other hosts that widen an interval (the
track interval, :func:`track`)."""

TRACK_MIN = 20
"""The fewest errors of an experiment on the other hosts that make a track interval."""


def corpus_root() -> Path | None:
    """The shipped corpus (``validation/pcie-bench`` in the source tree beside the package),
    or none where this installation does not have it (a wheel without the source tree)."""
    here = Path(__file__).resolve().parent
    for base in (here.parent.parent, here):
        p = base / "validation" / "pcie-bench"
        if p.is_dir():
            return p
    return None


CORPUS = corpus_root()

_NAME = re.compile(
    r"^(?P<card>[^_]+)_(?P<host>[^_]+_[^-_]+(?:-[^-_]+)*?)"
    r"(?:-s(?P<dev>\d)-s(?P<mem>\d)-s(?P<ctrl>\d))?(?P<iommu>-iommu(?:-nosp)?)?$"
)


@dataclass(frozen=True)
class Directory:
    """What a result directory's name says."""

    path: Path
    card: str
    host: str
    """The CPU and machine part, such as ``hsw-Xeon-E5-2620v3_dell-t630``."""
    memory: str
    """``local`` or ``remote``: the buffer's socket against the device's."""
    iommu: str
    """``off``, ``on`` (superpages allowed) or ``nosp`` (4 KiB pages only)."""

    @property
    def name(self) -> str:
        """The directory's name less the card: the host and its configuration."""
        return self.path.name.split("_", 1)[-1]


def directory(path: str | Path) -> Directory:
    """Parse a result directory's name; raises :class:`dmalab.ScenarioError` naming the
    convention where it does not follow it."""
    from dmalab import ScenarioError

    p = Path(path)
    if not p.is_dir():
        raise ScenarioError(f"--pcie-bench {path}: not a directory")
    m = _NAME.match(p.resolve().name)
    if not m:
        raise ScenarioError(
            f"--pcie-bench {path}: the name does not follow pcie-bench's "
            "<card>_<cpu>_<machine>[-sDEV-sMEM-sCTRL][-iommu|-iommu-nosp]"
        )
    dev, mem = m.group("dev"), m.group("mem")
    iommu = {None: "off", "-iommu": "on", "-iommu-nosp": "nosp"}[m.group("iommu")]
    return Directory(
        p, m.group("card"), m.group("host"), "remote" if dev != mem else "local", iommu
    )


def corpus_dirs(root: Path | None = None) -> list[Directory]:
    """Every result directory of the shipped corpus (or of ``root``), in name order."""
    from dmalab import ScenarioError

    base = root or CORPUS
    if base is None or not base.is_dir():
        raise ScenarioError(
            "the shipped corpus (validation/pcie-bench) is not in this installation: run from "
            "the source tree, or give --pcie-bench DIR"
        )
    return [directory(p) for p in sorted(base.iterdir()) if p.is_dir()]


@dataclass
class Point:
    """One measured row: where it came from, its model point (none where the model cannot
    express it, with the reason), and the measurement."""

    dir: str
    host: str
    file: str
    line: int
    experiment: str
    test: str
    pattern: str
    cache: str
    host_offset: int
    device_offset: int
    window_bytes: int
    size_bytes: int
    measured: float
    unit: str
    model: dict[str, Any] | None = None
    why_not: str | None = None
    modelled: float | None = None
    lo: float | None = None
    hi: float | None = None
    beyond: bool = False
    """The modelled value lay beyond its draws' 5th to 95th percentile (a knee), and the
    interval was stretched to reach it."""
    track_lo: float | None = None
    track_hi: float | None = None
    """The interval widened by the model's track record (:func:`track`)."""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def error(self) -> float | None:
        """Modelled over measured, less one."""
        if self.modelled is None or not self.measured:
            return None
        return self.modelled / self.measured - 1.0

    def as_dict(self) -> dict[str, Any]:
        """The point as a flat record: inputs, measured, modelled, error, interval."""
        key = "bandwidth_gbit_s" if self.unit == "Gbit/s" else "latency_ns"
        out = {
            "dir": self.dir,
            "host": self.host,
            "file": self.file,
            "line": self.line,
            "experiment": self.experiment,
            "test": self.test,
            "pattern": self.pattern,
            "cache": self.cache,
            "host_offset": self.host_offset,
            "device_offset": self.device_offset,
            "window_bytes": self.window_bytes,
            "size_bytes": self.size_bytes,
            "unit": self.unit,
            "measured": self.measured,
            "modelled": self.modelled,
            "error": self.error,
            "modelled_lo": self.lo,
            "modelled_hi": self.hi,
            "beyond_draws": self.beyond,
            "track_lo": self.track_lo,
            "track_hi": self.track_hi,
            "figure": key,
            "expressible": self.model is not None,
            "why_not": self.why_not,
        }
        if self.model is not None:
            out |= {
                "memory": self.model["memory"],
                "model_cache": self.model["cache"],
                "iommu": self.model["iommu"],
                "page_bytes": self.model["page_bytes"],
                "device_offset_bytes": self.model["device_offset_bytes"],
                "mixed": self.model["mixed"],
            }
        return out | self.extra


_EXPERIMENT = (
    (re.compile(r"^bw_dma_sz_sweep$"), "size"),
    (re.compile(r"^bw_dma_off_(rd|wr)$"), "offset"),
    (re.compile(r"^bw_dma_off_(rd|wr)_cold$"), "offset"),
    (re.compile(r"^bw_dma_win_sweep_"), "window"),
    (re.compile(r"^lat_dma_sizes(_byte_inc)?$"), "size"),
    (re.compile(r"^lat_dma_off_"), "offset"),
    (re.compile(r"^lat_dma_sweep_"), "window"),
    (re.compile(r"^lat_dma_details$"), "details"),
)

TESTS = {
    "BW_DMA_RD": ("read", "Gbit/s"),
    "BW_DMA_WR": ("write", "Gbit/s"),
    "BW_DMA_RW": ("read", "Gbit/s"),
    "LAT_DMA_RD": ("read", "ns"),
    "LAT_DMA_WRRD": ("write", "ns"),
}
"""The tests the model expresses: the direction and the figure compared."""

CACHE_STATES = {"HWarm": "warm", "Cold": "cold", "DWarm": "device-warm", "DThrash": "cold"}
"""The corpus's cache states as the model's: the host warmed the window (its lines in the LLC as
far as they fit), the host's cache thrashed first (DRAM), the device wrote the window first (in
the LLC's I/O share as far as it fits, where writes allocate), and the device thrashed the cache
with its own accesses first (the window's lines evicted: cold; in the server hosts' plain
directories with local memory the corpus's DThrash rows measure within 0.5% of its Cold
rows)."""


NOT_EXPRESSIBLE: dict[str, str] = {}
"""Why a row cannot be expressed, by what it asks."""


def _num(text: str) -> float:
    x = float(text)
    if not math.isfinite(x):
        raise ValueError(text)
    return x


def read_points(d: Directory, page_bytes: int) -> tuple[list[Point], list[str]]:
    """Every row of the directory's ``bw_dma_*.csv`` and ``lat_dma_*.csv`` as a point, and a
    warning for each file or row that cannot be read (a garbled row is skipped and named)."""
    points: list[Point] = []
    warnings: list[str] = []
    files = sorted(d.path.glob("bw_dma_*.csv")) + sorted(d.path.glob("lat_dma_*.csv"))
    for f in files:
        stem = f.stem
        kind = next((k for rx, k in _EXPERIMENT if rx.search(stem)), None)
        if kind is None:
            continue  # a raw CDF or another file that holds no point
        try:
            text = f.read_text(encoding="utf-8", errors="replace")
        except OSError as e:
            warnings.append(f"{f.name}: cannot be read ({e.strerror or e})")
            continue
        rows = list(csv.reader(text.splitlines()))
        if not rows:
            warnings.append(f"{f.name}: empty")
            continue
        head = [h.strip() for h in rows[0]]
        col = {h: i for i, h in enumerate(head)}
        need = ["Test", "PAT", "Cache", "HO", "DO", "WinSZ", "SZ"]
        value = "BW (GB/s)" if stem.startswith("bw_") else "Med(ns)"
        missing = [c for c in [*need, value] if c not in col]
        if missing:
            warnings.append(f"{f.name}: no column {', '.join(missing)}; the file is skipped")
            continue
        for n, row in enumerate(rows[1:], start=2):
            try:
                test = row[col["Test"]].strip()
                pat, cache = row[col["PAT"]].strip(), row[col["Cache"]].strip()
                ho, do = int(_num(row[col["HO"]])), int(_num(row[col["DO"]]))
                win, sz = int(_num(row[col["WinSZ"]])), int(_num(row[col["SZ"]]))
                measured = _num(row[col[value]])
            except (ValueError, IndexError):
                warnings.append(f"{f.name}:{n}: a garbled row is skipped")
                continue
            unit = "Gbit/s" if stem.startswith("bw_") else "ns"
            p = Point(
                d.name,
                d.host,
                f.name,
                n,
                f"{test} by {kind}" + (", cold" if stem.endswith("_cold") else ""),
                test,
                pat,
                cache,
                ho,
                do,
                win,
                sz,
                measured,
                unit,
            )
            _express(p, d, page_bytes)
            points.append(p)
    if not points:
        warnings.append(f"{d.path}: no bw_dma_*.csv or lat_dma_*.csv rows")
    return points, warnings


def _express(p: Point, d: Directory, page_bytes: int) -> None:
    """Set the point's model point, or the reason it has none."""
    if p.test not in TESTS:
        p.why_not = NOT_EXPRESSIBLE.get(p.test, f"test {p.test} is not a DMA the model runs")
        return
    if p.cache not in CACHE_STATES:
        p.why_not = NOT_EXPRESSIBLE.get(p.cache, f"cache state {p.cache} is not modelled")
        return
    if p.pattern not in ("Seq", "Rand"):
        p.why_not = f"access pattern {p.pattern} is not modelled"
        return
    direction, _ = TESTS[p.test]
    p.model = {
        "direction": direction,
        "size_bytes": p.size_bytes,
        "offset_bytes": p.host_offset,
        "window_bytes": max(p.window_bytes, p.size_bytes + p.host_offset),
        "access": "seq" if p.pattern == "Seq" else "random",
        "memory": d.memory,
        "cache": CACHE_STATES[p.cache],
        "iommu": "off" if d.iommu == "off" else "on",
        "page_bytes": page_bytes if d.iommu == "on" else 4096,
        "device_offset_bytes": p.device_offset,
        "then_read": p.test == "LAT_DMA_WRRD",
        # Reads and writes in turn, the figure counting every DMA of both: read as each
        # direction's alone, the rows' 49 Gbit/s at 2 KiB would put 98 through the device's
        # one data port, which moves 53 (docs/results/2026-12-07-speed-and-walks.md).
        "mixed": p.test == "BW_DMA_RW",
    }


@dataclass
class Result:
    """A validation run: every point, the platforms used, and what was warned of."""

    points: list[Point]
    platforms: dict[str, str]
    """Directory name to the platform its points ran on."""
    warnings: list[str]
    samples: int


def host_file(d: Directory, out: Path, *, calibrated: bool = True) -> Path:
    """Build the directory's host from its dump into ``out`` (a folder), and return the file;
    with ``calibrated`` false, from its dump alone (no value the corpus fitted for its CPU's
    generation: see :func:`dmalab.dumps.platform_toml`)."""
    from dmalab import dumps
    from dmalab.files import write_atomic

    dump = dumps.read_dumps(d.path)
    file = out / f"{d.name}.toml"
    write_atomic(file, dumps.platform_toml(dump, d.name, DEVICE, calibrated=calibrated))
    return file


def page_for(d: Directory) -> int:
    """The IOMMU page the directory's buffers were mapped in (from its dump)."""
    from dmalab import dumps

    return dumps.page_bytes(dumps.read_dumps(d.path)) if d.iommu == "on" else 4096


def run(
    dirs: Sequence[Directory],
    *,
    platform: str | None = None,
    samples: int = 0,
    seed: int = 1,
    progress: Callable[[int, int, str], None] | None = None,
    draws: dict[str, Any] | None = None,
    uncalibrated: Collection[str] = (),
) -> Result:
    """Run every expressible point of ``dirs``: on ``platform`` (a name, file or HOST+DEVICE)
    where given, else on each directory's host built from its dump with the NFP-6000 in its
    slot. With ``samples``, each point gets the interval of that many draws; ``draws``
    (parameter path to value, such as a fit's) are read in place of the files' values, and
    then no interval is drawn. The hosts named in ``uncalibrated`` are built from their dumps
    alone (leave-one-host-out's left-out host)."""
    from dmalab import devdma

    points: list[Point] = []
    warnings: list[str] = []
    platforms: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="dmalab-validate-") as work:
        jobs = []
        for d in dirs:
            mine, warn = read_points(d, page_for(d))
            points += mine
            warnings += [f"{d.name}: {w}" for w in warn]
            name = platform or str(host_file(d, Path(work), calibrated=d.host not in uncalibrated))
            platforms[d.name] = platform or f"{d.name} (from its dump) + {DEVICE}"
            jobs.append((d, name, [p for p in mine if p.model is not None]))
        total = sum(len(j[2]) for j in jobs) * (1 + samples)
        done = 0
        for d, name, mine in jobs:
            # Identical model points (rows that differ only in what the model does not see,
            # or repeats) run once.
            keys: dict[tuple[Any, ...], int] = {}
            unique: list[dict[str, Any]] = []
            for p in mine:
                assert p.model is not None
                k = tuple(sorted(p.model.items()))
                if k not in keys:
                    keys[k] = len(unique)
                    unique.append(p.model)
            records = devdma.measure(name, unique, draws=draws) if unique else []
            beyond: set[tuple[int, str]] = set()
            if samples and unique and not draws:
                base = done + len(mine)

                def drawn(
                    i: int, n: int, base: int = base, size: int = len(mine), at: str = d.name
                ) -> None:
                    if progress:
                        progress(base + i * size, total, at)

                beyond = devdma.measure_intervals(
                    name,
                    unique,
                    records,
                    samples=samples,
                    seed=seed,
                    progress=drawn,
                    drivers=False,
                ).beyond
            for p in mine:
                assert p.model is not None
                at = keys[tuple(sorted(p.model.items()))]
                r: dict[str, Any] = dict(records[at])
                key = "bandwidth_gbit_s" if p.unit == "Gbit/s" else "latency_ns"
                p.modelled = float(r[key])
                if f"{key}_lo" in r:
                    p.lo, p.hi = float(r[f"{key}_lo"]), float(r[f"{key}_hi"])
                    p.beyond = (at, key) in beyond
                p.extra = {"limit": r["limit"]}
            done += len(mine) * (1 + samples)
            if progress:
                progress(done, total, d.name)
    return Result(points, platforms, warnings, samples)


def _stats(points: Iterable[Point]) -> dict[str, Any]:
    pts = [p for p in points if p.modelled is not None]
    errs = [abs(e) for p in pts if (e := p.error) is not None]
    out: dict[str, Any] = {
        "points": len(pts),
        "within_10pct": sum(e <= WITHIN for e in errs) / len(errs) if errs else None,
        "median_abs_error": statistics.median(errs) if errs else None,
        "median_error": statistics.median([p.error for p in pts if p.error is not None])
        if errs
        else None,
    }
    spans = [p for p in pts if p.lo is not None and p.hi is not None]
    if spans:
        out["coverage"] = sum(
            p.lo <= p.measured <= p.hi for p in spans if p.lo is not None and p.hi is not None
        ) / len(spans)
        out["median_half_width"] = statistics.median(
            (p.hi - p.lo) / 2 / p.modelled
            for p in spans
            if p.hi is not None and p.lo is not None and p.modelled
        )
        out["beyond_draws"] = sum(p.beyond for p in spans)
    else:
        out["coverage"] = None
        out["median_half_width"] = None
        out["beyond_draws"] = None
    tracked = [
        (p.measured, p.modelled, p.track_lo, p.track_hi)
        for p in pts
        if p.track_lo is not None and p.track_hi is not None and p.modelled
    ]
    out["track_coverage"] = (
        sum(lo <= m <= hi for m, _, lo, hi in tracked) / len(tracked) if tracked else None
    )
    out["track_half_width"] = (
        statistics.median((hi - lo) / 2 / v for _, v, lo, hi in tracked) if tracked else None
    )
    return out


def track(result: Result, record: Sequence[Point] | None = None) -> None:
    """Widen each interval of ``result`` by the model's track record: the 5th to 95th
    percentile (:data:`TRACK_LEVEL`) of its error, ``modelled / measured - 1``, on the same
    experiment (and figure) of the corpus's other server-class hosts, run with the files as
    shipped and no draws. A measurement ``x`` with that error lies at ``modelled / (1 + e)``;
    the track interval spans the drawn interval and those two values (``Point.track_lo``,
    ``track_hi``).

    The drawn interval says what the parameters leave uncertain; it cannot hold what the
    model lacks (a sweep the model misses by 6% moves with no parameter). The track interval
    adds that, taken only from other machines, so that the point's own measurement, and its
    host's, never widen its interval: the statement "the model has been this far off on
    machines like it". Not a strict leave-one-host-out estimate: the shipped device was fitted
    on every server host, this one's among them, so the borrowed errors are in-sample and the
    widths likely optimistic. A point with fewer than :data:`TRACK_MIN` such errors keeps its
    drawn interval as its track interval. ``record`` gives the
    points to take the errors from (default: the shipped corpus's server-class
    directories)."""
    import numpy as np

    if record is None:
        from dmalab import corpusfit

        root = CORPUS
        if root is None:
            return
        dirs = [d for d in corpus_dirs(root) if corpusfit.server_class(d)]
        record = run(dirs).points
    errors: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for q in record:
        if (e := q.error) is not None:
            errors[(q.experiment, q.unit)][q.host].append(e)
    for p in result.points:
        if p.modelled is None or p.lo is None or p.hi is None:
            continue
        others = [
            e
            for host, es in errors.get((p.experiment, p.unit), {}).items()
            if host != p.host
            for e in es
        ]
        low, high = 0.0, 0.0
        if len(others) >= TRACK_MIN:
            low, high = (float(x) for x in np.percentile(others, TRACK_LEVEL))
        if high <= -1.0 or low <= -1.0:
            low, high = 0.0, 0.0
        p.track_lo = min(p.lo, p.modelled / (1.0 + high))
        p.track_hi = max(p.hi, p.modelled / (1.0 + low))


def summarise(result: Result, by: Sequence[str]) -> list[dict[str, Any]]:
    """One row per group of ``by`` (point attributes such as ``host``, ``experiment``,
    ``unit``), with the points run, the share within 10%, the median error, the interval
    coverage and the median half-width, the modelled values that lay beyond their draws (their
    interval stretched to them); and the rows not expressible, by reason."""
    groups: dict[tuple[Any, ...], list[Point]] = defaultdict(list)
    for p in result.points:
        groups[tuple(getattr(p, b) for b in by)].append(p)
    rows = []
    for k in sorted(groups, key=lambda t: tuple(str(x) for x in t)):
        pts = groups[k]
        row: dict[str, Any] = dict(zip(by, k, strict=True))
        row |= _stats(pts)
        row["not_expressible"] = sum(p.model is None for p in pts)
        rows.append(row)
    return rows


def not_expressible(result: Result) -> list[dict[str, Any]]:
    """The rows the model cannot express, counted by reason and experiment."""
    counts: dict[tuple[str, str], int] = defaultdict(int)
    for p in result.points:
        if p.model is None:
            counts[(p.why_not or "?", p.experiment)] += 1
    return [{"why": w, "experiment": e, "rows": n} for (w, e), n in sorted(counts.items())]


FIGURES = (
    ("BW_DMA_RD by size", "bw_dma_sz_sweep.csv", "BW_DMA_RD", "size_bytes", None),
    ("BW_DMA_WR by size", "bw_dma_sz_sweep.csv", "BW_DMA_WR", "size_bytes", None),
    ("LAT_DMA_RD by size", "lat_dma_sizes.csv", "LAT_DMA_RD", "size_bytes", None),
    ("BW_DMA_RD by host offset, 64 B", "bw_dma_off_rd.csv", "BW_DMA_RD", "host_offset", 64),
    (
        "BW_DMA_RD by window, 64 B random",
        "bw_dma_win_sweep_rd_rnd_64.csv",
        "BW_DMA_RD",
        "window_bytes",
        None,
    ),
    (
        "BW_DMA_WR by window, 64 B random",
        "bw_dma_win_sweep_wr_rnd_64.csv",
        "BW_DMA_WR",
        "window_bytes",
        None,
    ),
)
"""The figures of a validation (the report's charts, ``plot validate``): title, file, test,
the swept column, and a size the figure keeps to (none: every size). Each shows the
host-warmed points with no device offset."""


def figure_points(points: Iterable[Point], file: str, test: str, size: int | None) -> list[Point]:
    """The points of one of :data:`FIGURES`: run, host-warmed, no device offset."""
    return [
        p
        for p in points
        if p.file == file
        and p.test == test
        and p.cache == "HWarm"
        and p.device_offset == 0
        and p.modelled is not None
        and (size is None or p.size_bytes == size)
    ]
