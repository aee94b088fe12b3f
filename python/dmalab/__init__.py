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
    "MeasurementError",
    "NoSpaceError",
    "NotAllocatedError",
    "OutOfDomainError",
    "PlatformError",
    "ReserveConflictError",
    "ScenarioError",
    "SizeMismatchError",
    "__version__",
]


class MeasurementError(ScenarioError):
    """A file of measurements (``calibrate fit --measurements``) that cannot be read as one:
    the message names the file and line, and the field with its valid range where there is
    one."""
