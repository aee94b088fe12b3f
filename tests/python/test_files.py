"""Every file dmalab writes is written whole or not at all; a file several processes merge into
is changed under a lock; a command does not overwrite a file of another kind unless told."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dmalab import files, plot, report, sim, timeline
from dmalab.cli import main


class Stop(KeyboardInterrupt):
    """Ctrl-C in the middle of a write."""


def _half_then_stop(write: Callable[..., Any], where: int) -> Callable[..., Any]:
    """``write`` with its file cut to half and Ctrl-C raised after it: the argument at
    ``where`` is the path (or open file) it writes."""

    def cut(*args: Any, **kw: Any) -> None:  # noqa: ANN401
        write(*args, **kw)
        target = args[where]
        is_file = hasattr(target, "write")  # an open file, else a path
        if is_file:
            target.flush()
        path = Path(target.name if is_file else target)
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
        raise Stop

    return cut


def _tiny_run() -> Any:  # noqa: ANN401 - a RunReport
    return sim.run("p3-iommu-off", overrides={"workload": {"ios": 50}}, timeline_limit=1000)


WRITERS: dict[str, tuple[str, Callable[[pytest.MonkeyPatch], None], Callable[[Path], None]]] = {
    # name: (file name, how to cut its write in half, the write)
    "timeline": (
        "t.json",
        lambda m: m.setattr(json, "dump", _half_then_stop(json.dump, 1)),
        lambda p: timeline.write(_tiny_run(), p),
    ),
    "report": (
        "r.html",
        lambda m: m.setattr(Path, "write_text", _half_then_stop(Path.write_text, 0)),
        lambda p: report.write(p, None, None),
    ),
    "plot": (
        "p.svg",
        lambda m: m.setattr(
            __import__("matplotlib.figure").figure.Figure,
            "savefig",
            _half_then_stop(__import__("matplotlib.figure").figure.Figure.savefig, 1),
        ),
        lambda p: plot.crossover("xeon-broadwell-2s", p, max_len=4096),
    ),
}


@pytest.mark.parametrize("name", list(WRITERS))
def test_a_write_cut_short_leaves_the_old_file_whole_and_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    file, cut, write = WRITERS[name]
    out = tmp_path / file
    write(out)  # the old file, whole
    before = out.read_bytes()
    assert files.holds(out) in (files.TRACE, files.HTML, files.SVG)
    with monkeypatch.context() as m:
        cut(m)
        with pytest.raises(Stop):
            write(out)
    assert out.read_bytes() == before
    assert os.listdir(tmp_path) == [file]
    # With no old file, a write cut short leaves no file at all.
    out.unlink()
    with monkeypatch.context() as m:
        cut(m)
        with pytest.raises(Stop):
            write(out)
    assert os.listdir(tmp_path) == []


def test_write_atomic_keeps_the_files_permissions_and_writes_text_bytes_or_by_callback(
    tmp_path: Path,
) -> None:
    out = tmp_path / "x.txt"
    files.write_atomic(out, "one")
    out.chmod(0o640)
    files.write_atomic(out, b"two")
    assert out.read_bytes() == b"two" and (out.stat().st_mode & 0o777) == 0o640
    seen: list[Path] = []

    def writer(tmp: Path) -> None:
        seen.append(tmp)
        tmp.write_text("three")

    files.write_atomic(out, writer)
    assert out.read_text() == "three"
    # The writer wrote beside the target, under a name that ends in the target's suffix.
    assert seen[0].parent == tmp_path and seen[0].name.endswith(".txt") and not seen[0].exists()
    assert os.listdir(tmp_path) == ["x.txt"]


def test_a_symbolic_link_keeps_pointing_at_the_file_it_names(tmp_path: Path) -> None:
    real = tmp_path / "store" / "results.csv"
    real.parent.mkdir()
    real.write_text("old")
    link = tmp_path / "results.csv"
    link.symlink_to(real)
    assert files.write_atomic(link, "new") == link
    assert link.is_symlink() and real.read_text() == "new"
    assert sorted(os.listdir(real.parent)) == ["results.csv"]


def test_locked_lets_one_holder_in_at_a_time_and_leaves_no_lock_file(tmp_path: Path) -> None:
    out = tmp_path / "shared.csv"
    inside, most = [0], [0]
    guard = threading.Lock()

    def hold() -> None:
        for _ in range(20):
            with files.locked(out):
                with guard:
                    inside[0] += 1
                    most[0] = max(most[0], inside[0])
                time.sleep(0.001)
                with guard:
                    inside[0] -= 1

    threads = [threading.Thread(target=hold) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert most[0] == 1
    assert not files.lock_path(out).exists()


# An output file of another kind is refused before the work, unless --force.


def _sweep_results(tmp_path: Path) -> Path:
    spec = tmp_path / "s.toml"
    spec.write_text(
        'scenario = "p3-iommu-off"\n[set]\n"workload.ios" = 10\n[grid]\n"workload.seed" = [1]\n'
    )
    results = tmp_path / "results.csv"
    argv = ["sweep", str(spec), "--out", str(results), "--no-progress", "--no-intervals"]
    assert main(argv) == 0
    assert files.holds(results) == "a sweep's results (CSV)"
    return results


RUN = ["run", "p3-iommu-off", "--set", "workload.ios=10", "--no-progress", "--no-intervals"]


def test_a_timeline_over_a_sweeps_results_is_refused_before_the_run_unless_forced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    results = _sweep_results(tmp_path)
    before = results.read_bytes()
    capsys.readouterr()
    ran: list[int] = []
    real_run = sim.run
    monkeypatch.setattr(sim, "run", lambda *a, **k: ran.append(1) or real_run(*a, **k))
    assert main([*RUN, "--timeline", str(results)]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"dmalab: error: --timeline {results}: the file holds a sweep's results (CSV), not "
        "trace-event JSON; pass --force to overwrite it\n"
    )
    assert results.read_bytes() == before and not ran
    # A timeline over a timeline is what --timeline is for.
    trace = tmp_path / "t.json"
    assert main([*RUN, "--timeline", str(trace)]) == 0
    assert main([*RUN, "--timeline", str(trace)]) == 0
    assert json.loads(trace.read_text())["traceEvents"]
    # --force says to overwrite it; alone, it is an option that does not apply.
    assert main([*RUN, "--timeline", str(results), "--force"]) == 0
    assert json.loads(results.read_text())["traceEvents"]
    capsys.readouterr()
    assert main([*RUN, "--force"]) == 2
    assert "--force: applies to the timeline written with --timeline" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "option", "what"),
    [
        (["report", "--claims", "--run", "none", "--out", "{x}.html"], "--out", "an HTML page"),
        (["plot", "crossover", "--out", "{x}.svg"], "--out", "an SVG image"),
        (["plot", "crossover", "--out", "{x}.png"], "--out", "a PNG image"),
        (["calibrate", "copy", "--quick", "--out", "{x}.toml"], "--out", "a platform file"),
    ],
)
def test_other_outputs_refuse_a_file_of_another_kind(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    argv: list[str],
    option: str,
    what: str,
) -> None:
    x = tmp_path / "x"
    argv = [a.replace("{x}", str(x)) for a in argv]
    out = Path(argv[argv.index(option) + 1])
    out.write_text("cell_id,ops_per_s\n0123456789abcdef,1\n")
    before = out.read_bytes()
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"dmalab: error: {option} {out}: the file holds a sweep's results")
    assert what in err and "--force" in err and err.count("\n") == 1
    assert out.read_bytes() == before
