"""dmalab advise: the search over the DMA-mapping knobs, its honesty rules and its command."""

from __future__ import annotations

import json

import pytest

from dmalab import ScenarioError, advise
from dmalab.cli import main

HOST = "grace-2s"
"""A host whose slot holds an NVMe drive by default."""


def _nvme(ios: int = 4_000) -> advise.Workload:
    return advise.parse_workload("nvme:8x4K,qd32", ios)


def test_workload_specs_are_read_or_refused_by_name() -> None:
    w = advise.parse_workload("nvme:4x64K,qd8,threads16", 1000)
    assert w.table == {
        "kind": "block",
        "devices": 4,
        "io_bytes": 65536,
        "queue_depth": 8,
        "threads": 16,
        "ios": 1000,
    }
    assert advise.parse_workload("nvme:2x512").table["threads"] == 16
    with pytest.raises(ScenarioError, match="does not model nic workloads yet"):
        advise.parse_workload("nic:40G,64B")
    with pytest.raises(ScenarioError, match="expected nvme:DRIVESxSIZE"):
        advise.parse_workload("nvme:eight")


def test_strict_invalidation_on_a_many_cpu_nvme_load_gets_lazy_first() -> None:
    # Passthrough gains more and leaves no protection at all; kept to lazy, lazy comes first.
    anything = advise.advise(HOST, _nvme(), samples=8)
    assert anything["steps"][0]["knob"].value == "passthrough"
    assert anything["steps"][0]["protection"] == "none"
    r = advise.advise(HOST, _nvme(), samples=8, keep="lazy")
    first = r["steps"][0]
    assert first["knob"].key == "flush" and first["knob"].value in ("deferred", "per-cpu")
    assert first["certain"] and first["gain_lo"] > 0
    # Its protection cost is stated: stale mappings for a bounded window.
    assert first["protection"] == "lazy" and "reachable" in first["protection_detail"]
    assert r["today_protection"] == "strict"
    # A certain gain is never ranked below an uncertain one.
    certain = [e["certain"] and e["gain"] > 0 for e in r["singles"]]
    assert certain == sorted(certain, reverse=True)


def test_nothing_that_lowers_protection_under_keep_strict() -> None:
    r = advise.advise(HOST, _nvme(), samples=8, keep="strict")
    assert all(s["protection"] == "strict" for s in r["steps"])
    assert r["total"] is None or r["total"]["protection"] == "strict"
    lowering = [e for e in r["singles"] if e["protection"] != "strict"]
    assert lowering and not any(e["allowed"] for e in lowering)


def test_the_command_prints_json_with_a_ticket(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["advise", "--host", HOST, "--workload", "nvme:2x4K,qd16", "--ios", "2000"]
    assert main([*argv, "--samples", "8", "--format", "json", "--no-progress"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["steps"] and out["ticket"].startswith(f"On {HOST}")
    assert all({"gain", "gain_lo", "gain_hi", "how", "protection"} <= set(s) for s in out["steps"])
    assert main([*argv, "--no-intervals", "--samples", "8"]) == 2
    assert "--samples" in capsys.readouterr().err
    assert main([*argv, "--set", "workload.threads=4"]) == 2
    assert "today's mapping only" in capsys.readouterr().err


@pytest.mark.parametrize(
    "host", ["grace-2s", "xeon-broadwell-2s+samsung-pm1743", "epyc-rome-2s+samsung-pm1743"]
)
def test_each_modern_host_with_a_drive_is_advised_and_its_limit_explains_it(host: str) -> None:
    """Strict invalidation makes each host wait on its invalidation queue; the first advice
    kept to lazy protection is lazy invalidation, and the wait is named among the limits."""
    r = advise.advise(host, _nvme(), samples=8, keep="lazy")
    assert "invalidation queue wait" in r["limit_before"]
    assert r["steps"][0]["knob"].key == "flush"
    assert "invalidation queue wait" not in r["limit_after"].split(" of ")[0]
