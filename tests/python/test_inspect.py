"""`dmalab inspect`: recorded trees of five machine kinds read back as they were written, and
written as platforms that load with every value's provenance; this host inspects cleanly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import hosts
from dmalab import ScenarioError, inspect, sim
from dmalab.cli import main

GENERATION = {2.5: 1, 5.0: 2, 8.0: 3, 16.0: 4, 32.0: 5}


@pytest.mark.parametrize("kind", hosts.KINDS)
def test_a_recorded_host_reads_back_as_written(kind: str, tmp_path: Path) -> None:
    truth = hosts.build(kind, tmp_path)
    host = inspect.inspect(tmp_path)
    assert host.iommu_driver == truth["iommu_driver"]
    assert host.iommu_units == truth["iommu_units"]
    assert host.cmdline == truth["cmdline"]
    assert host.direct_window_offset == truth["direct_window_offset"]
    assert host.unreadable == []
    assert {d.bdf for d in host.devices} == set(truth["devices"])
    for d in host.devices:
        want = truth["devices"][d.bdf]
        got = (d.vendor, d.device, d.class_code, d.driver, d.numa_node, d.iommu_group)
        assert got == (
            want["vendor"],
            want["device"],
            want["class"],
            want["driver"],
            want["numa_node"],
            want["iommu_group"],
        )
        assert d.group_type == want["group_type"]
        if want["pcie"] is None:
            assert d.pcie is None
        else:
            assert d.pcie is not None
            for key, value in want["pcie"].items():
                assert getattr(d.pcie, key) == value, (d.bdf, key)


@pytest.mark.parametrize("kind", hosts.KINDS)
def test_the_platform_written_loads_with_every_value_sourced(kind: str, tmp_path: Path) -> None:
    truth = hosts.build(kind, tmp_path / "root")
    out = tmp_path / "p.toml"
    assert main(["inspect", "--root", str(tmp_path / "root"), "--out", str(out)]) == 0
    info = sim.platform_info(str(out))
    kinds = {p["provenance"]["kind"] for p in info["params"]}
    assert kinds <= {"inspected", "assumed"}
    assert all(p["provenance"]["note"] for p in info["params"])
    params = {p["field"]: p for p in info["params"]}
    pcie = [(b, d["pcie"]) for b, d in sorted(truth["devices"].items()) if d["pcie"]]
    if not pcie:
        assert kinds == {"assumed"}
        return
    # The device described is the first PCIe network or storage function.
    bdf, link = pcie[0]
    for field, value in (
        ("generation", GENERATION[link["speed_gts"]]),
        ("lanes", link["width"]),
        ("max_payload_bytes", link["mps"]),
        ("max_read_request_bytes", link["mrrs"]),
    ):
        p = params[f"bus.pcie.{field}"]
        assert p["value"] == str(value), field
        assert p["provenance"]["kind"] == "inspected" and bdf in p["provenance"]["note"]
    text = out.read_text()
    if truth["iommu_driver"]:
        assert f"# IOMMU: {truth['iommu_driver']}" in text


def test_json_summary_and_named_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    hosts.build("power-pseries", tmp_path)
    assert main(["inspect", "--root", str(tmp_path), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["direct_window_offset"] == 0x800000000000000
    assert "Using 64-bit direct DMA" in data["direct_window_from"]
    assert data["provenance"]["dmalab_version"]
    assert main(["inspect", "--root", str(tmp_path / "none")]) == 2
    assert "not a directory" in capsys.readouterr().err
    assert main(["inspect", "--root", str(tmp_path), "--out", str(tmp_path / "p.txt")]) == 2
    assert "must end in .toml" in capsys.readouterr().err
    with pytest.raises(ScenarioError, match=r"no such PCI function; this host has: 0000:01:00\.0"):
        inspect.platform_toml(inspect.inspect(tmp_path), "x", "9999:00:00.0")


def test_this_host_inspects_and_says_what_it_could_not_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "here.toml"
    assert main(["inspect", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "IOMMU:" in text and "PCI functions" in text
    info = sim.platform_info(str(out))
    assert {p["provenance"]["kind"] for p in info["params"]} <= {"inspected", "assumed"}


@pytest.mark.parametrize("kind", hosts.KINDS)
def test_each_pcie_function_gets_a_device_file_that_any_host_takes(
    kind: str, tmp_path: Path
) -> None:
    truth = hosts.build(kind, tmp_path / "root")
    out = tmp_path / "p.toml"
    assert main(["inspect", "--root", str(tmp_path / "root"), "--out", str(out)]) == 0
    pcie = sorted(b for b, d in truth["devices"].items() if d["pcie"])
    files = sorted(tmp_path.glob("inspected-host-*.toml"))
    assert len(files) == len(pcie)
    for file, bdf in zip(files, pcie, strict=True):
        assert sim.device_info(str(file))["description"].startswith(
            f"Inspected PCIe function {bdf}"
        )
        # The device goes into a built-in host's slot; its link values are inspected.
        info = sim.platform_info(f"xeon-broadwell-2s+{file}")
        params = {p["field"]: p for p in info["params"]}
        tags = params["bus.pcie.max_outstanding_read_requests"]
        assert tags["provenance"]["kind"] == "inspected" and bdf in tags["provenance"]["note"]
        assert params["device_dma.contexts"]["provenance"]["kind"] == "assumed"
    if pcie:
        # The host file names its described device, beside it, as its default.
        assert "default_device = " in out.read_text()
        assert "device_dma.setup_ns" in {p["field"] for p in sim.platform_info(str(out))["params"]}
