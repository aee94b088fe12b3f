"""The shipped fitted parameters' ``fit_range``: what ``scripts/fit_spans.py`` computes from the
claims they were fitted to, rechecked here for the platforms whose claims run fast."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from dmalab import _native

ROOT = Path(__file__).resolve().parents[2]

FAST = ("xeon-8180-cbdma", "intel-vtd-2008-server")
"""Platforms whose fitted claims rerun in seconds (the POWER and p660 ones take minutes)."""


def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fit_spans", ROOT / "scripts" / "fit_spans.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("platform", FAST)
def test_the_files_fit_ranges_are_what_the_claims_leave(platform: str) -> None:
    script = _script()
    fitted = {k: v for k, v in script.fitted_rows().items() if k[0] == platform}
    assert fitted, platform
    stated = {p["field"]: p.get("fit_range") for p in _native.platform_info(platform)["params"]}
    for (_, param), rows in fitted.items():
        got = script.span(platform, param, rows)
        want = stated[param]
        as_list = [want["lo"], want["hi"]] if isinstance(want, dict) else want
        assert got == as_list, (param, got, want)
        # Just outside, a claim it was fitted to fails (unless the range's end is reached).
        rng = next(
            p["range"] for p in _native.platform_info(platform)["params"] if p["field"] == param
        )
        if isinstance(want, dict) and want["hi"] < rng["hi"]:
            assert not script.passes(rows, param, want["hi"] + 1), param
        if isinstance(want, dict) and want["lo"] > rng["lo"]:
            assert not script.passes(rows, param, want["lo"] - 1), param
