"""dmalab.sim: platforms, traces, copy-break and the claims, through the Python API."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dmalab import AllocationError, NoSpaceError, PlatformError, ScenarioError, claims, sim

P660 = "ibm-p660-m2plus"


def commands(t: dict[str, object]) -> list[tuple[str, int, int]]:
    entries = t["entries"]
    assert isinstance(entries, list)
    return [(e["command"], e["bytes"], e["addr"]) for e in entries]


def test_the_seed_traces_come_back_exact() -> None:
    t = sim.trace(P660, "read", 0x420A8, 1514)
    assert commands(t) == [
        ("MRM", 344, 0x420A8),
        ("MRM", 512, 0x42200),
        ("MRM", 512, 0x42400),
        ("MRL", 128, 0x42600),
        ("MR", 18, 0x42680),
    ]
    assert t["totals"]["bytes"] == 1514
    rx = sim.trace(P660, "rx", 0x2012, 1514)
    assert rx["totals"]["partial_lines"] == 2
    assert rx["totals"]["read_modify_writes"] == 2


def test_firmware_choice_changes_the_prefetch_boundary() -> None:
    t = sim.trace(P660, "read", 0x4800, 1514, {"firmware": "2001"})
    assert [c for c, _, _ in commands(t)] == ["MRM"] * 5 + ["MRL", "MR"]


def test_bad_arguments_raise_specific_errors() -> None:
    with pytest.raises(ScenarioError, match=r"length_bytes is 0; valid: 1\.\.=16777216 \(2\^24"):
        sim.trace(P660, "read", 0x4800, 0)
    with pytest.raises(ScenarioError, match=r"length_bytes is 4294967296; valid: 1\.\.=16777216"):
        sim.trace(P660, "read", 0x4800, 2**32)
    with pytest.raises(ScenarioError, match="direction"):
        sim.trace(P660, "sideways", 0x4800, 64)
    with pytest.raises(PlatformError, match="unknown option of firmware `1999`"):
        sim.trace(P660, "read", 0, 64, {"firmware": "1999"})
    with pytest.raises(PlatformError, match="unknown platform `vax`"):
        sim.platform_info("vax")
    with pytest.raises(ScenarioError, match="unknown claim `P9-X`"):
        sim.reproduce(["P9-X"])


def test_a_platform_file_with_a_bad_field_names_file_field_and_range(tmp_path: object) -> None:
    from pathlib import Path

    assert isinstance(tmp_path, Path)
    info = sim.platform_info(P660)
    assert any(p["provenance"]["kind"] == "fitted" for p in info["params"])
    text = (Path(__file__).resolve().parents[2] / "platforms" / f"{P660}.toml").read_text()
    bad = tmp_path / "bad.toml"
    bad.write_text(text.replace("value = 64, source", "value = 48, source"))
    with pytest.raises(PlatformError, match=r"bad\.toml: field `bus\.pci\.width_bits` is 48"):
        sim.platform_info(str(bad))


def test_claims_pass_but_the_known_failures_and_report_their_fits() -> None:
    rows, platforms = sim.reproduce()
    assert {r["id"] for r in rows} == set(sim.claim_ids())
    # The rows that fail are exactly those dmalab.claims lists, each with its reason.
    failing = {(r["id"], r["case"]) for r in rows if not r["passed"]}
    assert failing == {(e.id, e.case) for e in claims.EXPECTED_FAILURES}
    assert {r.get("status") for r in rows} == {"pass", "expected-fail"}
    for r in rows:
        assert {"id", "published", "modelled", "unit", "passed"} <= r.keys()
    uncited = {p["field"] for pl in platforms for p in pl["uncited"]}
    assert "stream.host_per_send_ns" in uncited
    assert "iommu.hcall_map_ns" in uncited


def test_copybreak_answers_with_costs_per_frame() -> None:
    out = sim.copybreak(P660)["answer"]
    full = out["full_frame"]
    assert full["winner"] == "copy"
    assert full["map"]["bottleneck"] == "bus"
    assert out["cpu_crossover_bytes"] > 1514
    point = sim.copybreak(P660, 128)["point"]
    assert point["frame_bytes"] == 128
    with pytest.raises(ScenarioError, match="frame_bytes"):
        sim.copybreak(P660, 20_000)


def test_pcie_platform_traces_tlps_within_their_limits() -> None:
    assert "pcie-gen3-x8-server" in sim.platforms()
    t = sim.trace("pcie-gen3-x8-server", "write", 0x10FF0, 4096)
    assert t["bus"] == "PCIe Gen3 x8"
    entries = t["entries"]
    assert all(e["command"] == "MWr" and e["bytes"] <= 256 for e in entries)
    assert sum(e["bytes"] for e in entries) == 4096
    r = sim.trace("pcie-gen3-x8-server", "read", 0x10FF0, 1500)
    assert {e["command"] for e in r["entries"]} == {"MRd", "CplD"}
    assert r["totals"]["bytes"] == 1500


def test_run_a_builtin_scenario_and_a_mapping() -> None:
    assert "p3-rbtree-deferred" in sim.scenarios()
    spec = {
        "platform": "intel-vtd-2008-server",
        "mapping": {"translation": "page-table", "allocator": "segtree", "flush": "strict"},
        "workload": {"kind": "block", "io_bytes": 1024, "ios": 2000},
    }
    r = sim.run(spec)
    assert r["translation"] == "page-table"
    assert r["ops_per_s"] > 0
    assert r["breakdown_us"]["IOTLB invalidation"] > 0
    assert r["mapper"]["exposure"]["pages_exposed"] == 0
    assert r["dma_transfers"] == 2000


def test_runs_returns_a_dataframe_one_row_per_scenario() -> None:
    base = {
        "platform": "intel-vtd-2008-server",
        "workload": {"kind": "block", "io_bytes": 1024, "ios": 2000},
    }
    specs = [
        {**base, "mapping": {"translation": "none"}},
        {
            **base,
            "mapping": {"translation": "page-table", "allocator": "rbtree", "flush": "deferred"},
        },
    ]
    df = sim.runs(specs)
    assert list(df["translation"]) == ["none", "page-table"]
    assert df.loc[0, "ops_per_s"] > df.loc[1, "ops_per_s"]
    assert df.loc[1, "pages_exposed_after_unmap"] > 0
    assert "breakdown_iotlb_invalidation_us" in df.columns


def test_bad_scenarios_raise_specific_errors() -> None:
    with pytest.raises(ScenarioError, match="p3-rbtree-deferred"):
        sim.run("no-such-scenario")
    spec = {"platform": "intel-vtd-2008-server", "mapping": {}, "workload": {"threads": 0}}
    with pytest.raises(ScenarioError, match=r"workload\.threads.*1\.\.=1024"):
        sim.run(spec)


def test_a_misspelt_key_is_refused_naming_it() -> None:
    spec = {
        "platform": "intel-vtd-2008-server",
        "mapping": {"flsh": "deferred"},
        "workload": {"kind": "block", "ios": 100},
    }
    with pytest.raises(ScenarioError, match=r"mapping\.flsh.*expected one of .*`flush`"):
        sim.run(spec)
    with pytest.raises(ScenarioError, match=r"mapping\.flsh"):
        sim.runs([spec])
    spec = {**spec, "mapping": {}, "workload": {"kind": "block", "bogus_key": 1}}
    with pytest.raises(ScenarioError, match=r"workload\.bogus_key"):
        sim.run(spec)


def test_an_allocator_refusal_inside_a_run_is_an_allocation_error() -> None:
    spec = {
        "platform": "intel-vtd-2008-server",
        "mapping": {"translation": "page-table", "window_bytes": 16384},
        "workload": {"kind": "block", "io_bytes": 4096, "queue_depth": 8, "ios": 100},
    }
    # Eight I/Os in flight cannot all hold a page of a 3-page window: refused before the run.
    with pytest.raises(NoSpaceError, match=r"in flight\) is 8, at most 3 with 1 page of IOVA"):
        sim.run(spec)
    with pytest.raises(AllocationError):
        sim.run(spec)
    # Three fit, but deferred flushing holds freed pages until its flush: refused mid-run.
    spec["mapping"]["flush"] = "deferred"
    spec["workload"]["queue_depth"] = 3
    with pytest.raises(NoSpaceError, match=r"^IOVA allocation of 1 pages"):
        sim.run(spec)


def test_a_scenario_file_typo_is_refused(tmp_path: Path) -> None:
    text = (
        'platform = "intel-vtd-2008-server"\n[mapping]\nflsh = "deferred"\n'
        '[workload]\nkind = "block"\nios = 100\n'
    )
    path = tmp_path / "typo.toml"
    path.write_text(text)
    with pytest.raises(ScenarioError, match=r"typo: scenario key `mapping\.flsh`"):
        sim.run(str(path))


def test_a_platform_key_never_read_is_refused(tmp_path: Path) -> None:
    text = (Path(__file__).resolve().parents[2] / "platforms" / f"{P660}.toml").read_text()
    path = tmp_path / "typo.toml"
    path.write_text(
        text.replace("[bus.pci]\n", '[bus.pci]\nbogus_ns = { value = 1, assumed = "x" }\n')
    )
    with pytest.raises(PlatformError, match=r"unknown key `bus\.pci\.bogus_ns`"):
        sim.platform_info(str(path))


def test_each_run_reports_progress_to_its_own_handle() -> None:
    from concurrent.futures import ThreadPoolExecutor

    from dmalab import _native

    def spec(ios: int) -> dict[str, object]:
        return {
            "platform": "intel-vtd-2008-server",
            "mapping": {"translation": "none"},
            "workload": {"kind": "block", "io_bytes": 512, "ios": ios},
        }

    handles = [_native.Progress(), _native.Progress()]
    assert handles[0].get() == (0, 0)
    with ThreadPoolExecutor(max_workers=2) as pool:
        list(
            pool.map(
                lambda ix: sim.run(spec(ix[1]), progress=handles[ix[0]]), enumerate([9000, 5000])
            )
        )
    assert [h.get() for h in handles] == [(9000, 9000), (5000, 5000)]


def test_the_api_refuses_negative_addresses_with_a_scenario_error() -> None:
    with pytest.raises(ScenarioError, match="address is -1"):
        sim.trace(P660, "read", -1, 64)
    with pytest.raises(ScenarioError, match="frame_bytes is -5"):
        sim.copybreak(P660, -5)


def test_parallel_runs_match_serial_ones_and_claims_come_as_a_frame() -> None:
    base = {
        "platform": "intel-vtd-2008-server",
        "workload": {"kind": "block", "io_bytes": 1024, "ios": 3000},
    }
    specs = [
        {**base, "mapping": {"translation": "page-table", "allocator": a, "flush": f}}
        for a in ("rbtree", "bitmap", "segtree")
        for f in ("strict", "deferred")
    ]
    timing = ["wall_s", "dma_transfers_per_wall_s", "created_utc"]
    serial = sim.runs(specs, workers=1).drop(columns=timing)
    parallel = sim.runs(specs, workers=4).drop(columns=timing)
    assert serial.equals(parallel)
    with pytest.raises(ScenarioError, match="workers is 0"):
        sim.runs(specs, workers=0)
    frame = sim.claims_frame(["P1-TX-ALIGNED", "P3-DEFER"])
    assert list(frame["id"]) == ["P1-TX-ALIGNED", "P3-DEFER"]
    assert frame["passed"].all()


def _nvme(
    translation: str, flush: str, threads: int, devices: int = 8, platform: str = "grace-2s"
) -> dict:
    return {
        "platform": platform,
        "mapping": {"translation": translation, "allocator": "segtree", "flush": flush},
        "workload": {
            "kind": "block",
            "io_bytes": 4096,
            "threads": threads,
            "queue_depth": 32,
            "devices": devices,
            "ios": 100_000,
        },
    }


def test_strict_invalidation_is_shared_by_every_cpu_of_a_storage_server() -> None:
    vtd = "xeon-broadwell-2s+samsung-pm1743"
    one = sim.run(_nvme("page-table", "strict", 1, devices=1, platform=vtd))
    assert one["breakdown_us"]["IOTLB invalidation queue wait"] == 0.0
    strict = sim.run(_nvme("page-table", "strict", 64, platform=vtd))
    lazy = sim.run(_nvme("page-table", "per-cpu", 64, platform=vtd))
    passthrough = sim.run(_nvme("passthrough", "strict", 64, platform=vtd))
    assert strict["workload"]["devices"] == 8
    # VT-d's queue of waits bounds strict at about one unmap per invalidation time.
    assert strict["ops_per_s"] < 1.3e6 < 5 * strict["ops_per_s"] < lazy["ops_per_s"]
    assert strict["breakdown_us"]["IOTLB invalidation queue wait"] > 10.0
    assert lazy["ops_per_s"] <= passthrough["ops_per_s"]
    # SMMUv3's shared CMD_SYNC (grace-2s): one wait ends a whole batch, so strict is no
    # longer bound by it; lazy still gains, less.
    smmu = sim.run(_nvme("page-table", "strict", 64))
    smmu_lazy = sim.run(_nvme("page-table", "per-cpu", 64))
    assert smmu["breakdown_us"]["IOTLB invalidation queue wait"] < 5.0
    assert smmu["ops_per_s"] > 5 * strict["ops_per_s"]
    assert smmu["ops_per_s"] < smmu_lazy["ops_per_s"] < 4 * smmu["ops_per_s"]


def test_devices_out_of_range_name_the_key() -> None:
    spec = _nvme("passthrough", "strict", 1, devices=0)
    with pytest.raises(ScenarioError, match=r"workload\.devices"):
        sim.run(spec)


@pytest.mark.parametrize(
    ("one", "kind"),
    [("p3-iommu-off", "str"), (b"p3-iommu-off", "bytes"), ({"platform": P660}, "dict")],
)
def test_runs_takes_a_list_and_refuses_one_scenario_on_its_own(one: object, kind: str) -> None:
    message = f"runs() takes a list of scenarios, not a {kind}; use sim.run(...) for one"
    with pytest.raises(TypeError, match=rf"^{re.escape(message)}$"):
        sim.runs(one)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^run_frames\(\) takes a list of scenarios"):
        sim.run_frames(one)  # type: ignore[arg-type]
    # Any iterable of scenarios is taken.
    df = sim.runs(s for s in ["p3-iommu-off"])
    assert list(df["scenario"]) == ["p3-iommu-off"]


def test_runs_give_intervals_when_asked() -> None:
    base = {
        "platform": "intel-vtd-2008-server",
        "workload": {"kind": "block", "io_bytes": 1024, "ios": 200},
    }
    specs = [
        {**base, "mapping": {"translation": "none"}},
        {**base, "mapping": {"translation": "page-table", "flush": "strict"}},
    ]
    df = sim.runs(specs, samples=8)
    for k in ("ops_per_s", "bits_per_s", "latency_mean_us", "latency_p99_us"):
        assert (df[f"{k}_lo"] <= df[f"{k}_hi"]).all(), k
    assert (df["interval_draws"] > 0).all()
    assert sim.runs(specs, samples=8, workers=1).filter(like="_lo").equals(df.filter(like="_lo"))
    assert "ops_per_s_lo" not in sim.runs(specs).columns
    with pytest.raises(ScenarioError, match="power of two"):
        sim.runs(specs, samples=12)


BLOCK = {
    "platform": "intel-vtd-2008-server",
    "mapping": {"translation": "page-table", "allocator": "rbtree", "flush": "strict"},
    "workload": {"kind": "block", "io_bytes": 1024, "ios": 1000},
}
"""A small block scenario as a mapping."""


@pytest.mark.parametrize(
    ("ios", "message"),
    [
        (float("nan"), "workload.ios: nan is not a finite number"),
        (float("inf"), "workload.ios: inf is not a finite number"),
        (None, "workload.ios: None is not a value; leave the key out for its default"),
    ],
)
def test_the_api_refuses_ios_the_command_line_refuses(ios: float | None, message: str) -> None:
    # The core reads nan, inf and None as a key left out, and would run its default 100,000.
    scenario = BLOCK | {"workload": BLOCK["workload"] | {"ios": ios}}
    with pytest.raises(ScenarioError) as e:
        sim.run(scenario)
    assert str(e.value) == message
    with pytest.raises(ScenarioError) as e:
        sim.run("p3-iommu-off", overrides={"workload": {"ios": ios}})
    assert str(e.value) == message
    with pytest.raises(ScenarioError) as e:
        sim.runs([BLOCK, scenario])
    assert str(e.value) == message


def test_the_command_line_gives_the_same_message_for_a_non_finite_ios(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from dmalab.cli import main

    with pytest.raises(SystemExit) as e:
        main(["run", "p3-iommu-off", "--set", "workload.ios=nan", "--no-progress"])
    assert e.value.code == 2
    assert capsys.readouterr().err.rstrip().endswith("workload.ios: nan is not a finite number")


@pytest.mark.parametrize(
    ("hints", "message"),
    [
        (
            {"bogus": 1},
            "hints.bogus is 1; valid: a key named commands, prefetch_lines, block_bytes, "
            "relaxed_ordering, read_current",
        ),
        ({"prefetch_lines": "lots"}, "hints.prefetch_lines is 'lots'; valid: an integer"),
        ({"commands": "MR"}, "hints.commands is 'MR'; valid: a list"),
        ({"relaxed_ordering": 3}, "hints.relaxed_ordering is 3; valid: true or false"),
        ({"prefetch_lines": None}, "hints.prefetch_lines: None is not a value"),
    ],
)
def test_a_bad_hint_names_the_value_given(hints: dict[str, object], message: str) -> None:
    with pytest.raises(ScenarioError) as e:
        sim.trace("hp-rx2600-zx1", "read", 0, 64, hints=hints)
    assert str(e.value).startswith(message), str(e.value)


def test_a_bad_map_bench_setting_names_the_value_given() -> None:
    from dmalab import mapbench

    with pytest.raises(ScenarioError) as e:
        mapbench.run("grace-2s", threads="four")  # type: ignore[arg-type]
    assert str(e.value) == "bench.threads is 'four'; valid: an integer in 0..2^64-1"
    with pytest.raises(ScenarioError) as e:
        mapbench.run("grace-2s", maps_per_thread=float("nan"))  # type: ignore[arg-type]
    assert str(e.value).startswith("bench.maps_per_thread is nan; valid: ")


def test_an_unknown_key_in_a_device_file_names_the_device_file(tmp_path: Path) -> None:
    from dmalab import PlatformError, _native

    dev = tmp_path / "my-drive.toml"
    # Appended at the end, the key lands in the device's last table, which the host takes in.
    dev.write_text(_native.device_text("samsung-pm1743") + "\nbogus_key = 1\n")
    with pytest.raises(PlatformError) as e:
        sim.platform_info(sim.with_device("grace-2s", str(dev)))
    text = str(e.value)
    assert text.startswith(f"{dev} (the device attached to grace-2s): unknown key"), text
    assert "bogus_key" in text


def test_the_same_host_with_a_queue_of_waits_is_bound_by_them(tmp_path: Path) -> None:
    """grace-2s as shipped (SMMUv3's shared CMD_SYNC) against the same file with each wait
    served in turn: only the invalidation queue differs, and strict storage on 64 CPUs goes
    from bound by it to not (fails if the block model served a batch one wait at a time)."""
    from dmalab import _native

    text = _native.platform_text("grace-2s").replace('value = "shared-sync"', 'value = "queued"')
    queued = tmp_path / "grace-queued.toml"
    keep = [
        ln
        for ln in text.splitlines()
        if not ln.startswith(("command_", "range_inv", "max_page_commands"))
    ]
    queued.write_text("\n".join(keep))
    shared = sim.run(_nvme("page-table", "strict", 64))
    serial = sim.run(_nvme("page-table", "strict", 64, platform=str(queued)))
    assert serial["breakdown_us"]["IOTLB invalidation queue wait"] > 10.0
    assert shared["breakdown_us"]["IOTLB invalidation queue wait"] < 5.0
    assert shared["ops_per_s"] > 5 * serial["ops_per_s"]
