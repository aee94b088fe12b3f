"""The dmalab command line, in the order of the package dmalab.cli: the parser and main, the
shared options, then each command."""

from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys
from typing import Any

import pytest

from dmalab import cli
from dmalab.cli import main, options

SMALL = ["bench", "iova", "--quick", "--no-progress", "--workloads", "nic-ring", "--threads", "1"]
"""A bench run of a second or so: one workload, one thread."""


# --- dmalab.cli: build_parser, main
def test_every_command_is_a_module_that_registers_itself() -> None:
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    names = list(sub.choices)
    assert names == [m.__name__.rpartition(".")[2].replace("_", "-") for m in cli.COMMANDS]
    for module in cli.COMMANDS:
        assert callable(module.register) and callable(module.run)
    assert parser.parse_args(["bench", "iova"]).func is cli.bench.run
    assert parser.parse_args(["trace"]).func is cli.trace.run


def test_python_m_dmalab_is_the_same_command() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "dmalab", "--version"], capture_output=True, text=True, check=True
    )
    assert done.stdout.startswith("dmalab ")


def usage_error(capsys: pytest.CaptureFixture[str], args: list[str]) -> str:
    """The one line argparse writes on stderr for `args`, which it refuses with status 2."""
    with pytest.raises(SystemExit) as e:
        main(args)
    assert e.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("dmalab: error: ") and captured.err.count("\n") == 1
    return captured.err.rstrip("\n")


def test_usage_errors_are_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert "invalid choice: 'nope'" in usage_error(capsys, ["nope"])
    err = usage_error(capsys, ["plot", "crossover"])
    assert err == "dmalab: error: plot crossover: the following arguments are required: --out"
    assert "unrecognized arguments: --bogus" in usage_error(capsys, ["platforms", "--bogus"])
    err = usage_error(capsys, ["run", "x", "--choice", "tce_lock"])
    assert err.endswith(
        "argument --choice: expected NAME=OPTION (such as firmware=2001), got 'tce_lock'"
    )


def test_an_error_of_several_lines_is_written_as_one(
    capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path
) -> None:
    broken = tmp_path / "broken.toml"
    broken.write_text("x = [")
    for args in (["platforms", str(broken)], ["run", str(broken), "--no-progress"]):
        assert main(args) == 2
        err = capsys.readouterr().err
        assert err.startswith("dmalab: error: ") and err.count("\n") == 1
        assert err.endswith(
            "not valid TOML: TOML parse error at line 1, column 6: unclosed array, expected `]`\n"
        )

    assert cli._error("| a message of one line is kept whole") == 2
    assert capsys.readouterr().err == "dmalab: error: | a message of one line is kept whole\n"


def test_bad_integers_and_unwritable_files_are_clean_errors(
    capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path
) -> None:
    err = usage_error(capsys, ["trace", "--direction", "read", "--address", "-5", "--length", "10"])
    assert err.endswith("argument --address: -5 is outside 0..=2^64-1")
    missing = tmp_path / "no" / "such" / "dir" / "x.png"
    assert main(["plot", "crossover", "--out", str(missing)]) == 2
    assert f"the folder {missing.parent} does not exist" in capsys.readouterr().err


# --- dmalab.cli.options
def test_integer_option_reads_prefixes_and_names_its_range() -> None:
    assert options.u64("0x10") == 16
    assert options.integer(1, 64)("64") == 64
    with pytest.raises(argparse.ArgumentTypeError, match=r"outside 0\.\.=2\^64-1"):
        options.u64(str(2**64))
    with pytest.raises(argparse.ArgumentTypeError, match="not an integer: 'x'"):
        options.integer()("x")
    assert options.choice("firmware=2001") == ("firmware", "2001")
    with pytest.raises(argparse.ArgumentTypeError, match="expected NAME=OPTION"):
        options.choice("firmware")


def test_no_color_means_no_escape_sequences_on_a_terminal(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")  # rich takes the output for a terminal
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.delenv("NO_COLOR", raising=False)
    styled = ["reproduce", "P1-TX-ALIGNED", "--verbose"]
    assert main(styled) == 0
    assert "\x1b[" in capsys.readouterr().out
    monkeypatch.setenv("NO_COLOR", "1")
    for stderr in (False, True):
        console = options.console(stderr=stderr)
        assert console.is_terminal and console.color_system is None
    with_progress = [a for a in SMALL if a != "--no-progress"]
    for args in (styled, [*with_progress, "--allocators", "segtree"]):
        assert main(args) == 0
        captured = capsys.readouterr()
        assert "P1-TX-ALIGNED" in captured.out or "segtree" in captured.out
        assert "\x1b" not in captured.out + captured.err


# --- dmalab.cli.bench
def test_help_explains(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["bench", "iova", "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "map-unmap-1page" in out
    assert "--format" in out


def test_bad_threads_name_the_range(capsys: pytest.CaptureFixture[str]) -> None:
    err = usage_error(capsys, ["bench", "iova", "--threads", "0"])
    assert err == "dmalab: error: bench iova: argument --threads: 0 is outside 1..=64"


@pytest.mark.parametrize("seed", ["-1", str(2**64), "1e3"])
def test_bad_seed_is_refused_before_the_benchmark(
    capsys: pytest.CaptureFixture[str], seed: str
) -> None:
    err = usage_error(capsys, [*SMALL, "--seed", seed])
    assert err.startswith("dmalab: error: bench iova: argument --seed: ")
    assert "outside 0..=2^64-1" in err or "not an integer" in err


def test_the_largest_seed_runs(capsys: pytest.CaptureFixture[str]) -> None:
    args = [*SMALL, "--allocators", "segtree", "--format", "json", "--seed", hex(2**64 - 1)]
    assert main(args) == 0
    assert json.loads(capsys.readouterr().out)[0]["ops_per_s"] > 0


def test_address_bits_outside_what_the_workloads_run_in_are_refused(
    capsys: pytest.CaptureFixture[str],
) -> None:
    bench = ["bench", "iova", "--quick", "--no-progress", "--allocators", "segtree"]
    assert main([*bench, "--address-bits", "13"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "dmalab: error: --address-bits 13 is outside the valid range 29..=64 for the cells "
        "asked for (29: the narrowest domain that holds the starting live set of mixed with "
        "2 threads)\n"
    )
    for bits in ("24", "65", "-1", str(2**40)):
        assert main([*SMALL, "--address-bits", bits]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"dmalab: error: --address-bits {bits} is outside the valid range ")
        assert "25..=64" in err and err.count("\n") == 1
    assert main([*SMALL, "--allocators", "segtree", "--address-bits", "25"]) == 0
    assert "nic-ring" in capsys.readouterr().out


def test_unknown_allocator_is_named(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*SMALL, "--allocators", "splay"]) == 2
    err = capsys.readouterr().err
    assert "--allocators: unknown splay" in err
    assert "segtree" in err


def test_json_records(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*SMALL, "--allocators", "segtree", "rbtree", "--format", "json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert [r["allocator"] for r in records] == ["segtree", "rbtree"]
    keys = {"allocator", "workload", "threads", "ops_per_s", "p50_ns", "p99_ns", "p999_ns"}
    keys |= {"p9999_ns"}
    keys |= {"bytes_per_live_mapping", "default"}
    for r in records:
        assert keys <= r.keys()
        assert r["ops_per_s"] > 0
        assert r["p50_ns"] <= r["p99_ns"] <= r["p999_ns"] <= r["p9999_ns"]
    assert [r["default"] for r in records] == [True, False]


def test_table_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*SMALL, "--allocators", "segtree", "magazines+rbtree"]) == 0
    out = capsys.readouterr().out
    assert "segtree *" in out
    assert "nic-ring 1T ops/s vs magazines+rbtree" in out


# --- dmalab.cli.trace
def test_trace_scenario_prints_the_analyzer_view(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["trace", "p1-tx-unaligned"]) == 0
    out = capsys.readouterr().out
    assert "0x420A8" in out and "MRL" in out and "14.100 us" in out


def test_trace_json_and_missing_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["trace", "--direction", "write", "--address", "0xE800", "--length", "1514"]
    assert main([*args, "--format", "json"]) == 0
    t = json.loads(capsys.readouterr().out)
    assert [e["command"] for e in t["entries"]] == ["MWI", "MWI", "MWI", "MW"]
    assert main(["trace", "--direction", "read"]) == 2
    assert "missing: --address, --length" in capsys.readouterr().err


TRACE_FIELDS = 'platform = "ibm-p660-m2plus"\ndirection = "read"\naddress = 1\nlength_bytes = 10\n'


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\xff\xfe", "s.toml: cannot read: stream did not contain valid UTF-8"),
        (
            f"{TRACE_FIELDS}choices = 5\n".encode(),
            "s: scenario key `choices`: invalid type: integer `5`, expected a map",
        ),
        (
            f"{TRACE_FIELDS}[choices]\nfirmware = 2001\n".encode(),
            "s: scenario key `choices.firmware`: invalid type: integer `2001`, expected a string",
        ),
        (
            f"{TRACE_FIELDS}lenght = 10\n".encode(),
            "s: scenario key `lenght`: unknown field `lenght`, expected one of",
        ),
    ],
)
def test_trace_scenario_file_errors(
    capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path, content: bytes, message: str
) -> None:
    scenario = tmp_path / "s.toml"
    scenario.write_bytes(content)
    assert main(["trace", str(scenario)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dmalab: error: ") and err.count("\n") == 1
    assert message in err, err


def test_trace_scenario_choices_are_used(
    capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path
) -> None:
    scenario = tmp_path / "s.toml"
    scenario.write_text(f'{TRACE_FIELDS}[choices]\nfirmware = "2001"\n')
    assert main(["trace", str(scenario), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["entries"]
    assert main(["trace", str(scenario), "--choice", "firmware=nope"]) == 2
    assert "unknown option of firmware `nope`" in capsys.readouterr().err


# --- dmalab.cli.reproduce
def test_reproduce_one_claim_in_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["reproduce", "P1-TX-ALIGNED", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in rows] == ["P1-TX-ALIGNED"]
    assert rows[0]["passed"] is True


def test_reproduce_leads_with_its_summary_and_lists_fits_when_verbose(
    capsys: pytest.CaptureFixture[str],
) -> None:
    claims = ["reproduce", "P1-TX-UNALIGNED", "P1-TPUT", "P1-COPYBREAK"]
    assert main(claims) == 0
    out = capsys.readouterr().out
    assert out.startswith("4 of 4 claim rows pass: ") and "by a parameter fitted" in out
    assert "P1-COPYBREAK" in out and "fitted here" in out
    assert "read_fetch_latency_ns" not in out and "--verbose lists them" in out
    assert main([*claims, "--verbose"]) == 0
    out = capsys.readouterr().out
    assert "read_fetch_latency_ns" in out and "source: seed 001" in out
    assert main(["reproduce", "P7-NONE"]) == 2
    assert "unknown claim P7-NONE" in capsys.readouterr().err


def test_reproduce_exits_1_when_a_claim_fails(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from dmalab import sim

    real = sim.reproduce

    def one_failing(
        ids: list[str] | None = None,
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        rows, platforms = real(ids)
        rows[0] = {**rows[0], "passed": False}
        return rows, platforms

    assert main(["reproduce", "P0-TPUT"]) == 0
    capsys.readouterr()
    monkeypatch.setattr(sim, "reproduce", one_failing)
    rows = json.loads(
        (main(["reproduce", "P0-TPUT", "--format", "json"]), capsys.readouterr().out)[1]
    )
    assert rows[0]["passed"] is False
    assert main(["reproduce", "P0-TPUT"]) == 1
    assert "FAIL" in capsys.readouterr().out


# --- dmalab.cli.copybreak and dmalab.cli.platforms
def test_copybreak_and_platforms(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["copybreak", "--frame-bytes", "1514"]) == 0
    assert "Winner at 1514 bytes: copy" in capsys.readouterr().out
    assert main(["platforms"]) == 0
    listed = capsys.readouterr().out
    assert "ibm-p660-m2plus" in listed and "connectx-6dx" in listed
    assert main(["platforms", "ibm-p660-m2plus", "--choice", "firmware=2001"]) == 0
    assert "prefetch_boundary_bytes" in capsys.readouterr().out


# --- dmalab.cli.run
def test_run_takes_platform_choices(capsys: pytest.CaptureFixture[str]) -> None:
    def run(*extra: str) -> dict[str, Any]:
        sc = [
            "run",
            "p0-udp-rr-direct-window",
            "--format",
            "json",
            "--no-progress",
            "--no-intervals",
        ]
        assert main([*sc, *extra]) == 0
        report: dict[str, Any] = json.loads(capsys.readouterr().out)
        return report

    direct = run()
    assert direct["translation"] == "direct-window"
    locked = run("--choice", "slot=standard", "--choice", "tce_lock=table-lock")
    assert locked["translation"] == "tce"
    assert locked["choices"]["tce_lock"] == "table-lock"
    assert locked["breakdown_us"]["server table-lock wait"] > 0
    assert locked["latency_mean_us"] > direct["latency_mean_us"]
    with pytest.raises(SystemExit):
        main(["run", "p0-udp-rr-direct-window", "--choice", "tce_lock"])
    assert main(["run", "p0-udp-rr-direct-window", "--choice", "tce_lock=nope"]) == 2
    assert "tce_lock" in capsys.readouterr().err


def test_run_set_changes_scenario_keys(capsys: pytest.CaptureFixture[str]) -> None:
    def run(*sets: str) -> dict[str, Any]:
        args = ["run", "grace-nvme8-strict", "--format", "json", "--no-progress", "--no-intervals"]
        if not any(s.startswith("workload.ios=") for s in sets):
            args += ["--set", "workload.ios=3000"]  # a key is set once: a run's own length wins
        for s in sets:
            args += ["--set", s]
        assert main(args) == 0
        report: dict[str, Any] = json.loads(capsys.readouterr().out)
        return report

    one = run()
    assert one["dma_transfers"] == 3000 and one["workload"]["sockets"] == 1
    two = run("workload.sockets=2", "workload.queues_per_device=4")
    assert two["workload"]["sockets"] == 2 and two["workload"]["queues_per_device"] == 4
    assert two["breakdown_us"]["socket link crossings"] > 0
    assert two["breakdown_us"]["submission queue lock wait"] > 0
    assert one["breakdown_us"]["socket link crossings"] == 0
    assert run("mapping.flush=per-cpu")["flush"] != one["flush"]
    # A tree allocator without per-CPU caches: 64 threads queue on its lock.
    tree = run('mapping.allocator="rbtree"', "mapping.flush=per-cpu")
    assert tree["breakdown_us"]["IOVA allocator lock wait"] > 1.0
    assert tree["ops_per_s"] < run("mapping.flush=per-cpu")["ops_per_s"] / 2
    # One queue per drive, completed where its interrupt lands: 8 of the 64 CPUs complete.
    shared = ("workload.ios=40000", "workload.queues_per_device=1")
    irq = run(*shared, 'workload.completion="queue-interrupt"')
    assert irq["workload"]["completion"] == "queue-interrupt"
    assert irq["ops_per_s"] < run(*shared)["ops_per_s"] / 2
    # A value out of range names the key and its range; a malformed --set is an argparse error.
    assert main(["run", "grace-nvme8-strict", "--set", "workload.sockets=9"]) == 2
    err = capsys.readouterr().err
    assert "workload.sockets" in err and "1..=8" in err
    # Within the range, but more sockets than the two-socket host has.
    assert main(["run", "grace-nvme8-strict", "--no-intervals", "--set", "workload.sockets=3"]) == 2
    err = capsys.readouterr().err
    assert "workload.sockets is 3; valid: 1 or 2: the platform describes a two-socket" in err
    with pytest.raises(SystemExit):
        main(["run", "grace-nvme8-strict", "--set", "workload.sockets"])
    assert "TABLE.KEY=VALUE" in capsys.readouterr().err
    # A key set both as a value and as a table is a clean error, not a traceback.
    assert (
        main(["run", "grace-nvme8-strict", "--set", "workload=1", "--set", "workload.ios=5"]) == 2
    )
    assert "workload was set to a value" in capsys.readouterr().err


def test_run_prints_metrics_and_breakdown(
    capsys: pytest.CaptureFixture[str], tmp_path: pathlib.Path
) -> None:
    sc = tmp_path / "small.toml"
    sc.write_text(
        'platform = "intel-vtd-2008-server"\n[mapping]\ntranslation = "page-table"\n'
        'allocator = "bitmap"\n[workload]\nkind = "block"\nio_bytes = 1024\nios = 1000\n'
    )
    assert main(["run", str(sc), "--no-intervals"]) == 0
    captured = capsys.readouterr()
    assert "time per operation" in captured.out and "IOTLB invalidation" in captured.out
    assert "DMA transfers simulated" in captured.err
    assert main(["run", str(sc), "--format", "json", "--no-progress", "--no-intervals"]) == 0
    assert json.loads(capsys.readouterr().out)["dma_transfers"] == 1000


def test_run_writes_no_empty_line_to_a_file_or_pipe(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("dmalab: error: scenario is nope; valid: ") and err.count("\n") == 1
    assert main(["run", "p0-udp-rr-direct-window", "--format", "json", "--no-intervals"]) == 0
    err = capsys.readouterr().err
    assert err.startswith("p0-udp-rr-direct-window: ") and err.count("\n") == 1


def test_run_draws_its_progress_on_a_terminal(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert main(["run", "p0-udp-rr-direct-window", "--format", "json", "--no-intervals"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["dma_transfers"] > 0
    assert "DMA transfers simulated" in captured.err


# --- dmalab.cli.vhost (plot and calibrate: test_plot.py, test_calibrate.py)
def test_vhost_sweep_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["vhost", "--packets", "500", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 84
    for r in rows:
        assert r["planner"] >= 0.99 * max(r["cpu_only"], r["threshold"])


def test_the_longest_trace_accepted_runs_in_bounded_memory() -> None:
    """A trace at the largest length ``trace`` accepts stays under a 4 GiB address space."""
    import shutil

    prlimit = shutil.which("prlimit")
    assert prlimit is not None, "prlimit (util-linux) is needed for this test"
    dmalab = pathlib.Path(sys.executable).with_name("dmalab")
    base = [prlimit, f"--as={4 << 30}", str(dmalab), "trace", "--direction", "read"]
    base += ["--platform", "pcie-gen3-x8-server", "--address", "0x1000"]
    for fmt in ("json", "table"):
        done = subprocess.run(
            [*base, "--length", str(1 << 24), "--format", fmt],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        assert "16777216 bytes" in done.stdout or '"length_bytes": 16777216' in done.stdout
    over = subprocess.run(
        [*base, "--length", str((1 << 24) + 1)], capture_output=True, text=True, check=False
    )
    assert over.returncode == 2
    assert "length_bytes is 16777217; valid: 1..=16777216 (2^24" in over.stderr


def test_vhost_refuses_more_packets_than_it_can_count(capsys: pytest.CaptureFixture[str]) -> None:
    err = usage_error(capsys, ["vhost", "--packets", str(2**40), "--format", "json"])
    assert "packets" in err and "1..=16777216" in err


def test_bench_targets_set_the_exit_status_only_when_checked(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from dmalab import bench

    missed = [bench.Check("nic-ring 1T ops/s vs rbtree", 0.5, ">= 3x", False)]
    monkeypatch.setattr(bench, "checks", lambda records: missed)
    assert main(SMALL) == 0
    out = capsys.readouterr().out
    assert "| FAIL" not in out.replace("│", "|") and "--check marks each target" in out
    assert main([*SMALL, "--check"]) == 1
    captured = capsys.readouterr()
    assert "│ FAIL" in captured.out
    assert "targets missed: nic-ring 1T ops/s vs rbtree" in captured.err


def test_reproduce_reads_on_an_80_column_terminal() -> None:
    import io
    import re

    from rich.console import Console

    from dmalab import sim
    from dmalab.cli import reproduce

    ids = ["P0-TPUT", "P1-TX-ALIGNED", "P2-NUMA-MEM", "P4-PF-NIC", "P4-RO-1080"]
    rows, platforms = sim.reproduce(ids)
    out = io.StringIO()
    console = Console(file=out, width=80, no_color=True)
    reproduce._print_claims(rows, platforms, console, verbose=False)
    text = out.getvalue()
    assert max(len(line) for line in text.splitlines()) <= 80
    # Words stay whole: each word of a case appears as it is, never split across lines.
    for word in ("throughput", "prefetch", "P2-NUMA-MEM", "P1-TX-ALIGNED"):
        assert word in text
    assert not re.search(r"\bthroug\b|\bthroug…", text)
    assert "pass, fit" in text and "FAIL" in text
    wide = io.StringIO()
    reproduce._print_claims(rows, platforms, Console(file=wide, width=200), verbose=False)
    assert "tolerance" in wide.getvalue() and "fitted here" in wide.getvalue()


# --- issue 45: progress, help texts, lists
class _Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def _console(terminal: bool, width: int = 80) -> Any:  # noqa: ANN401 - a rich Console
    import io

    from rich.console import Console

    return Console(file=io.StringIO(), force_terminal=terminal, width=width)


def test_progress_in_a_pipe_is_a_few_whole_lines() -> None:
    out, clock = _console(False), _Clock()
    with options.ProgressLine(out, every=5.0, clock=clock) as line:
        for i in range(1, 1001):
            clock.now = i * 0.05  # 50 s in all: an update every 50 ms
            line.update(i, 1000, "cell")
    text = out.file.getvalue()
    lines = text.splitlines()
    assert "\r" not in text and text.endswith("\n")
    # One line every 5 s at most (the first, then ten), and the last one always.
    assert 2 <= len(lines) <= 12, lines
    assert lines[-1] == "[1,000/1,000] cell"
    assert all(ln.startswith("[") for ln in lines)


def test_progress_on_a_terminal_redraws_one_line() -> None:
    out, clock = _console(True, width=40), _Clock()
    with options.ProgressLine(out, clock=clock) as line:
        line.update(1, 3, "a long name that is wider than the terminal is")
        clock.now = 1.0
        line.update(2, 3, "b")
        line.update(3, 3, "c")  # the last one, however soon
    text = out.file.getvalue()
    draws = text.split("\r")[1:]
    assert len(draws) == 3 and text.count("\n") == 1 and text.endswith("\n")
    assert all(len(d.rstrip("\n")) <= 39 for d in draws)  # never wraps
    # A shorter line blanks out what is left of the longer one before it.
    assert draws[1] == "[2/3] b".ljust(39)
    assert draws[2].startswith("[3/3] c")


def test_progress_off_writes_nothing() -> None:
    out = _console(True)
    with options.ProgressLine(out, enabled=False) as line:
        line.update(1, 1, "x")
    assert out.file.getvalue() == ""


def test_bench_progress_is_redrawn_on_a_terminal(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")
    with_progress = [a for a in SMALL if a != "--no-progress"]
    assert main([*with_progress, "--allocators", "segtree", "rbtree", "--format", "json"]) == 0
    err = capsys.readouterr().err
    assert err.count("\r") >= 2 and err.count("\n") == 1 and err.endswith("\n")
    monkeypatch.delenv("FORCE_COLOR")
    args = ["bench", "map", "--maps", "1", "--threads", "1,2,4", "--format", "json"]
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "\r" not in err and 1 <= err.count("\n") <= 3, err


def test_bench_iova_takes_commas_and_spaces(capsys: pytest.CaptureFixture[str]) -> None:
    parser = cli.build_parser()
    for words in (["1,2"], ["1", "2"], ["1,", "2"]):
        args = parser.parse_args(["bench", "iova", "--threads", *words])
        assert args.threads == [1, 2]
    args = parser.parse_args(["bench", "iova", "--allocators", "segtree,rbtree", "bitmap"])
    assert args.allocators == ["segtree", "rbtree", "bitmap"]
    assert "outside 1..=64" in usage_error(capsys, ["bench", "iova", "--threads", "1,65"])
    assert "expected a value" in usage_error(capsys, ["bench", "iova", "--workloads", ","])


@pytest.mark.parametrize(
    ("command", "option", "says"),
    [
        (["bench", "map"], "--direction", "(default bidirectional)"),
        (
            ["bench", "map"],
            "--dma-bits",
            "32 or 64 (default: with --device, the device's own addressing, else 32",
        ),
        (["vhost"], "--platform", "(default xeon-8180-cbdma)"),
        (["vhost"], "--packets", "1..=16777216 (default 20000)"),
        (["iotlb-alias"], "--flush", "(default strict)"),
        (["bench", "iova"], "--threads", "comma- or space-separated, each 1..=64 (default 1,2)"),
    ],
)
def test_help_gives_defaults_and_ranges(
    command: list[str], option: str, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main([*command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    text = text[text.index("options:") :]
    start = text.index(option + " ")
    assert says in text[start : start + 300], text[start : start + 300]


def test_a_misspelt_required_key_is_named(
    tmp_path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = pathlib.Path(__file__).resolve().parents[2]
    text = (root / "platforms" / "pcie-gen3-x8-server.toml").read_text()
    assert "\nlanes =" in text
    path = tmp_path / "typo.toml"
    path.write_text(text.replace("\nlanes =", "\nlanez =", 1))
    assert main(["platforms", str(path)]) == 2
    err = capsys.readouterr().err
    assert "missing field `bus.pcie.lanes`" in err and "the file has `lanez`: a typo?" in err


def test_reproduce_verbose_gives_an_expected_failures_reason_once(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The reason is in the list under the table; the claim's own section points to it rather
    than print it again (it printed it twice)."""
    from dmalab import claims

    assert main(["reproduce", "P4-RO-1080", "--verbose"]) == 0
    out = capsys.readouterr().out
    known = next(e for e in claims.EXPECTED_FAILURES if e.id == "P4-RO-1080")
    assert out.count(known.reason[:60]) == 1
    assert "expected failure (fails): its reason is listed above" in out
