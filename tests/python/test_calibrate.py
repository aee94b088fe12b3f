"""dmalab calibrate copy: a real measurement, fitted, written as a platform section that loads."""

from __future__ import annotations

import pathlib
import re
import tomllib

import pytest

from dmalab import calibrate, sim
from dmalab.cli import main

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_quick_calibration_fits_every_regime() -> None:
    cal = calibrate.copy(quick=True)
    assert {(f["in_cache"], f["aligned"]) for f in cal["fits"]} == {
        (True, True),
        (True, False),
        (False, True),
        (False, False),
    }
    for f in cal["fits"]:
        assert f["bytes_per_us"] > 0 and f["setup_ns"] >= 0
    # A longer copy never takes less time than a much shorter one out of cache.
    cold = {p["len_bytes"]: p["ns_per_copy"] for p in cal["points"] if not p["in_cache"]}
    assert cold[65536] > cold[64]


def test_the_section_replaces_a_platforms_copy_costs(tmp_path: pathlib.Path) -> None:
    section = calibrate.platform_section(calibrate.copy(quick=True))
    assert "measured here" in section and calibrate.machine_description() in section
    text = (ROOT / "platforms" / "xeon-8180-cbdma.toml").read_text()
    start = text.index("[copy]")
    end = text.index("[dma_engine]")
    edited = text[:start] + section + "\n" + text[end:]
    tomllib.loads(edited)
    path = tmp_path / "this-machine.toml"
    path.write_text(edited)
    info = sim.platform_info(str(path))
    fields = {p["field"]: p for p in info["params"]}
    assert fields["copy.bytes_per_us"]["provenance"]["kind"] == "source"
    assert re.search(r"\d{4}-\d{2}-\d{2}", fields["copy.setup_ns"]["provenance"]["note"])


def test_cli_writes_the_section(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "copy.toml"
    assert main(["calibrate", "copy", "--quick", "--out", str(out), "--format", "json"]) == 0
    assert tomllib.loads(out.read_text())["copy"]["bytes_per_us"]["value"] > 0


def test_cli_writes_a_whole_platform_that_loads(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "this-machine.toml"
    argv = ["calibrate", "copy", "--quick", "--platform", "xeon-8180-cbdma", "--out", str(out)]
    assert main([*argv, "--format", "json"]) == 0
    info = sim.platform_info(str(out))
    fields = {p["field"]: p for p in info["params"]}
    assert "measured here" in fields["copy.setup_ns"]["provenance"]["note"]
    assert info["name"] == "xeon-8180-cbdma"
    assert main([*argv[:3], "--platform", "intel-vtd-2008-server", "--out", str(out)]) == 2


def test_cli_refuses_a_bad_out_or_platform_before_measuring(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def never(**kwargs: object) -> None:
        raise AssertionError("measured before refusing")

    monkeypatch.setattr(calibrate, "copy", never)
    for argv, says in (
        (["--out", str(tmp_path / "no" / "x.toml")], "does not exist"),
        (["--out", str(tmp_path / "x.txt")], "must end in .toml"),
        (["--platform", "intel-vtd-2008-server"], "no [copy] section"),
        (["--platform", str(tmp_path / "missing.toml")], "missing.toml"),
    ):
        assert main(["calibrate", "copy", "--quick", *argv]) == 2
        err = capsys.readouterr().err
        assert err.startswith("dmalab: error: ") and says in err and err.count("\n") == 1


def test_measured_values_state_their_precision() -> None:
    cal = {
        "machine": "m",
        "date": "2026-11-28",
        "fits": [
            {
                "in_cache": False,
                "aligned": True,
                "setup_ns": 40.4,
                "bytes_per_us": 9000.0,
                "max_relative_error": 0.12,
            },
        ],
    }
    copy = tomllib.loads(calibrate.platform_section(cal))["copy"]
    assert copy["bytes_per_us"]["range"] == [7920, 10080]
    assert copy["setup_ns"]["range"] == [35, 45]
    assert "12%" in copy["setup_ns"]["source"]
    cal["fits"][0]["max_relative_error"] = 0.0
    copy = tomllib.loads(calibrate.platform_section(cal))["copy"]
    assert copy["bytes_per_us"]["range"] == [8550, 9450]
    assert all("range" in v for v in copy.values())
