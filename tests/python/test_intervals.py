"""Prediction intervals: draws over the stated ranges, percentiles, what drives them."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from dmalab import _native, devdma, intervals

RANGE = re.compile(r",\s*range = \[[^\]]*\]")


def _only_contexts_uncertain(tmp_path: Path) -> str:
    """xeon-broadwell-2s with the XL710, every stated range removed but the engine's contexts'
    (16 to 128): the one parameter an interval can draw."""
    host = tmp_path / "host.toml"
    # Without its copy engine, whose file keeps its ranges.
    text = re.sub(
        r"^default_copy_engine = .*\n", "", _native.platform_text("xeon-broadwell-2s"), flags=re.M
    )
    host.write_text(RANGE.sub("", text))
    dev = RANGE.sub("", _native.device_text("intel-xl710"))
    dev, n = re.subn(
        r"^(contexts = \{ value = 48, assumed = \"[^\"]*\")",
        r"\1, range = [16, 128]",
        dev,
        flags=re.M,
    )
    assert n == 1
    (tmp_path / "xl.toml").write_text(dev)
    return f"{host}+{tmp_path / 'xl.toml'}"


def test_an_interval_spans_only_where_an_uncertain_part_binds(tmp_path: Path) -> None:
    name = _only_contexts_uncertain(tmp_path)
    assert intervals.uncertain(name) == ["device_dma.contexts"]
    pts = devdma.points(sizes=[64, 4096])
    recs = devdma.measure(name, pts)
    drawn = devdma.measure_intervals(name, pts, recs, samples=32)
    assert drawn.refused == []
    small, large = recs
    # 64 B: the root complex binds at 48 contexts; with 16 the contexts bind and bandwidth
    # falls, with 128 the root complex still binds. So the interval reaches below, not above.
    assert small["bandwidth_gbit_s_lo"] < 0.8 * small["bandwidth_gbit_s"]
    assert small["bandwidth_gbit_s_hi"] == pytest.approx(small["bandwidth_gbit_s"], rel=1e-6)
    tops = small["top_params"]["bandwidth_gbit_s"]
    assert tops and tops[0]["param"] == "device_dma.contexts"
    # 4 KiB: the link binds whatever the contexts; the interval is the point.
    assert large["bandwidth_gbit_s_lo"] == pytest.approx(large["bandwidth_gbit_s"], rel=1e-9)
    assert large["bandwidth_gbit_s_hi"] == pytest.approx(large["bandwidth_gbit_s"], rel=1e-9)
    assert large["top_params"]["bandwidth_gbit_s"] == []


def test_the_same_seed_gives_the_same_intervals(tmp_path: Path) -> None:
    name = _only_contexts_uncertain(tmp_path)
    pts = devdma.points(sizes=[64])

    def run(seed: int) -> dict[str, Any]:
        recs = devdma.measure(name, pts)
        devdma.measure_intervals(name, pts, recs, samples=16, seed=seed)
        return dict(recs[0])

    first = run(3)
    assert first == run(3)
    assert first["bandwidth_gbit_s_lo"] < first["bandwidth_gbit_s"]


def test_the_noise_floor_grows_with_parameters_and_falls_with_draws() -> None:
    assert intervals.noise_rho(64, 60) == pytest.approx(0.42, abs=0.01)
    assert intervals.noise_rho(32, 60) > intervals.noise_rho(64, 60) > intervals.noise_rho(64, 2)
    assert intervals.noise_rho(8, 60) == 1.0


def test_percentiles_and_drivers_of_synthetic_draws() -> None:
    rows = intervals.design(2, 64, seed=7)
    # y follows the first quantile only; the second is noise to it.
    outcomes = [{"records": [{"y": 10.0 + 100.0 * r[0]}]} for r in rows]
    outcomes[5] = {"error": "refused"}
    drawn = intervals.Drawn(["a", "b"], rows, outcomes)
    rec: dict[str, Any] = {"y": 60.0}
    drawn.attach([rec], ["y"])
    assert drawn.refused == ["refused"]
    assert rec["draws"] == 63
    assert 10.0 < rec["y_lo"] < 20.0 < 100.0 < rec["y_hi"] < 110.0
    assert [t["param"] for t in rec["top_params"]["y"]] == ["a"]


def test_a_figure_beyond_its_draws_stretches_its_interval_and_is_named() -> None:
    """A figure at a knee (every draw lowers it) lies above the draws' 95th percentile: the
    interval reaches it and ``beyond`` names it; a figure inside its draws is left alone."""
    rows = intervals.design(1, 16, seed=2)
    outcomes = [{"records": [{"y": 50.0 - 10.0 * r[0], "z": 10.0 * r[0]}]} for r in rows]
    drawn = intervals.Drawn(["a"], rows, outcomes)
    rec: dict[str, Any] = {"y": 50.0, "z": 5.0}
    drawn.attach([rec], ["y", "z"])
    assert rec["y_hi"] == 50.0 and rec["y_lo"] < 42.0
    assert 0.0 < rec["z_lo"] < 5.0 < rec["z_hi"] < 10.0
    assert drawn.beyond == {(0, "y")}


def test_designs_are_seeded_and_refuse_a_size_that_is_not_a_power_of_two() -> None:
    assert intervals.design(3, 8, seed=1) == intervals.design(3, 8, seed=1)
    assert intervals.design(3, 8, seed=1) != intervals.design(3, 8, seed=2)
    assert all(0.0 <= x < 1.0 for row in intervals.design(5, 16) for x in row)
    with pytest.raises(ValueError, match="power of two"):
        intervals.design(2, 12)


def test_a_parameters_draws_do_not_depend_on_the_other_parameters_drawn() -> None:
    """Named columns: a file that gains a key moves no other parameter's draws, and each
    column is still stratified (one draw in each of the samples' equal slices)."""
    two = intervals.design(2, 16, seed=3, names=["a.x", "b.y"])
    three = intervals.design(3, 16, seed=3, names=["c.z", "a.x", "b.y"])
    assert [r[0] for r in two] == [r[1] for r in three]
    assert [r[1] for r in two] == [r[2] for r in three]
    assert sorted(int(r[0] * 16) for r in three) == list(range(16))
    assert [r[0] for r in two] != [r[1] for r in two]
    assert two != intervals.design(2, 16, seed=4, names=["a.x", "b.y"])


def test_no_draws_when_every_draw_is_refused() -> None:
    drawn = intervals.Drawn(["a"], [[0.5]], [{"error": "no"}])
    with pytest.raises(ValueError, match="every one of the 1 draws"):
        drawn.attach([{"y": 1.0}], ["y"])


def test_bench_dma_shows_intervals_and_drivers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from dmalab.cli import main

    host, dev = _only_contexts_uncertain(tmp_path).split("+")
    args = ["bench", "dma", "--platform", host, "--device", dev, "--samples", "16"]
    assert main([*args, "--no-progress"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if " read " in line)
    assert re.search(r"\d+\.\d\d \[\d+\.\d\d, \d+\.\d\d\]", row), row
    assert "driven by" in out and "device_dma.contexts" in row
    assert "1 uncertain parameters drawn, 0 of 16 draws refused" in out
    assert main([*args, "--format", "json"]) == 0
    (r,) = json.loads(capsys.readouterr().out)
    assert r["bandwidth_gbit_s_lo"] <= r["bandwidth_gbit_s_hi"] and r["draws"] == 16
    # --no-intervals draws nothing: --samples beside it is refused, not ignored.
    assert main([*args, "--format", "json", "--no-intervals"]) == 2
    assert "--samples: " in capsys.readouterr().err
    assert main([*args[:-2], "--format", "json", "--no-intervals"]) == 0
    (r,) = json.loads(capsys.readouterr().out)
    assert "bandwidth_gbit_s_lo" not in r and "top_params" not in r


def test_run_map_and_copy_give_intervals(capsys: pytest.CaptureFixture[str]) -> None:
    from dmalab.cli import main

    fast = ["--samples", "8", "--format", "json"]
    run = ["run", "p3-rbtree-strict", "--set", "workload.ios=2000", "--no-progress"]
    assert main([*run, "--samples", "32", "--format", "json"]) == 0
    r = json.loads(capsys.readouterr().out)
    # seed 003's host: its CPU costs are assumed or fitted, so throughput is uncertain.
    assert r["ops_per_s_lo"] < r["ops_per_s_hi"] and r["draws"] == 32
    assert r["top_params"]["ops_per_s"], r["top_params"]
    assert main(["bench", "map", "--platform", "intel-vtd-2008-server", "--maps", "64", *fast]) == 0
    (m,) = json.loads(capsys.readouterr().out)
    assert m["unmap_us_lo"] <= m["unmap_us"] * 1.5 and m["unmap_us_lo"] < m["unmap_us_hi"]
    assert main(["bench", "copy", "--platform", "xeon-8180-cbdma", "--size", "4096", *fast]) == 0
    recs = json.loads(capsys.readouterr().out)
    assert all(c["engine_ns_lo"] < c["engine_ns_hi"] for c in recs)


def test_reproduce_verbose_draws_the_fitted_parameters(capsys: pytest.CaptureFixture[str]) -> None:
    from dmalab.cli import main

    assert main(["reproduce", "P3-IOPS", "--verbose", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    fitted = [r for r in rows if r["fitted_here"]]
    assert fitted and all("fit_interval" in r for r in fitted)
    for r in fitted:
        fi = r["fit_interval"]
        assert fi["fields"] == r["fitted_here"] and fi["draws"] == 16
        assert fi["lo"] < fi["hi"] and fi["covers"] == (fi["lo"] <= r["published"] <= fi["hi"])
        assert 0.0 <= fi["passed_share"] <= 1.0
    assert main(["reproduce", "P3-IOPS", "--verbose"]) == 0
    out = capsys.readouterr().out
    assert "rows that pass by a fit" in out and "hold the published one" in out


def test_reproduce_verbose_gives_predicted_rows_their_intervals(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from dmalab import sim
    from dmalab.cli import main

    assert main(["reproduce", "P1-TPUT", "P1-TSO", "--verbose", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    predicted = [r for r in rows if not r["fitted_here"]]
    assert predicted and all("interval" in r and "fit_interval" not in r for r in predicted)
    for r in predicted:
        iv = r["interval"]
        # Every assumed and fitted parameter of the claim's platform is drawn.
        assert sorted(iv["fields"]) == sorted(intervals.uncertain(r["platform"]))
        assert iv["draws"] + iv["refused"] == 16
        assert iv["lo"] <= iv["hi"] and iv["covers"] == (iv["lo"] <= r["published"] <= iv["hi"])
    # A throughput the host's assumed costs set spreads with them.
    tput = next(r for r in predicted if r["id"] == "P1-TPUT")
    assert tput["interval"]["hi"] - tput["interval"]["lo"] > 0.1 * tput["modelled"]
    again, _ = sim.reproduce(["P1-TPUT"])
    intervals.predict_intervals(again)
    assert again[0]["interval"] == tput["interval"]
    assert main(["reproduce", "P1-TPUT", "--verbose"]) == 0
    assert "predicted rows (no fit)" in capsys.readouterr().out


def test_a_claims_intervals_are_drawn_with_its_own_platform_options() -> None:
    from dmalab import sim

    rows, _ = sim.reproduce(["P4X-E1000-UDP"])
    one_k = next(r for r in rows if r["case"].startswith("1 KB"))
    assert one_k["choices"] == {"slot": "e1000"}
    intervals.predict_intervals([one_k])
    iv = one_k["interval"]
    assert sorted(iv["fields"]) == sorted(intervals.uncertain("hp-rx2600-zx1", {"slot": "e1000"}))
    # e1000's transmit routine is drawn over its own range (0.5 to 4 us), not tg3's fit range
    # (4.6 to 5.0 us, which alone would keep every draw below the wire's 939 Mbit/s).
    assert iv["hi"] == pytest.approx(one_k["modelled"], rel=1e-6)
    assert 0.0 < iv["passed_share"] < 1.0
    (default,) = [r for r in sim.reproduce(["P4-RO-UDP"])[0] if r["case"] == "streaming MRM"]
    assert default["choices"] == {}


def test_sensitivity_ranks_what_binds_first(capsys: pytest.CaptureFixture[str]) -> None:
    from dmalab.cli import main

    args = ["platforms", "xeon-broadwell-2s", "--sensitivity", "bandwidth_gbit_s"]
    assert main([*args, "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    swings = [abs(r["swing"]) for r in rows]
    assert swings == sorted(swings, reverse=True)
    by = {r["param"]: r for r in rows}
    # 64-byte reads: the engine's contexts bind below the file's 48, not above it, and the
    # link's ack batching never moves them.
    ctx = by["device_dma.contexts"]
    assert ctx["at_lo"] < 0.8 * ctx["nominal"] and ctx["at_hi"] == pytest.approx(ctx["nominal"])
    assert by["bus.pcie.tlps_per_ack"]["swing"] == pytest.approx(0.0, abs=1e-3)
    assert main([*args[:2], "--sensitivity", "unmap_us"]) == 0
    assert "iommu." in capsys.readouterr().out


def test_plot_dma_draws_bands_and_refuses_interval_options_elsewhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from dmalab.cli import main

    out = tmp_path / "dma.svg"
    assert main(["plot", "dma", "--samples", "8", "--out", str(out)]) == 0
    assert "5th-95th pct, 8 draws" in out.read_text()
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        main(["plot", "map", "--samples", "8", "--out", str(tmp_path / "m.svg")])
    assert exit_.value.code == 2 and "--samples" in capsys.readouterr().err
