"""Platforms, bus traces, the stream and copy-break models, and the published claims.

Every function returns plain Python data (dicts and lists, typed in :mod:`dmalab.types`); the
models run in Rust (``dmalab._native``). Platforms are named (see :func:`platforms`) or given
as a path to a TOML file; ``choices`` picks options a platform offers, such as
``{"firmware": "2001"}``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from dmalab import ScenarioError, _native
from dmalab.types import (
    AttributeReport,
    ClaimRow,
    HintReport,
    PlatformInfo,
    RunReport,
    ScenarioTrace,
    ScsiHintReport,
    SpaceReport,
    Trace,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "claim_ids",
    "claims_frame",
    "copybreak",
    "iova_space",
    "nic_hints",
    "platform_info",
    "platforms",
    "platforms_with",
    "reproduce",
    "run",
    "run_frames",
    "runs",
    "scenarios",
    "scsi_hints",
    "trace",
    "trace_scenario",
    "trace_scenarios",
]


TIMELINE_LIMIT_MAX = 100_000_000
"""The most slices a timeline keeps (about 4 GB as JSON)."""


def _u64(name: str, value: int) -> int:
    """`value` if it fits an unsigned 64-bit integer, else a ScenarioError naming `name`."""
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < 2**64:
        raise ScenarioError(f"{name} is {value!r}; valid: an integer in 0..2^64-1")
    return value


def platforms() -> list[str]:
    """The names of the built-in platforms."""
    return list(_native.platform_names())


def devices(kind: str | None = None) -> list[str]:
    """The built-in devices (``HOST+DEVICE``, or ``--device`` on the command line), or those
    of one ``kind``: ``pcie`` (for a host's PCIe slot) or ``copy-engine`` (for its copy-engine
    slot)."""
    names = list(_native.device_names())
    if kind is None:
        return names
    return [d for d in names if _native.device_info(d)["kind"] == kind]


def device_info(device: str) -> dict[str, str]:
    """A device's name, description and kind (``pcie`` or ``copy-engine``): a built-in device
    or a device file's path."""
    return _native.device_info(device)


def with_device(platform: str, device: str | None) -> str:
    """The platform name for ``platform`` with ``device`` in its slot for that kind of device
    (``HOST+DEVICE``), or ``platform`` itself without one."""
    return f"{platform}+{device}" if device else platform


def platforms_with(*sections: str) -> list[str]:
    """The built-in platforms whose files have every one of ``sections`` (top-level parts of
    their parameter names, such as ``device_dma`` or ``copy``)."""
    out = []
    for name in _native.platform_names():
        have = {p["field"].split(".")[0] for p in _native.platform_info(name)["params"]}
        if set(sections) <= have:
            out.append(name)
    return out


def platform_info(platform: str, choices: dict[str, str] | None = None) -> PlatformInfo:
    """A platform's description, bus, options in force, and every parameter's provenance."""
    return _native.platform_info(platform, choices)


def trace(
    platform: str,
    direction: str,
    address: int,
    length: int,
    choices: dict[str, str] | None = None,
    *,
    mapping: str = "streaming",
    hints: dict[str, Any] | None = None,
    pio_writes_ns: list[int] | None = None,
) -> Trace:
    """The bus commands of one DMA transfer, as an analyzer shows them, with totals.

    ``direction`` is ``read`` (the device reads memory: transmit) or ``write`` (receive). On a
    platform whose PCI host bridge takes DMA hints (``hp-rx2600-zx1``), reads go through a
    ``mapping`` (``streaming`` or ``consistent``) with the firmware's hints changed by ``hints``
    (``prefetch_lines``, ``block_bytes``, ``relaxed_ordering``, ``read_current`` and the
    ``commands`` they apply to, such as ``["MRM"]``), while PIO writes reach the bridge at
    ``pio_writes_ns`` (ascending, from the transfer's start).
    """
    from dmalab.keys import check_values, name_value

    address, length = _u64("address", address), _u64("length", length)
    if hints is not None:
        check_values(hints, "hints")
    try:
        return _native.trace(
            platform,
            direction,
            address,
            length,
            choices,
            mapping=mapping,
            hints=hints,
            pio_writes_ns=pio_writes_ns,
        )
    except ScenarioError as e:
        raise name_value(e, "hints", hints or {}) from None


def trace_scenario(scenario: str, choices: dict[str, str] | None = None) -> ScenarioTrace:
    """The trace of a trace scenario: a built-in name (see :func:`trace_scenarios`) or a file."""
    return _native.trace_scenario(scenario, choices)


def trace_scenarios() -> list[str]:
    """The names of the built-in trace scenarios (``dmalab trace NAME``)."""
    return list(_native.scenario_names(trace=True))


def claim_ids() -> list[str]:
    """The claims of ``docs/CLAIMS.md`` that dmalab can reproduce so far."""
    return list(_native.claim_ids())


def reproduce(ids: list[str] | None = None) -> tuple[list[ClaimRow], list[dict[str, Any]]]:
    """Run the claims (all when ``ids`` is empty): the rows, and the platforms' uncited params.

    Each row has its ``status`` against :data:`dmalab.claims.EXPECTED_FAILURES` (``pass``,
    ``expected-fail``, ``fail`` or ``unexpected-pass``) and, where that list holds it, its
    ``expected_failure`` (``reason`` and ``docs``)."""
    from dmalab import claims

    out = _native.reproduce(ids)
    rows = out["claims"]
    claims.annotate(rows)  # type: ignore[arg-type]
    return rows, out["platforms"]


def copybreak(
    platform: str, frame_bytes: int | None = None, choices: dict[str, str] | None = None
) -> dict[str, Any]:
    """Copy into a pre-mapped aligned buffer, or map the frame where it lies?

    With ``frame_bytes``, both policies at that size (``{"point": ...}``); without, the sweep
    over every frame size up to the MTU (``{"answer": ...}``).
    """
    if frame_bytes is not None:
        frame_bytes = _u64("frame_bytes", frame_bytes)
    return _native.copybreak(platform, frame_bytes, choices)


def nic_hints(
    platform: str = "hp-rx2600-zx1",
    protocol: str = "udp",
    message_bytes: int = 1024,
    mtu_bytes: int = 1500,
    choices: dict[str, str] | None = None,
) -> HintReport:
    """A NIC's send stream (netperf ``UDP_STREAM`` or ``TCP_STREAM``) through the platform's
    hinted PCI bridge, under the firmware's DMA hints and under each single change of them:
    the rate, the gain and whether a driver may set the hint. Bad values raise
    :class:`dmalab.ScenarioError` naming the field."""
    from dmalab.keys import name_value

    stream = {
        "protocol": protocol,
        "message_bytes": _u64("message_bytes", message_bytes),
        "mtu_bytes": _u64("mtu_bytes", mtu_bytes),
    }
    try:
        return _native.nic_hints(platform, stream, choices)
    except ScenarioError as e:
        raise name_value(e, "stream", stream) from None


def scsi_hints(
    platform: str = "hp-rx2600-zx1", choices: dict[str, str] | None = None
) -> ScsiHintReport:
    """A SCSI controller's write stream (seed 004's 53c1010 under ``dd``) through the platform's
    hinted PCI bridge, under the firmware's DMA hints and under each single change of them: the
    rate, the gain, what limits the stream and whether a driver may set the hint."""
    return _native.scsi_hints(platform, choices)


def pcie_hints(
    platform: str = "xeon-broadwell-2s",
    packet_bytes: int = 1514,
    packets: int = 4096,
    functions: int = 1,
    cpu_owned_lines: int = 1,
    choices: dict[str, str] | None = None,
) -> AttributeReport:
    """A NIC's receive stream over the platform's PCIe link, with no TLP attributes and with
    each single one set (Relaxed Ordering, No Snoop, ID-based Ordering on data, completion or
    all TLPs): the rate, the completion latency, the gain and whether a driver may set it. Bad
    values raise :class:`dmalab.ScenarioError` naming the field."""
    stream = {
        "packet_bytes": _u64("packet_bytes", packet_bytes),
        "packets": _u64("packets", packets),
        "functions": _u64("functions", functions),
        "cpu_owned_lines": _u64("cpu_owned_lines", cpu_owned_lines),
    }
    return _native.pcie_hints(platform, stream, choices)


def scenarios() -> list[str]:
    """The names of the built-in scenarios (``dmalab run NAME``)."""
    return list(_native.scenario_names())


def run(
    scenario: str | Mapping[str, Any],
    name: str = "scenario",
    choices: Mapping[str, str] | None = None,
    progress: _native.Progress | None = None,
    overrides: Mapping[str, Any] | None = None,
    timeline_limit: int | None = None,
    draws: Mapping[str, Any] | None = None,
) -> RunReport:
    """Run a scenario: a built-in name, a TOML file's path, or a mapping of the same fields.

    ``overrides`` is merged into a named scenario key by key (``{"workload": {"sockets": 2}}``);
    ``choices`` picks platform options on top of the scenario's own (``{"slot": "64bit"}``);
    ``progress`` (a :class:`dmalab._native.Progress`) receives the run's progress, to be polled
    from another thread.

    Returns the report: throughput, latency, CPU utilization, a breakdown of the time per
    operation by component, the IOTLB hit rate, the allocator's work, the exposure the mapping
    configuration leaves, and ``dma_transfers_per_wall_s`` (how fast the simulation ran).

    With ``timeline_limit``, the report also has ``timeline``: at most that many slices of what
    each CPU, device, data path and invalidation unit (block workloads) or each host's cores,
    wire and NIC link (network workloads) did when, for :func:`dmalab.timeline.write`.

    ``draws`` (parameter path to value, as :func:`dmalab.intervals.draws` gives) runs the
    scenario's platform with those parameters in place of its files' values.

    A value no scenario file can hold (None, nan, inf) in the mapping or in ``overrides`` is a
    ScenarioError naming the key, as ``dmalab run --set`` refuses it: the core would take it for
    a key left out and run its default.
    """
    from dmalab.keys import check_values

    picks = dict(choices) if choices else None
    if overrides is not None:
        check_values(overrides)
    if not isinstance(scenario, str):
        check_values(scenario)
    if timeline_limit is not None and not 1 <= timeline_limit <= TIMELINE_LIMIT_MAX:
        raise ScenarioError(
            f"timeline_limit is {timeline_limit}; valid: 1..={TIMELINE_LIMIT_MAX:_} slices"
        )
    if isinstance(scenario, str):
        return _native.run_scenario(
            scenario, None, picks, progress, overrides, timeline_limit, draws
        )
    if overrides:
        raise ValueError("overrides: only for a named scenario; change the mapping itself")
    return _native.run_scenario(name, scenario, picks, progress, None, timeline_limit, draws)


def iova_space(
    scenario: str,
    overrides: Mapping[str, Any] | None = None,
    choices: Mapping[str, str] | None = None,
    progress: _native.Progress | None = None,
) -> SpaceReport:
    """The smallest IOVA window at which ``scenario`` runs with no mapping refused.

    ``scenario`` is a built-in name or a TOML file's path; ``overrides`` is merged into it key by
    key (``{"mapping": {"allocator": "rbtree"}, "workload": {"ios": 100_000}}``). Each probe is a
    whole run, bisecting over pages between a window that refuses and one that does not; the
    answer holds for this run (its length and seed), and every probe is returned with it.
    Also returned: the bytes of translation tables the smallest window and the scenario's own
    window take.
    """
    from dmalab.keys import check_values

    picks = dict(choices) if choices else None
    if overrides is not None:
        check_values(overrides)
    return _native.iova_space(scenario, overrides, picks, progress)


def run_frames(
    scenarios: Iterable[str | Mapping[str, Any]],
    workers: int | None = None,
    samples: int = 0,
    seed: int = 1,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Run several scenarios: one tidy row per run (see :func:`runs`) and the breakdown as a
    long frame, one row per run and component (``run``, ``scenario``, ``side``, ``component``,
    ``time_us``), ``run`` being the row's index in the first frame.

    The runs go in parallel on ``workers`` threads (default: one per CPU): each native run
    releases the GIL. Rows keep the order of ``scenarios``, and each row's results are the same
    whatever the number of workers (every run is deterministic on its own).

    With ``samples`` (a power of two from 8), each run is repeated over that many draws of its
    platform's uncertain parameters (seeded by ``seed``; :mod:`dmalab.intervals`) and
    its row gains ``KEY_lo`` and ``KEY_hi`` (the 5th to 95th percentile), ``KEY_driven_by``
    and ``interval_draws`` for each figure of :data:`dmalab.tidy.RUN_FIGURES`.
    """
    import os
    from concurrent.futures import ThreadPoolExecutor

    import pandas as pd

    from dmalab import tidy
    from dmalab.provenance import created_utc

    specs = _scenario_list(scenarios, "run_frames")
    if workers is not None and workers < 1:
        raise ScenarioError(f"workers is {workers}; valid: at least 1")
    if samples and (samples < 8 or samples & (samples - 1)):
        raise ScenarioError(f"samples is {samples}; valid: 0 (none) or a power of two from 8")
    n = workers or os.cpu_count() or 1

    def one(i: int, spec: str | Mapping[str, Any]) -> RunReport:
        name = f"scenario-{i}"
        report = run(spec, name=name)
        if samples:
            from dmalab import intervals

            def rerun(d: dict[str, Any]) -> RunReport:
                return run(spec, name=name, draws=d)

            intervals.attach_run(report, rerun, samples=samples, seed=seed, workers=1)
        return report

    with ThreadPoolExecutor(max_workers=n) as pool:
        reports = list(pool.map(lambda ix: one(*ix), enumerate(specs)))
    created = created_utc()
    wide = pd.DataFrame([tidy.run_row(r, created) for r in reports])
    long = pd.DataFrame(
        [row for i, r in enumerate(reports) for row in tidy.breakdown_rows(r, i)],
        columns=["run", "scenario", "side", "component", "time_us"],
    )
    return wide, long


def runs(
    scenarios: Iterable[str | Mapping[str, Any]],
    workers: int | None = None,
    samples: int = 0,
    seed: int = 1,
) -> pd.DataFrame:
    """Run several scenarios and return one tidy row per run (pandas).

    Columns: the inputs that made the run (``scenario``, ``platform``, ``platform_sha256``,
    ``choice_<name>``, ``translation``, ``window``, ``allocator``, ``flush``,
    ``flush_high_water``, ``flush_timeout_us``, ``workload_<key>``), the results with their
    units in their names (``ops_per_s``, ``latency_p99_9_us``, ...), the exposure left, the
    breakdown as ``breakdown_<component>_us`` and the provenance (``dmalab_version``,
    ``created_utc``). Every name is an identifier, so ``df.query`` takes any column. The
    breakdown as a long frame comes from :func:`run_frames`.

    ``scenarios`` is a list (or any iterable) of scenarios, each a name, a file or a mapping;
    one scenario on its own (a str, bytes or a mapping) is a TypeError: :func:`run` takes it.
    With ``samples`` (8, 16, ... draws), each row has its figures' intervals (``KEY_lo``,
    ``KEY_hi``, ``KEY_driven_by``, ``interval_draws``), as :func:`run_frames` says.
    """
    return run_frames(_scenario_list(scenarios, "runs"), workers, samples, seed)[0]


def _scenario_list(scenarios: object, function: str) -> list[str | Mapping[str, Any]]:
    """``scenarios`` as a list, refusing one scenario given on its own (whose iteration would
    be its characters or its keys) with a TypeError that says what to pass."""
    if isinstance(scenarios, str | bytes | bytearray | Mapping):
        kind = "dict" if isinstance(scenarios, Mapping) else type(scenarios).__name__
        raise TypeError(
            f"{function}() takes a list of scenarios, not a {kind}; use sim.run(...) for one"
        )
    if not isinstance(scenarios, Iterable):
        raise TypeError(f"{function}() takes a list of scenarios, not {type(scenarios).__name__}")
    return list(scenarios)


def claims_frame(ids: list[str] | None = None) -> pd.DataFrame:
    """``reproduce`` as a pandas DataFrame, one row per checked claim (breakdowns left out).

    ``published`` and ``modelled`` are numbers (NaN where the claim is a text, such as a list
    of bus commands), with ``published_text`` and ``modelled_text`` always the value as text;
    ``fitted_here`` is a bool and ``fitted_params`` names the parameters fitted to that row.
    """
    import math

    import pandas as pd

    def number(v: object) -> float:
        return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else math.nan

    def text(v: object) -> str:
        return f"{v:g}" if isinstance(v, int | float) and not isinstance(v, bool) else str(v)

    rows, _ = reproduce(ids)
    out = []
    for r in rows:
        row: dict[str, Any] = {k: v for k, v in r.items() if k != "breakdown"}
        row["published"], row["modelled"] = number(r["published"]), number(r["modelled"])
        row["published_text"], row["modelled_text"] = text(r["published"]), text(r["modelled"])
        row["fitted_params"] = ", ".join(r["fitted_here"])
        row["fitted_here"] = bool(r["fitted_here"])
        out.append(row)
    return pd.DataFrame(out)
