"""Every option of every command, walked from the argparse parser itself (so that a new option
is covered without editing this file): each option that takes a value is given values no option
accepts as meant (empty, binary junk, inf, nan, a huge number, a negative one), and each must end
in one line on stderr, ``dmalab: error: ...``, exit status 2, no traceback and nothing written
to the current folder. Then the options that do not apply to what was asked are refused by
name, with the reason."""

from __future__ import annotations

import argparse
import contextlib
import io
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from dmalab import cli

BAD = ["", "\x00\xff", "inf", "nan", "1e308", str(2**80), "-1"]
"""Values given to every option that takes one."""

CORPUS_DIR = str(
    Path(__file__).resolve().parents[2]
    / "validation/pcie-bench/nfp6000-1.2GHz_hsw-Xeon-E5-2620v3_dell-t630-iommu"
)
"""One directory of the shipped validation corpus."""

RUN = "p3-iommu-off"
"""A small run scenario (its runs are cut to a few I/Os below)."""

# The arguments each command gets beside the option under test: enough to get past its
# required ones, and small, so that a value that were accepted would run something short.
# ``{in}`` is a folder outside the current one, holding the input files.
BASE: dict[str, list[str]] = {
    "bench iova": ["--quick", "--no-progress", "--workloads", "nic-ring", "--threads", "1"],
    "bench dma": ["--no-intervals", "--no-progress"],
    "bench map": ["--maps", "1", "--no-progress"],
    "bench copy": ["--size", "64"],
    "trace": ["--direction", "read", "--address", "0", "--length", "64"],
    "reproduce": ["P1-TX-ALIGNED"],
    "report": ["--claims", "--run", "none", "--out", "{in}/r.html"],
    "copybreak": ["--frame-bytes", "64"],
    "hints": [],
    "platforms": ["ibm-p660-m2plus"],
    "inspect": ["--root", "{in}"],
    "run": [RUN, "--set", "workload.ios=10", "--no-progress"],
    "sweep": ["{in}/s.toml", "--out", "{in}/s.csv", "--no-progress", "--workers", "1"],
    "compare": [RUN, RUN, "--set", "workload.ios=10"],
    "iova-space": [RUN, "--ios", "10", "--no-progress"],
    "iotlb-alias": ["--ios", "1", "--streams", "1"],
    "plot crossover": ["--out", "{in}/p.svg"],
    "plot dma": ["--out", "{in}/p.svg"],
    "plot copy": ["--out", "{in}/p.svg"],
    "plot iotlb": ["--out", "{in}/p.svg"],
    "plot map": ["--out", "{in}/p.svg"],
    "plot validate": ["--out", "{in}/p.svg"],
    "calibrate copy": ["--quick"],
    "calibrate fit": ["--params", "iommu.invalidate_ns", "--measurements", "{in}/m.csv"],
    "vhost": ["--packets", "1"],
    "validate": ["--pcie-bench", "{corpus}", "--no-intervals", "--no-progress"],
    "advise": [
        "--host",
        "grace-2s",
        "--workload",
        "nvme:1x4K,qd1",
        "--ios",
        "1000",
        "--no-intervals",
        "--no-progress",
    ],
}

# (command, option, value) that are valid, with the reason: these must end cleanly (exit 0, or
# one error line) and may write only the file the value names.
VALID = {
    **{
        ("run", "--timeline", v): "a timeline file of any name is written where it is named"
        for v in ("inf", "nan", "1e308", str(2**80), "-1")
    },
    ("bench map", "--node", "-1"): "-1 is the kernel tool's own default: CPUs unbound",
}


def _commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Each command (``bench iova``, ``plot dma``, ...) and its own parser."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield " ".join(path), parser
    for action in subs:
        for name, sub in action.choices.items():
            yield from _commands(sub, (*path, name))


def _cases() -> list[tuple[str, str]]:
    cases = []
    for command, parser in _commands(cli.build_parser()):
        # Every option that takes a value, hidden ones (that only some kinds take) included.
        cases += [
            (command, a.option_strings[-1])
            for a in parser._actions
            if a.option_strings and a.nargs != 0
        ]
    return cases


CASES = _cases()


def test_the_walk_covers_every_command() -> None:
    assert {c for c, _ in CASES} <= set(BASE), "a new command needs its BASE arguments"
    assert {c for c, _ in _commands(cli.build_parser())} == set(BASE)
    assert len(CASES) > 60


@pytest.fixture
def folders(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Path]:
    """An input folder (a sweep file, a measurements file) and an empty current folder."""
    inputs, here = tmp_path / "in", tmp_path / "here"
    inputs.mkdir()
    here.mkdir()
    (inputs / "s.toml").write_text(
        f'scenario = "{RUN}"\n[set]\n"workload.ios" = 10\n[grid]\n"workload.threads" = [1]\n'
    )
    (inputs / "m.csv").write_text(f"scenario,metric,measured\n{RUN},ops_per_s,1000\n")
    monkeypatch.chdir(here)
    return inputs, here


def _argv(command: str, option: str, value: str, inputs: Path) -> list[str]:
    base = [a.replace("{in}", str(inputs)).replace("{corpus}", CORPUS_DIR) for a in BASE[command]]
    # Leave out the option under test (and its value) where the base gives it.
    if option in base:
        i = base.index(option)
        nxt = base[i + 1] if i + 1 < len(base) else None
        base = base[:i] + base[i + 2 if nxt is not None and not nxt.startswith("--") else i + 1 :]
    return [*command.split(), *base, f"{option}={value}"]


def _main(argv: list[str]) -> tuple[int, str, str]:
    """Run ``dmalab ARGV`` here: its exit status, stdout and stderr. An exception that
    escapes (a traceback for the user) fails the test."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = cli.main(argv)
        except SystemExit as e:
            code = e.code if isinstance(e.code, int) else 1
        except Exception as e:
            pytest.fail(f"dmalab {' '.join(map(repr, argv))}: traceback: {e!r}")
    return code, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(("command", "option"), CASES, ids=[" ".join(c) for c in CASES])
def test_bad_values_end_in_one_line(command: str, option: str, folders: tuple[Path, Path]) -> None:
    inputs, here = folders
    before = sorted(os.listdir(inputs))
    for value in BAD:
        argv = _argv(command, option, value, inputs)
        code, _, err = _main(argv)
        what = f"dmalab {' '.join(map(repr, argv))}"
        assert "Traceback" not in err, f"{what}: {err}"
        if (command, option, value) in VALID:
            assert code in (0, 2), f"{what}: exit {code}: {err}"
            written = set(os.listdir(here)) - {value}
            assert not written, f"{what} wrote {written}"
            for name in os.listdir(here):
                (here / name).unlink()
            continue
        assert code == 2, f"{what}: exit {code}, stderr {err!r}"
        lines = err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("dmalab: error: "), f"{what}: {err!r}"
        assert err.endswith("\n")
        assert not os.listdir(here), f"{what} wrote {os.listdir(here)}"
        assert sorted(os.listdir(inputs)) == before, f"{what} wrote into the input folder"


# Options that do not apply to what was asked: refused by name, with the reason.
INAPPLICABLE = [
    (["trace", "p1-tx-unaligned", "--length", "100"], "--length"),
    (["trace", "p1-tx-unaligned", "--address", "0"], "--address"),
    (["trace", "p1-tx-unaligned", "--direction", "read"], "--direction"),
    (["trace", "p1-tx-unaligned", "--hint", "prefetch_lines=2"], "--hint"),
    (["trace", "p1-tx-unaligned", "--platform", "ibm-p660-m2plus"], "--platform"),
    (
        [
            "trace",
            "--direction",
            "read",
            "--address",
            "0",
            "--length",
            "64",
            "--mapping",
            "consistent",
        ],
        "--mapping",
    ),
    (["hints", "--packets", "1024"], "--packets"),
    (["hints", "--platform", "xeon-broadwell-2s", "--protocol", "tcp"], "--protocol"),
    (["hints", "--platform", "xeon-broadwell-2s", "--mtu-bytes", "1500"], "--mtu-bytes"),
    (["plot", "crossover", "--sweep", "offset", "--out", "x.svg"], "--sweep"),
    (["plot", "copy", "--device", "nvme-gen4", "--out", "x.svg"], "--device"),
    (["plot", "dma", "--size", "128", "--out", "x.svg"], "--size"),
    (["bench", "dma", "--page-bytes", "2097152", "--no-intervals"], "--page-bytes"),
    (["bench", "dma", "--no-intervals", "--samples", "8"], "--samples"),
    (["validate", "--pcie-bench", CORPUS_DIR, "--no-intervals", "--samples", "8"], "--samples"),
    (["inspect", "--dumps", CORPUS_DIR, "--device", "03:00.0"], "--device"),
    (["bench", "dma", "--no-intervals", "--seed", "2"], "--seed"),
    (["bench", "dma", "--sweep", "full", "--direction", "write"], "--direction"),
    (["report", "--run", "none", "--set", "workload.ios=5"], "--set"),
    (["inspect", "--device", "zz:zz.z"], "--device"),
    (["inspect", "--name", "x"], "--name"),
    (
        ["calibrate", "fit", "--max-error", "-1", "--params", "a.b", "--measurements", "m.csv"],
        "--max-error",
    ),
    (["calibrate", "fit", "--params", "a.b", "--measurements", "m.csv", "--force"], "--force"),
    (
        ["calibrate", "fit", "--params", "a.b", "--measurements", "m.csv", "--flush", "lazy"],
        "--flush",
    ),
    (
        ["calibrate", "fit", "--params", "a.b", "--measurements", "m.csv", "--scenario", RUN],
        "--scenario",
    ),
    (["run", RUN, "--timeline-limit", "5"], "--timeline-limit"),
    (["run", RUN, "--no-intervals", "--samples", "64"], "--samples"),
    (["run", RUN, "--no-intervals", "--seed", "2"], "--seed"),
    (["bench", "copy", "--size", "64", "--no-intervals", "--samples", "8"], "--samples"),
    (["bench", "map", "--maps", "1", "--no-intervals", "--seed", "2"], "--seed"),
    (["plot", "dma", "--no-intervals", "--samples", "8", "--out", "x.svg"], "--samples"),
    (["sweep", "s.toml", "--out", "x.csv", "--no-intervals", "--samples", "8"], "--samples"),
    (["platforms", "ibm-p660-m2plus", "--size", "64"], "--size"),
    (["platforms", "ibm-p660-m2plus", "--direction", "write"], "--direction"),
    (["platforms", "--check", "--sensitivity", "latency_ns"], "--sensitivity"),
    (
        [
            *"bench iova --quick --workloads nic-ring --threads 1 --allocators bitmap".split(),
            "--check",
        ],
        "--check",
    ),
]


@pytest.mark.parametrize(
    ("argv", "option"), INAPPLICABLE, ids=[" ".join(a) for a, _ in INAPPLICABLE]
)
def test_options_that_do_not_apply_are_refused(
    argv: list[str], option: str, folders: tuple[Path, Path]
) -> None:
    inputs, here = folders
    argv = [str(inputs / a) if a in ("m.csv", "s.toml") else a for a in argv]
    code, out, err = _main(argv)
    assert code == 2 and out == "", err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("dmalab: error: "), err
    assert option in lines[0], err
    assert not os.listdir(here)


def test_an_option_given_at_its_default_value_is_still_refused(
    folders: tuple[Path, Path],
) -> None:
    # --packets 4096 is hints' default: given, it is still an option that does not apply.
    code, _, err = _main(["hints", "--packets", "4096"])
    assert code == 2 and "--packets" in err, err
    # Left out, the default is no error.
    assert cli.given_options(cli.build_parser(), ["hints"]) == frozenset()
    assert cli.given_options(cli.build_parser(), ["hints", "--packets=4096"]) == {"packets"}


# A key given twice is refused, never the last one silently kept.
TWICE = [
    (["run", RUN, "--set", "workload.ios=10", "--set", "workload.ios=20"], "--set workload.ios"),
    (
        ["run", RUN, "--set", "workload.ios=10", "--choice", "a=b", "--choice", "a=c"],
        "--choice a",
    ),
    (
        [
            *"trace --direction read --address 0 --length 64 --platform hp-rx2600-zx1".split(),
            *("--hint", "prefetch_lines=1", "--hint", "prefetch_lines=2"),
        ],
        "--hint prefetch_lines",
    ),
    (
        [
            *"calibrate fit --params iommu.invalidate_ns --measurements m.csv".split(),
            *("--bounds", "iommu.invalidate_ns=1:2", "--bounds", "iommu.invalidate_ns=3:4"),
        ],
        "--bounds iommu.invalidate_ns",
    ),
    (
        ["advise", "--host", "epyc-rome-2s", "--workload", "nic:100G,64B,window=1G,window=4K"],
        "window given twice",
    ),
    (["advise", "--host", "grace-2s", "--workload", "map:16,granule2,granule4"], "granule"),
]


@pytest.mark.parametrize(("argv", "needle"), TWICE, ids=[n for _, n in TWICE])
def test_a_key_given_twice_is_refused(
    argv: list[str], needle: str, folders: tuple[Path, Path]
) -> None:
    inputs, here = folders
    argv = [str(inputs / a) if a == "m.csv" else a for a in argv]
    code, out, err = _main(argv)
    assert code == 2 and out == "", err
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("dmalab: error: "), err
    assert needle in lines[0] and "twice" in lines[0], err
    assert not os.listdir(here)


# A file that is not there is named as the user gave it, with its option, in a few words.
MISSING = [
    (["sweep", "{gone}.toml", "--out", "x.csv", "--no-progress"], "{gone}.toml: no such file"),
    (
        ["calibrate", "fit", "--params", "iommu.invalidate_ns", "--measurements", "{gone}.csv"],
        "--measurements {gone}.csv: no such file",
    ),
    (
        ["calibrate", "fit", "--params", "iommu.invalidate_ns", "--measurements={gone}.csv"],
        "--measurements {gone}.csv: no such file",
    ),
    (["compare", "{gone}.json", RUN], "{gone}.json: no such file"),
    (
        ["advise", "--host", "grace-2s", "--workload", "{gone}.toml"],
        "--workload {gone}.toml: no such file",
    ),
]


@pytest.mark.parametrize(("argv", "line"), MISSING, ids=[" ".join(a[:2]) for a, _ in MISSING])
def test_a_missing_file_is_one_plain_line_naming_it(
    argv: list[str], line: str, folders: tuple[Path, Path]
) -> None:
    inputs, _ = folders
    gone = str(inputs / "gone")
    code, out, err = _main([a.replace("{gone}", gone) for a in argv])
    assert code == 2 and out == "", err
    assert err == f"dmalab: error: {line.replace('{gone}', gone)}\n"
    assert "Errno" not in err
