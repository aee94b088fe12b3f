"""dmalab: a laboratory for DMA I/O paths.

The IOVA allocator library is :mod:`dmalab.iova`; the command line is ``dmalab`` (or
``python -m dmalab``). Errors are all subclasses of :class:`DmalabError`.
"""

from dmalab._native import (
    AllocationError,
    BenchError,
    ConfigError,
    DmalabError,
    FreeOfReservedError,
    InvalidRequestError,
    NoSpaceError,
    NotAllocatedError,
    OutOfDomainError,
    PlatformError,
    ReserveConflictError,
    ScenarioError,
    SizeMismatchError,
    __version__,
)

__all__ = [
    "AllocationError",
    "BenchError",
    "ConfigError",
    "DmalabError",
    "FreeOfReservedError",
    "InvalidRequestError",
    "NoSpaceError",
    "NotAllocatedError",
    "OutOfDomainError",
    "PlatformError",
    "ReserveConflictError",
    "ScenarioError",
    "SizeMismatchError",
    "__version__",
]
