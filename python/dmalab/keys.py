"""Scenario keys as users write them: ``TABLE.KEY`` names and TOML values (``--set``, sweep
files, measurement files), and the nested tables ``sim.run``'s overrides take."""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from typing import Any


def toml_value(text: str) -> Any:  # noqa: ANN401 - any TOML value
    """``text`` read as a TOML value (``2``, ``"per-cpu"``, ``true``), or as a bare string when
    it is not one."""
    try:
        return tomllib.loads(f"v = {text.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        return text.strip()


def all_finite(value: Any) -> bool:  # noqa: ANN401 - any TOML value
    """False where ``value`` is, or holds, a float that is inf or nan (TOML has both)."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, list):
        return all(map(all_finite, value))
    if isinstance(value, dict):
        return all(map(all_finite, value.values()))
    return True


def nest(flat: Mapping[str, Any]) -> dict[str, Any]:
    """Dotted scenario keys (``{"workload.ios": 5}``) as nested tables (``{"workload": {"ios":
    5}}``), the form ``sim.run``'s overrides take."""
    out: dict[str, Any] = {}
    for key, value in flat.items():
        node = out
        *tables, last = key.split(".")
        for t in tables:
            node = node.setdefault(t, {})
        node[last] = value
    return out
