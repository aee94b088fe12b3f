"""dmalab.plot and `dmalab plot`: files written, bad suffixes refused."""

from __future__ import annotations

import pathlib

import pytest

from dmalab import ScenarioError, plot
from dmalab.cli import main


def test_crossover_plot_is_written(tmp_path: pathlib.Path) -> None:
    out = plot.crossover("xeon-8180-cbdma", tmp_path / "x.png")
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = plot.crossover("xeon-8180-cbdma", tmp_path / "x.svg")
    assert b"<svg" in svg.read_bytes()[:500]


def test_bad_suffix_and_platform_without_engine(tmp_path: pathlib.Path) -> None:
    with pytest.raises(ScenarioError, match=r"\.png or \.svg"):
        plot.crossover("xeon-8180-cbdma", tmp_path / "x.jpg")
    assert (
        main(
            ["plot", "crossover", "--platform", "ibm-p660-m2plus", "--out", str(tmp_path / "y.png")]
        )
        == 2
    )


def test_cli_writes_the_file(tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plot", "crossover", "--out", str(tmp_path / "c.svg")]) == 0
    assert "wrote" in capsys.readouterr().err


def test_dma_plots_are_written_for_both_sweeps(tmp_path: pathlib.Path) -> None:
    for sweep in ("size", "offset"):
        out = tmp_path / f"dma-{sweep}.svg"
        assert (
            main(
                [
                    "plot",
                    "dma",
                    "--platform",
                    "grace-2s",
                    "--sweep",
                    sweep,
                    "--out",
                    str(out),
                    "--no-intervals",
                ]
            )
            == 0
        )
        assert out.read_text().startswith("<?xml")
    with pytest.raises(ScenarioError, match="sweep"):
        plot.dma("grace-2s", tmp_path / "x.png", sweep="window")


def test_the_copy_plot_is_written(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "copy.svg"
    assert main(["plot", "copy", "--platform", "xeon-8180-cbdma", "--out", str(out)]) == 0
    assert out.read_text().startswith("<?xml")


def test_the_iotlb_plot_is_written(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "iotlb.svg"
    assert main(["plot", "iotlb", "--platform", "grace-2s", "--out", str(out)]) == 0
    assert out.read_text().startswith("<?xml")


def test_the_map_plot_is_written(tmp_path: pathlib.Path) -> None:
    out = plot.map_bench("grace-2s", tmp_path / "map.svg", threads=(1, 4), maps_per_thread=64)
    assert out.read_text().startswith("<?xml")


def test_the_dma_plot_takes_a_device_and_other_plots_refuse_one(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "dma.png"
    assert (
        main(["plot", "dma", "--device", "connectx-6dx", "--out", str(out), "--no-intervals"]) == 0
    )
    assert out.stat().st_size > 10_000
    assert main(["plot", "map", "--device", "connectx-6dx", "--out", str(out)]) == 2


def test_each_kind_has_its_own_help(capsys: pytest.CaptureFixture[str]) -> None:
    helps = {}
    for kind in ("crossover", "dma", "copy", "iotlb", "map"):
        with pytest.raises(SystemExit) as e:
            main(["plot", kind, "--help"])
        assert e.value.code == 0
        helps[kind] = " ".join(capsys.readouterr().out.split())
    assert "the engine wins" in helps["crossover"] and "--sweep" not in helps["crossover"]
    assert "--sweep {size,offset}" in helps["dma"] and "--device" in helps["dma"]
    assert "--device" in helps["iotlb"] and "--size" not in helps["iotlb"]
    assert "(default xeon-broadwell-2s)" in helps["map"] and "--device" not in helps["map"]
    assert len(set(helps.values())) == 5


def test_out_is_checked_before_the_work(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("plotted before checking --out")

    for name in ("crossover", "dma", "sync_copy", "iotlb", "map_bench"):
        monkeypatch.setattr(plot, name, never)
    missing = tmp_path / "no" / "x.svg"
    for kind in ("crossover", "dma", "copy", "iotlb", "map"):
        assert main(["plot", kind, "--out", str(missing)]) == 2
        assert "does not exist" in capsys.readouterr().err
        assert main(["plot", kind, "--out", str(tmp_path / "x.jpg")]) == 2
        assert ".png or .svg" in capsys.readouterr().err


def test_the_validation_plot_is_written_and_refuses_a_platform(tmp_path: pathlib.Path) -> None:
    out = tmp_path / "v.svg"
    assert main(["plot", "validate", "--out", str(out)]) == 0
    text = out.read_text()
    assert text.startswith("<?xml") and "hsw-Xeon-E5-2620v3_dell-t630" in text
    assert main(["plot", "validate", "--platform", "grace-2s", "--out", str(out)]) == 2
