"""``dmalab iova-space`` and ``sim.iova_space``: the smallest IOVA window a run needs."""

from __future__ import annotations

import json

import pytest

from dmalab import ScenarioError, sim
from dmalab.cli import main


def test_deferred_flushing_holds_its_queue_and_strict_one_page() -> None:
    ios = {"workload": {"ios": 2000}}
    deferred = sim.iova_space("p3-segtree-deferred", ios)
    strict = sim.iova_space("p3-bitmap-strict", ios)
    # One I/O in flight: strict frees its page before the next map; deferred keeps 250
    # unmapped pages allocated until their flush, so it needs at least that many more.
    assert strict["window_pages"] == 2 and strict["refused_at_bytes"] is None
    assert deferred["window_pages"] >= 250 + strict["window_pages"] - 1
    assert deferred["refused_at_bytes"] == deferred["window_bytes"] - deferred["page_bytes"]
    outcomes = {p["window_bytes"]: p["refusal"] for p in deferred["probes"]}
    assert outcomes[deferred["window_bytes"]] is None
    assert "IOVA allocation" in str(outcomes[deferred["refused_at_bytes"]])
    assert deferred["table_bytes"] < deferred["scenario_table_bytes"]


def test_overrides_change_the_run_and_bad_ones_name_the_key() -> None:
    deep = sim.iova_space("p3-segtree-deferred", {"workload": {"ios": 2000, "queue_depth": 16}})
    assert deep["window_pages"] > 251
    with pytest.raises(ScenarioError, match=r"workload\.queue_depth"):
        sim.iova_space("p3-segtree-deferred", {"workload": {"queue_depth": 0}})
    with pytest.raises(ScenarioError, match="translation"):
        sim.iova_space("p3-iommu-off", {"workload": {"ios": 10}})


def test_the_command_gives_json_per_allocator(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["iova-space", "p3-segtree-deferred", "--ios", "1000", "--no-progress"]
    assert main([*args, "--allocator", "bitmap,segtree", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["allocator"] for r in out] == ["bitmap", "segtree"]
    assert main([*args, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["allocator"] == "segtree"
    assert main(args) == 0
    assert "smallest IOVA window" in capsys.readouterr().out
