"""`dmalab sweep`: grids on threads and on a real local Ray give the same rows; an interrupted
sweep resumes without redoing its finished cells; bad sweep files are named."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

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
    once = ["--no-progress", "--no-intervals"]
    assert main(["sweep", str(spec), "--out", str(threads), *once]) == 0
    argv = ["sweep", str(spec), "--out", str(ray), "--ray", "--workers", "2", *once]
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
        ('scenario = "p3-iommu-off"\n[grid]\n"workload.ios" = [1, 2, 1]\n', "gives 1 twice"),
        ('scenario = "p3-iommu-off"\n[grid]\n"m.a" = ["x", "x"]\n', "'m.a' gives 'x' twice"),
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


# A sweep's --out belongs to the sweep that wrote it: never dropped, never half written.

A = 'scenario = "p3-iommu-off"\n[set]\n"workload.ios" = 20\n[grid]\n"workload.seed" = [1, 2, 3]\n'
B = A.replace('"workload.ios" = 20', '"workload.ios" = 30')  # the same grid, [set] changed


def _sweep(out: Path, spec: Path, *flags: str) -> int:
    """The sweep command; one run per cell (``--no-intervals``) unless ``flags`` ask for the
    intervals' draws."""
    drawn = {"--samples", "--seed", "--no-intervals"} & set(flags)
    once = [] if drawn else ["--no-intervals"]
    argv = ["sweep", str(spec), "--out", str(out), "--no-progress", "--workers", "1"]
    return main([*argv, *once, *flags])


def _one_line(capsys: pytest.CaptureFixture[str], prefix: str) -> str:
    err = capsys.readouterr().err
    assert err.startswith(prefix) and err.count("\n") == 1 and "Traceback" not in err, err
    return err.rstrip("\n")


def _rows(out: Path) -> pd.DataFrame:
    return pd.read_parquet(out) if out.suffix == ".parquet" else pd.read_csv(out)


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_a_sweep_into_another_sweeps_file_is_refused_and_the_file_is_unchanged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], suffix: str
) -> None:
    a, b = _spec(tmp_path, A, "a.toml"), _spec(tmp_path, B, "b.toml")
    ha, hb = sweep.load(a).spec_hash(), sweep.load(b).spec_hash()
    assert ha != hb
    out = tmp_path / f"r{suffix}"
    assert _sweep(out, a) == 0
    rows = _rows(out)
    assert list(rows["spec_hash"]) == [ha] * 3 and set(rows["spec_file"]) == {str(a)}
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        meta = json.loads((pq.read_schema(out).metadata or {})[sweep.META_KEY])
        assert list(meta["specs"]) == [ha] and meta["specs"][ha]["spec"]["set"] == {
            "workload.ios": 20
        }
    before = out.read_bytes()
    capsys.readouterr()
    assert _sweep(out, b) == 2
    err = _one_line(capsys, "dmalab: error: ")
    assert f"--out {out} holds results of spec {ha} ({a}?), not spec {hb} ({b})" in err
    assert "--replace" in err and "--append" in err
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["a.toml", "b.toml", out.name])
    # Its own spec still resumes it: every row already in, the file as it was.
    assert _sweep(out, a) == 0
    assert "3 cells: 0 run, 3 already in" in capsys.readouterr().out
    assert out.read_bytes() == before


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_replace_overwrites_and_append_keeps_both_sweeps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], suffix: str
) -> None:
    a, b = _spec(tmp_path, A, "a.toml"), _spec(tmp_path, B, "b.toml")
    ha, hb = sweep.load(a).spec_hash(), sweep.load(b).spec_hash()
    out = tmp_path / f"r{suffix}"
    assert _sweep(out, a) == 0
    assert _sweep(out, b, "--append") == 0
    both = _rows(out)
    assert list(both["spec_hash"]) == [ha] * 3 + [hb] * 3
    assert list(both["workload_ios"]) == [20] * 3 + [30] * 3
    assert both["cell_id"].is_unique
    # --append again resumes its own rows; a plain run of either spec is refused now.
    capsys.readouterr()
    assert _sweep(out, b, "--append") == 0
    assert "3 cells: 0 run, 3 already in" in capsys.readouterr().out
    for spec in (a, b):
        assert _sweep(out, spec) == 2
        assert "holds results of spec" in _one_line(capsys, "dmalab: error: ")
    assert _rows(out).equals(both)
    # --replace leaves this sweep's rows only, and then resumes as its own file.
    assert _sweep(out, b, "--replace") == 0
    assert list(_rows(out)["spec_hash"]) == [hb] * 3
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        meta = json.loads((pq.read_schema(out).metadata or {})[sweep.META_KEY])
        assert list(meta["specs"]) == [hb]
    capsys.readouterr()
    assert _sweep(out, b) == 0
    assert "3 cells: 0 run, 3 already in" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:
        _sweep(out, b, "--replace", "--append")
    assert e.value.code == 2
    assert "not allowed with argument" in _one_line(capsys, "dmalab: error: sweep: ")


def _cut(tmp_path: Path, suffix: str) -> bytes:
    """A real sweep file of A, cut in the middle."""
    whole = tmp_path / f"whole{suffix}"
    sweep.run(sweep.load(_spec(tmp_path, A, "whole.toml")), whole, workers=1)
    data = whole.read_bytes()
    whole.unlink()
    return data[: len(data) * 2 // 3]


@pytest.mark.parametrize(
    ("suffix", "content", "needle"),
    [
        (".csv", b"", "is empty"),
        (".parquet", b"", "is empty"),
        (".csv", b"name,value\nx,1\n", "no cell_id column"),
        (".csv", bytes(range(256)) * 4, "ends mid-row"),
        (".csv", bytes(range(256)) * 4 + b"\n", "not readable CSV"),
        (".csv", b"cell_id,x\nnot-a-hash,1\n", "cell_id is not 16 hex digits"),
        (".csv", "cut", "ends mid-row"),
        (".parquet", b"PAR1 this is not Parquet\n", "not a readable Parquet file"),
        (".parquet", "cut", "not a readable Parquet file"),
    ],
)
def test_a_corrupt_empty_or_foreign_out_is_refused_and_left_as_it_is(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    suffix: str,
    content: bytes | str,
    needle: str,
) -> None:
    data = _cut(tmp_path, suffix) if content == "cut" else content
    assert isinstance(data, bytes)
    out = tmp_path / f"r{suffix}"
    out.write_bytes(data)
    spec = _spec(tmp_path, A, "a.toml")
    capsys.readouterr()
    assert _sweep(out, spec) == 2
    err = _one_line(capsys, f"dmalab: error: --out {out} ")
    assert needle in err and "--replace" in err
    assert out.read_bytes() == data
    assert _sweep(out, spec, "--append") == 2
    assert out.read_bytes() == data
    # --replace says to overwrite it.
    assert _sweep(out, spec, "--replace") == 0
    assert len(_rows(out)) == 3


def test_a_file_from_before_spec_hashes_is_resumed_when_its_cells_are_this_sweeps(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a = _spec(tmp_path, A, "a.toml")
    out = tmp_path / "r.csv"
    assert _sweep(out, a) == 0
    old = pd.read_csv(out).drop(columns=["spec_hash", "spec_file"])
    old.iloc[:2].to_csv(out, index=False)  # two of the three cells, as written before
    capsys.readouterr()
    assert _sweep(out, a) == 0
    assert "3 cells: 1 run, 2 already in" in capsys.readouterr().out
    assert list(pd.read_csv(out)["spec_hash"]) == [sweep.load(a).spec_hash()] * 3
    # Another sweep's cells are not adopted.
    old.to_csv(out, index=False)
    before = out.read_bytes()
    assert _sweep(out, _spec(tmp_path, B, "b.toml")) == 2
    assert "holds results of a sweep without spec_hash" in _one_line(capsys, "dmalab: error: ")
    assert out.read_bytes() == before


def _interrupt_writer(monkeypatch: pytest.MonkeyPatch, suffix: str) -> None:
    """Make every save write half its file, then stop as Ctrl-C does."""
    if suffix == ".csv":
        real_csv = pd.DataFrame.to_csv

        def half_csv(self: pd.DataFrame, path: Any, **kw: Any) -> None:  # noqa: ANN401
            text = real_csv(self, None, **kw)
            Path(path).write_text(text[: len(text) // 2])
            raise KeyboardInterrupt

        monkeypatch.setattr(pd.DataFrame, "to_csv", half_csv)
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        real_pq = pq.write_table

        def half_pq(table: Any, where: Any, *args: Any, **kw: Any) -> None:  # noqa: ANN401
            sink = pa.BufferOutputStream()
            real_pq(table, sink, *args, **kw)
            data = sink.getvalue().to_pybytes()
            Path(where).write_bytes(data[: len(data) // 2])
            raise KeyboardInterrupt

        monkeypatch.setattr(pq, "write_table", half_pq)


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_ctrl_c_keeps_what_is_saved_even_during_a_save(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    suffix: str,
) -> None:
    spec = _spec(tmp_path, A, "a.toml")
    out = tmp_path / f"r{suffix}"
    real_batch = sweep.run_batch
    calls = []

    def first_only(*args: Any) -> list[dict[str, Any]]:  # noqa: ANN401
        calls.append(1)
        if len(calls) > 1:
            raise KeyboardInterrupt
        return real_batch(*args)

    # Ctrl-C while cells run: the cell done is saved, one line, status 130.
    with monkeypatch.context() as m:
        m.setattr(sweep, "run_batch", first_only)
        capsys.readouterr()
        assert _sweep(out, spec) == 130
    line = f"dmalab: interrupted: 1 of 3 cells kept in {out}; run the same command to resume"
    assert _one_line(capsys, "dmalab: interrupted") == line
    assert len(_rows(out)) == 1
    before = out.read_bytes()
    # Ctrl-C during the save: the earlier file is whole, and no temporary file is left.
    with monkeypatch.context() as m:
        _interrupt_writer(m, suffix)
        assert _sweep(out, spec) == 130
    assert _one_line(capsys, "dmalab: interrupted") == line
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.toml", out.name]
    # The same command resumes.
    assert _sweep(out, spec) == 0
    assert "3 cells: 2 run, 1 already in" in capsys.readouterr().out
    assert len(_rows(out)) == 3


def test_a_real_sigint_during_a_save_ends_in_one_line_and_status_130(tmp_path: Path) -> None:
    spec = _spec(tmp_path, A, "a.toml")
    out = tmp_path / "r.csv"
    sweep.run(sweep.load(spec), out, workers=1)
    frame = pd.read_csv(out)
    frame.iloc[:1].to_csv(out, index=False)  # one cell of three done
    before = out.read_bytes()
    # The save writes part of its file, then this process gets SIGINT (as from Ctrl-C).
    script = f"""
import os, signal, time
from pathlib import Path
import pandas as pd
from dmalab.cli import main
real = pd.DataFrame.to_csv
def slow(self, path, **kw):
    text = real(self, None, **kw)
    Path(path).write_text(text[:len(text) // 2])
    os.kill(os.getpid(), signal.SIGINT)
    time.sleep(30)
    Path(path).write_text(text)
pd.DataFrame.to_csv = slow
raise SystemExit(main(["sweep", {str(spec)!r}, "--out", {str(out)!r}, "--no-progress",
                       "--no-intervals"]))
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 130, done.stderr
    assert done.stderr == (
        f"dmalab: interrupted: 1 of 3 cells kept in {out}; run the same command to resume\n"
    )
    assert out.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.toml", "r.csv"]


def test_a_binary_sweep_file_and_a_repeated_grid_value_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    binary = tmp_path / "s.toml"
    binary.write_bytes(bytes(range(256)))
    assert _sweep(tmp_path / "r.csv", binary) == 2
    assert "not a sweep file" in _one_line(capsys, f"dmalab: error: {binary}: ")
    twice = _spec(tmp_path, A.replace("[1, 2, 3]", "[1, 2, 1]"), "twice.toml")
    assert _sweep(tmp_path / "r.csv", twice) == 2
    err = _one_line(capsys, f"dmalab: error: {twice}: ")
    assert "grid.'workload.seed' gives 1 twice" in err
    assert not (tmp_path / "r.csv").exists()


def test_progress_in_a_pipe_is_whole_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = _spec(tmp_path, A)
    out = tmp_path / "r.csv"
    assert main(["sweep", str(spec), "--out", str(out), "--workers", "1", "--no-intervals"]) == 0
    err = capsys.readouterr().err
    assert "\r" not in err and err.endswith("\n")
    assert err.splitlines()[-1] == "[3/3] cells"
    # On a terminal: one line redrawn, ended once.
    monkeypatch.setenv("FORCE_COLOR", "1")
    argv = ["sweep", str(spec), "--out", str(out), "--workers", "1", "--no-intervals"]
    assert main([*argv, "--replace"]) == 0
    err = capsys.readouterr().err
    assert err.count("\r") >= 1 and err.count("\n") == 1 and "[3/3] cells" in err


def test_a_sweep_gives_each_cell_its_intervals_and_they_enter_its_hash(tmp_path: Path) -> None:
    spec = _spec(tmp_path, A, "a.toml")
    out = tmp_path / "r.csv"
    assert _sweep(out, spec, "--samples", "8") == 0
    df = pd.read_csv(out)
    assert len(df) == 3
    for k in ("ops_per_s", "latency_p99_us", "cpu_utilization"):
        assert (df[f"{k}_lo"] <= df[f"{k}_hi"]).all(), k
        # (Empty where no parameter stands out of 8 draws' noise.)
        assert f"{k}_driven_by" in df.columns
    assert (df["interval_draws"] <= 8).all() and (df["interval_draws"] > 0).all()
    # The draws spread the figures: the platform's assumed values move a run's rate.
    assert (df["ops_per_s_hi"] > df["ops_per_s_lo"]).any()
    # The same sweep, seed and draws give the same intervals; another seed is another sweep.
    again = tmp_path / "again.csv"
    assert _sweep(again, spec, "--samples", "8") == 0
    cols = [c for c in df.columns if c.endswith(("_lo", "_hi"))]
    assert pd.read_csv(again)[cols].equals(df[cols])
    assert _sweep(out, spec, "--samples", "8", "--seed", "2") == 2
    assert _sweep(out, spec) == 2
    plain = tmp_path / "plain.csv"
    assert _sweep(plain, spec) == 0
    assert "ops_per_s_lo" not in pd.read_csv(plain).columns


def test_two_sweeps_appending_to_one_file_at_once_keep_every_row_of_both(
    tmp_path: Path,
) -> None:
    # Two real `dmalab sweep --append` processes, started together, into one CSV: each reads
    # the file at its start, runs its 40 cells (about a second) and saves; each save reads the
    # file again under the file's lock, so neither drops the other's rows.
    seeds = ", ".join(str(s) for s in range(1, 41))
    specs = [
        _spec(
            tmp_path,
            f'scenario = "p3-iommu-off"\n[set]\n"workload.ios" = {ios}\n'
            f'[grid]\n"workload.seed" = [{seeds}]\n',
            f"s{ios}.toml",
        )
        for ios in (250_000, 250_001)
    ]
    out = tmp_path / "f.csv"
    argv = ["--out", str(out), "--append", "--no-progress", "--no-intervals", "--workers", "1"]
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "dmalab", "sweep", str(s), *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for s in specs
    ]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    rows = pd.read_csv(out)
    for s in specs:
        mine = rows[rows["spec_hash"] == sweep.load(s).spec_hash()]
        assert sorted(mine["workload_seed"]) == list(range(1, 41)), s.name
    assert len(rows) == 80 and rows["cell_id"].is_unique
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.csv", "s250000.toml", "s250001.toml"]


def test_a_save_after_every_cell_writes_each_row_once(tmp_path: Path) -> None:
    # Each save reads the file again and merges; this sweep's own rows, read back, are not
    # taken for new ones.
    spec = sweep.load(_spec(tmp_path, A, "a.toml"))
    often, once = tmp_path / "often.csv", tmp_path / "once.csv"
    sweep.run(spec, often, workers=1, checkpoint_s=0)
    sweep.run(spec, once, workers=1)
    assert pd.read_csv(often).equals(pd.read_csv(once))
    assert len(pd.read_csv(often)) == 3
