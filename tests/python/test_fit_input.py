"""``calibrate fit`` tells the truth: hostile measurement files are refused in one line naming
the file and line, a parameter named twice or bounded without being fitted is refused, a
parameter the measurements cannot determine is warned of and left as it was, and a refused fit
exits 1."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import pytest

from dmalab import DmalabError, MeasurementError, ScenarioError, fit
from dmalab.cli import main

VTD = "intel-vtd-2008-server"
ROOT = Path(__file__).resolve().parents[2]


def _one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str], needle: str) -> None:
    """``dmalab ARGV`` exits 2 with one line on stderr, ``dmalab: error: ...`` holding
    ``needle``, and no traceback."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("dmalab: error: ") and err.count("\n") == 1, err
    assert needle in err, err
    assert "Traceback" not in err


def _fit_argv(path: Path, *more: str) -> list[str]:
    return [
        "calibrate",
        "fit",
        "--params",
        "iommu.invalidate_ns",
        "--measurements",
        str(path),
        *more,
    ]


def test_a_csv_column_that_is_not_a_number_is_named_with_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    p = tmp_path / "m.csv"
    p.write_text(
        "model,direction,size_bytes,metric,measured\n"
        "bench-dma,read,64,bandwidth_gbit_s,10\n"
        "bench-dma,read,abc,bandwidth_gbit_s,10\n"
    )
    with pytest.raises(
        ScenarioError, match=r"m\.csv:3: column size_bytes is 'abc'; valid: an integer"
    ):
        fit.read_csv(p)
    argv = ["calibrate", "fit", "--platform", "xeon-broadwell-2s+intel-xl710"]
    argv += ["--params", "device_dma.setup_ns", "--measurements", str(p)]
    _one_line_error(capsys, argv, f"{p}:3: column size_bytes is 'abc'")
    # A benchmark column below its least is named as the file is read; above the model's top,
    # the model names the field and its range, and the row.
    p.write_text("model,threads,metric,measured\nbench-map,0,map_us,1\n")
    with pytest.raises(
        ScenarioError, match=r"m\.csv:2: column threads is '0'; valid: an integer >= 1"
    ):
        fit.read_csv(p)
    p.write_text("model,threads,metric,measured\nbench-map,999,map_us,1\n")
    with pytest.raises(ScenarioError, match=r"^m\.csv:2: threads is 999; valid: 1\.\.=256$"):
        fit.model_values("xeon-broadwell-2s", fit.read_csv(p))


def test_fio_json_with_a_value_that_is_not_a_number_is_named_with_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = {
        "global options": {"bs": "4k"},
        "jobs": [
            {"jobname": "a", "read": {"iops": 1000.0, "clat_ns": {"mean": 5000.0}}},
            {"jobname": "b", "read": {"iops": "abc"}},
        ],
    }
    p = tmp_path / "fio.json"
    text = json.dumps(data, indent=2)
    p.write_text(text)
    line = next(n for n, s in enumerate(text.splitlines(), 1) if '"abc"' in s)
    want = rf"fio\.json:{line}: jobs\[1\]\.read\.iops is 'abc'; valid: a finite number >= 0"
    with pytest.raises(ScenarioError, match=want):
        fit.read_fio(p, "p3-iommu-off")
    _one_line_error(
        capsys, _fit_argv(p, "--scenario", "p3-iommu-off"), f"{p}:{line}: jobs[1].read.iops"
    )
    data["jobs"][1] = {"jobname": "b", "job options": {"iodepth": "deep"}, "read": {"iops": 5}}
    text = json.dumps(data, indent=2)
    p.write_text(text)
    line = next(n for n, s in enumerate(text.splitlines(), 1) if '"deep"' in s)
    with pytest.raises(ScenarioError, match=rf"fio\.json:{line}: jobs\[1\]\.job options\.iodepth"):
        fit.read_fio(p, "p3-iommu-off")


@pytest.mark.parametrize("name", ["m.csv", "fio.json", "dmb.txt"])
def test_a_binary_file_is_refused_with_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    p = tmp_path / name
    p.write_bytes(b"metric,measured\nops_per_s,1\n\x7fELF\x02\x01\x01\x00\x00\xf0\xff\n")
    readers = {
        "m.csv": fit.read_csv,
        "fio.json": lambda q: fit.read_fio(q, "p3-iommu-off"),
        "dmb.txt": fit.read_dma_map_benchmark,
    }
    with pytest.raises(MeasurementError, match=rf"{re.escape(name)}:3: not a text file"):
        readers[name](p)
    assert issubclass(MeasurementError, ScenarioError) and issubclass(MeasurementError, DmalabError)
    more = ["--scenario", "p3-iommu-off"] if name.endswith(".json") else []
    _one_line_error(capsys, _fit_argv(p, *more), f"{p}:3: not a text file")


@pytest.mark.parametrize("name", ["m.csv", "fio.json", "dmb.txt"])
def test_an_empty_file_is_refused_with_file_and_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    p = tmp_path / name
    p.write_text("")
    more = ["--scenario", "p3-iommu-off"] if name.endswith(".json") else []
    _one_line_error(capsys, _fit_argv(p, *more), f"{p}:1: the file is empty")


def test_a_parameter_named_twice_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    m = tmp_path / "m.csv"
    m.write_text("scenario,workload.ios,metric,measured\np3-iommu-off,500,ops_per_s,140000\n")
    argv = ["calibrate", "fit", "--params", "io.complete_ns,iommu.invalidate_ns,io.complete_ns"]
    with pytest.raises(SystemExit) as e:
        main([*argv, "--measurements", str(m)])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "io.complete_ns is named twice" in err, err
    with pytest.raises(ScenarioError, match=r"io\.complete_ns is named twice"):
        fit.fit(VTD, ["io.complete_ns", "io.complete_ns"], fit.read_csv(m))


def test_bounds_on_a_parameter_not_fitted_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    m = tmp_path / "m.csv"
    m.write_text("scenario,workload.ios,metric,measured\np3-iommu-off,500,ops_per_s,140000\n")
    argv = ["calibrate", "fit", "--params", "io.complete_ns", "--measurements", str(m)]
    _one_line_error(
        capsys,
        [*argv, "--bounds", "io.submit_ns=1000:5000"],
        "--bounds io.submit_ns=1000:5000: io.submit_ns is not fitted (--params io.complete_ns)",
    )
    with pytest.raises(ScenarioError, match=r"io\.submit_ns is not fitted"):
        fit.fit(VTD, ["io.complete_ns"], fit.read_csv(m), bounds={"io.submit_ns": (1.0, 2.0)})


def test_a_parameter_the_measurements_cannot_determine_is_warned_of_and_left_as_it_was(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Without an IOMMU only the sum of the submit and completion paths shows: the fit puts
    # millions of nanoseconds of uncertainty on each, far more than either's whole range.
    m = tmp_path / "m.csv"
    m.write_text(
        "scenario,workload.ios,metric,measured\n"
        "p3-iommu-off,2000,ops_per_s,140000\n"
        "p3-iommu-off,2000,latency_mean_us,7\n"
    )
    out = tmp_path / "fitted.toml"
    argv = ["calibrate", "fit", "--params", "io.submit_ns,io.complete_ns", "--measurements"]
    assert main([*argv, str(m), "--out", str(out), "--format", "json"]) == 0
    captured = capsys.readouterr()
    params = {p["name"]: p for p in json.loads(captured.out)["parameters"]}
    for name in ("io.submit_ns", "io.complete_ns"):
        p = params[name]
        assert p["determined"] is False
        assert p["sigma"] is None or p["sigma"] > p["upper"] - p["lower"]
        assert f"warning: {name}: the measurements cannot determine it" in captured.err
    before = tomllib.loads((ROOT / "platforms" / f"{VTD}.toml").read_text())["io"]
    after = tomllib.loads(out.read_text())["io"]
    for key in ("submit_ns", "complete_ns"):
        assert after[key] == before[key], key
        assert after[key]["fit_range"] == before[key]["fit_range"]

    # A parameter the model does not read at all here (the invalidation, with no IOMMU) beside
    # one it does: the one is fitted with its uncertainty, the other warned of.
    argv = ["calibrate", "fit", "--params", "iommu.invalidate_ns,io.complete_ns"]
    assert main([*argv, "--measurements", str(m), "--format", "json"]) == 0
    captured = capsys.readouterr()
    params = {p["name"]: p for p in json.loads(captured.out)["parameters"]}
    assert params["iommu.invalidate_ns"]["determined"] is False
    assert params["io.complete_ns"]["determined"] is True
    assert params["io.complete_ns"]["sigma"] is not None
    assert "warning: iommu.invalidate_ns" in captured.err
    assert "warning: io.complete_ns" not in captured.err


def test_a_refused_fit_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    m = tmp_path / "m.csv"
    m.write_text("scenario,workload.ios,metric,measured\np3-iommu-off,500,ops_per_s,10\n")
    assert main(_fit_argv(m)) == 1
    assert "REFUSED" in capsys.readouterr().out
    assert main([*_fit_argv(m), "--format", "json"]) == 1
    assert json.loads(capsys.readouterr().out)["accepted"] is False
    # --force writes the platform, and the fit is still refused.
    out = tmp_path / "p.toml"
    assert main([*_fit_argv(m), "--out", str(out), "--force"]) == 1
    captured = capsys.readouterr()
    assert "REFUSED" in captured.out and out.exists()


def test_dma_map_benchmark_refuses_a_bad_header_or_average_with_file_and_line(
    tmp_path: Path,
) -> None:
    head = "dma mapping benchmark: threads:{} seconds:20 node:-1 dir:BIDIRECTIONAL granule: 1\n"
    good = head.format(4) + "average map latency(us):0.9 standard deviation:0.4\n"
    p = tmp_path / "dmb.txt"
    p.write_text(good + head.format(-4) + "average map latency(us):1.9 standard deviation:0.4\n")
    with pytest.raises(ScenarioError, match=r"dmb\.txt:3: threads is '-4'; valid: an integer >= 1"):
        fit.read_dma_map_benchmark(p)
    p.write_text(good + "average unmap latency(us):nan standard deviation:1.1\n")
    with pytest.raises(
        ScenarioError,
        match=r"dmb\.txt:3: average unmap latency is 'nan'; valid: a finite number of at least 0",
    ):
        fit.read_dma_map_benchmark(p)
    # An average before any run's header belongs to no run.
    p.write_text("average map latency(us):0.9 standard deviation:0.4\n" + good)
    with pytest.raises(ScenarioError, match=r"dmb\.txt:1: an average before any run's header"):
        fit.read_dma_map_benchmark(p)
