"""The shapes of what the native module returns: plain dicts and lists, typed here.

The models' results cross from Rust as Python objects (never JSON text); these TypedDicts say
which keys each carries, so that a renamed field is caught by mypy, not at run time. Nested
parts that vary by workload or platform stay ``dict[str, Any]``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NotRequired, TypedDict

if TYPE_CHECKING:
    from dmalab.claims import Status


class TraceEntry(TypedDict):
    """One bus command or TLP of a trace, as an analyzer shows it."""

    command: str
    addr: int
    bytes: int
    start_ps: int
    end_ps: int
    retries: int
    partial_lines: int


class TraceTotals(TypedDict):
    """What a performance engineer reads first."""

    commands: int
    bytes: int
    bus_time_ps: int
    retries: int
    partial_lines: int
    read_modify_writes: int
    read_modify_write_ps: int


class Trace(TypedDict):
    """One DMA transfer on a platform's bus (``_native.trace``)."""

    platform: str
    bus: str
    direction: str
    addr: int
    length_bytes: int
    entries: list[TraceEntry]
    totals: TraceTotals
    text: str


class ScenarioTrace(Trace):
    """A trace scenario's trace, with the scenario's name and description."""

    scenario: str
    description: str | None


class LatencyBucket(TypedDict):
    """One bucket of a run's latency histogram (quarter octaves): ``count`` operations took
    from ``low_us`` up to ``high_us``."""

    low_us: float
    high_us: float
    count: int


class Timeline(TypedDict):
    """A run's recorded slices ([track, name, start_ps, duration_ps]) and how many were
    dropped past its limit."""

    slices: list[tuple[str, str, int, int]]
    limit: int
    dropped: int


class RunReport(TypedDict):
    """A run's report (``_native.run_scenario``): inputs in force, results, breakdown."""

    scenario: str
    description: str | None
    platform: str
    choices: dict[str, str]
    translation: str
    allocator: str
    flush: dict[str, Any]
    window: str | None
    workload: dict[str, Any]
    ops_per_s: float
    bits_per_s: float
    latency_mean_us: float
    latency_p50_us: float
    latency_p90_us: float
    latency_p99_us: float
    latency_p99_9_us: float
    latency_p99_99_us: float
    latency_max_us: float
    latency_histogram: list[LatencyBucket]
    cpu_utilization: float
    peer_cpu_utilization: float | None
    breakdown_us: dict[str, float]
    iotlb_hit_rate: float
    mapper: dict[str, Any]
    dma_transfers: int
    events: int
    simulated_us: float
    wall_s: float
    dma_transfers_per_wall_s: float
    timeline: NotRequired[Timeline]


class ClaimRow(TypedDict):
    """One checked case of a published claim (the repository's ``claims/`` files)."""

    id: str
    case: str
    source: str
    platform: str
    published: Any
    modelled: Any
    unit: str
    error: float | None
    tolerance: str
    passed: bool
    status: NotRequired[Status]
    expected_failure: NotRequired[dict[str, Any]]
    fitted_here: list[str]
    breakdown: str
    choices: dict[str, str]
    fit_interval: NotRequired[dict[str, Any]]
    interval: NotRequired[dict[str, Any]]


class Reproduction(TypedDict):
    """``_native.reproduce``: the checked claims and their platforms' uncited parameters."""

    claims: list[ClaimRow]
    platforms: list[dict[str, Any]]


class PlatformInfo(TypedDict):
    """A platform's description, bus, options in force and parameters with provenance."""

    name: str
    description: str
    bus: str
    choices: dict[str, str]
    params: list[dict[str, Any]]


class DeviceCheckLine(TypedDict):
    """One line of the datasheet check (``platforms --check``): a direction of a device's
    rating on a host, or (``what == "link"``) a note that its link trains down there."""

    platform: str
    what: str
    size_bytes: int
    needed_per_s: float
    modelled_per_s: float
    limit: str
    verdict: str
    reason: str


class DmaRecord(TypedDict):
    """One point of ``bench dma``: the device's DMA over its link, root complex and memory."""

    platform: str
    direction: str
    size_bytes: int
    offset_bytes: int
    window_bytes: int
    access: str
    memory: str
    cache: str
    iommu: str
    page_bytes: int
    device_offset_bytes: int
    then_read: bool
    mixed: bool
    bandwidth_gbit_s: float
    latency_ns: float
    transactions_per_s: float
    limit: str
    utilisation: list[tuple[str, float]]
    lines_per_transfer: float
    tlps_per_transfer: float
    latency_parts: list[tuple[str, float]]
    iotlb_miss_rate: float | None
    walk_reads_per_transfer: float | None
    bandwidth_gbit_s_lo: NotRequired[float]
    bandwidth_gbit_s_hi: NotRequired[float]
    latency_ns_lo: NotRequired[float]
    latency_ns_hi: NotRequired[float]
    transactions_per_s_lo: NotRequired[float]
    transactions_per_s_hi: NotRequired[float]
    top_params: NotRequired[dict[str, list[dict[str, Any]]]]
    draws: NotRequired[int]


class MapBenchRecord(TypedDict):
    """One run of ``bench map``: N CPUs mapping and unmapping on one IOMMU domain, with the
    mean and standard deviation of each operation's latency (us) and where the time goes."""

    platform: str
    threads: int
    granule_pages: int
    dma_bits: int
    direction: str
    flush: str
    allocator: str
    maps_per_thread: int
    node: int
    map_us: float
    map_sd_us: float
    unmap_us: float
    unmap_sd_us: float
    map_parts: list[tuple[str, float]]
    unmap_parts: list[tuple[str, float]]
    invalidation_busy: float
    allocator_lock_busy: float
    flushes: int
    pairs: int
    map_us_lo: NotRequired[float]
    map_us_hi: NotRequired[float]
    unmap_us_lo: NotRequired[float]
    unmap_us_hi: NotRequired[float]
    top_params: NotRequired[dict[str, list[dict[str, Any]]]]
    draws: NotRequired[int]


class SyncCopyRecord(TypedDict):
    """One synchronous copy of ``bench copy``: the core copying, and the core handing the copy
    to a copy engine and waiting; each with its parts in order."""

    platform: str
    size_bytes: int
    placement: str
    cpu_ns: float
    engine_ns: float
    faster: str
    cpu_parts: list[tuple[str, float]]
    engine_parts: list[tuple[str, float]]
    cpu_ns_lo: NotRequired[float]
    cpu_ns_hi: NotRequired[float]
    engine_ns_lo: NotRequired[float]
    engine_ns_hi: NotRequired[float]
    top_params: NotRequired[dict[str, list[dict[str, Any]]]]
    draws: NotRequired[int]


class NicTxRecord(TypedDict):
    """A NIC's send stream through a hinted PCI bridge: per frame, where the time goes."""

    payload_bytes: int
    frame_bytes: int
    descriptor_ns: float
    frame_read_quiet_ns: float
    frame_read_ns: float
    extra_commands_per_frame: float
    nic_ns: float
    card_frames: int
    wire_ns: float
    sender_ns: float | None
    limit: str
    doorbell: str
    stopped_share: float
    mbit_s: float


class HintGain(TypedDict):
    """One DMA hint changed for one (mapping, read command), and what it does to the stream."""

    mapping: str
    command: str
    knob: str
    hint: str
    mbit_s: float
    gain_pct: float
    limit: str
    safety: str
    why: str


class HintReport(TypedDict):
    """``dmalab hints``: the stream under the firmware's hints and under each single change."""

    bus: str
    firmware: NicTxRecord
    gains: list[HintGain]


class ScsiTxRecord(TypedDict):
    """A SCSI controller's write stream through a hinted PCI bridge: per command, where the time
    goes, and the limits."""

    entry_read: str | None
    command_read: str | None
    data_read: str | None
    control_ns: float
    data_ns: float
    bus_busy_ns: float
    channel_pci_mb_s: float
    channels_mb_s: float
    bus_mb_s: float
    array_mb_s: float
    limit: str
    mb_s: float


class ScsiHintGain(TypedDict):
    """One DMA hint changed for one (mapping, read command), and what it does to the stream."""

    mapping: str
    command: str
    knob: str
    hint: str
    mb_s: float
    gain_pct: float
    limit: str
    safety: str
    why: str


class ScsiHintReport(TypedDict):
    """``dmalab hints --workload scsi``: the write stream under the firmware's hints and under
    each single change."""

    bus: str
    firmware: ScsiTxRecord
    gains: list[ScsiHintGain]


class NicRxRecord(TypedDict):
    """A NIC's receive stream over a PCIe link: the rate and where the packets wait."""

    gbit_s: float
    mpackets_s: float
    link_busy_pct: float
    limit: str
    completion_latency_ns: float | None
    order_wait_ns: float
    tracker_wait_ns: float
    descriptor_read_ns: float
    descriptor_read_wait_ns: float


class AttributeGain(TypedDict):
    """One TLP attribute set on one kind of TLP, and what it does to the receive stream."""

    tlps: str
    attribute: str
    record: NicRxRecord
    gain_pct: float
    latency_change_pct: float | None
    safety: str
    why: str


class AttributeReport(TypedDict):
    """``dmalab hints`` on a PCIe platform: the stream with no attributes and with each one."""

    ordered_writes: str
    baseline: NicRxRecord
    gains: list[AttributeGain]


class CopyCurve(TypedDict):
    """Per-copy time of the CPU and the copy engine by length, and the crossovers."""

    platform: str
    points: list[dict[str, Any]]
    crossover_local_bytes: int | None
    crossover_remote_bytes: int | None


class SpaceProbe(TypedDict):
    """One run of a scenario at an IOVA window size (``SpaceReport['probes']``)."""

    window_bytes: int
    refusal: str | None


class SpaceReport(TypedDict):
    """The smallest IOVA window a scenario needs (``_native.iova_space``)."""

    scenario: str
    platform: str
    allocator: str
    translation: str
    page_bytes: int
    scenario_window_bytes: int
    window_bytes: int
    window_pages: int
    refused_at_bytes: int | None
    table_bytes: int
    scenario_table_bytes: int
    probes: list[SpaceProbe]


class AliasRecord(TypedDict):
    """One cell of the IOTLB aliasing what-if (``_native.iotlb_alias``)."""

    allocator: str
    streams: int
    iotlb_entries: int
    iotlb_ways: int
    io_bytes: int
    tlp_bytes: int
    align: str
    flush: str
    ios_per_stream: int
    platform: str
    iotlb_sets: int
    tlps_per_io: int
    misses_per_io: float
    thrash_misses_per_io: float
    miss_rate: float
    walk_us_per_io: float
    first_page_sets: float
