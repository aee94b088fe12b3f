"""``bench copy`` and :mod:`dmalab.synccopy`: records, parts, errors and determinism."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dmalab import ScenarioError, sim, synccopy
from dmalab.cli import main


def copy_json(capsys: pytest.CaptureFixture[str], args: list[str]) -> list[dict]:
    assert main(["bench", "copy", "--format", "json", "--no-intervals", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_platforms_with_a_copy_engine_include_broadwell() -> None:
    names = synccopy.platforms()
    assert {"xeon-broadwell-2s", "xeon-8180-cbdma", "xeon-spr-dsa"} <= set(names)
    assert "grace-2s" not in names


def test_records_add_up_their_parts(capsys: pytest.CaptureFixture[str]) -> None:
    records = copy_json(capsys, ["--platform", "all", "--size", "64,4096", "--placement", "all"])
    assert len(records) == len(synccopy.platforms()) * 2 * len(synccopy.PLACEMENTS)
    for r in records:
        assert r["cpu_ns"] == pytest.approx(sum(ns for _, ns in r["cpu_parts"]))
        assert r["engine_ns"] == pytest.approx(sum(ns for _, ns in r["engine_parts"]))
        assert r["faster"] == ("engine" if r["engine_ns"] < r["cpu_ns"] else "cpu")


def test_the_memory_path_shows_in_broadwell_and_distance_costs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    records = copy_json(capsys, ["--size", "64,1048576"])
    by = {(r["size_bytes"], r["placement"]): r for r in records}
    for size in (64, 1048576):
        local, far = by[size, "local"], by[size, "max-remote"]
        assert far["cpu_ns"] > local["cpu_ns"] and far["engine_ns"] > local["engine_ns"]
        assert "first line" in dict(local["engine_parts"])
    # Set-up and doorbell dominate one line; the engine's rate wins a megabyte.
    assert by[64, "local"]["faster"] == "cpu"
    assert by[1048576, "local"]["faster"] == "engine"


def test_the_frame_has_one_column_per_part() -> None:
    df = synccopy.frame(synccopy.measure("xeon-8180-cbdma", [64, 128]))
    assert len(df) == 4
    assert {"cpu_set_up_ns", "engine_doorbell_ns", "engine_completion_ns"} <= set(df.columns)
    assert all(c.isidentifier() for c in df.columns)


def test_bad_input_names_the_field(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ScenarioError, match="size_bytes"):
        synccopy.measure("xeon-broadwell-2s", [0])
    with pytest.raises(ScenarioError, match="placement"):
        synccopy.measure("xeon-broadwell-2s", [64], ["nearby"])
    assert main(["bench", "copy", "--platform", "grace-2s"]) != 0
    assert "copy engine" in capsys.readouterr().err


def test_the_same_copies_give_identical_json(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--platform", "all", "--placement", "all"]
    assert copy_json(capsys, args) == copy_json(capsys, args)


def test_any_copy_engine_goes_in_a_hosts_engine_slot(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    engines = sim.devices("copy-engine")
    assert {"intel-cbdma-bdx", "intel-cbdma-skx", "intel-dsa-spr"} <= set(engines)
    rows = copy_json(capsys, ["--platform", "grace-2s", "--device", "all", "--size", "4096"])
    assert {r["platform"] for r in rows} == {f"grace-2s+{e}" for e in engines}
    # A host's own engine named gives what the host alone gives.
    own = copy_json(capsys, ["--platform", "xeon-spr-dsa", "--size", "64,65536"])
    named = copy_json(
        capsys, ["--platform", "xeon-spr-dsa", "--device", "intel-dsa-spr", "--size", "64,65536"]
    )
    assert [r["engine_ns"] for r in own] == [r["engine_ns"] for r in named]
    # A faster engine in an older host: the DSA's copy of 64 KiB beats Broadwell's CBDMA
    # channel only where its rate does; the core's side stays the host's.
    dsa = copy_json(capsys, ["--device", "intel-dsa-spr", "--size", "65536"])
    cb = copy_json(capsys, ["--size", "65536"])
    assert [r["cpu_ns"] for r in dsa] == [r["cpu_ns"] for r in cb]
    # A PCIe device is no copy engine, and a copy engine no PCIe device: each has its slot.
    with pytest.raises(SystemExit):
        main(["bench", "copy", "--device", "intel-xl710", "--no-intervals"])
    assert "intel-xl710 is a pcie device" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["bench", "dma", "--device", "intel-dsa-spr", "--no-intervals"])
    assert "takes a pcie device" in capsys.readouterr().err
    # An engine file of one's own.
    mine = tmp_path / "slow-dsa.toml"
    from dmalab import _native

    text = _native.device_text("intel-dsa-spr")
    mine.write_text(text.replace("channels = { value = 4,", "channels = { value = 1,"))
    twice = copy_json(capsys, ["--device", "intel-dsa-spr,intel-dsa-spr", "--size", "64"])
    assert len(twice) == 2  # each engine once, at each of the two default placements
    one = copy_json(capsys, ["--device", str(mine), "--size", "65536"])
    assert one[0]["platform"] == "xeon-broadwell-2s+intel-dsa-spr"


def test_the_datasheet_check_rates_a_copy_engine(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["platforms", "--check", "intel-dsa-spr", "--format", "json"]) == 0
    lines = json.loads(capsys.readouterr().out)
    assert lines and all(ln["what"] == "copy" for ln in lines)
    # The engine reaches its rated rate on every host but one whose DRAM is slower than the
    # rating (arm-morello's one DDR4 controller), where the host is named as the limit.
    for ln in lines:
        assert ln["verdict"] == "pass" or (ln["verdict"] == "host" and ln["limit"] == "DRAM"), ln
    assert sum(ln["verdict"] == "pass" for ln in lines) >= len(lines) - 1
    assert {ln["platform"].split("+")[0] for ln in lines} >= {"grace-2s", "xeon-spr-dsa"}
    assert main(["platforms"]) == 0
    out = capsys.readouterr().out
    assert "copy-engine slot" in out and "intel-dsa-spr" in out
