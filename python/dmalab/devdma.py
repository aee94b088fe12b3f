"""Device DMA microbenchmarks: a device's DMA engine reading or writing host memory over its
PCIe link, the root complex and the memory path in cache lines (``dmalab bench dma``).

:func:`measure` runs points on one platform (the model runs in Rust); :func:`points` builds the
product of the dimensions a sweep varies; :func:`frame` returns the records as a DataFrame.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

from dmalab import _native, intervals, sim
from dmalab._frames import flatten
from dmalab.types import DmaRecord

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "DIMENSIONS",
    "OFFSETS",
    "PAGE_SIZES",
    "SIZES",
    "WINDOWS",
    "frame",
    "measure",
    "platforms",
    "points",
]

DIMENSIONS: dict[str, tuple[str, ...]] = {
    "direction": ("read", "write"),
    "access": ("seq", "random"),
    "memory": ("local", "remote"),
    "cache": ("warm", "cold", "device-warm"),
    "iommu": ("off", "on"),
}
"""The named dimensions of a point and their values."""


def _size_sweep() -> tuple[int, ...]:
    """4 B to 8 KiB: every power of two, one byte either side of it (line, MPS, MRRS and 4 KiB
    boundaries are all powers of two), and the midpoints between powers."""
    sizes: set[int] = set()
    p = 4
    while p <= 8192:
        sizes.update({p - 1, p, p + 1, p + p // 2})
        p *= 2
    return tuple(sorted(s for s in sizes if 4 <= s <= 8192))


SIZES = _size_sweep()
"""The size sweep: 4 B to 8 KiB in fine steps around powers of two."""

OFFSETS = tuple(range(64))
"""The offset sweep: every host offset within a 64-byte line."""

WINDOWS = tuple(1 << k for k in range(12, 27))
"""The window sweep: 4 KiB to 64 MiB, every power of two (IOTLB reach and walk regimes)."""

PAGE_SIZES = (4096, 2097152, 1073741824)
"""The page sizes a mapping may use with the IOMMU on: 4 KiB, 2 MiB and 1 GiB."""


def platforms() -> list[str]:
    """The built-in platforms that describe a device DMA engine and a memory path."""
    return sim.platforms_with("device_dma")


def sockets(platform: str) -> int:
    """The host's sockets: 2 where its memory section describes a socket link (a remote home
    for a buffer), else 1."""
    for p in sim.platform_info(platform)["params"]:
        if p["field"] == "memory.socket_link_ns":
            return 2 if int(p["value"]) > 0 else 1
    return 1


def points(
    *,
    sizes: Iterable[int],
    offsets: Iterable[int] = (0,),
    windows: Iterable[int] = (1 << 20,),
    direction: Iterable[str] = ("read",),
    access: Iterable[str] = ("seq",),
    memory: Iterable[str] = ("local",),
    cache: Iterable[str] = ("warm",),
    iommu: Iterable[str] = ("off",),
    page_bytes: Iterable[int] = (4096,),
) -> list[dict[str, Any]]:
    """Every combination of the values given, as point dicts ``measure`` takes. A window
    smaller than size plus offset is raised to it. Page sizes apply with the IOMMU on; a point
    with it off is made once, with the first page size given (it has no effect there)."""
    out = []
    pages = list(page_bytes)
    for d, a, m, c, i, w, o, s in itertools.product(
        direction, access, memory, cache, iommu, windows, offsets, sizes
    ):
        for page in pages if i == "on" else pages[:1]:
            out.append(
                {
                    "direction": d,
                    "size_bytes": s,
                    "offset_bytes": o,
                    "window_bytes": max(w, s + o),
                    "access": a,
                    "memory": m,
                    "cache": c,
                    "iommu": i,
                    "page_bytes": page,
                }
            )
    return out


def measure(
    platform: str,
    pts: Sequence[dict[str, Any]],
    choices: dict[str, str] | None = None,
    progress: Callable[[int, int], None] | None = None,
    chunk: int = 64,
    draws: dict[str, Any] | None = None,
) -> list[DmaRecord]:
    """Measure each point on ``platform``; ``progress(done, total)`` is called after each chunk
    of points. Bad points raise :class:`dmalab.ScenarioError` naming the field."""
    records: list[DmaRecord] = []
    for i in range(0, len(pts), chunk):
        records.extend(_native.bench_dma(platform, list(pts[i : i + chunk]), choices, draws))
        if progress:
            progress(len(records), len(pts))
    return records


FIGURES = ("bandwidth_gbit_s", "latency_ns", "transactions_per_s")
"""The figures of a record that intervals are given for."""


def measure_intervals(
    platform: str,
    pts: Sequence[dict[str, Any]],
    records: Sequence[DmaRecord],
    choices: dict[str, str] | None = None,
    *,
    samples: int = intervals.SAMPLES,
    seed: int = 1,
    progress: Callable[[int, int], None] | None = None,
    fields: Sequence[str] | None = None,
    drivers: bool = True,
) -> intervals.Drawn:
    """Run ``pts`` on ``samples`` draws of ``platform``'s uncertain parameters and add each
    figure's interval and ``top_params`` to ``records`` (the nominal run of the same points, in
    order); returns the draws. ``progress(done, total)`` counts draws. ``fields`` draws only
    those parameters (default: every assumed or fitted one that states a range). ``drivers``
    false leaves ``top_params`` out (see :meth:`intervals.Drawn.attach`)."""
    fields = list(fields) if fields is not None else intervals.uncertain(platform, choices)
    rows = intervals.design(len(fields), samples, seed, fields)
    outcomes: list[dict[str, Any]] = []
    step = 8
    for i in range(0, len(rows), step):
        outcomes += _native.bench_dma_drawn(
            platform, list(pts), fields, rows[i : i + step], choices, list(FIGURES)
        )
        if progress:
            progress(len(outcomes), len(rows))
    drawn = intervals.Drawn(fields, rows, outcomes)
    drawn.attach(list(records), FIGURES, drivers=drivers)  # type: ignore[arg-type]
    return drawn


def frame(records: Iterable[DmaRecord]) -> pd.DataFrame:
    """The records as a DataFrame: one row per point, each part's utilisation as a
    ``busy_<part>`` column and each latency part as ``latency_<part>_ns`` (identifiers)."""
    return flatten(records, {"utilisation": "busy_{}", "latency_parts": "latency_{}_ns"})
