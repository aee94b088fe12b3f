"""Memory refused up front: a run estimated not to fit (or not to fit its I/Os' IOVA) is
refused with exit 2 and one line before it allocates, never an abort."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from dmalab import ScenarioError, sim

ROOT = Path(__file__).resolve().parents[2]


def _dmalab(*args: str) -> tuple[int, float, str]:
    started = time.monotonic()
    p = subprocess.run(
        [sys.executable, "-m", "dmalab", *args], cwd=ROOT, capture_output=True, text=True
    )
    return p.returncode, time.monotonic() - started, p.stderr


def test_the_8_gib_case_is_refused_in_under_a_second() -> None:
    status, took, err = _dmalab(
        "run", "p3-bitmap-strict", "--no-intervals",
        "--set", "workload.threads=1024", "--set", "workload.queue_depth=65536",
        "--set", "workload.ios=100000000",
    )  # fmt: skip
    assert status == 2, err
    assert took < 3.0  # under a second of work; the rest is Python's start
    assert len(err.strip().splitlines()) == 1, err
    assert "workload.threads x workload.queue_depth (the I/Os in flight) is 67108864" in err
    assert "at most 1048575 with 1 page of IOVA each" in err


def test_max_memory_refuses_a_run_that_would_fit_the_machine() -> None:
    args = ["run", "p3-iommu-off", "--no-intervals", "--set", "workload.threads=64"]
    args += ["--set", "workload.queue_depth=65536"]
    status, _, err = _dmalab("--max-memory", "64M", *args, "--set", "workload.ios=10000000")
    assert status == 2, err
    assert "more than the 0.06 GiB available (DMALAB_MAX_MEMORY)" in err, err
    assert "lower workload.threads x workload.queue_depth" in err
    # Its I/Os in flight are capped by workload.ios: the same with few I/Os runs.
    status, _, err = _dmalab("--max-memory", "64M", *args, "--set", "workload.ios=1000")
    assert status == 0, err


def test_a_timeline_too_big_to_keep_is_refused_naming_the_limit(tmp_path: Path) -> None:
    out = tmp_path / "t.json"
    status, took, err = _dmalab(
        "--max-memory", "1G", "run", "p3-bitmap-strict", "--no-intervals",
        "--set", "workload.ios=20000000", "--timeline", str(out),
        "--timeline-limit", "100000000",
    )  # fmt: skip
    assert status == 2, err
    assert took < 3.0
    assert "lower --timeline-limit (or workload.ios)" in err
    assert not out.exists()


@pytest.mark.parametrize("bad", ["0", "abc", "1.5G", "-1", "99999999999T"])
def test_a_bad_max_memory_is_a_usage_error(bad: str) -> None:
    status, _, err = _dmalab(f"--max-memory={bad}", "run", "p3-iommu-off", "--no-intervals")
    assert status == 2
    assert err.startswith("dmalab: error: argument --max-memory:"), err
    assert len(err.strip().splitlines()) == 1


def test_the_api_refuses_past_the_environment_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DMALAB_MAX_MEMORY", "1M")
    changes = {"workload": {"threads": 16, "queue_depth": 4096, "ios": 100000}}
    with pytest.raises(ScenarioError, match=r"needs about .* GiB of memory"):
        sim.run("p3-iommu-off", overrides=changes)
    monkeypatch.setenv("DMALAB_MAX_MEMORY", "lots")
    with pytest.raises(ScenarioError, match="DMALAB_MAX_MEMORY"):
        sim.run("p3-iommu-off", overrides=changes)
