"""A run's timeline as a trace Perfetto (ui.perfetto.dev, offline too) and chrome://tracing
open: Chrome's trace-event JSON, one thread track per CPU, device, data path and invalidation
unit (block workloads) or per host's core, wire and NIC link direction (network workloads), one
complete ("X") event per slice, times in microseconds.

The simulator records the slices (``sim.run(..., timeline_limit=N)``); this module only lays
them out. A timeline keeps at most its limit of slices, and says how many it dropped.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dmalab.provenance import provenance

if TYPE_CHECKING:
    from dmalab.types import RunReport

_ORDER = ("cpu", "device", "iommu", "client", "server")
_LABEL = re.compile(r"(\D+?) (\d+)(.*)")


def _track_key(label: str) -> tuple[int, int, str]:
    """Tracks in the order a reader scans them: CPUs, then devices (each followed by its data
    path), then the invalidation units; by number within each."""
    m = _LABEL.fullmatch(label)
    if not m:
        return (len(_ORDER), 0, label)
    kind, number, rest = m.groups()
    rank = _ORDER.index(kind) if kind in _ORDER else len(_ORDER)
    return (rank, int(number), rest)


def chrome_trace(report: RunReport) -> dict[str, Any]:
    """The trace-event JSON object of ``report``'s timeline (a run made with a timeline)."""
    timeline = report.get("timeline")
    if timeline is None:
        raise ValueError("the report has no timeline: run with timeline_limit")
    labels = sorted({s[0] for s in timeline["slices"]}, key=_track_key)
    tid = {label: i + 1 for i, label in enumerate(labels)}
    title = f"dmalab: {report['scenario']} on {report['platform']}"
    events: list[dict[str, Any]] = [
        {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": title}},
    ]
    for label, t in tid.items():
        events.append(
            {"ph": "M", "pid": 1, "tid": t, "name": "thread_name", "args": {"name": label}}
        )
        events.append(
            {"ph": "M", "pid": 1, "tid": t, "name": "thread_sort_index", "args": {"sort_index": t}}
        )
    for label, name, start_ps, duration_ps in timeline["slices"]:
        events.append(
            {
                "ph": "X",
                "pid": 1,
                "tid": tid[label],
                "name": name,
                "cat": label.split(" ")[0],
                "ts": start_ps / 1e6,
                "dur": duration_ps / 1e6,
            }
        )
    other = provenance(report["platform"], report["choices"]) | {
        "scenario": report["scenario"],
        "slices": len(timeline["slices"]),
        "dropped_slices": timeline["dropped"],
        "limit": timeline["limit"],
    }
    return {"traceEvents": events, "displayTimeUnit": "ns", "otherData": other}


def write(report: RunReport, path: str | Path) -> dict[str, Any]:
    """Write ``report``'s timeline to ``path`` as trace-event JSON, whole or not at all (see
    :func:`dmalab.files.write_atomic`); returns the trace."""
    from dmalab.files import write_atomic

    trace = chrome_trace(report)

    def dump(tmp: Path) -> None:
        with tmp.open("w", encoding="utf-8") as f:
            json.dump(trace, f, separators=(",", ":"))

    write_atomic(path, dump)
    return trace
