"""``bench dma`` and :mod:`dmalab.devdma`: records, errors, sweeps and determinism."""

from __future__ import annotations

import itertools
import json
import pathlib

import pytest

from dmalab import PlatformError, ScenarioError, _native, devdma, sim
from dmalab.cli import main

NEW_PLATFORMS = ("xeon-broadwell-2s", "epyc-rome-2s", "grace-2s")
KEYS = {
    "platform",
    "direction",
    "size_bytes",
    "offset_bytes",
    "window_bytes",
    "access",
    "memory",
    "cache",
    "bandwidth_gbit_s",
    "latency_ns",
    "transactions_per_s",
    "limit",
}


def bench_json(capsys: pytest.CaptureFixture[str], args: list[str]) -> list[dict]:
    assert main(["bench", "dma", "--format", "json", "--no-progress", "--no-intervals", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_the_new_platforms_describe_a_device_dma_path() -> None:
    assert set(NEW_PLATFORMS) <= set(devdma.platforms())


def test_json_records_carry_every_field_and_a_named_limit(
    capsys: pytest.CaptureFixture[str],
) -> None:
    records = bench_json(
        capsys, ["--platform", "all", "--direction", "all", "--size", "64,1500", "--memory", "all"]
    )
    # A one-socket host (arm-morello) runs local memory only.
    memories = sum(devdma.sockets(p) for p in devdma.platforms())
    assert len(records) == memories * 2 * 2
    parts = {"device engine", "link", "link (requests)", "tags", "root complex", "memory"}
    parts |= {"socket link", "engine contexts"}
    for r in records:
        assert KEYS <= r.keys()
        assert r["limit"] in parts
        assert r["bandwidth_gbit_s"] > 0 and r["latency_ns"] > 0


def test_sweeps_cover_sizes_and_offsets(capsys: pytest.CaptureFixture[str]) -> None:
    offsets = bench_json(capsys, ["--sweep", "offset", "--size", "64"])
    assert [r["offset_bytes"] for r in offsets] == list(range(64))
    # Offset 0 touches one line, every other offset two.
    assert [r["lines_per_transfer"] for r in offsets] == [1.0] + [2.0] * 63
    sizes = bench_json(capsys, ["--sweep", "size"])
    assert [r["size_bytes"] for r in sizes] == list(devdma.SIZES)
    assert {63, 64, 65, 255, 256, 257, 4095, 4096, 4097} <= set(devdma.SIZES)


def test_remote_and_cold_cost_more_than_local_and_warm(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = ["--size", "4096", "--memory", "all", "--cache", "all"]
    rows = {(r["memory"], r["cache"]): r for r in bench_json(capsys, args)}
    assert rows["remote", "warm"]["latency_ns"] > rows["local", "warm"]["latency_ns"]
    assert rows["local", "cold"]["latency_ns"] > rows["local", "warm"]["latency_ns"]
    # A sequential sweep over a window larger than the LLC finds nothing warm (LRU).
    big = bench_json(capsys, [*args, "--window", str(1 << 30)])
    rows = {(r["memory"], r["cache"]): r for r in big}
    assert rows["local", "cold"]["latency_ns"] == rows["local", "warm"]["latency_ns"]


def test_the_same_points_give_identical_records(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--size", "100,3000", "--access", "random", "--window", str(1 << 28)]
    assert bench_json(capsys, args) == bench_json(capsys, args)


def test_frame_flattens_utilisation_and_latency_parts() -> None:
    pts = devdma.points(sizes=[64, 65], direction=["read", "write"])
    df = devdma.frame(devdma.measure("grace-2s", pts))
    assert len(df) == 4
    assert "busy_link" in df.columns and "latency_set_up_ns" in df.columns
    assert "busy_engine_contexts" in df.columns and "latency_device_ns" in df.columns
    assert all(c.isidentifier() for c in df.columns)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--size", "0"], "--size"),
        (["--offset", "4096"], "--offset"),
        (["--direction", "sideways"], "--direction"),
        (["--memory", "far"], "--memory"),
    ],
)
def test_bad_options_are_one_line_errors(
    capsys: pytest.CaptureFixture[str], args: list[str], needle: str
) -> None:
    with pytest.raises(SystemExit) as e:
        main(["bench", "dma", *args])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("dmalab: error: ") and err.count("\n") == 1 and needle in err


def test_a_platform_without_the_path_names_what_it_lacks(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["bench", "dma", "--platform", "ibm-p660-m2plus"]) == 2
    assert "PCIe link" in capsys.readouterr().err
    assert main(["bench", "dma", "--platform", "pcie-gen3-x8-server"]) == 2
    assert "[memory]" in capsys.readouterr().err


def test_bad_points_from_python_name_the_field() -> None:
    good = devdma.points(sizes=[64])[0]
    for field, value in (("cache", "tepid"), ("size_bytes", 0), ("window_bytes", 1)):
        with pytest.raises(ScenarioError, match=field):
            devdma.measure("grace-2s", [{**good, field: value}])
    with pytest.raises(ScenarioError, match="bogus"):
        devdma.measure("grace-2s", [{**good, "bogus": 1}])


def test_the_iommu_window_sweep_shows_the_iotlb_reach(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--platform", "grace-2s", "--iommu", "on", "--access", "random", "--sweep", "window"]
    records = bench_json(capsys, [*args, "--page-bytes", "4096,2097152"])
    assert len(records) == len(devdma.WINDOWS) * 2
    by = {(r["window_bytes"], r["page_bytes"]): r for r in records}
    small = [by[w, 4096]["iotlb_miss_rate"] for w in devdma.WINDOWS]
    # No misses within the reach of 4 KiB pages, then more the larger the window.
    assert small[0] == 0.0 and small[-1] > 0.9
    assert all(a <= b for a, b in itertools.pairwise(small))
    # 2 MiB pages reach every window of the sweep.
    assert all(by[w, 2097152]["iotlb_miss_rate"] == 0.0 for w in devdma.WINDOWS)
    biggest = by[devdma.WINDOWS[-1], 4096]
    assert dict(biggest["latency_parts"])["translation"] > 0
    assert biggest["latency_ns"] > by[devdma.WINDOWS[-1], 2097152]["latency_ns"]
    assert "IOMMU walkers" in dict(biggest["utilisation"])


def test_records_with_the_iommu_off_have_no_miss_rate(capsys: pytest.CaptureFixture[str]) -> None:
    (r,) = bench_json(capsys, ["--platform", "grace-2s"])
    assert (r["iommu"], r["page_bytes"], r["iotlb_miss_rate"]) == ("off", 4096, None)
    # The table shows the page and miss columns only when a point translates.
    assert main(["bench", "dma", "--platform", "grace-2s", "--iommu", "all", "--no-intervals"]) == 0
    off, on = capsys.readouterr().out.splitlines()[1:]
    # Sequential 64-byte reads over 1 MiB: one new 4 KiB page every 64 reads, 256 pages
    # against an IOTLB of 128.
    assert off.split()[6:8] == ["-", "-"] and on.split()[6:8] == ["4K", "0.02"]


def test_iommu_errors_name_what_is_missing(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["bench", "dma", "--page-bytes", "8192"])
    assert "--page-bytes" in capsys.readouterr().err
    assert main(["bench", "dma", "--platform", "xeon-spr-dsa", "--iommu", "on"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert main(["bench", "dma", "--sweep", "window", "--window", "4096"]) == 2
    assert "not both" in capsys.readouterr().err
    good = devdma.points(sizes=[64], iommu=["on"])[0]
    with pytest.raises(ScenarioError, match="page_bytes"):
        devdma.measure("grace-2s", [{**good, "page_bytes": 12345}])


def test_any_device_goes_in_a_hosts_slot(capsys: pytest.CaptureFixture[str]) -> None:
    rows = bench_json(
        capsys, ["--platform", "xeon-broadwell-2s", "--device", "all", "--size", "64,4096"]
    )
    names = {r["platform"] for r in rows}
    assert names == {f"xeon-broadwell-2s+{d}" for d in sim.devices("pcie")}
    assert len(sim.devices("pcie")) >= 4
    # The host's own device gives what the host alone gives.
    own = bench_json(capsys, ["--size", "64,4096"])
    named = [r for r in rows if r["platform"] == "xeon-broadwell-2s+intel-xl710"]
    keep = ("bandwidth_gbit_s", "latency_ns", "limit")
    assert [[r[k] for k in keep] for r in own] == [[r[k] for k in keep] for r in named]


def test_a_device_needs_a_pcie_host(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(PlatformError, match="PCIe root port"):
        sim.platform_info("ibm-p660-m2plus+intel-xl710")
    with pytest.raises(PlatformError, match="built-in devices"):
        sim.platform_info("xeon-broadwell-2s+no-such-card")


def test_the_datasheet_check_passes_the_shipped_devices_and_fails_a_serial_engine(
    capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path
) -> None:
    assert main(["platforms", "--check", "--format", "json"]) == 0
    lines = json.loads(capsys.readouterr().out)
    assert {ln["verdict"] for ln in lines} <= {"pass", "host", "unused"}
    assert any(ln["verdict"] == "pass" for ln in lines)
    # The XL710 with one context: its set-up charged one frame after another.
    text = _native.device_text("intel-xl710")
    serial = tmp_path / "serial-xl710.toml"
    one = text.replace("contexts = { value = 48,", "contexts = { value = 1,")
    serial.write_text(one.replace("range = [16, 128] }", "range = [1, 128] }"))
    assert main(["platforms", "--check", str(serial)]) == 1
    out = capsys.readouterr()
    assert "FAIL" in out.out and "engine contexts" in out.out


def test_run_takes_a_device_and_a_drive_brings_its_own_costs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    base = ["run", "grace-nvme8-lazy", "--set", "workload.ios=5000", "--no-progress"]
    base += ["--no-intervals", "--format", "json"]
    assert main(base) == 0
    own = json.loads(capsys.readouterr().out)
    assert main([*base, "--device", "samsung-pm1743"]) == 0
    named = json.loads(capsys.readouterr().out)
    # The host's default drive, named or not: the same run.
    assert named["platform"] == "grace-2s+samsung-pm1743"
    assert named["ops_per_s"] == own["ops_per_s"]
    # A NIC in the slot is no drive: the block workload names what is missing.
    assert main([*base, "--device", "connectx-6dx"]) == 2
    assert "I/O path" in capsys.readouterr().err
