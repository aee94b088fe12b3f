"""The IOVA allocator benchmark: every design on every workload, and ratios against baselines.

Each cell (allocator, workload, threads) runs in Rust with the GIL released; this module only
sequences the cells, reports progress, and derives the comparisons from records of one run, so a
ratio never mixes two runs. The allocators of one (workload, threads) pair run as a group, their
throughput passes interleaved one by one, so that a shared machine's drift in speed (another
guest on the same core) falls on every design alike.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from dmalab import _native

Record = dict[str, Any]

DEFAULT_DESIGN = "segtree"

SLOW_IN_QUICK: dict[tuple[str, str], str] = {
    ("vm-allocator", "fragmented-32bit"): (
        "its first-match search is linear, so filling the 32-bit zone takes about 140 s a cell"
    ),
}
"""Cells ``--quick`` leaves out unless named explicitly, and why."""

LINUX_LEAD: dict[str, float] = {"mixed": 6.0, "fragmented-32bit": 65.0}
"""The design's lead over ``linux-rcache`` in ops/s by workload (1.2x where not named): the
leads the design holds over Linux's own allocator where sizes vary or space is crowded."""


def names() -> tuple[list[str], list[str]]:
    """The allocator and workload names the benchmark knows."""
    allocators, workloads = _native.bench_names()
    return list(allocators), list(workloads)


def run_cells(
    allocators: Sequence[str],
    workloads: Sequence[str],
    threads: Sequence[int],
    *,
    quick: bool = True,
    seed: int = 1,
    address_bits: int = 36,
    progress: Callable[[int, int, str], None] | None = None,
    skip: Iterable[tuple[str, str]] = (),
) -> list[Record]:
    """Run every (workload, threads, allocator) cell but the (allocator, workload) pairs in
    ``skip``, and return one record per cell run. The allocators of each (workload, threads) pair
    run together, their passes interleaved."""
    left_out = set(skip)
    groups = [
        (w, t, [a for a in allocators if (a, w) not in left_out])
        for w in workloads
        for t in threads
    ]
    groups = [g for g in groups if g[2]]
    total = sum(len(names) for _, _, names in groups)
    records: list[Record] = []
    for w, t, names in groups:
        if progress is not None:
            label = f"{w} / {t} thread{'s' if t > 1 else ''}: {', '.join(names)}"
            progress(len(records), total, label)
        texts = _native.bench_iova_group(
            names, w, t, quick=quick, seed=seed, address_bits=address_bits
        )
        records.extend(json.loads(text) for text in texts)
    if progress is not None:
        progress(total, total, "done")
    return records


@dataclass(frozen=True)
class Check:
    """One target of the design, evaluated on the records of one run."""

    name: str
    value: float
    target: str
    passed: bool


def targets(
    allocators: Sequence[str],
    workloads: Sequence[str],
    threads: Sequence[int],
    skip: Iterable[tuple[str, str]] = (),
) -> list[str]:
    """The names of the targets (:func:`checks`) that the cells asked for can be held against,
    known before they run (none where the default design, or every baseline it is compared
    with, is left out)."""
    left_out = set(skip)
    shape = [
        {
            "allocator": a,
            "workload": w,
            "threads": t,
            "ops_per_s": 1.0,
            "p50_ns": 1.0,
            "p999_ns": 1.0,
            "bytes_per_live_mapping": 1.0,
        }
        for w in workloads
        for t in threads
        for a in allocators
        if (a, w) not in left_out
    ]
    return [c.name for c in checks(shape)]


def _find(records: Iterable[Record], allocator: str, workload: str, threads: int) -> Record | None:
    for r in records:
        if (r["allocator"], r["workload"], r["threads"]) == (allocator, workload, threads):
            return r
    return None


def checks(records: Sequence[Record], design: str = DEFAULT_DESIGN) -> list[Check]:
    """The design's targets: throughput ratios against each baseline, tail latency, scaling and
    memory, for every cell the records contain."""
    out: list[Check] = []
    threads = sorted({int(r["threads"]) for r in records})
    workloads = list(dict.fromkeys(r["workload"] for r in records))

    def ratio(a: Record | None, b: Record | None, key: str = "ops_per_s") -> float | None:
        if a is None or b is None or not b[key]:
            return None
        return float(a[key]) / float(b[key])

    for w in workloads:
        for t in threads:
            mine = _find(records, design, w, t)
            targets = [("magazines+rbtree", 1.0), ("linux-rcache", LINUX_LEAD.get(w, 1.2))]
            if w in ("map-unmap-1page", "mixed"):
                targets += [("rbtree", 3.0), ("vm-allocator", 10.0)]
            for base, need in targets:
                r = ratio(mine, _find(records, base, w, t))
                if r is not None:
                    out.append(Check(f"{w} {t}T ops/s vs {base}", r, f">= {need:g}x", r >= need))
    for t in threads:
        mine = _find(records, design, "fragmented-32bit", t)
        if mine is not None and mine["p50_ns"] > 0:
            r = float(mine["p999_ns"]) / float(mine["p50_ns"])
            out.append(Check(f"fragmented-32bit {t}T p99.9/p50", r, "<= 2x", r <= 2.0))
        linux = _find(records, "linux-rcache", "fragmented-32bit", t)
        if mine is not None and linux is not None and mine["p999_ns"] > 0:
            r = float(linux["p999_ns"]) / float(mine["p999_ns"])
            out.append(
                Check(f"fragmented-32bit {t}T p99.9 below linux-rcache's", r, ">= 100x", r >= 100)
            )
    if 1 in threads and 2 in threads:
        for w in workloads:
            r = ratio(_find(records, design, w, 2), _find(records, design, w, 1))
            if r is not None:
                out.append(Check(f"{w} 2T/1T ops/s", r, ">= 1.8x", r >= 1.8))
    for t in threads:
        ring = _find(records, design, "nic-ring", t)
        if ring is not None:
            b = float(ring["bytes_per_live_mapping"])
            out.append(Check(f"nic-ring {t}T bytes per live 1-page mapping", b, "<= 16", b <= 16))
    return out
