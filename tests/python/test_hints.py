"""DMA hints on the ZX1 platform through ``dmalab trace``: each hint acts, errors name the field."""

from __future__ import annotations

import json

import pytest

from dmalab import PlatformError, ScenarioError, sim
from dmalab.cli import main
from dmalab.types import AttributeGain, AttributeReport

ZX1 = "hp-rx2600-zx1"


def span_us(**kw: object) -> float:
    t = sim.trace(ZX1, "read", 0x1000, 1066, **kw)  # type: ignore[arg-type]
    return t["entries"][-1]["end_ps"] / 1e6


def test_the_firmware_defaults_stream_a_frame_in_one_burst() -> None:
    t = sim.trace(ZX1, "read", 0x1000, 1066)
    assert [(e["command"], e["bytes"]) for e in t["entries"]] == [("MRM", 1066)]


def test_each_hint_acts_where_the_mechanism_says() -> None:
    base = span_us()
    assert span_us(hints={"prefetch_lines": 0}) > 2 * base
    assert span_us(hints={"block_bytes": 512}) > base
    # Prefetch on MR and MRL alone changes nothing for a burst read.
    assert span_us(hints={"prefetch_lines": 0, "commands": ["MR", "MRL"]}) == base
    assert span_us(pio_writes_ns=[600]) > base
    assert span_us(pio_writes_ns=[600], hints={"relaxed_ordering": True}) == base
    assert span_us(hints={"read_current": False}) > base
    # The consistent mapping keeps the firmware's hints when only streaming ones change.
    assert span_us(mapping="consistent", hints=None) == base


def test_the_cli_takes_hints_and_pio_writes(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["trace", "--platform", ZX1, "--direction", "read", "--address", "0x1000"]
    args += ["--length", "1066", "--format", "json", "--hint", "prefetch_lines=0"]
    assert main([*args, "--hint", "commands=mrm", "--pio-write-ns", "600"]) == 0
    entries = json.loads(capsys.readouterr().out)["entries"]
    assert len(entries) == 9 and sum(e["bytes"] for e in entries) == 1066


def test_bad_hints_name_the_field() -> None:
    with pytest.raises(ScenarioError, match=r"hints\.prefetch_lines"):
        sim.trace(ZX1, "read", 0, 64, hints={"prefetch_lines": 4})
    with pytest.raises(ScenarioError, match=r"hints\.commands"):
        sim.trace(ZX1, "read", 0, 64, hints={"commands": ["MRX"]})
    with pytest.raises(ScenarioError, match="hints"):
        sim.trace(ZX1, "read", 0, 64, hints={"prefetch": 1})
    with pytest.raises(ScenarioError, match="pio_writes_ns"):
        sim.trace(ZX1, "read", 0, 64, pio_writes_ns=[5, 1])
    with pytest.raises(ScenarioError, match="mapping"):
        sim.trace(ZX1, "read", 0, 64, mapping="coherent")
    with pytest.raises(PlatformError, match=r"\[bus.pci.lba\]"):
        sim.trace("ibm-p660-m2plus", "read", 0, 64, hints={"prefetch_lines": 0})


def test_nic_hints_lists_every_single_change_with_its_safety() -> None:
    report = sim.nic_hints()
    fw = report["firmware"]
    # The BCM5701 reads frames ahead into its 96 KiB buffer, so its reads overlap its own
    # work, and the sending host's CPU is the slowest stage.
    assert fw["limit"] == "sender"
    assert fw["card_frames"] == 98304 // fw["frame_bytes"]
    assert fw["nic_ns"] == fw["descriptor_ns"] + fw["frame_read_ns"]
    assert fw["frame_bytes"] == 1024 + 28 + 14
    # 2 mappings x 3 commands x (3 other depths, 3 other block sizes, ordering, read current).
    assert len(report["gains"]) == 48
    by = {(g["mapping"], g["command"], g["hint"]): g for g in report["gains"]}
    ro = by[("streaming", "MRM", "relaxed_ordering=on")]
    assert ro["safety"] == "driver-decides"
    assert by[("consistent", "MR", "read_current=off")]["safety"] == "unsafe"
    # No change moves the stream: prefetch depth 0 slows the card's reads, which stay hidden.
    assert all(g["gain_pct"] == 0.0 and g["limit"] == "sender" for g in report["gains"])
    tcp = sim.nic_hints(protocol="tcp")
    assert tcp["firmware"]["payload_bytes"] == 1448
    assert tcp["firmware"]["limit"] == "sender"
    assert all(g["gain_pct"] <= 0.0 for g in tcp["gains"])


def test_nic_hints_errors_name_the_field() -> None:
    with pytest.raises(ScenarioError, match=r"message_bytes is 1600; valid: 1\.\.=1472"):
        sim.nic_hints(message_bytes=1600)
    with pytest.raises(ScenarioError, match=r"stream\.protocol"):
        sim.nic_hints(protocol="sctp")
    with pytest.raises(PlatformError, match="hinted host bridge"):
        sim.nic_hints("xeon-broadwell-2s")
    with pytest.raises(ScenarioError, match="message_bytes is 1180591620717411303424"):
        sim.nic_hints(message_bytes=2**70)


def test_the_hints_command_prints_a_table_and_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["hints"]) == 0
    out = capsys.readouterr().out
    assert "relaxed_ordering=on" in out and "driver-decides" in out
    # Every change that is not plainly safe is listed, however small its effect.
    rows = [line.split() for line in out.splitlines()]
    assert sum(r[-1:] == ["unsafe"] and r[2] == "read_current=off" for r in rows) == 3
    assert main(["hints", "--all", "--format", "json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["gains"]) == 48
    assert main(["hints", "--mtu-bytes", "100"]) == 2
    assert "mtu_bytes is 100; valid: 576..=9000" in capsys.readouterr().err


BROADWELL = "xeon-broadwell-2s"
SERIALIZED = {"root_complex": "serialized"}


def gain(report: AttributeReport, tlps: str, attribute: str) -> AttributeGain:
    return next(g for g in report["gains"] if g["tlps"] == tlps and g["attribute"] == attribute)


def test_pcie_attributes_on_a_pipelined_root_complex_buy_no_rate() -> None:
    r = sim.pcie_hints(BROADWELL, packets=1024)
    assert r["ordered_writes"] == "pipelined"
    assert r["baseline"]["limit"] == "link"
    assert [(g["tlps"], g["attribute"], g["safety"]) for g in r["gains"]] == [
        ("data", "relaxed-ordering", "driver-decides"),
        ("data", "no-snoop", "unsafe"),
        ("completion", "relaxed-ordering", "unsafe"),
        ("completion", "no-snoop", "unsafe"),
        ("all", "id-based-ordering", "safe"),
    ]
    assert all(abs(g["gain_pct"]) < 0.5 for g in r["gains"])
    # Skipping the snoop of the completion line the driver holds shortens the completion.
    change = gain(r, "completion", "no-snoop")["latency_change_pct"]
    assert change is not None and change < -5
    assert sim.pcie_hints(BROADWELL, packets=1024) == r


def test_relaxed_data_and_ido_free_a_serialized_root_complex() -> None:
    r = sim.pcie_hints(BROADWELL, packets=1024, functions=4, choices=SERIALIZED)
    assert r["baseline"]["limit"] == "root complex"
    assert gain(r, "data", "relaxed-ordering")["gain_pct"] > 100
    ido = gain(r, "all", "id-based-ordering")
    assert ido["gain_pct"] > 100
    # With no buffer line held by a core, No Snoop on data is the driver's call, not unsafe.
    clean = sim.pcie_hints(BROADWELL, packets=1024, cpu_owned_lines=0)
    assert gain(clean, "data", "no-snoop")["safety"] == "driver-decides"


def test_pcie_hints_errors_name_the_field() -> None:
    with pytest.raises(ScenarioError, match=r"packet_bytes is 10000; valid: 64\.\.=9216"):
        sim.pcie_hints(BROADWELL, packet_bytes=10000)
    with pytest.raises(ScenarioError, match=r"cpu_owned_lines is 30; valid: 0\.\.=24"):
        sim.pcie_hints(BROADWELL, cpu_owned_lines=30)
    with pytest.raises(PlatformError, match=r"\[pcie_ordering\]"):
        sim.pcie_hints("epyc-rome-2s")


def test_the_hints_command_on_a_pcie_platform(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["hints", "--platform", BROADWELL, "--packets", "1024"]
    assert main([*args, "--choice", "root_complex=serialized"]) == 0
    out = capsys.readouterr().out
    assert "serialized root complex" in out and "id-based-ordering" in out
    assert main([*args, "--format", "json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["gains"]) == 5
    assert main([*args, "--functions", "0"]) == 2
    assert "functions is 0; valid: 1..=256" in capsys.readouterr().err


def test_on_the_pci_x_slot_only_ordering_acts(capsys: pytest.CaptureFixture[str]) -> None:
    r = sim.nic_hints(choices={"slot": "pci-x"})
    assert r["bus"].startswith("PCI-X 64-bit 100 MHz")
    assert [(g["mapping"], g["command"], g["knob"]) for g in r["gains"]] == [
        ("consistent", "MRM", "relaxed_ordering"),
        ("streaming", "MRM", "relaxed_ordering"),
    ]
    assert max(abs(g["gain_pct"]) for g in r["gains"]) < 0.5
    wire = sim.nic_hints(
        protocol="tcp", message_bytes=4096, mtu_bytes=9000, choices={"slot": "pci-x"}
    )
    assert wire["firmware"]["limit"] == "wire"
    assert main(["hints", "--choice", "slot=pci-x"]) == 0
    assert "only the ordering hint" in capsys.readouterr().out


def test_the_scsi_write_stream_lists_every_change_and_names_its_limit(
    capsys: pytest.CaptureFixture[str],
) -> None:
    r = sim.scsi_hints()
    fw = r["firmware"]
    assert fw["limit"] == "disks" and fw["mb_s"] == fw["array_mb_s"]
    # The SCRIPTS' control reads are short (Memory Read); the data goes in MRM bursts.
    assert (fw["entry_read"], fw["command_read"], fw["data_read"]) == ("MR", "MR", "MRM")
    assert len(r["gains"]) == 48
    assert all(g["limit"] == "disks" for g in r["gains"])
    assert main(["hints", "--workload", "scsi"]) == 0
    out = capsys.readouterr().out
    assert "(limit: disks)" in out and "read_current=off" in out
    assert main(["hints", "--workload", "scsi", "--all", "--format", "json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["gains"]) == 48


def test_the_scsi_workload_refuses_what_does_not_apply(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["hints", "--workload", "scsi", "--protocol", "tcp"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dmalab: error: --protocol: applies to the NIC's send stream"), err
    assert main(["hints", "--platform", BROADWELL, "--workload", "scsi"]) == 2
    assert "--workload: applies to a hinted PCI bridge" in capsys.readouterr().err
    # The PCI-X slot has no conventional PCI bus for the controller.
    assert main(["hints", "--workload", "scsi", "--choice", "slot=pci-x"]) == 2
    err = capsys.readouterr().err
    assert "conventional PCI bus" in err and len(err.strip().splitlines()) == 1, err
