"""The DMA map benchmark (``dmalab bench map``): N CPUs mapping and unmapping buffers on one
IOMMU domain at once, with the semantics of the kernel's ``dma_map_benchmark``: the mean and
standard deviation of map and unmap latency, and where the time goes (the IOVA allocator and
its lock, page-table writes, the invalidation interface shared by every CPU, flush queues).

:func:`run` runs one configuration (the model runs in Rust); :func:`frame` returns records as a
DataFrame.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from dmalab import ScenarioError, _native
from dmalab._frames import flatten
from dmalab.keys import name_value, toml_value
from dmalab.types import MapBenchRecord

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["ALLOCATORS", "DIRECTIONS", "FLUSHES", "frame", "run"]

ALLOCATORS = ("bitmap", "rbtree", "magazines+rbtree", "magazines+bitmap", "segtree")
"""The IOVA allocators a run may use."""

FLUSHES = ("strict", "lazy")
"""Invalidation policies: every unmap invalidates and waits, or per-CPU flush queues."""

DIRECTIONS = ("to-device", "from-device", "bidirectional")
"""The DMA directions a mapping may have."""


FIGURES = ("map_us", "unmap_us")
"""The figures of a record that intervals are given for."""


def run(
    platform: str,
    *,
    threads: int = 1,
    granule_pages: int = 1,
    dma_bits: int = 32,
    direction: str = "bidirectional",
    flush: str = "strict",
    allocator: str = "magazines+rbtree",
    maps_per_thread: int = 4096,
    node: int = -1,
    choices: dict[str, str] | None = None,
    progress: _native.Progress | None = None,
    draws: Mapping[str, Any] | None = None,
) -> MapBenchRecord:
    """Run the map benchmark on ``platform``; bad values raise :class:`dmalab.ScenarioError`
    naming the field and its valid range."""
    bench: dict[str, Any] = {
        "threads": threads,
        "granule_pages": granule_pages,
        "dma_bits": dma_bits,
        "direction": direction,
        "flush": flush,
        "allocator": allocator,
        "maps_per_thread": maps_per_thread,
        "node": node,
    }
    try:
        return _native.bench_map(platform, bench, choices, progress, draws)
    except ScenarioError as e:
        raise name_value(e, "bench", bench) from None


def default_flush(platform: str) -> str:
    """The host kernel's default invalidation policy as ``platform`` states it (``[iommu]
    default_flush``), or ``strict`` where it states none."""
    from dmalab import sim

    for p in sim.platform_info(platform)["params"]:
        if p["field"] == "iommu.default_flush":
            return str(toml_value(str(p["value"])))
    return "strict"


def frame(records: Iterable[MapBenchRecord]) -> pd.DataFrame:
    """The records as a DataFrame: one row per run, each map part as ``map_<part>_us`` and each
    unmap part as ``unmap_<part>_us`` (identifiers)."""
    return flatten(records, {"map_parts": "map_{}_us", "unmap_parts": "unmap_{}_us"})
