"""``bench map`` and :mod:`dmalab.mapbench`: records, sharing, errors and determinism."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dmalab import ScenarioError, mapbench
from dmalab.cli import main

KEYS = {"map_us", "map_sd_us", "unmap_us", "unmap_sd_us", "threads", "map_parts", "unmap_parts"}


def bench_json(capsys: pytest.CaptureFixture[str], args: list[str]) -> list[dict]:
    assert main(["bench", "map", "--format", "json", "--no-progress", "--no-intervals", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_records_carry_the_kernel_benchmarks_fields(capsys: pytest.CaptureFixture[str]) -> None:
    records = bench_json(capsys, ["--threads", "1,4", "--flush", "all", "--maps", "200"])
    assert len(records) == 4
    for r in records:
        assert KEYS <= r.keys()
        assert r["pairs"] == 200 * r["threads"]
        # The parts add up to the mean latency.
        assert sum(us for _, us in r["map_parts"]) == pytest.approx(r["map_us"], rel=1e-9)
        assert sum(us for _, us in r["unmap_parts"]) == pytest.approx(r["unmap_us"], rel=1e-9)


def test_strict_unmaps_queue_on_a_queue_of_waits_and_share_one_sync_on_an_smmu() -> None:
    def run(host: str, threads: int, flush: str = "strict") -> dict:
        return dict(
            mapbench.run(
                host, threads=threads, allocator="segtree", flush=flush, maps_per_thread=300
            )
        )

    # VT-d's queued invalidation: each unmap's wait queues behind every earlier one.
    one, many = run("xeon-broadwell-2s", 1), run("xeon-broadwell-2s", 16)
    assert dict(one["unmap_parts"])["invalidation queue wait"] == 0.0
    assert dict(many["unmap_parts"])["invalidation queue wait"] > 5.0
    assert many["unmap_us"] > 8 * one["unmap_us"] and many["invalidation_busy"] > 0.99
    # SMMUv3 (grace-2s): one CMD_SYNC ends every invalidation queued before it.
    one, many = run("grace-2s", 1), run("grace-2s", 16)
    assert one["unmap_us"] < many["unmap_us"] < 4 * one["unmap_us"]
    lazy = run("grace-2s", 16, "lazy")
    assert lazy["unmap_us"] < many["unmap_us"] / 10


def test_a_global_lock_allocator_waits_with_more_cpus() -> None:
    def run(threads: int) -> dict:
        return dict(
            mapbench.run(
                "xeon-broadwell-2s",
                threads=threads,
                flush="lazy",
                allocator="rbtree",
                maps_per_thread=300,
            )
        )

    one, many = run(1), run(8)
    assert dict(one["map_parts"])["allocator lock wait"] == 0.0
    assert many["map_us"] > 2 * one["map_us"]


def test_the_table_and_the_frame() -> None:
    assert (
        main(["bench", "map", "--threads", "2", "--maps", "50", "--no-progress", "--no-intervals"])
        == 0
    )
    df = mapbench.frame([mapbench.run("epyc-rome-2s", maps_per_thread=50)])
    assert len(df) == 1 and "unmap_invalidation_us" in df.columns


def test_the_same_run_gives_the_same_record() -> None:
    def go() -> dict:
        return dict(mapbench.run("epyc-rome-2s", threads=3, flush="lazy", maps_per_thread=300))

    assert go() == go()


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--threads", "0"], "--threads"),
        (["--granule", "2048"], "--granule"),
        (["--dma-bits", "48"], "--dma-bits"),
        (["--allocator", "slab"], "--allocator"),
        (["--flush", "sometimes"], "--flush"),
    ],
)
def test_bad_options_are_one_line_errors(
    capsys: pytest.CaptureFixture[str], args: list[str], needle: str
) -> None:
    with pytest.raises(SystemExit) as e:
        main(["bench", "map", *args])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("dmalab: error: ") and err.count("\n") == 1 and needle in err


def test_errors_from_python_name_the_field(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ScenarioError, match="maps_per_thread"):
        mapbench.run("grace-2s", maps_per_thread=0)
    with pytest.raises(ScenarioError, match="allocator"):
        mapbench.run("grace-2s", allocator="slab")
    assert main(["bench", "map", "--platform", "xeon-spr-dsa"]) == 2
    assert "[iommu]" in capsys.readouterr().err


def test_a_device_sets_the_dma_mask_unless_one_is_given(capsys: pytest.CaptureFixture[str]) -> None:
    (r,) = bench_json(capsys, ["--device", "samsung-pm1743", "--maps", "64"])
    # NVMe addresses host memory with 64-bit PRP entries: the mask is the device's own.
    assert (r["platform"], r["dma_bits"]) == ("xeon-broadwell-2s+samsung-pm1743", 64)
    (r,) = bench_json(capsys, ["--device", "samsung-pm1743", "--dma-bits", "32", "--maps", "64"])
    assert r["dma_bits"] == 32
    (r,) = bench_json(capsys, ["--maps", "64"])
    assert (r["platform"], r["dma_bits"]) == ("xeon-broadwell-2s", 32)


def test_as_kernel_prints_the_tools_text_and_calibrate_reads_it_back(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    from dmalab import fit

    # 256 pages a map: the map itself takes above the tool's 0.1 us resolution.
    argv = ["bench", "map", "--platform", "grace-2s", "--threads", "1,4", "--maps", "200"]
    argv += ["--granule", "256", "--no-intervals", "--no-progress"]
    assert main([*argv, "--format", "json"]) == 0
    records = json.loads(capsys.readouterr().out)
    assert main([*argv, "--as-kernel"]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    assert lines[0] == (
        "dma mapping benchmark: threads:1 seconds:1 node:-1 dir:BIDIRECTIONAL granule: 256"
    )
    # Cut to the tool's 100 ns units, not rounded: 2.155 us prints as 2.1.
    assert records[0]["unmap_us"] == pytest.approx(2.155, abs=1e-3)
    assert lines[2].startswith("average unmap latency(us):2.1 standard deviation:")
    out = tmp_path / "dmb.txt"
    out.write_text(text)
    got = fit.read_dma_map_benchmark(out)
    assert [(m.keys["threads"], m.metric) for m in got] == [
        (1, "map_us"),
        (1, "unmap_us"),
        (4, "map_us"),
        (4, "unmap_us"),
    ]
    assert main([*argv, "--as-kernel", "--format", "json"]) == 2
    assert "--format: --as-kernel prints" in capsys.readouterr().err


def test_the_default_policy_is_the_host_kernels_as_its_file_states_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """x86 hosts' kernels are lazy by default, Arm ones strict; a file that states none runs
    strict. An explicit --flush wins."""

    def _json(*args: str) -> list[dict]:
        return bench_json(capsys, list(args))

    assert mapbench.default_flush("xeon-broadwell-2s") == "lazy"
    assert mapbench.default_flush("epyc-rome-2s") == "lazy"
    assert mapbench.default_flush("grace-2s") == "strict"
    assert mapbench.default_flush("arm-morello") == "strict"
    assert mapbench.default_flush("intel-vtd-2008-server") == "strict"
    assert [r["flush"] for r in _json("--maps", "20")] == ["lazy"]
    assert [r["flush"] for r in _json("--maps", "20", "--platform", "grace-2s")] == ["strict"]
    assert [r["flush"] for r in _json("--maps", "20", "--flush", "strict")] == ["strict"]


def test_a_map_under_100_ns_prints_as_the_kernel_prints_it_and_reads_back(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """Morello's one-page map takes about 45 ns: the kernel's tool prints 0.0, and reading
    that back takes the middle of the 0.2 us its cuts leave (the reader refused 0.0 before)."""
    from dmalab import fit

    argv = ["bench", "map", "--platform", "arm-morello", "--maps", "100", "--as-kernel"]
    assert main([*argv, "--no-intervals", "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[1].startswith("average map latency(us):0.0 ")
    out = tmp_path / "dmb.txt"
    out.write_text(text)
    got = fit.read_dma_map_benchmark(out)
    assert got[0].metric == "map_us" and got[0].measured == pytest.approx(0.1)
    assert got[1].measured > 0.5  # the unmap: 0.6 us and its 100 ns
