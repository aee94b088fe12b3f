"""`dmalab compare`: two runs side by side, from saved files or run now."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from dmalab import ScenarioError, compare, sim
from dmalab.cli import main

SHORT = ["--set", "workload.ios=3000"]


def test_two_scenarios_differ_where_their_inputs_do() -> None:
    a = sim.run("p3-rbtree-deferred", overrides={"workload": {"ios": 3000}})
    b = sim.run("p3-bitmap-strict", overrides={"workload": {"ios": 3000}})
    c = compare.compare(a, b)
    differ = {i["input"] for i in c["inputs"]}
    assert {"allocator", "flush", "scenario"} <= differ
    assert "workload_ios" not in differ
    rows = {(r["kind"], r["name"]): r for r in c["rows"]}
    inval = rows[("component", "IOTLB invalidation")]
    assert inval["sign"] == "+" and inval["diff"] == pytest.approx(inval["b"] - inval["a"])
    exposed = rows[("metric", "pages_exposed_after_unmap")]
    assert exposed["a"] > 0 and exposed["b"] == 0 and exposed["change"] == -1.0
    assert rows[("metric", "dma_transfers")]["sign"] == "="
    assert rows[("metric", "peer_cpu_utilization")]["diff"] is None


def test_a_saved_run_compares_equal_to_itself_run_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    saved = tmp_path / "a.json"
    assert (
        main(
            [
                "run",
                "p3-segtree-deferred",
                *SHORT,
                "--no-progress",
                "--no-intervals",
                "--format",
                "json",
            ]
        )
        == 0
    )
    saved.write_text(capsys.readouterr().out)
    assert main(["compare", str(saved), "p3-segtree-deferred", *SHORT, "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["inputs"] == []
    assert all(r["sign"] in ("=", "") for r in out["rows"]), out["rows"]
    assert "provenance" in out
    assert main(["compare", str(saved), "p3-iommu-off", *SHORT, "--format", "csv"]) == 0
    table = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    kinds = {r["kind"] for r in table}
    assert kinds == {"input", "metric", "component"}
    assert main(["compare", str(saved), "p3-iommu-off", *SHORT]) == 0
    assert "inputs that differ" in capsys.readouterr().out


def test_bad_inputs_are_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"x": 1}')
    with pytest.raises(ScenarioError, match="not a saved run"):
        compare.load(str(bad))
    bad.write_text("5")
    with pytest.raises(ScenarioError, match="not a saved run"):
        compare.load(str(bad))
    bad.write_text("{")
    with pytest.raises(ScenarioError, match="not JSON"):
        compare.load(str(bad))
    assert main(["compare", str(bad), str(bad), "--set", "workload.ios=5"]) == 2
    assert "apply to scenarios run now" in capsys.readouterr().err
    assert main(["compare", str(tmp_path / "none.json"), "p3-iommu-off"]) == 2
    assert capsys.readouterr().err == f"dmalab: error: {tmp_path / 'none.json'}: no such file\n"
