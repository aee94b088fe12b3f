"""Scenario keys as users write them: ``TABLE.KEY`` names and TOML values (``--set``, sweep
files, measurement files), and the nested tables ``sim.run``'s overrides take."""

from __future__ import annotations

import math
import re
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


def check_values(table: Mapping[str, Any], where: str = "") -> None:
    """Refuse (a ScenarioError naming the key) a value no scenario file can hold, which the
    core would otherwise take for a key left out (its default): None (TOML has no null), or a
    float that is nan or inf, as ``--set`` refuses it (``workload.ios: nan is not a finite
    number``). ``where`` is the table's own name (``hints``), or empty for a scenario."""
    from dmalab import ScenarioError

    def walk(value: Any, path: str) -> None:  # noqa: ANN401 - any value
        if value is None:
            raise ScenarioError(f"{path}: None is not a value; leave the key out for its default")
        if isinstance(value, float) and not math.isfinite(value):
            raise ScenarioError(f"{path}: {value} is not a finite number")
        if isinstance(value, Mapping):
            for k, v in value.items():
                walk(v, f"{path}.{k}" if path else str(k))
        elif isinstance(value, list | tuple):
            for i, v in enumerate(value):
                walk(v, f"{path}[{i}]")

    walk(table, where)


_UNNAMED = re.compile(r"(?P<path>[\w.\[\]]+) is ; valid: (?P<valid>.*)", re.S)
_EXPECTED = {
    "u8": "an integer in 0..=255",
    "u16": "an integer in 0..=65535",
    "u32": "an integer in 0..=4294967295",
    "u64": "an integer in 0..2^64-1",
    "usize": "an integer in 0..2^64-1",
    "i64": "an integer",
    "f64": "a number",
    "f32": "a number",
    "a boolean": "true or false",
    "a sequence": "a list",
    "a string": "a string",
    "string or map": "a name (a string)",
}


def _lookup(table: Any, path: str) -> tuple[bool, Any]:  # noqa: ANN401 - any value
    """The value at ``path`` (``commands[0]``, ``a.b``) in ``table``, and whether there is one."""
    node = table
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", path):
        if part.startswith("["):
            i = int(part[1:-1])
            if not isinstance(node, list | tuple) or i >= len(node):
                return False, None
            node = node[i]
        elif isinstance(node, Mapping) and part in node:
            node = node[part]
        else:
            return False, None
    return True, node


def name_value(e: Exception, root: str, table: Mapping[str, Any]) -> Exception:
    """``e`` (a core error about ``root``'s table, such as ``hints.bogus is ; valid: unknown
    field ...``, which leaves the value out) as a ScenarioError that shows the value given and
    what is valid in plain words: ``hints.bogus is 1; valid: a key named commands,
    prefetch_lines, ...``. Any other error is returned as it is."""
    from dmalab import ScenarioError

    m = _UNNAMED.fullmatch(str(e).strip())
    if not isinstance(e, ScenarioError) or m is None or not m["path"].startswith(root):
        return e
    path, valid = m["path"], m["valid"].strip()
    found, value = _lookup(table, path.removeprefix(root).lstrip("."))
    if not found:
        return e
    unknown = re.fullmatch(r"unknown (?:field|variant) `[^`]*`, expected (?:one of )?(.*)", valid)
    expected = re.search(r"expected (.*)$", valid)
    if unknown:
        names = unknown[1].replace("`", "")
        kind = "a key named" if "field" in valid else "one of"
        valid = f"{kind} {names}"
    elif expected:
        valid = _EXPECTED.get(expected[1], expected[1])
    return ScenarioError(f"{path} is {value!r}; valid: {valid}")
