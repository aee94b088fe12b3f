"""Type stub of the native module (checked against it by ``mypy.stubtest``)."""

from collections.abc import Mapping
from typing import Any, final

from dmalab.types import (
    AliasRecord,
    AttributeReport,
    CopyCurve,
    DeviceCheckLine,
    DmaRecord,
    HintReport,
    MapBenchRecord,
    PlatformInfo,
    Reproduction,
    RunReport,
    ScenarioTrace,
    ScsiHintReport,
    SpaceReport,
    SyncCopyRecord,
    Trace,
)

__all__ = [
    "AllocationError",
    "BenchError",
    "ConfigError",
    "DmalabError",
    "FreeOfReservedError",
    "InvalidRequestError",
    "IovaDomain",
    "IovaRange",
    "NoSpaceError",
    "NotAllocatedError",
    "OutOfDomainError",
    "PlatformError",
    "Progress",
    "ReserveConflictError",
    "ScenarioError",
    "SizeMismatchError",
    "__version__",
    "allocator_names",
    "bench_address_bits",
    "bench_copy",
    "bench_dma",
    "bench_dma_drawn",
    "bench_iova_group",
    "bench_map",
    "bench_names",
    "calibrate_copy",
    "claim_ids",
    "copy_curve",
    "copybreak",
    "device_check",
    "device_info",
    "device_names",
    "device_text",
    "engine_keys",
    "interrupt",
    "iotlb_alias",
    "iova_space",
    "is_device",
    "nic_hints",
    "pcie_hints",
    "platform_draws",
    "platform_info",
    "platform_names",
    "platform_text",
    "reproduce",
    "reproduce_drawn",
    "run_scenario",
    "scenario_names",
    "scsi_hints",
    "timer_overhead_ns",
    "trace",
    "trace_scenario",
    "vhost_run",
    "vhost_sweep",
]
__version__: str

class DmalabError(Exception): ...
class ConfigError(DmalabError): ...
class AllocationError(DmalabError): ...
class InvalidRequestError(AllocationError): ...
class NoSpaceError(AllocationError): ...
class NotAllocatedError(AllocationError): ...
class SizeMismatchError(AllocationError): ...
class FreeOfReservedError(AllocationError): ...
class ReserveConflictError(AllocationError): ...
class OutOfDomainError(AllocationError): ...
class BenchError(DmalabError): ...
class PlatformError(DmalabError): ...
class ScenarioError(DmalabError): ...

@final
class IovaRange:
    @property
    def pfn_lo(self) -> int: ...
    @property
    def pfn_hi(self) -> int: ...
    @property
    def pages(self) -> int: ...
    def __eq__(self, other: object, /) -> bool: ...
    def __hash__(self) -> int: ...

@final
class IovaDomain:
    def __new__(
        cls,
        allocator: str = "segtree",
        *,
        pfn_lo: int | None = None,
        pfn_hi: int | None = None,
        address_bits: int | None = None,
        page_size: int = 4096,
    ) -> IovaDomain: ...
    @property
    def allocator(self) -> str: ...
    @property
    def pfn_lo(self) -> int: ...
    @property
    def pfn_hi(self) -> int: ...
    @property
    def page_size(self) -> int: ...
    def allocate(
        self, pages: int, *, align: int = 1, limit: int | None = None, boundary: int | None = None
    ) -> IovaRange: ...
    def free(self, pfn: int, pages: int) -> None: ...
    def reserve(self, pfn_lo: int, pfn_hi: int) -> None: ...
    def stats(self) -> dict[str, int | float]: ...
    def work(self) -> dict[str, int]: ...
    def memory_bytes(self) -> int: ...
    def flush_caches(self) -> None: ...

def allocator_names() -> list[str]: ...
def bench_iova_group(
    allocators: list[str],
    workload: str,
    threads: int,
    *,
    quick: bool = True,
    seed: int = 1,
    address_bits: int = 36,
) -> list[str]: ...
def bench_names() -> tuple[list[str], list[str]]: ...
def bench_address_bits(workload: str, threads: int, *, seed: int = 1) -> tuple[int, int]: ...
def timer_overhead_ns() -> float: ...
def platform_names() -> list[str]: ...
def device_names() -> list[str]: ...
def engine_keys() -> list[str]: ...
def device_info(device: str) -> dict[str, str]: ...
def is_device(name: str) -> bool: ...
def device_text(name: str) -> str: ...
def device_check(platform: str, choices: dict[str, str] | None = None) -> list[DeviceCheckLine]: ...
def platform_text(name: str) -> str: ...
def platform_info(platform: str, choices: dict[str, str] | None = None) -> PlatformInfo: ...
def trace(
    platform: str,
    direction: str,
    address: int,
    length: int,
    choices: dict[str, str] | None = None,
    mapping: str = "streaming",
    hints: Mapping[str, Any] | None = None,
    pio_writes_ns: list[int] | None = None,
) -> Trace: ...
def trace_scenario(scenario: str, choices: dict[str, str] | None = None) -> ScenarioTrace: ...
def reproduce(ids: list[str] | None = None) -> Reproduction: ...
def claim_ids() -> list[str]: ...
def reproduce_drawn(id: str, case: str, draws: list[dict[str, Any]]) -> list[dict[str, Any]]: ...
def bench_dma(
    platform: str,
    points: list[Mapping[str, Any]],
    choices: dict[str, str] | None = None,
    draws: Mapping[str, Any] | None = None,
) -> list[DmaRecord]: ...
def bench_dma_drawn(
    platform: str,
    points: list[Mapping[str, Any]],
    fields: list[str],
    design: list[list[float]],
    choices: dict[str, str] | None = None,
    figures: list[str] | None = None,
) -> list[dict[str, Any]]: ...
def bench_map(
    platform: str,
    bench: Mapping[str, Any],
    choices: dict[str, str] | None = None,
    progress: Progress | None = None,
    draws: Mapping[str, Any] | None = None,
) -> MapBenchRecord: ...
def bench_copy(
    platform: str,
    sizes: list[int],
    placements: list[str],
    choices: dict[str, str] | None = None,
    draws: Mapping[str, Any] | None = None,
) -> list[SyncCopyRecord]: ...
def platform_draws(
    platform: str,
    fields: list[str],
    design: list[list[float]],
    choices: dict[str, str] | None = None,
    physical: bool = False,
) -> list[dict[str, Any]]: ...
def copybreak(
    platform: str, frame_bytes: int | None = None, choices: dict[str, str] | None = None
) -> dict[str, Any]: ...
def nic_hints(
    platform: str, stream: Mapping[str, Any], choices: dict[str, str] | None = None
) -> HintReport: ...
def scsi_hints(platform: str, choices: dict[str, str] | None = None) -> ScsiHintReport: ...
def pcie_hints(
    platform: str, stream: Mapping[str, Any], choices: dict[str, str] | None = None
) -> AttributeReport: ...
def iotlb_alias(
    platform: str,
    point: Mapping[str, Any],
    choices: dict[str, str] | None = None,
    progress: Progress | None = None,
) -> AliasRecord: ...
def iova_space(
    scenario: str,
    overrides: Mapping[str, Any] | None = None,
    choices: dict[str, str] | None = None,
    progress: Progress | None = None,
) -> SpaceReport: ...
def run_scenario(
    scenario: str,
    spec: Mapping[str, Any] | None = None,
    choices: dict[str, str] | None = None,
    progress: Progress | None = None,
    overrides: Mapping[str, Any] | None = None,
    timeline_limit: int | None = None,
    draws: Mapping[str, Any] | None = None,
) -> RunReport: ...

@final
class Progress:
    def __init__(self) -> None: ...
    def get(self) -> tuple[int, int]: ...
    def cancel(self) -> None: ...
    def cancelled(self) -> bool: ...

def scenario_names(trace: bool = False) -> list[str]: ...
def copy_curve(
    platform: str, max_len: int = 65536, choices: dict[str, str] | None = None
) -> CopyCurve: ...
def calibrate_copy(*, quick: bool = False) -> str: ...
def vhost_sweep(
    platform: str,
    packets: int = 20000,
    choices: dict[str, str] | None = None,
    progress: Progress | None = None,
) -> list[dict[str, Any]]: ...
def vhost_run(
    platform: str,
    packet_bytes: int,
    mbuf_bytes: int,
    placement: str,
    policy: str,
    packets: int,
    choices: dict[str, str] | None = None,
    draws: Mapping[str, Any] | None = None,
) -> dict[str, Any]: ...
def interrupt() -> None:
    """Stop every native run of this process, running or to come (the CLI's Ctrl-C)."""
