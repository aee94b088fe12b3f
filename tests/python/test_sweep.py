"""`dmalab sweep`: grids on threads and on a real local Ray give the same rows; an interrupted
sweep resumes without redoing its finished cells; bad sweep files are named."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from dmalab import ScenarioError, sweep
from dmalab.cli import main

BIG = """
scenario = "p3-iommu-off"
[grid]
"workload.ios" = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
"workload.io_bytes" = [512, 1024, 1536, 2048, 2560, 3072, 3584, 4096, 4608, 5120]
"workload.seed" = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
"workload.queue_depth" = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
"""

SMALL = """
scenario = "p3-rbtree-deferred"
[set]
"workload.ios" = 500
[grid]
"mapping.allocator" = ["rbtree", "bitmap", "segtree"]
"mapping.flush" = ["strict", "deferred", "per-cpu"]
"""


def _spec(tmp_path: Path, text: str, name: str = "s.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_10000_cells_on_threads_and_on_a_local_ray_give_identical_rows(tmp_path: Path) -> None:
    spec = _spec(tmp_path, BIG)
    threads, ray = tmp_path / "threads.parquet", tmp_path / "ray.parquet"
    assert main(["sweep", str(spec), "--out", str(threads), "--no-progress"]) == 0
    argv = ["sweep", str(spec), "--out", str(ray), "--ray", "--workers", "2", "--no-progress"]
    assert main(argv) == 0
    a = pd.read_parquet(threads).drop(columns=["created_utc"])
    b = pd.read_parquet(ray).drop(columns=["created_utc"])
    assert len(a) == 10_000 and a["cell_id"].is_unique
    assert a.equals(b)
    # Inputs are columns: a cell is selected without a join.
    one = a.query("axis_workload_ios == 7 and workload_queue_depth == 3 and workload_seed == 2")
    assert len(one) == 10 and set(one["workload_io_bytes"]) == set(range(512, 5121, 512))


def test_an_interrupted_sweep_resumes_without_redoing_cells(tmp_path: Path) -> None:
    spec = sweep.load(_spec(tmp_path, SMALL))
    out = tmp_path / "r.csv"

    def stop_after_four(done: int, total: int) -> None:
        if done >= 4:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        sweep.run(spec, out, workers=1, progress=stop_after_four)
    saved = pd.read_csv(out)
    assert 4 <= len(saved) < 9
    resumed = sweep.run(spec, out, workers=1)
    assert (resumed.skipped, resumed.ran) == (len(saved), 9 - len(saved))
    whole = sweep.run(spec, tmp_path / "whole.csv", workers=2)
    cols = [c for c in whole.rows[0] if c != "created_utc"]
    assert pd.read_csv(out)[cols].equals(pd.read_csv(tmp_path / "whole.csv")[cols])
    again = sweep.run(spec, out)
    assert (again.skipped, again.ran) == (9, 0)


def test_a_sample_is_seeded_and_has_no_repeats(tmp_path: Path) -> None:
    text = SMALL + "[sample]\ncount = 30\nseed = 7\n"
    s = sweep.load(_spec(tmp_path, text))
    cells = s.cells()
    assert cells == sweep.load(_spec(tmp_path, text, "b.toml")).cells()
    assert len(cells) <= 9 and len({tuple(c.items()) for c in cells}) == len(cells)


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ('scenario = "p3-iommu-off"\n', r"\[grid\] must give"),
        ('scenario = "p3-iommu-off"\n[grid]\n"workload.ios" = []\n', "non-empty list"),
        ('scenario = "p3-iommu-off"\n[grid]\nios = [1]\n', "TABLE.KEY"),
        ('scenario = "p3-iommu-off"\nbogus = 1\n[grid]\n"workload.ios" = [1]\n', "unknown key"),
        ('[grid]\n"workload.ios" = [1]\n', "scenario must be"),
        ('scenario = "p3-iommu-off"\n[grid]\n"workload.ios" = [1]\n[sample]\n', "sample.count"),
    ],
)
def test_bad_sweep_files_are_named(tmp_path: Path, text: str, needle: str) -> None:
    with pytest.raises(ScenarioError, match=needle):
        sweep.load(_spec(tmp_path, text))


def test_a_bad_key_in_a_cell_is_the_scenario_error(tmp_path: Path) -> None:
    text = 'scenario = "p3-iommu-off"\n[grid]\n"workload.threads" = [0]\n'
    spec = sweep.load(_spec(tmp_path, text))
    with pytest.raises(ScenarioError, match=r"workload\.threads"):
        sweep.run(spec, tmp_path / "x.parquet")
    with pytest.raises(ScenarioError, match=r"\.parquet or \.csv"):
        sweep.run(spec, tmp_path / "x.json")
