"""`dmalab validate` and `dmalab inspect --dumps`: the shipped pcie-bench corpus read as its
files say, every row accounted for (run or named as not expressible), errors computed from the
measured and modelled values, hosts built from dumps that load and pass the datasheet check, and
a garbled dump or result file a warning, never a traceback."""

from __future__ import annotations

import csv
import json
import shutil
import statistics
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from dmalab import ScenarioError, dumps, sim, validate

CORPUS = Path(__file__).resolve().parents[2] / "validation" / "pcie-bench"
HSW = CORPUS / "nfp6000-1.2GHz_hsw-Xeon-E5-2620v3_dell-t630-iommu"
E3 = CORPUS / "nfp6000-1.2GHz_hsw-Xeon-E3-1226v3_fujitsu-tx1310-iommu-nosp"
IB_REMOTE = CORPUS / "nfp6000-1.2GHz_ib-Xeon-E5-2620v2_dell-t620-s0-s1-s1-iommu-nosp"


def _dmalab(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dmalab", *argv], capture_output=True, text=True, check=False
    )


def test_the_corpus_ships_with_its_licence_and_thirteen_directories() -> None:
    assert (CORPUS / "LICENSE").read_text().startswith("\n") or "Apache" in (
        CORPUS / "LICENSE"
    ).read_text()
    assert len(validate.corpus_dirs()) == 13
    assert validate.CORPUS is not None and validate.CORPUS.resolve() == CORPUS.resolve()


def test_directory_names_give_memory_and_iommu() -> None:
    d = validate.directory(IB_REMOTE)
    assert (d.host, d.memory, d.iommu) == ("ib-Xeon-E5-2620v2_dell-t620", "remote", "nosp")
    d = validate.directory(HSW)
    assert (d.host, d.memory, d.iommu) == ("hsw-Xeon-E5-2620v3_dell-t630", "local", "on")
    local = validate.directory(CORPUS / "nfp6000-1.2GHz_ib-Xeon-E5-2620v2_dell-t620-s0-s0-s0")
    assert (local.memory, local.iommu) == ("local", "off")


def test_a_directory_that_does_not_follow_the_convention_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "results"
    bad.mkdir()
    with pytest.raises(ScenarioError, match="does not follow pcie-bench"):
        validate.directory(bad)
    with pytest.raises(ScenarioError, match="not a directory"):
        validate.directory(tmp_path / "absent")


@pytest.mark.parametrize(
    ("path", "mps", "llc", "page", "coherent"),
    [
        (HSW, 256, 15 << 20, 2 << 20, 1),
        (E3, 128, 8 << 20, 4096, 0),
        (IB_REMOTE, 256, 15 << 20, 4096, 0),
    ],
)
def test_a_dump_reads_as_its_files_say(
    path: Path, mps: int, llc: int, page: int, coherent: int
) -> None:
    d = dumps.read_dumps(path)
    assert d.link_gts is not None and d.link_gts.value == 8.0
    assert d.link_width is not None and d.link_width.value == 8
    assert d.mps is not None and d.mps.value == mps
    assert d.mrrs is not None and d.mrrs.value == 512
    assert d.llc_bytes is not None and d.llc_bytes.value == llc
    assert d.vtd_ecap is not None and d.vtd_ecap.value & 1 == coherent
    assert dumps.page_bytes(d) == page
    # Every fact names its file.
    for name in dumps.FACTS:
        f = getattr(d, name)
        assert f is None or f.where.startswith("sys-"), (name, f)


def test_a_dump_without_numactl_warns_and_still_builds_a_host() -> None:
    d = dumps.read_dumps(E3)
    assert any("numactl" in w for w in d.warnings)
    assert d.numa_nodes is None


@pytest.mark.parametrize("path", sorted(p for p in CORPUS.iterdir() if p.is_dir()))
def test_every_shipped_dump_writes_a_host_that_loads_and_passes_the_check(
    path: Path, tmp_path: Path
) -> None:
    out = tmp_path / "host.toml"
    done = _dmalab("inspect", "--dumps", str(path), "--out", str(out))
    assert done.returncode == 0, done.stderr
    info = sim.platform_info(str(out))
    params = {p["field"]: p for p in info["params"]}
    assert params["bus.pcie.lanes"]["provenance"]["kind"] == "inspected"
    assert params["memory.llc_bytes"]["provenance"]["kind"] == "inspected"
    check = _dmalab("platforms", str(out), "--check", "--format", "json")
    assert check.returncode == 0, check.stderr
    lines = json.loads(check.stdout)
    assert [ln["verdict"] for ln in lines] == ["unrated"]


def test_a_garbled_dump_is_a_warning_not_a_traceback(tmp_path: Path) -> None:
    d = tmp_path / "dump"
    d.mkdir()
    (d / "sys-cpuinfo.txt").write_bytes(b"\x00\xff garbage \xfe\n" * 20)
    (d / "sys-lspci.txt").write_text("00:00.0 Host bridge: nothing of interest\n")
    (d / "sys-dmesg.txt").write_bytes(b"")
    dump = dumps.read_dumps(d)
    text = "\n".join(dump.warnings)
    assert "model name" in text and "Netronome" in text and "sys-dmesg.txt: empty" in text
    out = tmp_path / "h.toml"
    done = _dmalab("inspect", "--dumps", str(d), "--out", str(out))
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    # Every value the dump could not give is assumed, and the host still loads.
    info = sim.platform_info(str(out))
    kinds = {p["field"]: p["provenance"]["kind"] for p in info["params"]}
    assert kinds["bus.pcie.lanes"] == "assumed"
    assert kinds["iommu_hw.walk_coherent"] == "assumed"


def test_every_row_is_run_or_named_and_errors_are_computed(tmp_path: Path) -> None:
    done = _dmalab(
        "validate",
        "--pcie-bench",
        str(HSW),
        "--no-intervals",
        "--no-progress",
        "--format",
        "json",
    )
    assert done.returncode == 0, done.stderr
    points = json.loads(done.stdout)
    rows = 0
    for f in list(HSW.glob("bw_dma_*.csv")) + list(HSW.glob("lat_dma_*.csv")):
        if not f.name.endswith("_cdf.csv"):
            rows += len(list(csv.reader(f.read_text().splitlines()))) - 1
    assert len(points) == rows
    ran = [p for p in points if p["expressible"]]
    # Every row of the corpus is expressible, reads and writes in turn (BW_DMA_RW) included.
    assert len(ran) == len(points)
    for p in ran:
        assert p["modelled"] > 0
        assert p["error"] == pytest.approx(p["modelled"] / p["measured"] - 1)
        assert p["iommu"] == "on" and p["page_bytes"] == 2 << 20
    for p in points:
        if not p["expressible"]:
            assert p["modelled"] is None and p["why_not"]
    mixed = [p for p in ran if p["test"] == "BW_DMA_RW"]
    assert mixed and all(p["mixed"] for p in mixed)
    assert not any(p["mixed"] for p in ran if p["test"] != "BW_DMA_RW")
    # A cache the device warmed runs as device-warm, one it thrashed as cold.
    by_cache = {p["cache"]: p["model_cache"] for p in ran if "model_cache" in p}
    assert by_cache == {"HWarm": "warm", "Cold": "cold", "DWarm": "device-warm", "DThrash": "cold"}
    # Device offsets are expressible: a row with one runs with it.
    skewed = [p for p in ran if p["device_offset"]]
    assert skewed and all(p["device_offset_bytes"] == p["device_offset"] for p in skewed)


def test_a_garbled_result_row_is_skipped_and_named(tmp_path: Path) -> None:
    d = tmp_path / HSW.name
    d.mkdir()
    for f in HSW.glob("sys-*.txt"):
        shutil.copy(f, d)
    lines = (HSW / "lat_dma_sizes.csv").read_text().splitlines()
    lines[3] = "LAT_DMA_RD,Seq,HWarm,zero,0,8192,64" + ",x" * 16
    (d / "lat_dma_sizes.csv").write_text("\n".join(lines[:6]) + "\n")
    result = validate.run([validate.directory(d)])
    assert any("lat_dma_sizes.csv:4: a garbled row is skipped" in w for w in result.warnings)
    assert len(result.points) == 4


def test_intervals_are_attached_and_summarised() -> None:
    d = validate.directory(HSW)
    result = validate.run([d], samples=8)
    ran = [p for p in result.points if p.modelled is not None]
    assert all(p.lo is not None and p.hi is not None and p.lo <= p.hi for p in ran)
    (row,) = validate.summarise(result, ["host"])
    assert 0.0 <= row["coverage"] <= 1.0
    assert row["median_half_width"] > 0
    assert row["points"] == len(ran)
    assert all(p.lo <= p.modelled <= p.hi for p in ran)  # type: ignore[operator]
    assert row["beyond_draws"] == sum(p.beyond for p in ran)


def test_the_same_inputs_give_bit_identical_results() -> None:
    d = validate.directory(HSW)
    a = [p.as_dict() for p in validate.run([d]).points]
    b = [p.as_dict() for p in validate.run([d]).points]
    assert a == b


def test_a_device_fit_lowers_the_error_and_writes_a_device_file_that_loads(
    tmp_path: Path,
) -> None:
    from dmalab import corpusfit

    d = validate.directory(HSW)
    result = corpusfit.fit_device([d], every=40)
    assert result.hosts == [d.host] and result.points > 5
    # The fit starts from the file's values among its candidates, so its loss cannot end
    # worse than theirs.
    pts, _ = validate.read_points(d, validate.page_for(d))
    chosen = corpusfit.sample(pts, 40)
    assert len(chosen) == result.points
    before = validate.run([d])
    shipped = {(p.file, p.line): p.error for p in before.points if p.error is not None}
    cost_before = corpusfit.robust_cost([shipped[(p.file, p.line)] for p in chosen])
    assert result.cost <= cost_before + 1e-12
    for p in result.params:
        assert p.lower <= p.value <= p.upper
    text = corpusfit.device_file(result)
    file = tmp_path / "nfp.toml"
    file.write_text(text)
    host = validate.host_file(d, tmp_path)
    info = sim.platform_info(f"{host}+{file}")
    params = {p["field"]: p for p in info["params"]}
    for p in result.params:
        got = params[p.name]
        assert got["provenance"]["kind"] == "fitted"
        assert int(got["value"]) == round(p.value)
    # Refitting the written file keeps one fit header, not two.
    assert text.count("# fitted by dmalab validate --fit-device") == 1


def test_the_fit_flags_refuse_what_does_not_apply() -> None:
    done = _dmalab("validate", "--pcie-bench", str(HSW), "--leave-out", "x")
    assert done.returncode == 2 and "--leave-out: applies with --fit-device" in done.stderr
    done = _dmalab("validate", "--pcie-bench", str(HSW), "--fit-device", "--leave-out", "x")
    assert done.returncode == 2 and "no such host" in done.stderr


def test_fit_hosts_fits_a_hosts_own_values_and_shows_both_modes() -> None:
    done = _dmalab(
        "validate", "--pcie-bench", str(HSW), "--fit-hosts", "--format", "json", "--no-progress"
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    (fit,) = data["fits"]
    names = [p["name"] for p in fit["params"]]
    # No remote memory in this directory: the socket link is not fitted.
    assert names == ["memory.root_complex_ns", "memory.partial_line_ns", "memory.dram_ns"]
    assert {r["unit"] for r in data["shipped"]} == {"Gbit/s", "ns"}
    assert len(data["fitted"]) == len(data["shipped"])
    done = _dmalab("validate", "--pcie-bench", str(HSW), "--fit-hosts", "--out", "x.toml")
    assert done.returncode == 2 and "--out" in done.stderr


def test_your_own_measurements_validate_as_calibrate_fit_reads_them(tmp_path: Path) -> None:
    host = tmp_path / "host.toml"
    assert _dmalab("inspect", "--dumps", str(HSW), "--out", str(host)).returncode == 0
    csv_file = tmp_path / "m.csv"
    csv_file.write_text(
        "model,metric,measured,direction,size_bytes,window_bytes\n"
        "bench-dma,bandwidth_gbit_s,32.6,read,64,8192\n"
        "bench-dma,latency_ns,546.7,read,64,8192\n"
    )
    done = _dmalab(
        "validate", "--measurements", str(csv_file), "--platform", str(host), "--format", "json"
    )
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert [r["metric"] for r in rows] == ["bandwidth_gbit_s", "latency_ns"]
    for r in rows:
        assert r["error"] == pytest.approx(r["modelled"] / r["measured"] - 1)
    # It needs the platform, and corpus options do not apply.
    done = _dmalab("validate", "--measurements", str(csv_file))
    assert done.returncode == 2 and "--platform" in done.stderr
    done = _dmalab(
        "validate", "--measurements", str(csv_file), "--platform", str(host), "--fit-device"
    )
    assert done.returncode == 2 and "--fit-device" in done.stderr


HSW_4K = CORPUS / "nfp6000-1.2GHz_hsw-Xeon-E5-2620v3_dell-t630-iommu-nosp"


def test_past_the_iotlbs_reach_walks_are_long_and_overlap_as_the_corpus_shows() -> None:
    """With 4 KiB pages and a 64 MiB window every DMA misses the IOTLB. The Haswell-EP host's
    small reads then run at one DMA about each 51 ns, yet a lone 64-byte read takes some 220 ns
    longer than within reach, and a write then a read 150 ns: a walk is long (its table read
    crosses the uncore as a DMA's does) and several are in flight. The generation's fitted walk
    values give the rate and the write then read within 10%, and the lone read 15% long; the
    values fitted before (one walk at a time, 30 ns a step) gave the rate but lone reads 22% and
    writes then reads 15% short."""
    d = validate.directory(HSW_4K)

    def far(result: validate.Result) -> list[validate.Point]:
        return [
            p
            for p in result.points
            if p.modelled is not None
            and p.experiment
            in ("BW_DMA_RD by window", "LAT_DMA_RD by window", "LAT_DMA_WRRD by window")
            and p.size_bytes == 64
            and p.window_bytes >= 2 << 20
        ]

    fitted = far(validate.run([d]))
    before = far(validate.run([d], draws={"iommu_hw.walkers": 1, "iommu_hw.walk_step_ns": 30}))
    assert fitted and len(fitted) == len(before)
    lat = [(f, b) for f, b in zip(fitted, before, strict=True) if f.unit == "ns"]
    bw = [(f, b) for f, b in zip(fitted, before, strict=True) if f.unit == "Gbit/s"]
    assert lat and bw
    for f, b in lat:
        close = 0.1 if f.test == "LAT_DMA_WRRD" else 0.2
        assert abs(f.modelled / f.measured - 1) < close, (f.window_bytes, f.measured, f.modelled)
        assert b.modelled < 0.9 * b.measured, (b.window_bytes, b.measured, b.modelled)
    big = [(f, b) for f, b in bw if f.window_bytes == 64 << 20]
    assert big
    for f, b in big:
        assert f.measured < 12
        assert abs(f.modelled / f.measured - 1) < 0.1, (f.measured, f.modelled)
        assert abs(b.modelled / b.measured - 1) < 0.1, (b.measured, b.modelled)


def test_a_host_from_its_dump_alone_keeps_the_walk_values_assumed() -> None:
    dump = dumps.read_dumps(HSW_4K)
    fitted = dumps.platform_toml(dump, "h")
    alone = dumps.platform_toml(dump, "h", calibrated=False)
    assert 'walkers = { value = 7, fitted = "fitted by dmalab validate' in fitted
    assert 'walkers = { value = 4, assumed = "' in alone
    assert "fitted" not in alone.split("[iommu_hw]")[1]
    # A generation the corpus does not fix keeps them assumed, calibrated or not.
    snb = dumps.read_dumps(CORPUS / "nfp6000-1.2GHz_snb-Xeon-E5-2630_dell-t620-iommu")
    assert 'walkers = { value = 4, assumed = "' in dumps.platform_toml(snb, "s")


def test_a_fit_samples_each_experiment_in_proportion_to_its_points() -> None:
    from dmalab import corpusfit

    d = validate.directory(HSW)
    pts, _ = validate.read_points(d, validate.page_for(d))
    chosen = corpusfit.sample(pts, 4)
    groups: dict[tuple[str, str, str], int] = {}
    for p in pts:
        if p.model is not None and p.test not in corpusfit.FIT_EXCLUDES:
            k = (p.experiment, p.cache, p.pattern)
            groups[k] = groups.get(k, 0) + 1
    got: dict[tuple[str, str, str], int] = {}
    for p in chosen:
        k = (p.experiment, p.cache, p.pattern)
        got[k] = got.get(k, 0) + 1
    # Every fourth point of each group, the first included: an offset sweep of 210 points
    # gives 53, a size sweep of 40 gives 10.
    assert got == {k: -(-n // 4) for k, n in groups.items()}
    assert not any(p.test in corpusfit.FIT_EXCLUDES for p in chosen)


def test_the_fits_loss_is_quadratic_near_zero_and_linear_far_out() -> None:
    from dmalab import corpusfit

    f = corpusfit.F_SCALE
    assert abs(corpusfit.robust_cost([0.01]) - 0.01**2) < 1e-6
    # Ten times the error costs about ten times as much far out, not a hundred.
    far, farther = corpusfit.robust_cost([10 * f]), corpusfit.robust_cost([100 * f])
    assert 9.0 < farther / far < 11.0


def test_a_corpus_host_carries_its_own_fitted_memory_values_and_no_other_host_does() -> None:
    dump = dumps.read_dumps(IB_REMOTE)
    name = IB_REMOTE.name.removeprefix("nfp6000-1.2GHz_")
    mine = tomllib.loads(dumps.platform_toml(dump, name))["memory"]
    fit = dumps.HOST_FITS["ib-Xeon-E5-2620v2_dell-t620"]
    for key, (value, lo, hi) in fit.values.items():
        assert mine[key]["value"] == value and mine[key]["fit_range"] == [lo, hi]
        assert "fitted" in mine[key] and mine[key]["range"][0] <= lo <= value <= hi
    # Built from its dump alone, or under another machine's name, it has none of them.
    for text in (
        dumps.platform_toml(dump, name, calibrated=False),
        dumps.platform_toml(dump, "ib-Xeon-E5-2620v2_dell-t6200"),
    ):
        memory = tomllib.loads(text)["memory"]
        assert all("assumed" in memory[key] for key in fit.values)


def test_a_hosts_own_fit_narrows_its_latency_intervals_and_keeps_them_covering() -> None:
    """The root complex assumed over 100 to 400 ns made a 550 ns latency's interval about 25%
    either side; fitted on the host's own points, it is narrower and still covers."""
    d = validate.directory(HSW)

    def lat(result: validate.Result) -> list[validate.Point]:
        return [p for p in result.points if p.unit == "ns" and p.lo is not None][::8]

    fitted = lat(validate.run([d], samples=16))
    alone = lat(validate.run([d], samples=16, uncalibrated={d.host}))

    def half(points: list[validate.Point]) -> float:
        return statistics.median((p.hi - p.lo) / 2 / p.modelled for p in points)  # type: ignore[operator]

    def covered(points: list[validate.Point]) -> float:
        return sum(p.lo <= p.measured <= p.hi for p in points) / len(points)  # type: ignore[operator]

    assert half(fitted) < 0.8 * half(alone)
    assert covered(fitted) >= 0.8


def _pt(host: str, measured: float, modelled: float, lo: float | None = None) -> validate.Point:
    p = validate.Point(
        "d",
        host,
        "f.csv",
        1,
        "BW_DMA_RD by size",
        "BW_DMA_RD",
        "Seq",
        "HWarm",
        0,
        0,
        8192,
        64,
        measured,
        "Gbit/s",
    )
    p.modelled = modelled
    if lo is not None:
        p.lo, p.hi = lo, modelled * 1.01
    return p


def test_the_track_interval_takes_its_width_from_other_hosts_only() -> None:
    # The other host erred by +0% to +100% (modelled over measured), the point's own host by
    # -50%: only the other host's errors widen the point's interval.
    record = [_pt("other", 10.0, 10.0 * (1 + k / 99)) for k in range(100)]
    record += [_pt("mine", 10.0, 5.0) for _ in range(100)]
    p = _pt("mine", 7.0, 10.0, lo=9.9)
    result = validate.Result([p], {}, [], 16)
    validate.track(result, record)
    assert p.track_lo is not None and p.track_hi is not None
    # Errors at the 5th and 95th percentile: +5% and +95%; the measurement lies at
    # modelled / (1 + e): 10 / 1.95 to 10 / 1.05, and the drawn interval stays inside.
    assert abs(p.track_lo - 10.0 / 1.95) < 1e-9
    assert p.track_hi == p.hi
    assert p.track_lo <= p.lo and p.track_hi >= p.hi
    # With no other host's record, the track interval is the drawn one.
    q = _pt("mine", 7.0, 10.0, lo=9.9)
    validate.track(validate.Result([q], {}, [], 16), record[100:])
    assert (q.track_lo, q.track_hi) == (q.lo, q.hi)
    stats = validate._stats([p])
    assert stats["track_coverage"] == 1.0 and stats["coverage"] == 0.0
