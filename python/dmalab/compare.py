"""Two runs side by side: which inputs differ, and each metric and each breakdown component with
its difference and the sign of the change.

A run is a report (what :func:`dmalab.sim.run` returns, or ``dmalab run --format json`` saved
to a file); :func:`load` reads either a saved file or a scenario to run now.
"""

from __future__ import annotations

import json
import math
from typing import TYPE_CHECKING, Any, TypedDict

from dmalab import ScenarioError, files, sim, tidy

if TYPE_CHECKING:
    from collections.abc import Mapping

    from dmalab.types import RunReport

METRICS = (
    *tidy.MODEL_RESULTS,
    "pages_exposed_after_unmap",
    "max_exposure_window_us",
    "sub_page_bytes_exposed",
)
"""The results compared, named as in :func:`dmalab.sim.runs` (the simulator's own speed is
left out: it is a property of the machine that ran it, not of the model)."""


class Row(TypedDict):
    """One compared quantity: its values in A and B, B - A, and (B - A) / A where A is not 0."""

    kind: str
    name: str
    a: float | None
    b: float | None
    diff: float | None
    change: float | None
    sign: str


class Comparison(TypedDict):
    """What :func:`compare` returns."""

    a: str
    b: str
    inputs: list[dict[str, Any]]
    rows: list[Row]


def load(
    source: str,
    overrides: Mapping[str, Any] | None = None,
    choices: Mapping[str, str] | None = None,
) -> RunReport:
    """A run report: ``source`` is a saved ``dmalab run --format json`` file (``.json``), or a
    scenario (a built-in name or a TOML file) run now with ``overrides`` and ``choices``."""
    if source.endswith(".json"):
        if overrides or choices:
            raise ScenarioError(f"{source}: a saved run cannot take --set or --choice")
        try:
            data = json.loads(files.read_text(source, "a saved run (JSON text)"))
        except json.JSONDecodeError as e:
            raise ScenarioError(f"{source}: not JSON ({e})") from None
        keys = ("scenario", "platform", "breakdown_us", "mapper")
        missing = [k for k in keys if k not in data] if isinstance(data, dict) else list(keys)
        if missing:
            raise ScenarioError(
                f"{source}: not a saved run (dmalab run --format json); missing {missing}"
            )
        report: RunReport = data
        try:
            # What compare reads of a run, read once here: a file edited or cut short names
            # itself, not Python's KeyError.
            tidy.run_inputs(report)
            tidy.run_results(report)
            if not isinstance(report["breakdown_us"], dict):
                raise TypeError("breakdown_us is not a table")
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise ScenarioError(
                f"{source}: not a saved run (dmalab run --format json): {type(e).__name__} {e}"
            ) from None
        return report
    return sim.run(source, choices=choices, overrides=overrides)


def _row(kind: str, name: str, a: Any, b: Any) -> Row:  # noqa: ANN401 - numbers or None
    def num(v: Any) -> float | None:  # noqa: ANN401
        if isinstance(v, bool):
            return float(v)
        return float(v) if isinstance(v, int | float) and math.isfinite(v) else None

    x, y = num(a), num(b)
    diff = None if x is None or y is None else y - x
    change = None if diff is None or not x else diff / abs(x)
    sign = "" if diff is None else "+" if diff > 0 else "-" if diff < 0 else "="
    return Row(kind=kind, name=name, a=x, b=y, diff=diff, change=change, sign=sign)


def compare(a: RunReport, b: RunReport) -> Comparison:
    """Runs ``a`` and ``b`` side by side: the inputs that differ, every metric and every
    breakdown component (in either run; one missing from a run reads as None)."""
    ra, rb = tidy.run_results(a), tidy.run_results(b)
    ia, ib = tidy.run_inputs(a), tidy.run_inputs(b)
    inputs = [
        {"input": k, "a": ia.get(k), "b": ib.get(k)}
        for k in dict.fromkeys([*ia, *ib])
        if ia.get(k) != ib.get(k)
    ]
    rows = [_row("metric", m, ra.get(m), rb.get(m)) for m in METRICS]
    components = dict.fromkeys([*a["breakdown_us"], *b["breakdown_us"]])
    rows += [
        _row("component", c, a["breakdown_us"].get(c), b["breakdown_us"].get(c)) for c in components
    ]
    return Comparison(a=a["scenario"], b=b["scenario"], inputs=inputs, rows=rows)
