"""``dmalab advise``: for a host and a workload, which knobs to change, in what order, for what
gain (with its interval) and at what cost in DMA protection.

What it covers today: block I/O (``nvme:...``) through a host's IOMMU, and the knobs of the DMA
mapping layer that the run model has: the IOMMU's translation (passthrough or page tables), its
invalidation (strict, lazy with one global flush queue, lazy with per-CPU flush queues of a
chosen depth) and the IOVA allocator. Each knob carries what allows it (a kernel parameter, a
sysfs write, a build constant, or an embedding of the allocator library) and the protection it
leaves, from the exposure the run reports.

The search: from today's configuration, every single change is run (the best single changes),
then a greedy search adds, one at a time, the change that most improves the combination so far,
rerunning every remaining change on top of it (so interactions are seen), until no change
improves it by more than its noise. Every configuration runs over the same draws of the
platform's uncertain parameters (:mod:`dmalab.intervals`), so a gain is a paired ratio per
draw; its interval is the 5th to 95th percentile over the draws. A gain whose interval holds
zero is "uncertain" and never ranked above a certain one.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from dmalab import ScenarioError, sim

GOALS = ("throughput", "latency", "cpu")
"""What a gain is measured in: operations per second (higher is better), the 99th percentile
latency, or the CPU time an operation costs (lower is better)."""

PROTECTIONS = ("strict", "lazy", "any")
"""What ``--keep-protection`` keeps: ``strict`` (no stale mapping after an unmap returns and no
device reaching memory it was not given), ``lazy`` (stale mappings for a bounded window, never
all memory), or ``any``."""

LEVEL = {"strict": 2, "lazy": 1, "none": 0}
"""Protection levels, higher is safer."""

BASELINE = {"translation": "page-table", "flush": "strict", "allocator": "magazines+rbtree"}
"""Today's configuration where the user states none: the Linux DMA layer in strict mode with
its cached red-black tree allocator (the nearest of the run model's designs to Linux's
``iova.c`` with its range cache)."""

ADVISE_IOS = 20_000
"""I/Os a run of the search makes by default: enough for every queue to reach its steady state
at the workload's depth (a few thousand I/Os per device), short enough for dozens of runs with
their draws in under a minute on two cores."""


@dataclass(frozen=True)
class Knob:
    """One setting the search may change: a ``[mapping]`` key and its value, with how to set
    it and what it does to protection."""

    name: str
    key: str
    value: Any
    how: str
    """How to set it (Linux kernel parameter, sysfs, build constant or library)."""
    allowed: str
    """What must hold for it to be settable."""


KNOBS: tuple[Knob, ...] = (
    Knob(
        "IOMMU passthrough",
        "translation",
        "passthrough",
        "kernel parameter iommu.passthrough=1 (x86: iommu=pt), or per group: "
        "echo identity > /sys/kernel/iommu_groups/N/type (device unbound)",
        "a kernel with IOMMU passthrough support; the device must be trusted",
    ),
    Knob(
        "IOMMU page tables",
        "translation",
        "page-table",
        "kernel parameter iommu.passthrough=0, or per group: "
        "echo DMA > /sys/kernel/iommu_groups/N/type",
        "an IOMMU with DMA-API translation",
    ),
    Knob(
        "strict invalidation",
        "flush",
        "strict",
        "kernel parameter iommu.strict=1, or per group: echo DMA > /sys/kernel/iommu_groups/N/type",
        "always",
    ),
    Knob(
        "lazy invalidation, one flush queue",
        "flush",
        "deferred",
        "kernel parameter iommu.strict=0 (or per group: echo DMA-FQ > "
        "/sys/kernel/iommu_groups/N/type); one shared queue rather than one per CPU is the "
        "IOMMU driver's choice, not a user setting",
        "an IOMMU driver with flush-queue support that asks for a single queue",
    ),
    Knob(
        "lazy invalidation, per-CPU flush queues",
        "flush",
        "per-cpu",
        "kernel parameter iommu.strict=0 (the DMA layer keeps a flush queue per CPU), or per "
        "group: echo DMA-FQ > /sys/kernel/iommu_groups/N/type",
        "an IOMMU driver with flush-queue support",
    ),
    Knob(
        "per-CPU flush queues of 64 entries",
        "high_water",
        64,
        "a kernel build constant (IOVA_FQ_SIZE in drivers/iommu/dma-iommu.c)",
        "lazy invalidation; a rebuilt kernel",
    ),
    Knob(
        "per-CPU flush queues of 1024 entries",
        "high_water",
        1024,
        "a kernel build constant (IOVA_FQ_SIZE in drivers/iommu/dma-iommu.c)",
        "lazy invalidation; a rebuilt kernel",
    ),
    Knob(
        "segtree IOVA allocator",
        "allocator",
        "segtree",
        "not a kernel setting: a VMM or user-space driver that embeds dmalab-iova "
        "(AllocatorKind::SegTree, its default)",
        "the mapping layer is yours (a VMM or a user-space driver)",
    ),
    Knob(
        "bitmap IOVA allocator",
        "allocator",
        "bitmap",
        "not a kernel setting: a VMM or user-space driver that embeds dmalab-iova "
        "(AllocatorKind::Bitmap)",
        "the mapping layer is yours (a VMM or a user-space driver)",
    ),
    Knob(
        "red-black tree IOVA allocator without caches",
        "allocator",
        "rbtree",
        "not a kernel setting: a VMM or user-space driver that embeds dmalab-iova "
        "(AllocatorKind::RbTree)",
        "the mapping layer is yours (a VMM or a user-space driver)",
    ),
)
"""The knobs the search may turn, each to one value."""


@dataclass
class Workload:
    """A workload as the user stated it, and the run model's ``[workload]`` table."""

    spec: str
    kind: str
    table: dict[str, Any]


NVME = re.compile(
    r"nvme:(?P<drives>\d+)x(?P<size>\d+)(?P<unit>[KkMm]?)(?:,qd(?P<qd>\d+))?"
    r"(?:,threads(?P<threads>\d+))?(?:,(?P<op>read))?"
)


def parse_workload(spec: str, ios: int = ADVISE_IOS) -> Workload:
    """A short workload spec: ``nvme:DRIVESxSIZE[,qdDEPTH][,threadsN][,read]`` (random reads
    of SIZE bytes, K or M suffix, to DRIVES drives, DEPTH in flight per thread, N submitting
    threads: default 8 per drive, depth 32). Other kinds are refused, naming what is known."""
    m = NVME.fullmatch(spec.strip())
    if not m:
        kind = spec.partition(":")[0]
        if kind in ("nic", "vhost", "map"):
            raise ScenarioError(
                f"--workload {spec}: advise does not model {kind} workloads yet; it takes "
                "block I/O: nvme:DRIVESxSIZE[,qdDEPTH][,threadsN][,read], such as nvme:8x4K,qd32"
            )
        raise ScenarioError(
            f"--workload {spec}: expected nvme:DRIVESxSIZE[,qdDEPTH][,threadsN][,read], such as "
            "nvme:8x4K,qd32 (SIZE in bytes with an optional K or M)"
        )
    scale = {"": 1, "k": 1024, "m": 1 << 20}[m["unit"].lower()]
    drives = int(m["drives"])
    table = {
        "kind": "block",
        "devices": drives,
        "io_bytes": int(m["size"]) * scale,
        "queue_depth": int(m["qd"] or 32),
        "threads": int(m["threads"] or 8 * drives),
        "ios": ios,
    }
    return Workload(spec, "block", table)


def protection(report: Mapping[str, Any]) -> tuple[str, str]:
    """The protection a run's configuration leaves, by what the configuration allows (not by
    what one run happened to see): ``none`` where the device reaches all memory, ``lazy`` where
    an unmapped page stays mapped until a deferred flush, ``strict`` otherwise; with a line
    giving the exposure this run measured."""
    m = report["mapper"]
    if m["all_memory_reachable"] or report["translation"] in ("passthrough", "none"):
        return "none", "the device reaches all memory"
    exp = m["exposure"]
    seen = (
        f"{exp['pages_exposed']:,} unmapped pages seen reachable, up to "
        f"{exp['max_window_ps'] / 1e6:.1f} us"
    )
    flush = report["flush"]
    if flush["policy"] != "strict":
        bound = flush["timeout"] / 1e6
        return "lazy", (
            f"an unmapped page stays reachable until a flush: every {flush['high_water']} "
            f"unmaps or {bound:,.0f} us at most; this run: {seen}"
        )
    if exp["pages_exposed"]:
        return "lazy", seen
    return "strict", "no page reachable after its unmap returns"


def figure(report: Mapping[str, Any], goal: str) -> float:
    """The goal's figure of a run: ops/s, p99 latency (us), or CPU time per operation (us, the
    CPU-side components of the breakdown)."""
    if goal == "throughput":
        return float(report["ops_per_s"])
    if goal == "latency":
        return float(report["latency_p99_us"])
    return sum(float(v) for k, v in report["breakdown_us"].items() if k not in DEVICE_PARTS)


DEVICE_PARTS = frozenset({"device", "translation (IOTLB misses)"})
"""Breakdown components a device, not a CPU, spends: left out of the CPU goal."""


def gain(base: float, new: float, goal: str) -> float:
    """The relative gain of ``new`` over ``base`` (positive is better)."""
    if goal == "throughput":
        return new / base - 1.0 if base else 0.0
    return base / new - 1.0 if new else 0.0


def limiting(report: Mapping[str, Any]) -> str:
    """The two largest parts of an operation's time, of its whole: what limits it."""
    parts = report["breakdown_us"]
    top = sorted(parts.items(), key=lambda kv: (-kv[1], kv[0]))[:2]
    named = ", ".join(f"{name} {us:.3f} us" for name, us in top if us > 0)
    return f"{named} of {sum(parts.values()):.3f} us an operation"


@dataclass
class Config:
    """A mapping configuration and what it gave."""

    mapping: dict[str, Any]
    changes: list[Knob] = field(default_factory=list)
    nominal: dict[str, Any] | None = None
    drawn: list[float] = field(default_factory=list)


class Advisor:
    """Runs configurations of one workload on one host, nominal and over shared draws."""

    def __init__(
        self,
        host: str,
        workload: Workload,
        goal: str,
        *,
        samples: int = 16,
        seed: int = 1,
        workers: int | None = None,
        progress: Callable[[int], None] | None = None,
    ) -> None:
        from dmalab import intervals

        self.host, self.workload, self.goal = host, workload, goal
        self.samples = samples
        self.draws = intervals.draws(host, samples=samples, seed=seed)[2] if samples else []
        self.workers = workers
        self.progress = progress
        self.runs = 0
        self._cache: dict[tuple[tuple[str, Any], ...], tuple[dict[str, Any], list[float]]] = {}

    def scenario(self, mapping: Mapping[str, Any]) -> dict[str, Any]:
        """The run scenario of this host, workload and mapping."""
        return {"platform": self.host, "mapping": dict(mapping), "workload": self.workload.table}

    def measure(self, mapping: Mapping[str, Any]) -> tuple[dict[str, Any], list[float]]:
        """The nominal report and the goal's figure at every draw (cached per mapping)."""
        key = tuple(sorted(mapping.items()))
        if key not in self._cache:
            spec = self.scenario(mapping)
            todo: list[dict[str, Any] | None] = [None, *self.draws]

            def one(d: dict[str, Any] | None) -> Any:  # noqa: ANN401 - a RunReport
                return sim.run(spec, name="advise", draws=d)

            import os

            n = self.workers or os.cpu_count() or 1
            with ThreadPoolExecutor(max_workers=n) as pool:
                reports = list(pool.map(one, todo))
            self.runs += len(todo)
            if self.progress:
                self.progress(self.runs)
            nominal = dict(reports[0])
            self._cache[key] = (nominal, [figure(r, self.goal) for r in reports[1:]])
        return self._cache[key]


def applies(knob: Knob, mapping: Mapping[str, Any]) -> bool:
    """Whether ``knob`` changes ``mapping`` and makes sense on it (a flush-queue depth only
    with per-CPU flush queues; no flush or allocator change without translation)."""
    if mapping.get(knob.key) == knob.value:
        return False
    if knob.key == "high_water":
        return mapping.get("flush") == "per-cpu"
    if knob.key in ("flush", "allocator", "high_water"):
        return mapping.get("translation") == "page-table"
    return True


def allowed_by(level: str, keep: str) -> bool:
    """Whether a configuration whose protection is ``level`` may be advised under ``keep``."""
    need = {"strict": LEVEL["strict"], "lazy": LEVEL["lazy"], "any": LEVEL["none"]}[keep]
    return LEVEL[level] >= need


def advise(
    host: str,
    workload: Workload,
    *,
    goal: str = "throughput",
    keep: str = "any",
    base: Mapping[str, Any] | None = None,
    samples: int = 16,
    seed: int = 1,
    workers: int | None = None,
    progress: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """The advice for ``workload`` on ``host`` (see the module's description): ``singles`` (each
    allowed single change with its gain, interval and protection, best first), ``steps`` (the
    greedy combination, in the order to apply them), the limiting part before and after, and a
    paragraph for a ticket."""
    import numpy as np

    if goal not in GOALS:
        raise ScenarioError(f"--goal {goal}: valid: {', '.join(GOALS)}")
    if keep not in PROTECTIONS:
        raise ScenarioError(f"--keep-protection {keep}: valid: {', '.join(PROTECTIONS)}")
    adv = Advisor(
        host, workload, goal, samples=samples, seed=seed, workers=workers, progress=progress
    )
    today = dict(BASELINE) | dict(base or {})
    start, start_drawn = adv.measure(today)
    start_level, start_why = protection(start)

    def rate(
        mapping: dict[str, Any], ref: dict[str, Any], ref_drawn: list[float]
    ) -> dict[str, Any]:
        rep, drawn = adv.measure(mapping)
        level, why = protection(rep)
        g = gain(figure(ref, goal), figure(rep, goal), goal)
        entry: dict[str, Any] = {
            "gain": g,
            "figure": figure(rep, goal),
            "protection": level,
            "protection_detail": why,
            "limit": limiting(rep),
            "report": rep,
        }
        if drawn:
            per = [gain(b, n, goal) for b, n in zip(ref_drawn, drawn, strict=True)]
            lo, hi = (float(x) for x in np.percentile(per, (5.0, 95.0)))
            entry |= {"gain_lo": lo, "gain_hi": hi, "certain": lo > 0 or hi < 0}
        else:
            entry["certain"] = True
        return entry

    def rank_key(e: dict[str, Any]) -> tuple[bool, float, str]:
        # A certain gain before any uncertain one; then the larger gain.
        return (not (e["certain"] and e["gain"] > 0), -e["gain"], e["knob"].name)

    def candidates(
        mapping: dict[str, Any], ref: dict[str, Any], drawn: list[float]
    ) -> list[dict[str, Any]]:
        out = []
        for k in KNOBS:
            if not applies(k, mapping):
                continue
            trial = mapping | {k.key: k.value}
            if k.key == "flush" and k.value == "per-cpu":
                trial.setdefault("high_water", 256)
            e = rate(trial, ref, drawn) | {"knob": k, "mapping": trial}
            e["allowed"] = allowed_by(e["protection"], keep)
            out.append(e)
        return sorted(out, key=rank_key)

    singles = candidates(today, start, start_drawn)
    steps: list[dict[str, Any]] = []
    current, cur_rep, cur_drawn = today, start, start_drawn
    for _ in range(len(KNOBS)):
        options = [e for e in candidates(current, cur_rep, cur_drawn) if e["allowed"]]
        best = next((e for e in options if e["certain"] and e["gain"] > 0), None)
        if best is None:
            break
        steps.append(best)
        current = best["mapping"]
        cur_rep, cur_drawn = adv.measure(current)
    total = rate(current, start, start_drawn) if steps else None
    return {
        "host": host,
        "workload": workload.spec,
        "scenario_workload": workload.table,
        "goal": goal,
        "keep_protection": keep,
        "today": today,
        "today_figure": figure(start, goal),
        "today_protection": start_level,
        "today_protection_detail": start_why,
        "limit_before": limiting(start),
        "singles": singles,
        "steps": steps,
        "advised": current,
        "total": total,
        "limit_after": limiting(cur_rep),
        "samples": samples,
        "seed": seed,
        "runs": adv.runs,
    }


def unit(goal: str) -> str:
    """The goal's figure and its unit, for a table."""
    return {"throughput": "ops/s", "latency": "p99 us", "cpu": "CPU us/op"}[goal]


def ticket(result: Mapping[str, Any]) -> str:
    """A short paragraph a person can paste into a ticket."""
    goal = result["goal"]
    head = (
        f"On {result['host']} with {result['workload']}, today's DMA mapping "
        f"({_mapping_text(result['today'])}) is limited by {result['limit_before']}."
    )
    if not result["steps"]:
        return head + (
            " No change the search may make (keeping protection "
            f"{result['keep_protection']}) gives a gain whose interval excludes zero."
        )
    total = result["total"]
    changes = "; then ".join(f"{s['knob'].name} ({s['knob'].how})" for s in result["steps"])
    interval = f" [{total['gain_lo']:+.0%}, {total['gain_hi']:+.0%}]" if "gain_lo" in total else ""
    return (
        f"{head} Change: {changes}. Predicted {goal} gain {total['gain']:+.0%}{interval} "
        f"(5th to 95th percentile over {result['samples']} draws of the host's uncertain "
        f"parameters). Protection: {result['today_protection']} -> {total['protection']} "
        f"({total['protection_detail']}). After it, the limit is {result['limit_after']}."
    )


def _mapping_text(m: Mapping[str, Any]) -> str:
    parts = [f"{k} {v}" for k, v in sorted(m.items())]
    return ", ".join(parts)
