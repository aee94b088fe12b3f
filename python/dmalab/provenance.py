"""Where a result came from: the dmalab version, when and where it ran, and the platform with a
hash of its resolved parameters, so that a saved JSON file, CSV or DataFrame says what made it.

The date is the current UTC time, or ``SOURCE_DATE_EPOCH`` (seconds since 1970) when that is
set, the reproducible-builds convention for output that must be byte-identical across runs.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import platform as _host
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from dmalab import DmalabError, __version__, _native


def created_utc() -> str:
    """Now (or ``SOURCE_DATE_EPOCH``) as an ISO 8601 UTC time to the second."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch is not None and epoch.strip().isdigit():
        when = datetime.datetime.fromtimestamp(int(epoch), datetime.UTC)
    else:
        when = datetime.datetime.now(datetime.UTC)
    return when.replace(microsecond=0).isoformat().replace("+00:00", "Z")


@lru_cache(maxsize=64)
def _platform_sha256(name: str, picks: tuple[tuple[str, str], ...]) -> str:
    info = _native.platform_info(name, dict(picks) or None)
    resolved = sorted((p["field"], p["value"]) for p in info["params"])
    text = json.dumps(resolved, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def platform_sha256(name: str, choices: Mapping[str, str] | None = None) -> str | None:
    """The first 16 hex digits of the SHA-256 of a platform's resolved parameters (every
    parameter's field and value under ``choices``, sorted), or None if it cannot be loaded.
    Two results with the same hash ran on the same parameter values."""
    try:
        return _platform_sha256(name, tuple(sorted((choices or {}).items())))
    except DmalabError:
        return None


def platform_part(name: str, choices: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The platform's share of a provenance: its name, options and parameters' hash."""
    return {
        "platform": name,
        "platform_choices": dict(choices or {}),
        "platform_sha256": platform_sha256(name, choices),
    }


def provenance(
    platform: str | None = None,
    choices: Mapping[str, str] | None = None,
    command: list[str] | None = None,
) -> dict[str, Any]:
    """What made a result: dmalab's version, the date, the host and Python, the platform (name,
    options and hash of its resolved parameters) and the command, where given."""
    out: dict[str, Any] = {
        "dmalab_version": __version__,
        "created_utc": created_utc(),
        "host": _host.node(),
        "python": _host.python_version(),
    }
    if platform is not None:
        out.update(platform_part(platform, choices))
    if command is not None:
        out["command"] = list(command)
    return out
