"""A generated test over every input (property-based, with hypothesis).

- Every option of every command (walked from the CLI's own parser, as in
  ``test_options_walk``) gets generated hostile values: text, binary, numbers far out of any
  range, NaN and infinities.
- Every file dmalab reads (measurements as CSV, fio JSON and ``dma_map_benchmark`` output,
  sweep, scenario, platform and device TOML, saved runs, pcie-bench CSV and system dumps) gets
  generated contents: empty, binary, a valid file truncated anywhere, hostile tokens spliced
  in, a valid file repeated.
- The Python API's runs get generated hostile values for their inputs.

Each case must end with exit status 0, 1 or 2 and, on 2, one ``dmalab: error:`` line, never a
traceback, a panic or dmalab's own "internal error" line; the API raises a ``DmalabError``
subclass. The generation is derandomized (the same cases on every run, so CI is repeatable);
the cases that found bugs are kept below as ``@example`` entries, the corpus replayed first on
every run. Budgets are bounded (``max_examples``) so that this runs in CI in a few minutes.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from dmalab import DmalabError, _native, sim
from test_options_walk import BASE, CASES, CORPUS_DIR, RUN, _argv, _main

SETTINGS = settings(
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

TOKENS = [
    b"", b"nan", b"NaN", b"inf", b"-inf", b"-1", b"0", b"-0", b"1e308", b"1e-400",
    str(2**80).encode(), b"abc", b"\x00", b"\xff\xfe", b",", b"\n", b'"', b"[", b"]",
    b"{", b"}", b"=", b":", b"\t", b"#", b"\xe2\x80\x8b",
]  # fmt: skip
"""Spliced into valid files."""

VALUES = st.one_of(
    st.sampled_from([t.decode("latin-1") for t in TOKENS]),
    st.text(max_size=24),
    # Out of every range, or small enough that an accepted value runs in a moment.
    st.integers(-(2**70), -1).map(str),
    st.integers(2**31, 2**70).map(str),
    st.integers(0, 3).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.binary(max_size=12).map(lambda b: b.decode("latin-1")),
)
"""Hostile values for an option."""


def _clean(argv: list[str], code: int, err: str) -> None:
    """The contract every case keeps: a status of 0, 1 or 2, and on 2 one error line."""
    what = f"dmalab {' '.join(map(repr, argv))}"
    assert code in (0, 1, 2), f"{what}: exit {code}: {err}"
    for bad in ("Traceback", "panicked", "internal error", "RUST_BACKTRACE"):
        assert bad not in err, f"{what}: {err}"
    if code == 2:
        errors = [ln for ln in err.splitlines() if ln.startswith("dmalab: error: ")]
        assert len(errors) == 1, f"{what}: {err!r}"


@pytest.fixture(scope="module")
def inputs() -> Any:  # noqa: ANN401 (a Path; the fixture is module-scoped)
    """A folder outside the current one, with the files the commands' base arguments name."""
    folder = Path(tempfile.mkdtemp(prefix="dmalab-gen-"))
    (folder / "s.toml").write_text(
        f'scenario = "{RUN}"\n[set]\n"workload.ios" = 10\n[grid]\n"workload.threads" = [1]\n'
    )
    (folder / "m.csv").write_text(f"scenario,metric,measured\n{RUN},ops_per_s,1000\n")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@settings(SETTINGS, max_examples=400)
@given(case=st.sampled_from(CASES), value=VALUES)
@example(case=("run", "--timeline-limit"), value="100000000")
@example(case=("sweep", "--ray"), value="127.0.0.1:1")
@example(case=("calibrate fit", "--params"), value="io.complete_ns,io.complete_ns")
def test_every_option_with_a_generated_value_ends_cleanly(
    case: tuple[str, str], value: str, inputs: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    here = tmp_path_factory.mktemp("here")
    command, option = case
    argv = _argv(command, option, value, inputs)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(here)
        code, _, err = _main(argv)
    _clean(argv, code, err)


# The files each command reads: its arguments (``{f}`` is the generated file, ``{out}`` an
# output path) and a valid example of the file.
def _saved_run() -> bytes:
    report = sim.run(RUN, overrides={"workload": {"ios": 10}})
    return json.dumps(report).encode()


PCIE_BENCH = Path(CORPUS_DIR)
DMB_HEAD = "dma mapping benchmark: threads:4 seconds:20 node:-1 dir:BIDIRECTIONAL granule: 1\n"
FILES: dict[str, tuple[list[str], str, bytes | None]] = {
    "measurements csv": (
        ["calibrate", "fit", "--params", "iommu.invalidate_ns", "--measurements", "{f}"],
        ".csv",
        b"scenario,workload.ios,metric,measured\np3-iommu-off,200,ops_per_s,140000\n",
    ),
    "fio json": (
        ["calibrate", "fit", "--params", "iommu.invalidate_ns", "--kind", "fio",
         "--scenario", RUN, "--measurements", "{f}"],
        ".json",
        json.dumps({"global options": {"bs": "4k"}, "jobs": [
            {"jobname": "a", "read": {"iops": 1000.0, "clat_ns": {"mean": 5000.0}}}]}).encode(),
    ),
    "dma_map_benchmark output": (
        ["calibrate", "fit", "--params", "iommu.invalidate_ns", "--kind", "dma-map-benchmark",
         "--measurements", "{f}"],
        ".txt",
        (DMB_HEAD + "average map latency(us):0.9 standard deviation:0.4\n"
         "average unmap latency(us):1.9 standard deviation:1.1\n").encode(),
    ),
    "validate measurements": (
        ["validate", "--measurements", "{f}", "--no-intervals", "--no-progress"],
        ".csv",
        b"scenario,workload.ios,metric,measured\np3-iommu-off,200,ops_per_s,140000\n",
    ),
    "sweep toml": (
        ["sweep", "{f}", "--out", "{out}.csv", "--no-progress", "--workers", "1"],
        ".toml",
        f'scenario = "{RUN}"\n[set]\n"workload.ios" = 10\n[grid]\n"workload.seed" = [1, 2]\n'
        .encode(),
    ),
    "scenario toml": (
        ["run", "{f}", "--no-intervals", "--no-progress", "--set", "workload.ios=10"],
        ".toml",
        None,  # the built-in scenario's own text
    ),
    "platform toml": (["platforms", "{f}"], ".toml", _native.platform_text("ibm-p660-m2plus")
                      .encode()),
    "device toml": (
        ["platforms", "grace-2s", "--device", "{f}"],
        ".toml",
        _native.device_text("samsung-pm1743").encode(),
    ),
    "saved run json": (["compare", "{f}", "{f}"], ".json", None),
    "pcie-bench csv": (
        ["validate", "--pcie-bench", "{dir}", "--no-intervals", "--no-progress"],
        "bw_dma_off_rd.csv",
        b"".join((PCIE_BENCH / "bw_dma_off_rd.csv").read_bytes().splitlines(True)[:4]),
    ),
    "system dump": (
        ["inspect", "--dumps", "{dir}"],
        "sys-cpuinfo.txt",
        (PCIE_BENCH / "sys-cpuinfo.txt").read_bytes()[:4000],
    ),
}  # fmt: skip


def _sample(name: str) -> bytes:
    if name == "scenario toml":
        return (Path(__file__).resolve().parents[2] / "scenarios" / f"{RUN}.toml").read_bytes()
    if name == "saved run json":
        return _saved_run()
    sample = FILES[name][2]
    assert sample is not None
    return sample


def _contents(sample: bytes) -> st.SearchStrategy[bytes]:
    """Hostile contents made from a valid ``sample``."""
    n = len(sample)
    at = st.integers(0, n)
    token = st.sampled_from(TOKENS)
    return st.one_of(
        st.just(b""),
        st.binary(max_size=300),
        at.map(lambda i: sample[:i]),
        st.tuples(at, token).map(lambda t: sample[: t[0]] + t[1] + sample[t[0] :]),
        st.tuples(at, st.integers(1, 16), token).map(
            lambda t: sample[: t[0]] + t[2] + sample[t[0] + t[1] :]
        ),
        st.just(sample * 3),
        st.just(sample),
    )


@pytest.mark.parametrize("name", list(FILES))
def test_every_file_with_generated_contents_ends_cleanly(
    name: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    template, suffix, _ = FILES[name]
    sample = _sample(name)

    @settings(SETTINGS, max_examples=25)
    @given(contents=_contents(sample))
    # Found by this test: a binary saved run (UnicodeDecodeError), a saved run missing what
    # compare reads (KeyError).
    @example(contents=b"\x80")
    @example(contents=b'{"scenario": 1, "platform": 2, "breakdown_us": 3, "mapper": 4}')
    def check(contents: bytes) -> None:
        work = tmp_path_factory.mktemp("gen")
        here = work / "here"
        here.mkdir()
        if "{dir}" in template:
            # A copy of one corpus directory (its name says the host) with one file replaced.
            folder = work / PCIE_BENCH.name
            shutil.copytree(PCIE_BENCH, folder)
            (folder / suffix).write_bytes(contents)
            path = folder
        else:
            path = work / f"input{suffix}"
            path.write_bytes(contents)
        argv = [
            a.replace("{f}", str(path))
            .replace("{dir}", str(path))
            .replace("{out}", str(work / "out"))
            for a in template
        ]
        with pytest.MonkeyPatch.context() as mp:
            mp.chdir(here)
            code, _, err = _main(argv)
        _clean(argv, code, err)
        assert not list(here.iterdir()), f"{argv} wrote into the current folder"
        leftovers = [p.name for p in work.iterdir() if p.name.startswith(".") or "tmp" in p.name]
        assert not leftovers, f"{argv} left {leftovers} (a half-written output)"

    check()


WORKLOAD_KEYS = ["ios", "threads", "queue_depth", "io_bytes", "sockets", "devices", "seed"]
HOSTILE = st.one_of(
    st.none(),
    st.booleans(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(-(2**80), 2**80),
    st.text(max_size=8),
    st.lists(st.integers(0, 3), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(0, 3), max_size=2),
)


@settings(SETTINGS, max_examples=150)
@given(key=st.sampled_from(WORKLOAD_KEYS), value=HOSTILE)
@example(key="ios", value=float("nan"))
@example(key="ios", value=None)
@example(key="sockets", value=3)
@example(key="queue_depth", value=-(2**63) - 1)  # found: a TypeError, not a DmalabError
def test_the_api_refuses_hostile_workload_values_with_a_typed_error(key: str, value: Any) -> None:  # noqa: ANN401
    changes = {"workload": {key: value, "ios": 10} if key != "ios" else {key: value}}
    if key == "ios" and isinstance(value, int) and not isinstance(value, bool) and value > 1000:
        changes["workload"][key] = 1000  # an accepted count runs; keep it short
    try:
        sim.run("grace-nvme8-strict", overrides=changes)
    except DmalabError:
        pass


def test_the_walk_and_the_files_cover_every_command() -> None:
    commands = {c for c, _ in CASES}
    assert commands <= set(BASE)
    assert {t[0][0] for t in FILES.values()} >= {"calibrate", "validate", "sweep", "run"}
