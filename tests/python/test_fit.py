"""dmalab calibrate fit: known parameters recovered from dmalab's own measurements with noise,
within their reported uncertainty; a fit that cannot match is refused; the importers read fio
and dma_map_benchmark output; a poor memcpy fit is flagged."""

from __future__ import annotations

import csv
import json
import math
import random
import tomllib
from pathlib import Path
from typing import Any

import pytest

from dmalab import ScenarioError, calibrate, fit, sim
from dmalab.cli import main

TRUE = {"io.complete_ns": 2477, "iommu.invalidate_ns": 280}
BOUNDS = {"io.complete_ns": (500.0, 8000.0), "iommu.invalidate_ns": (50.0, 2000.0)}


def _measure(path: Path, scale: float = 1.0) -> Path:
    """Synthetic measurements made by dmalab itself on the built-in platform (whose values are
    TRUE), with 0.5% Gaussian noise from a fixed seed."""
    rng = random.Random(3)
    rows = []
    for scenario in ("p3-iommu-off", "p3-bitmap-strict"):
        for qd in (1, 2, 4):
            for size in (512, 1024, 4096):
                keys = {"ios": 2000, "queue_depth": qd, "io_bytes": size}
                r: Any = sim.run(scenario, overrides={"workload": keys})
                for metric in ("ops_per_s", "latency_mean_us"):
                    noise = 1 + rng.gauss(0, 0.005)
                    rows.append(
                        {
                            "scenario": scenario,
                            "workload.ios": 2000,
                            "workload.queue_depth": qd,
                            "workload.io_bytes": size,
                            "metric": metric,
                            "measured": r[metric] * noise * scale,
                        }
                    )
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return path


def test_known_parameters_are_recovered_within_their_uncertainty(tmp_path: Path) -> None:
    ms = fit.read_csv(_measure(tmp_path / "m.csv"))
    start = {"io.complete_ns": 1500.0, "iommu.invalidate_ns": 700.0}
    r = fit.fit("intel-vtd-2008-server", list(TRUE), ms, start=start, bounds=BOUNDS)
    assert r.accepted and r.rms_error < 0.01
    for p in r.parameters:
        assert p.sigma is not None and 0 < p.sigma < 0.1 * TRUE[p.name]
        assert abs(p.value - TRUE[p.name]) <= 2 * p.sigma, (p.name, p.value, p.sigma)
    # The fitted platform loads, its values marked fitted with the file and the date.
    text = fit.fitted_platform(r, "this-host")
    out = tmp_path / "fitted.toml"
    out.write_text(text)
    info = sim.platform_info(str(out))
    params = {p["field"]: p for p in info["params"]}
    assert info["name"] == "this-host"
    for name in TRUE:
        assert params[name]["provenance"]["kind"] == "fitted"
        assert "m.csv" in params[name]["provenance"]["note"]


def test_a_fit_that_cannot_match_is_refused_unless_forced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Every measurement 60% above the model, and only the invalidation cost free: the runs
    # without an IOMMU cannot move.
    m = _measure(tmp_path / "bad.csv", scale=1.6)
    out = tmp_path / "p.toml"
    argv = ["calibrate", "fit", "--params", "iommu.invalidate_ns", "--measurements", str(m)]
    assert main([*argv, "--out", str(out)]) == 1
    assert not out.exists()
    assert "not written" in capsys.readouterr().err
    # --force writes it, and the fit is still refused: exit status 1.
    assert main([*argv, "--out", str(out), "--force", "--format", "json"]) == 1
    result = json.loads(capsys.readouterr().out)
    assert not result["accepted"] and result["rms_error"] > 0.1
    assert sim.platform_info(str(out))["params"]


def test_fio_json_becomes_run_measurements(tmp_path: Path) -> None:
    data = {
        "global options": {"bs": "4k", "iodepth": "32"},
        "jobs": [
            {
                "jobname": "randread",
                "job options": {"numjobs": "8"},
                "read": {"iops": 250000.0, "clat_ns": {"mean": 120000.0}},
                "write": {"iops": 0},
            }
        ],
    }
    p = tmp_path / "fio.json"
    p.write_text(json.dumps(data))
    ms = fit.read_fio(p, "grace-nvme8-lazy")
    assert [(m.metric, m.measured) for m in ms] == [
        ("ops_per_s", 250000.0),
        ("latency_mean_us", 120.0),
    ]
    assert ms[0].keys == {
        "workload.io_bytes": 4096,
        "workload.queue_depth": 32,
        "workload.threads": 8,
    }
    p.write_text("{")
    with pytest.raises(ScenarioError, match="not fio JSON"):
        fit.read_fio(p, "x")


def test_dma_map_benchmark_output_becomes_bench_map_measurements(tmp_path: Path) -> None:
    p = tmp_path / "dmb.txt"
    p.write_text(
        "dma mapping benchmark: threads:4 seconds:20 node:-1 dir:BIDIRECTIONAL granule: 1\n"
        "average map latency(us):0.9 standard deviation:0.4\n"
        "average unmap latency(us):2.5 standard deviation:1.1\n"
    )
    ms = fit.read_dma_map_benchmark(p)
    # The tool cuts each operation to 100 ns and the mean again: a printed average stands for
    # a mean up to 0.2 us above it, read as that span's middle, with its uncertainty.
    assert [(m.model, m.metric) for m in ms] == [("bench-map", "map_us"), ("bench-map", "unmap_us")]
    assert [m.measured for m in ms] == pytest.approx([1.0, 2.6])
    assert ms[0].sigma == pytest.approx(math.sqrt(0.05**2 + (0.2 / math.sqrt(12) / 1.0) ** 2))
    # A map under 100 ns prints as 0.0: read, as the middle of 0 to 0.2 us.
    p.write_text(p.read_text().replace("latency(us):0.9", "latency(us):0.0"))
    assert fit.read_dma_map_benchmark(p)[0].measured == pytest.approx(0.1)
    assert ms[0].keys["threads"] == 4 and ms[0].keys["direction"] == "bidirectional"
    values = fit.model_values("xeon-broadwell-2s", ms)
    assert all(v > 0 for v in values)


@pytest.mark.parametrize(
    ("row", "needle"),
    [
        ("scenario,metric,measured\np3-iommu-off,ops_per_s,abc\n", "not a number"),
        ("scenario,metric,measured\np3-iommu-off,ops_per_s,-1\n", "above 0"),
        ("metric,measured\nops_per_s,5\n", "needs a scenario"),
        ("scenario,metric\np3-iommu-off,ops_per_s\n", "metric and measured"),
        ("scenario,metric,measured\np3-iommu-off,ops_per_s,inf\n", r"m\.csv:2: column measured"),
        ("scenario,metric,measured\np3-iommu-off,ops_per_s,nan\n", "not a finite number"),
        (
            "scenario,metric,measured,workload.ios\np3-iommu-off,ops_per_s,5,nan\n",
            r"m\.csv:2: column workload\.ios is 'nan'",
        ),
    ],
)
def test_bad_measurements_are_named(tmp_path: Path, row: str, needle: str) -> None:
    p = tmp_path / "m.csv"
    p.write_text(row)
    with pytest.raises(ScenarioError, match=needle):
        fit.read_csv(p)


def test_unknown_parameters_are_named(tmp_path: Path) -> None:
    ms = fit.read_csv(_measure(tmp_path / "m.csv"))
    with pytest.raises(ScenarioError, match="no such parameter"):
        fit.fit("intel-vtd-2008-server", ["io.no_such_ns"], ms)
    with pytest.raises(ScenarioError, match="not a numeric parameter"):
        fit.fit("intel-vtd-2008-server", ["iommu.iotlb_replacement"], ms)


def test_a_poor_memcpy_fit_is_flagged(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    real = calibrate.copy

    def poor(quick: bool = False) -> dict[str, Any]:
        result = real(quick=True)
        result["fits"][0]["max_relative_error"] = 0.8
        return result

    monkeypatch.setattr(calibrate, "copy", poor)
    assert main(["calibrate", "copy", "--quick", "--format", "json"]) == 0
    assert "fit is poor (largest error 80%)" in capsys.readouterr().err


HIDDEN = {"device_dma.contexts": 24, "device_dma.setup_ns": 180}
"""A device unlike the XL710 file's (48 contexts, 100 ns set-up): what the fit must find."""


def test_a_dma_sweep_is_predicted_from_two_points_of_it(tmp_path: Path) -> None:
    """bench dma points made by dmalab on a hidden parameter set, with 1% noise: a fit to two
    of them (64-byte bandwidth and latency) predicts the rest of the size sweep within 5%, and
    the fitted device's fit ranges, and the intervals drawn over them, cover the truth."""
    from dmalab import devdma, intervals

    name = "xeon-broadwell-2s+intel-xl710"
    pts = devdma.points(sizes=devdma.SIZES)
    truth = devdma.measure(name, pts, draws=dict(HIDDEN))
    rng = random.Random(5)
    rows = []
    for rec in truth:
        if rec["size_bytes"] == 64:
            for metric in ("bandwidth_gbit_s", "latency_ns"):
                rows.append(
                    {
                        "model": "bench-dma",
                        "direction": "read",
                        "size_bytes": 64,
                        "metric": metric,
                        "measured": rec[metric] * (1 + rng.gauss(0, 0.01)),  # type: ignore[literal-required]
                        "sigma": 0.01,
                    }
                )
    path = tmp_path / "dma.csv"
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    ms = fit.read_csv(path)
    r = fit.fit(name, list(HIDDEN), ms)
    assert r.accepted
    got = {p.name: p.value for p in r.parameters}
    predicted = devdma.measure(name, pts, draws={k: round(v) for k, v in got.items()})
    for t, p in zip(truth, predicted, strict=True):
        for metric in ("bandwidth_gbit_s", "latency_ns"):
            tv, pv = t[metric], p[metric]  # type: ignore[literal-required]
            assert abs(pv / tv - 1) < 0.05, (t["size_bytes"], metric, tv, pv)
    # The fit writes the device: each fitted value keeps its physical range and gains a
    # fit_range, the fit's uncertainty, which holds the truth.
    dev = tmp_path / "fitted-xl710.toml"
    dev.write_text(fit.fitted_platform(r))
    info = sim.platform_info(f"xeon-broadwell-2s+{dev}")
    recs = {p["field"]: p for p in info["params"]}
    base = {p["field"]: p for p in sim.platform_info(name)["params"]}
    for field, true in HIDDEN.items():
        assert recs[field]["range"] == base[field]["range"], field
        lo, hi = recs[field]["fit_range"]["lo"], recs[field]["fit_range"]["hi"]  # type: ignore[index]
        assert lo <= true <= hi, (field, lo, hi, true)
        assert hi - lo < 0.5 * true, (field, lo, hi)
    # Intervals over the fitted parameters' fit ranges hold the truth at every point of
    # the sweep. (Drawing the host's own ranges too moves the link-bound points below the
    # file's values: its payload size and descriptor batching sit at the fast end of theirs.)
    fitted_name = f"xeon-broadwell-2s+{dev}"
    assert set(HIDDEN) <= set(intervals.uncertain(fitted_name))
    recs = devdma.measure(fitted_name, pts)
    devdma.measure_intervals(fitted_name, pts, recs, samples=32, fields=list(HIDDEN))
    for t, rec in zip(truth, recs, strict=True):
        for k in ("bandwidth_gbit_s", "latency_ns"):
            lo, hi = rec[f"{k}_lo"], rec[f"{k}_hi"]  # type: ignore[literal-required]
            assert lo * 0.999999 <= t[k] <= hi * 1.000001, (t["size_bytes"], k, lo, t[k], hi)  # type: ignore[literal-required]


def test_leave_one_out_predicts_each_measurement_from_the_others(tmp_path: Path) -> None:
    ms = fit.read_csv(_measure(tmp_path / "m.csv"))[:6]
    r = fit.fit("intel-vtd-2008-server", list(TRUE), ms, bounds=BOUNDS, loo=True)
    assert [x["label"] for x in r.loo] == [m.label for m in ms]
    assert all(abs(x["error"]) < 0.05 for x in r.loo), r.loo


def test_fit_cli_refuses_bad_bounds_and_max_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    m = tmp_path / "m.csv"
    m.write_text("scenario,metric,measured\np3-iommu-off,ops_per_s,1000\n")
    argv = ["calibrate", "fit", "--params", "iommu.invalidate_ns", "--measurements", str(m)]
    for bounds in ("iommu.invalidate_ns=1:inf", "iommu.invalidate_ns=nan:5", "x=5:1"):
        assert main([*argv, "--bounds", bounds]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"dmalab: error: --bounds {bounds}:") and err.count("\n") == 1
    for value in ("-1", "0", "inf", "nan"):
        with pytest.raises(SystemExit) as e:
            main([*argv, f"--max-error={value}"])
        assert e.value.code == 2
        assert "--max-error" in capsys.readouterr().err
    assert main([*argv, "--out", str(tmp_path / "p.txt")]) == 2
    assert "must end in .toml" in capsys.readouterr().err


def test_a_fit_of_a_copy_engines_own_parameters_writes_the_engines_file(
    tmp_path: Path,
) -> None:
    from dmalab import synccopy

    hidden = {"dma_engine.bytes_per_us": 9_000, "dma_engine.startup_ns": 300}
    sizes = [64, 4096, 65536, 1 << 20]
    truth = synccopy.measure("xeon-spr-dsa", sizes, ["local"], draws=hidden)
    path = tmp_path / "copy.csv"
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["model", "size_bytes", "placement", "metric", "measured", "sigma"])
        for rec in truth:
            w.writerow(
                ["bench-copy", rec["size_bytes"], "local", "engine_ns", rec["engine_ns"], 0.01]
            )
    r = fit.fit("xeon-spr-dsa", list(hidden), fit.read_csv(path))
    assert r.accepted
    # The host alone: its default engine's file is the one written, its keys where it has them.
    text = fit.fitted_platform(r)
    written = tomllib.loads(text)
    assert "copy_engine" in written and "bus" not in written
    dev = tmp_path / "fitted-dsa.toml"
    dev.write_text(text)
    info = sim.platform_info(f"xeon-spr-dsa+{dev}")
    fields = {p["field"]: p for p in info["params"]}
    for name, true in hidden.items():
        rec = fields[name]
        assert rec["provenance"]["kind"] == "fitted"
        assert abs(float(rec["value"].split()[0]) / true - 1) < 0.05, (name, rec["value"])
    # A host parameter and an engine's in one fit: refused, each has its own file.
    mixed = fit.fit(
        "xeon-spr-dsa", ["dma_engine.bytes_per_us", "copy.bytes_per_us"], fit.read_csv(path)
    )
    with pytest.raises(ScenarioError, match="separate fits"):
        fit.fitted_platform(mixed)


def test_the_posterior_holds_the_truth_and_is_seeded(tmp_path: Path) -> None:
    """emcee around a least-squares fit of the hidden device's two 64-byte points: each
    parameter's sampled central 99% holds the value that made the points, the same seed gives
    the same samples, and the written fit_range is the posterior's span."""
    pytest.importorskip("emcee")
    from dmalab import devdma

    name = "xeon-broadwell-2s+intel-xl710"
    (truth,) = devdma.measure(name, devdma.points(sizes=[64]), draws=dict(HIDDEN))
    ms = [
        fit.Measurement(
            "bench-dma",
            metric,
            truth[metric] * (1 + noise),  # type: ignore[literal-required]
            keys={"direction": "read", "size_bytes": 64},
            label=metric,
            sigma=0.01,
        )
        for metric, noise in (("bandwidth_gbit_s", 0.004), ("latency_ns", -0.006))
    ]
    r = fit.fit(name, list(HIDDEN), ms)
    post = fit.posterior(r, ms, steps=40, seed=7)
    assert 0.05 < post["acceptance"] < 0.95, post
    for field, true in HIDDEN.items():
        q = post["params"][field]
        assert q["lo"] <= q["p5"] <= q["p50"] <= q["p95"] <= q["hi"], q
        assert q["lo"] <= true <= q["hi"], (field, q, true)
    again = fit.posterior(fit.fit(name, list(HIDDEN), ms), ms, steps=40, seed=7)
    assert again["params"] == post["params"]
    written = tomllib.loads(fit.fitted_platform(r))
    values = {p.name: round(p.value) for p in r.parameters}
    for field in HIDDEN:
        table, key = field.split(".")
        q, entry = post["params"][field], written[table][key]
        lo, hi = entry["range"]
        span = [max(math.floor(q["lo"]), lo), min(math.ceil(q["hi"]), hi)]
        v = values[field]
        assert entry["fit_range"] == [min(span[0], v), max(span[1], v)], (field, entry, q)
