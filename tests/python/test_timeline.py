"""Timelines: a run's slices per track, written as trace-event JSON and read back."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from pathlib import Path

import pytest

from dmalab import ScenarioError, sim, timeline
from dmalab.cli import main

IOS = 1000


def _slices(trace: dict) -> list[tuple[str, dict]]:
    names = {
        e["tid"]: e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"
    }
    return [(names[e["tid"]], e) for e in trace["traceEvents"] if e["ph"] == "X"]


def test_a_deferred_run_has_the_expected_slices_per_track(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "p3.json"
    argv = [
        "run",
        "p3-rbtree-deferred",
        "--set",
        f"workload.ios={IOS}",
        "--no-progress",
        "--no-intervals",
    ]
    assert main([*argv, "--timeline", str(out), "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert "timeline" not in report
    trace = json.loads(out.read_text())
    counts = Counter((track, e["name"]) for track, e in _slices(trace))
    # One thread at queue depth 1: every I/O submits, maps, completes and unmaps on cpu 0; the
    # flush queue of 250 unmaps flushes (and frees its IOVAs) 1000 / 250 = 4 times.
    assert counts == {
        ("cpu 0", "submit"): IOS,
        ("cpu 0", "map: IOVA allocation"): IOS,
        ("cpu 0", "page-table writes"): 2 * IOS,
        ("cpu 0", "complete"): IOS,
        ("cpu 0", "unmap: IOVA free"): IOS // 250,
        ("cpu 0", "IOTLB invalidation"): IOS // 250,
        ("device 0", "translation (IOTLB misses)"): IOS,
        ("device 0", "device latency"): IOS,
        ("device 0 data path", "data transfer"): IOS,
        ("iommu 0 invalidation", "IOTLB invalidation"): IOS // 250,
    }
    assert report["mapper"]["iotlb"]["flushes"] == IOS // 250
    # The slices add up to the report's breakdown.
    alloc_us = sum(e["dur"] for t, e in _slices(trace) if e["name"] == "map: IOVA allocation")
    assert alloc_us / IOS == pytest.approx(report["breakdown_us"]["map: IOVA allocation"])
    # A track with one server never does two things at once.
    for track in ("cpu 0", "device 0 data path", "iommu 0 invalidation"):
        spans = sorted((e["ts"], e["ts"] + e["dur"]) for t, e in _slices(trace) if t == track)
        assert all(b[0] >= a[1] - 1e-9 for a, b in itertools.pairwise(spans)), track
    assert trace["otherData"]["dropped_slices"] == 0
    assert trace["otherData"]["platform"] == "intel-vtd-2008-server"


def test_the_limit_keeps_the_first_slices_and_counts_the_rest(tmp_path: Path) -> None:
    full = sim.run("p3-bitmap-strict", overrides={"workload": {"ios": 200}}, timeline_limit=10**6)
    cut = sim.run("p3-bitmap-strict", overrides={"workload": {"ios": 200}}, timeline_limit=50)
    assert len(cut["timeline"]["slices"]) == 50
    assert cut["timeline"]["dropped"] == len(full["timeline"]["slices"]) - 50
    assert cut["timeline"]["slices"] == full["timeline"]["slices"][:50]
    # The same run gives the same timeline, slice for slice.
    again = sim.run("p3-bitmap-strict", overrides={"workload": {"ios": 200}}, timeline_limit=50)
    assert again["timeline"] == cut["timeline"]
    trace = timeline.write(cut, tmp_path / "cut.json")
    assert trace["otherData"]["dropped_slices"] == cut["timeline"]["dropped"]


def test_a_network_run_has_its_hosts_cores_wires_and_links() -> None:
    r = sim.run(
        "p0-udp-rr-default-window",
        overrides={"workload": {"transactions": 100}},
        timeline_limit=10**6,
    )
    counts = Counter((s[0], s[1]) for s in r["timeline"]["slices"])
    # Each transaction: one 64-byte request frame on the client's wire, one response on the
    # server's.
    assert counts[("client wire", "frames")] == 100
    assert counts[("server wire", "frames")] == 100
    tracks = {s[0] for s in r["timeline"]["slices"]}
    assert {"client link, NIC reads", "server link, NIC writes"} <= tracks
    assert any(t.startswith("client core") for t in tracks)
    sends = sum(n for (t, name), n in counts.items() if name == "stack (send)")
    assert sends == 200
    trace = timeline.chrome_trace(r)
    assert trace["otherData"]["slices"] == len(r["timeline"]["slices"])


def test_bad_limits_are_refused() -> None:
    with pytest.raises(ScenarioError, match="timeline_limit is 0"):
        sim.run("p3-iommu-off", timeline_limit=0)
    with pytest.raises(ValueError, match="no timeline"):
        timeline.chrome_trace(sim.run("p3-iommu-off", overrides={"workload": {"ios": 10}}))


def test_a_limit_that_cuts_the_run_is_said_before_the_file_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from dmalab.cli import main

    out = tmp_path / "t.json"
    run = ["run", "p3-iommu-off", "--no-intervals", "--no-progress", "--set", "workload.ios=100"]
    assert main([*run, "--timeline", str(out), "--timeline-limit", "50"]) == 0
    err = capsys.readouterr().err
    said, wrote = err.index("--timeline-limit cut the run: 50 slices kept"), err.index("wrote ")
    assert said < wrote
    assert main([*run, "--timeline", str(out)]) == 0
    assert "cut the run" not in capsys.readouterr().err
