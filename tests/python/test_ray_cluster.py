"""The distributed path against a real Ray cluster: a head started by ``ray start`` with its
node address on loopback and token authentication on, a sweep through ``--ray
127.0.0.1:PORT``; and an address where nothing listens fails fast with one line."""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[2]
RAY = Path(sys.executable).parent / "ray"
SPEC = """scenario = "p3-iommu-off"
[grid]
"workload.ios" = [1000, 2000]
"workload.seed" = [1, 2, 3]
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def head() -> Iterator[tuple[str, dict[str, str]]]:
    """A Ray head on loopback with token authentication: its address and the environment a
    client needs (the token)."""
    if not RAY.exists():
        pytest.skip("ray is not installed")
    env = dict(
        os.environ,
        RAY_AUTH_MODE="token",
        RAY_AUTH_TOKEN=secrets.token_hex(16),
        RAY_USAGE_STATS_ENABLED="0",
    )
    # Ray's socket paths must stay short: a temporary folder right under /tmp.
    temp = tempfile.mkdtemp(prefix="dmalab-ray-", dir="/tmp")
    port = _free_port()
    start = [str(RAY), "start", "--head", "--node-ip-address=127.0.0.1", f"--port={port}"]
    start += ["--num-cpus=2", "--include-dashboard=false", "--disable-usage-stats"]
    start += [f"--temp-dir={temp}"]
    subprocess.run(start, env=env, check=True, capture_output=True, timeout=120)
    try:
        yield f"127.0.0.1:{port}", env
    finally:
        subprocess.run([str(RAY), "stop", "--force"], env=env, capture_output=True, timeout=60)
        shutil.rmtree(temp, ignore_errors=True)


def test_a_sweep_through_a_real_head_on_loopback_returns_every_row_once(
    head: tuple[str, dict[str, str]], tmp_path: Path
) -> None:
    address, env = head
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC)
    out = tmp_path / "r.csv"
    argv = [sys.executable, "-m", "dmalab", "sweep", str(spec), "--out", str(out)]
    p = subprocess.run(
        [*argv, "--ray", address], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
    )
    assert p.returncode == 0, p.stderr
    rows = pd.read_csv(out)
    cells = rows[["workload_ios", "workload_seed"]].apply(tuple, axis=1)
    assert sorted(cells) == [(i, s) for i in (1000, 2000) for s in (1, 2, 3)]
    # A client without the cluster's token is refused with one line, not a hang.
    wrong = dict(env, RAY_AUTH_TOKEN=secrets.token_hex(16))
    p = subprocess.run(
        [*argv[:-1], str(tmp_path / "w.csv"), "--ray", address],
        cwd=ROOT, env=wrong, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert p.returncode == 2
    assert p.stderr.strip().splitlines()[-1].startswith(f"dmalab: error: --ray {address}:")


@pytest.mark.parametrize("address", ["127.0.0.1:1", "127.0.0.1:99999", "nowhere"])
def test_an_address_where_nothing_answers_fails_within_10_s(address: str, tmp_path: Path) -> None:
    spec = tmp_path / "s.toml"
    spec.write_text(SPEC)
    started = time.monotonic()
    p = subprocess.run(
        [sys.executable, "-m", "dmalab", "sweep", str(spec), "--out", str(tmp_path / "r.csv"),
         "--ray", address],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert time.monotonic() - started < 10
    assert p.returncode == 2
    assert p.stderr.startswith(f"dmalab: error: --ray {address}:"), p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert not (tmp_path / "r.csv").exists()
