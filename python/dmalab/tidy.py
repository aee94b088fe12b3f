"""Run reports as tidy rows: one row per run with the inputs that made it as columns (so a sweep
is selected with ``df.query("allocator == 'rbtree' and flush == 'deferred'")``, no join), the
results with their units in their names, and the breakdown both wide (one column per component)
and long (one row per component). Every column name is a Python identifier, so ``df.query``
works on every column without quoting.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dmalab.provenance import created_utc, platform_sha256

if TYPE_CHECKING:
    from dmalab.types import RunReport

_NOT_WORD = re.compile(r"[^0-9a-z]+")

RESULTS = (
    "ops_per_s",
    "bits_per_s",
    "latency_mean_us",
    "latency_p50_us",
    "latency_p90_us",
    "latency_p99_us",
    "latency_p99_9_us",
    "latency_p99_99_us",
    "latency_max_us",
    "cpu_utilization",
    "peer_cpu_utilization",
    "iotlb_hit_rate",
    "dma_transfers",
    "events",
    "simulated_us",
    "wall_s",
    "dma_transfers_per_wall_s",
)
"""The report's scalar results, each named with its unit, in the order a frame shows them."""

RUN_FIGURES = (
    "ops_per_s",
    "bits_per_s",
    "latency_mean_us",
    "latency_p99_us",
    "cpu_utilization",
)
"""The figures of a run that intervals are given for (``KEY_lo``, ``KEY_hi``)."""

SPEED = ("wall_s", "dma_transfers_per_wall_s")
"""Results that measure the machine that ran the model, not the model: compare, report and
sweep leave them out."""

MODEL_RESULTS = tuple(m for m in RESULTS if m not in SPEED)
"""The results of the model itself."""


def slug(text: str) -> str:
    """``text`` as a lower-case identifier (``"map: IOVA allocation"``: ``map_iova_allocation``)."""
    word = _NOT_WORD.sub("_", text.lower()).strip("_")
    return word if word and not word[0].isdigit() else f"x_{word}"


def split_component(name: str) -> tuple[str, str]:
    """A breakdown key as (side, component): network runs name the host first (``client
    stack (per message)``); a block run has one host, ``host``."""
    side, _, rest = name.partition(" ")
    if side in ("client", "server") and rest:
        return side, rest
    return "host", name


def run_inputs(r: RunReport) -> dict[str, Any]:
    """What made run ``r``: scenario, platform (and the hash of its resolved parameters), the
    platform options as ``choice_<name>``, the mapping configuration and the workload's keys
    as ``workload_<key>``, every default resolved."""
    row: dict[str, Any] = {
        "scenario": r["scenario"],
        "platform": r["platform"],
        "platform_sha256": platform_sha256(r["platform"], r["choices"]),
    }
    row.update({f"choice_{slug(k)}": v for k, v in sorted(r["choices"].items())})
    row["translation"] = r["translation"]
    row["window"] = r.get("window")
    row["allocator"] = r["allocator"]
    flush: Mapping[str, Any] = r["flush"]
    row["flush"] = flush.get("policy")
    row["flush_high_water"] = flush.get("high_water")
    timeout_ps = flush.get("timeout")
    row["flush_timeout_us"] = None if timeout_ps is None else timeout_ps / 1e6
    row.update({f"workload_{slug(k)}": v for k, v in r["workload"].items()})
    return row


def run_results(r: RunReport) -> dict[str, Any]:
    """What run ``r`` measured: the results, the exposure left and the breakdown as
    ``breakdown_<component>_us`` columns."""
    row: dict[str, Any] = {k: r.get(k) for k in RESULTS}
    m = r["mapper"]
    row["pages_exposed_after_unmap"] = m["exposure"]["pages_exposed"]
    row["max_exposure_window_us"] = m["exposure"]["max_window_ps"] / 1e6
    row["sub_page_bytes_exposed"] = m["sub_page_bytes_exposed"]
    row["all_memory_reachable"] = m["all_memory_reachable"]
    row.update({f"breakdown_{slug(k)}_us": v for k, v in r["breakdown_us"].items()})
    row.update(interval_columns(r))
    return row


def interval_columns(r: Mapping[str, Any]) -> dict[str, Any]:
    """A run's intervals where it has them (see :mod:`dmalab.intervals`): ``KEY_lo`` and
    ``KEY_hi`` for each of :data:`RUN_FIGURES`, ``KEY_driven_by`` (the parameters that move it
    most, comma-separated) and ``interval_draws``; none for a run without."""
    if f"{RUN_FIGURES[0]}_lo" not in r:
        return {}
    row: dict[str, Any] = {}
    tops = r.get("top_params", {})
    for k in RUN_FIGURES:
        row[f"{k}_lo"] = r.get(f"{k}_lo")
        row[f"{k}_hi"] = r.get(f"{k}_hi")
        row[f"{k}_driven_by"] = ", ".join(t["param"] for t in tops.get(k, []))
    row["interval_draws"] = r.get("draws")
    return row


def run_row(r: RunReport, created: str | None = None) -> dict[str, Any]:
    """One tidy row for run ``r``: :func:`run_inputs`, :func:`run_results` and the provenance
    (``dmalab_version``, ``created_utc``)."""
    from dmalab import __version__

    row = run_inputs(r) | run_results(r)
    row["dmalab_version"] = __version__
    row["created_utc"] = created or created_utc()
    return row


def breakdown_rows(r: RunReport, run: int) -> list[dict[str, Any]]:
    """Run ``r``'s breakdown as long rows: ``run`` (the row's index in the wide frame),
    ``scenario``, ``side``, ``component`` and ``time_us`` per operation."""
    rows = []
    for key, us in r["breakdown_us"].items():
        side, component = split_component(key)
        rows.append(
            {
                "run": run,
                "scenario": r["scenario"],
                "side": side,
                "component": component,
                "time_us": us,
            }
        )
    return rows
