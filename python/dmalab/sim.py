"""Platforms, bus traces, the stream and copy-break models, and the published claims.

Every function returns plain Python data (dicts and lists, as JSON would give them); the models
run in Rust (``dmalab._native``). Platforms are named (see :func:`platforms`) or given as a path
to a TOML file; ``choices`` picks options a platform offers, such as ``{"firmware": "2001"}``.
"""

from __future__ import annotations

import json
from typing import Any

from dmalab import _native

__all__ = ["claim_ids", "copybreak", "platform_info", "platforms", "reproduce", "trace"]


def platforms() -> list[str]:
    """The names of the built-in platforms."""
    return list(_native.platform_names())


def platform_info(platform: str, choices: dict[str, str] | None = None) -> dict[str, Any]:
    """A platform's description, bus, options in force, and every parameter's provenance."""
    info: dict[str, Any] = json.loads(_native.platform_info(platform, choices))
    return info


def trace(
    platform: str,
    direction: str,
    address: int,
    length: int,
    choices: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The bus commands of one DMA transfer, as an analyzer shows them, with totals.

    ``direction`` is ``read`` (the device reads memory: transmit) or ``write`` (receive).
    """
    result: dict[str, Any] = json.loads(
        _native.trace(platform, direction, address, length, choices)
    )
    return result


def claim_ids() -> list[str]:
    """The claims of ``CLAIMS.md`` that dmalab can reproduce so far."""
    return list(_native.claim_ids())


def reproduce(ids: list[str] | None = None) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Run the claims (all when ``ids`` is empty): the rows, and the platforms' uncited params."""
    out = json.loads(_native.reproduce(ids))
    return out["claims"], out["platforms"]


def copybreak(
    platform: str, frame_bytes: int | None = None, choices: dict[str, str] | None = None
) -> dict[str, Any]:
    """Copy into a pre-mapped aligned buffer, or map the frame where it lies?

    With ``frame_bytes``, both policies at that size (``{"point": ...}``); without, the sweep
    over every frame size up to the MTU (``{"answer": ...}``).
    """
    result: dict[str, Any] = json.loads(_native.copybreak(platform, frame_bytes, choices))
    return result
