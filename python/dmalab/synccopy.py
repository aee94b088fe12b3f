"""One synchronous copy, by the CPU and by a copy engine (``dmalab bench copy``).

The core either copies the bytes itself or hands them to a copy engine (CBDMA, DSA) and waits
for its completion; nothing overlaps, so every part of the path adds up. :func:`measure` runs
sizes and placements on one platform (the model runs in Rust); :func:`frame` returns the records
as a DataFrame.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dmalab import _native, sim
from dmalab._frames import flatten
from dmalab.types import SyncCopyRecord

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["PLACEMENTS", "SIZES", "frame", "measure", "platforms"]

PLACEMENTS: tuple[str, ...] = ("local", "engine-remote", "min-remote", "max-remote")
"""Where the core, the engine and the buffers sit: everything in one node; the engine and both
buffers in the other node than the core; the destination alone across; both buffers across
from the core and the engine."""

SIZES: tuple[int, ...] = tuple(1 << k for k in range(6, 21))
"""The default sizes: powers of two from 64 B to 1 MiB."""


FIGURES = ("cpu_ns", "engine_ns")
"""The figures of a record that intervals are given for."""


def platforms() -> list[str]:
    """The built-in platforms with CPU copy costs and a copy engine in their copy-engine slot
    (those that name a default engine; a host that only states the core's side of one takes
    one with ``HOST+ENGINE``)."""
    out = []
    for name in sim.platforms_with("copy", "dma_engine"):
        fields = {p["field"] for p in _native.platform_info(name)["params"]}
        if "dma_engine.bytes_per_us" in fields:
            out.append(name)
    return out


def measure(
    platform: str,
    sizes: Sequence[int] = SIZES,
    placements: Sequence[str] = ("local", "max-remote"),
    choices: dict[str, str] | None = None,
    draws: Mapping[str, Any] | None = None,
) -> list[SyncCopyRecord]:
    """One record per (size, placement), sizes outer. Bad sizes or placements raise
    :class:`dmalab.ScenarioError` naming the field."""
    return _native.bench_copy(platform, list(sizes), list(placements), choices, draws)


def frame(records: Iterable[SyncCopyRecord]) -> pd.DataFrame:
    """The records as a DataFrame: one row per copy, each part as ``cpu_<part>_ns`` or
    ``engine_<part>_ns`` (identifiers)."""
    return flatten(records, {"cpu_parts": "cpu_{}_ns", "engine_parts": "engine_{}_ns"})
