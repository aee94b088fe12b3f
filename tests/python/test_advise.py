"""dmalab advise: the search over the DMA-mapping knobs, its honesty rules and its command."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from dmalab import ScenarioError, advise, fit
from dmalab.cli import main

HOST = "grace-2s"
"""A host whose slot holds an NVMe drive by default."""

SERIAL_HOST = "xeon-broadwell-2s+samsung-pm1743"
"""A host whose IOMMU serves each strict invalidation's wait in turn (VT-d's queue), with a
drive."""


def _nvme(ios: int = 4_000) -> advise.Workload:
    return advise.parse_workload("nvme:8x4K,qd32", ios)


def test_workload_specs_are_read_or_refused_by_name() -> None:
    w = advise.parse_workload("nvme:4x64K,qd8,threads16", 1000)
    assert w.table == {
        "kind": "block",
        "devices": 4,
        "io_bytes": 65536,
        "queue_depth": 8,
        "threads": 16,
        "ios": 1000,
        # Two waves of the 16 x 8 in flight before the counted I/Os: the caches start empty.
        "warm_up_ios": 256,
    }
    assert advise.parse_workload("nvme:2x512").table["threads"] == 16
    v = advise.parse_workload("vhost:64K,mbuf4K,min-remote")
    assert (v.kind, v.table["packet_bytes"], v.table["mbuf_bytes"]) == ("vhost", 65536, 4096)
    assert v.table["placement"] == "min-remote"
    with pytest.raises(ScenarioError, match="packet of 1 bytes; valid: 64 to 1048576"):
        advise.parse_workload("vhost:1")
    with pytest.raises(ScenarioError, match="expected nvme:"):
        advise.parse_workload("vhost:64K,far")
    nic = advise.parse_workload("nic:40G,64B,rx,window=1G,random")
    assert (nic.kind, nic.rate_gbit_s) == ("nic", 40.0)
    assert nic.table["direction"] == "write" and nic.table["window_bytes"] == 1 << 30
    with pytest.raises(ScenarioError, match="packet size 9000 bytes"):
        advise.parse_workload("nic:40G,9000B,window=4K")
    with pytest.raises(ScenarioError, match="expected nvme:DRIVESxSIZE"):
        advise.parse_workload("nvme:eight")


def test_strict_invalidation_on_a_many_cpu_nvme_load_gets_lazy_first() -> None:
    # Passthrough and lazy both lift the serial invalidations; passthrough leaves no protection
    # at all, so it comes first only where it gains more (else lazy, tied with it, says so).
    anything = advise.advise(SERIAL_HOST, _nvme(), samples=8)
    first = anything["steps"][0]
    assert first["knob"].value == "passthrough" or (
        first["knob"].key == "flush" and "IOMMU passthrough" in first["note"]
    )
    r = advise.advise(SERIAL_HOST, _nvme(), samples=8, keep="lazy")
    keys = [s["knob"].key for s in r["steps"]]
    # Lazy comes first, unless a change that keeps strict protection ties with it (and says so).
    for s in r["steps"][: keys.index("flush")]:
        assert s["protection"] == "strict" and s["note"].startswith("ranked above lazy")
    first = r["steps"][keys.index("flush")]
    assert first["knob"].value in ("deferred", "per-cpu")
    assert first["certain"] and first["gain_lo"] > 0
    # Its protection cost is stated: stale mappings for a bounded window.
    assert first["protection"] == "lazy" and "reachable" in first["protection_detail"]
    assert r["today_protection"] == "strict"
    # A certain gain is never ranked below an uncertain one.
    certain = [e["certain"] and e["gain"] > 0 for e in r["singles"]]
    assert certain == sorted(certain, reverse=True)


def test_nothing_that_lowers_protection_under_keep_strict() -> None:
    r = advise.advise(HOST, _nvme(), samples=8, keep="strict")
    assert all(s["protection"] == "strict" for s in r["steps"])
    assert r["total"] is None or r["total"]["protection"] == "strict"
    lowering = [e for e in r["singles"] if e["protection"] != "strict"]
    assert lowering and not any(e["allowed"] for e in lowering)


def test_the_command_prints_json_with_a_ticket(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["advise", "--host", HOST, "--workload", "nvme:2x4K,qd16", "--ios", "2000"]
    assert main([*argv, "--samples", "8", "--format", "json", "--no-progress"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["steps"] and out["ticket"].startswith(f"On {HOST}")
    assert all({"gain", "gain_lo", "gain_hi", "how", "protection"} <= set(s) for s in out["steps"])
    assert main([*argv, "--no-intervals", "--samples", "8"]) == 2
    assert "--samples" in capsys.readouterr().err
    assert main([*argv, "--set", "workload.threads=4"]) == 2
    assert "today's mapping only" in capsys.readouterr().err


@pytest.mark.parametrize(
    "host", ["xeon-broadwell-2s+samsung-pm1743", "epyc-rome-2s+samsung-pm1743"]
)
def test_each_modern_host_with_a_drive_is_advised_and_its_limit_explains_it(host: str) -> None:
    """Strict invalidation makes each host whose IOMMU serves waits in turn (VT-d, AMD-Vi)
    wait on its invalidation queue; kept to lazy protection, lazy invalidation is advised,
    first unless a change that keeps strict protection gains the same within the interval
    (and says so), and the wait is named among the limits."""
    r = advise.advise(host, _nvme(), samples=8, keep="lazy")
    assert "invalidation queue wait" in r["limit_before"]
    keys = [s["knob"].key for s in r["steps"]]
    assert "flush" in keys
    for s in r["steps"][: keys.index("flush")]:
        assert s["protection"] == "strict"
        assert s["note"].startswith("ranked above lazy invalidation"), s["note"]
    assert "invalidation queue wait" not in r["limit_after"].split(" of ")[0]


def test_an_smmu_host_shares_its_sync_and_names_another_limit() -> None:
    """On grace-2s (SMMUv3, one CMD_SYNC for a batch) strict invalidation is not the limit:
    the wait is not named, and lazy invalidation gains far less than on a VT-d host. (Runs of
    20,000 counted I/Os: in 4,000, two waves of the 2,048 in flight, the burst of every slot
    starting at once still shows in the invalidation queue.)"""
    r = advise.advise(HOST, _nvme(20_000), samples=8, keep="lazy")
    assert "invalidation queue wait" not in r["limit_before"]
    serial = advise.advise(SERIAL_HOST, _nvme(20_000), samples=8, keep="lazy")

    def lazy_gain(a: dict) -> float:
        return max(e["gain"] for e in a["singles"] if e["knob"].key == "flush")

    assert lazy_gain(r) < lazy_gain(serial) / 5


NIC_HOST = "epyc-rome-2s+connectx-6dx"
"""Random 64-byte DMAs over 1 GiB of buffers in 4 KiB IOMMU pages: the IOTLB misses every
time, and the IOMMU's table walkers are the only limit."""


def test_a_host_limited_by_the_iotlbs_reach_gets_the_page_size_first() -> None:
    w = advise.parse_workload("nic:100G,64B,random,window=1G")
    r = advise.advise(NIC_HOST, w, samples=8, keep="strict")
    assert "IOMMU walkers" in r["limit_before"] and "miss rate 1.00" in r["limit_before"]
    first = r["steps"][0]
    assert first["knob"].key == "page_bytes" and first["certain"] and first["gain_lo"] > 0
    # Passthrough gains as much but leaves no protection: listed, not advised.
    off = next(e for e in r["singles"] if e["knob"].value == "off")
    assert off["protection"] == "none" and not off["allowed"]


def test_a_page_size_the_hosts_iommu_cannot_map_is_never_advised(tmp_path: Path) -> None:
    """The same host with an IOMMU that maps at most 2 MiB: 1 GiB pages are never tried."""
    text = fit.platform_text("epyc-rome-2s").replace(
        "max_page_bytes = { value = 1_073_741_824,", "max_page_bytes = { value = 2_097_152,", 1
    )
    assert "2_097_152" in text
    host = tmp_path / "rome-2m.toml"
    host.write_text(text)
    w = advise.parse_workload("nic:100G,64B,random,window=1G")
    r = advise.advise(f"{host}+connectx-6dx", w, samples=8, keep="strict")
    tried = {(e["knob"].key, e["knob"].value) for e in r["singles"]}
    assert ("page_bytes", 2 << 20) in tried and ("page_bytes", 1 << 30) not in tried
    assert r["steps"][0]["knob"].value == 2 << 20


def test_a_map_heavy_driver_bound_by_invalidation_gets_lazy_first() -> None:
    w = advise.parse_workload("map:16,granule2,bits64")
    assert w.kind == "map" and w.table["granule_pages"] == 2 and w.table["dma_bits"] == 64
    r = advise.advise("xeon-broadwell-2s", advise.parse_workload("map:16"), samples=8)
    assert "invalidation queue wait" in r["limit_before"]
    first = r["steps"][0]
    assert (first["knob"].key, first["knob"].value, first["protection"]) == (
        "flush",
        "lazy",
        "lazy",
    )
    kept = advise.advise(
        "xeon-broadwell-2s", advise.parse_workload("map:16"), samples=8, keep="strict"
    )
    assert all(s["protection"] == "strict" for s in kept["steps"])


def test_the_command_refuses_options_a_workload_does_not_take(
    capsys: pytest.CaptureFixture[str],
) -> None:
    argv = ["advise", "--host", "xeon-broadwell-2s", "--no-intervals", "--no-progress"]
    assert main([*argv, "--workload", "map:2", "--ios", "5000"]) == 2
    assert "--ios" in capsys.readouterr().err
    assert main([*argv, "--workload", "map:2", "--set", "mapping.translation=none"]) == 2
    assert "mapping.flush" in capsys.readouterr().err
    assert main([*argv, "--workload", "nic:40G,64B", "--set", "mapping.flush=lazy"]) == 2
    assert "states today's configuration" in capsys.readouterr().err


def test_a_workload_file_reads_as_its_spec_and_names_bad_keys(tmp_path: Path) -> None:
    good = tmp_path / "w.toml"
    good.write_text(
        '[workload]\nkind = "nic"\nrate_gbit_s = 100\nsize_bytes = 64\naccess = "random"\n'
        "window_bytes = 1073741824\n"
    )
    w, today = advise.read_workload_file(str(good))
    assert (w.kind, w.table["access"], w.table["window_bytes"], today) == (
        "nic",
        "random",
        1 << 30,
        {},
    )
    mps = tmp_path / "m.toml"
    mps.write_text('[workload]\nkind = "nic"\nmax_payload_bytes = 128\n')
    assert advise.read_workload_file(str(mps))[0].today == {advise.MPS_KEY: 128}
    irq = tmp_path / "i.toml"
    irq.write_text(
        '[workload]\nkind = "nvme"\nqueues_per_device = 2\ncompletion = "queue-interrupt"\n'
    )
    w, _ = advise.read_workload_file(str(irq), 1000)
    assert (w.table["queues_per_device"], w.table["completion"]) == (2, "queue-interrupt")
    nvme = tmp_path / "n.toml"
    nvme.write_text('[workload]\nkind = "nvme"\ndrives = 2\n[today]\nflush = "deferred"\n')
    w, today = advise.read_workload_file(str(nvme), 1000)
    assert w.table["devices"] == 2 and today == {"flush": "deferred"}
    vh = tmp_path / "v.toml"
    vh.write_text('[workload]\nkind = "vhost"\nmbuf_bytes = 8192\n[today]\npolicy = "threshold"\n')
    w, today = advise.read_workload_file(str(vh))
    assert (w.kind, w.table["packet_bytes"], w.table["mbuf_bytes"]) == ("vhost", 65536, 8192)
    assert today == {"policy": "threshold"}
    for text, says in (
        ('[workload]\nkind = "vhost"\nplacement = "far"\n', "workload.placement is 'far'"),
        ('[workload]\nkind = "nvme"\ncompletion = "idle"\n', "workload.completion is 'idle'"),
        ('[workload]\nkind = "nic"\nsize = 64\n', "workload.size is not a key"),
        ('[workload]\nkind = "disk"\n', "workload.kind is 'disk'"),
        ('[workload]\nkind = "map"\nthreads = "four"\n', "workload.threads is 'four'"),
        ('[workload]\nkind = "nic"\naccess = "zigzag"\n', "valid: seq, random"),
        ("[work]\n", "needs a [workload] table"),
        ("\x00\x01", "not a readable TOML file"),
    ):
        bad = tmp_path / "bad.toml"
        bad.write_text(text)
        with pytest.raises(ScenarioError, match=re.escape(says)):
            advise.read_workload_file(str(bad))


@pytest.mark.parametrize("host", ["xeon-broadwell-2s", "epyc-rome-2s", "grace-2s"])
def test_a_vhost_backend_is_advised_on_each_modern_host_and_its_limit_explains_it(
    host: str,
) -> None:
    """A vhost backend's core does its packets' work and every copy: the core limits, and
    the core's own breakdown names the copies among its parts. Where the host has a copy
    engine (Broadwell's CBDMA) the advice hands the copies to it, and the core's copy time
    gives way to the hand-off; without one, no engine policy is ever tried."""
    r = advise.advise(host, advise.parse_workload("vhost:64K"), samples=8)
    assert r["limit_before"].startswith("the backend core") and "copies" in r["limit_before"]
    tried = {e["knob"].value for e in r["singles"] if e["knob"].key == "policy"}
    assert r["steps"] and all(s["certain"] for s in r["steps"])
    if host == "xeon-broadwell-2s":
        assert tried == {"engine-only", "threshold", "planner"}
        # The engine takes the copies in one of the steps (first, or after the mbuf size
        # where some draws make the engine slower than the core), and its hand-off replaces
        # the core's copy time in the breakdown.
        step = next(s for s in r["steps"] if s["knob"].key == "policy")
        assert step["gain"] > 0.1 and step["gain_lo"] >= 0
        assert "engine hand-off" in step["limit"] and "copies" not in step["limit"]
        assert "copies" in step["moved"]
        # dmalab's planner gains as much, but no backend offers it: listed, never a step.
        planner = next(e for e in r["singles"] if e["knob"].value == "planner")
        assert planner["gain"] > 0 and planner["why_not"] == "no software sets it yet"
        assert all(s["knob"].settable for s in r["steps"])
    else:
        assert tried == set()
        assert r["steps"][0]["knob"].key == "mbuf_bytes"
    # No knob here changes what a device can reach.
    assert all(e["protection"] == "strict" for e in r["singles"])


def test_guest_memory_in_the_other_node_is_brought_home_first() -> None:
    """Guest memory across the socket link slows every copy and the guest-facing share of the
    packet work: moving it to the core's node is the largest single change."""
    r = advise.advise("epyc-rome-2s", advise.parse_workload("vhost:64K,max-remote"), samples=8)
    assert r["steps"][0]["knob"].key == "placement" and r["steps"][0]["gain_lo"] > 0.1


def _tag_bound_nic(tmp_path: Path) -> Path:
    """The ConnectX-6 Dx as a device that keeps only 32 reads in flight without 10-bit tags and
    768 once 10-bit tags are enabled (the shipped file states no 10-bit tags)."""
    lines = Path("devices/connectx-6dx.toml").read_text().splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("max_outstanding_read_requests"))
    lines[at : at + 1] = [
        'max_outstanding_read_requests = { value = 32, source = "a test device", exact = true }',
        'ten_bit_tag_reads = { value = 768, source = "a test device", exact = true }',
    ]
    text = "\n".join(lines) + "\n"
    path = tmp_path / "nic-32-tags.toml"
    path.write_text(text)
    return path


def test_ten_bit_tags_are_advised_only_where_both_ends_support_them(tmp_path: Path) -> None:
    """A device short of read tags on a 10-Bit Tag Completer root port (Rome's, PCIe 4.0) gets
    10-bit tags first; the same device behind Broadwell's PCIe 3.0 root port, and the shipped
    ConnectX-6 Dx (no 10-Bit Tag Requester), are never offered them."""
    nic = _tag_bound_nic(tmp_path)
    w = advise.parse_workload("nic:100G,64B")
    r = advise.advise(f"epyc-rome-2s+{nic}", w, samples=8, keep="strict")
    assert r["limit_before"].startswith("tags at")
    first = r["steps"][0]
    assert (first["knob"].name, first["knob"].value) == ("10-bit tags", 768)
    assert first["certain"] and first["gain_lo"] > 0
    for host in (f"xeon-broadwell-2s+{nic}", "epyc-rome-2s+connectx-6dx"):
        r = advise.advise(host, w, samples=0, keep="strict")
        assert "10-bit tags" not in {e["knob"].name for e in r["singles"]}


def test_max_payload_size_is_raised_only_from_below_what_both_ends_support() -> None:
    """Firmware that left Max_Payload_Size at 128 bytes on a link-bound receive stream: the
    knob raises it to the trained 256 (Broadwell's root port) and comes first; with today's
    MPS at the trained value it is not offered at all. (The buffers span 256 KiB, within the
    IOTLB's reach: over the default 8 MiB the walks' 3% misses, each some 340 ns on
    Broadwell-EP, bind the engine's contexts first.)"""
    host = "xeon-broadwell-2s+connectx-6dx"
    w = "nic:100G,512B,rx,window=262144"
    r = advise.advise(host, advise.parse_workload(f"{w},mps=128"), samples=8)
    assert r["today"][advise.MPS_KEY] == 128 and r["limit_before"].startswith("link at")
    first = r["steps"][0]
    assert first["knob"].key == advise.MPS_KEY and first["knob"].value == 256
    assert first["certain"] and first["gain_lo"] > 0
    r = advise.advise(host, advise.parse_workload(w), samples=0)
    assert advise.MPS_KEY not in {e["knob"].key for e in r["singles"]}
    with pytest.raises(ScenarioError, match="mps=100; valid"):
        advise.parse_workload("nic:100G,512B,mps=100")


def test_batching_is_offered_only_as_far_as_the_device_states_it_can(tmp_path: Path) -> None:
    """The ConnectX-6 Dx's file says it fetches 1 to 4 descriptors a read: a root-complex-
    bound small-packet stream is offered 4, never more; a device that states it fetches one
    at a time, exactly, is never offered batching."""
    w = advise.parse_workload("nic:100G,64B")
    r = advise.advise("epyc-rome-2s", w, samples=0)
    offered = {e["knob"].key: e["knob"].value for e in r["singles"]}
    assert offered[advise.FETCH_KEY] == 4 and offered[advise.COMPLETIONS_KEY] == 8
    assert r["singles"][0]["knob"].key == advise.FETCH_KEY
    lines = Path("devices/connectx-6dx.toml").read_text().splitlines()
    at = next(i for i, ln in enumerate(lines) if ln.startswith("descriptors_per_fetch"))
    lines[at] = 'descriptors_per_fetch = { value = 1, source = "a test device", exact = true }'
    one = tmp_path / "one-at-a-time.toml"
    one.write_text("\n".join(lines) + "\n")
    r = advise.advise(f"epyc-rome-2s+{one}", w, samples=0)
    assert advise.FETCH_KEY not in {e["knob"].key for e in r["singles"]}


def test_an_inspected_host_is_advised_from_what_it_shows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--inspect`` reads a recorded host: its NIC's link as trained and its IOMMU
    configuration (lazy, from the kernel command line) are today's; what a host cannot show
    is the built-in host of its CPU's vendor. A host with no PCIe function is refused."""
    import hosts

    hosts.build("x86-vtd", tmp_path / "vtd")
    found = advise.inspected_host(tmp_path / "work", root=str(tmp_path / "vtd"))
    assert found.today == {"iommu": "lazy"} and "xeon-broadwell-2s" in found.label
    assert "i40e" in found.note and "IOMMU lazy" in found.note
    argv = ["advise", "--inspect", "--root", str(tmp_path / "vtd"), "--no-progress"]
    assert main([*argv, "--workload", "map:4", "--samples", "8", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["today"]["flush"] == "lazy" and out["today_protection"] == "lazy"
    assert out["host"].endswith("(inspected, like xeon-broadwell-2s)")
    # The inspected link replaces the root port's: Gen3 x8 at the MPS the device runs.
    params = {p["field"]: p for p in advise.sim.platform_info(found.platform)["params"]}
    lanes = params["bus.pcie.lanes"]
    assert lanes["provenance"]["kind"] == "inspected" and lanes["value"] == "8"
    hosts.build("vm-no-iommu", tmp_path / "vm")
    assert (
        main(
            [
                "advise",
                "--inspect",
                "--root",
                str(tmp_path / "vm"),
                "--workload",
                "nic:10G,64B",
                "--no-intervals",
            ]
        )
        == 2
    )
    assert "no PCI Express function" in capsys.readouterr().err
    assert (
        main(
            [
                "advise",
                "--host",
                "grace-2s",
                "--like",
                "grace-2s",
                "--workload",
                "nic:10G,64B",
                "--no-intervals",
            ]
        )
        == 2
    )
    assert "--like: needs --inspect" in capsys.readouterr().err


def test_completions_on_the_interrupts_cpu_are_moved_to_the_submitter() -> None:
    """Four shared queues a drive, each completion run where its queue's interrupt lands: one
    CPU completes and unmaps for four threads. Completing on the submitter (rq_affinity=2)
    gains, for sure; a workload that completes on its submitters is never offered it. (20,000
    counted I/Os: in 4,000 the start's burst leaves the gain uncertain.)"""
    host = "xeon-broadwell-2s+samsung-pm1743"
    w = advise.parse_workload("nvme:8x4K,qd32,queues4,irq", 20_000)
    assert w.table["completion"] == "queue-interrupt" and w.table["queues_per_device"] == 4
    r = advise.advise(host, w, samples=8, keep="strict")
    done = next(e for e in r["singles"] if e["knob"].key == "workload.completion")
    assert done["certain"] and done["gain_lo"] > 0 and done["gain"] > 0.1
    assert done["protection"] == "strict"
    assert advise.entry(done)["key"] == "workload.completion"
    r = advise.advise(host, advise.parse_workload("nvme:8x4K,qd32,queues4", 4_000), samples=0)
    assert "workload.completion" not in {e["knob"].key for e in r["singles"]}


# On a tie, the change that keeps more protection ranks first, and says so.

PASSTHROUGH = next(k for k in advise.NIC_KNOBS if k.key == "iommu" and k.value == "off")
GIB_PAGES = next(k for k in advise.NIC_KNOBS if k.key == "page_bytes" and k.value == 1 << 30)


def _candidate(knob: advise.Knob, protection: str, per: list[float] | None) -> dict:
    gain = 2.0 if per is None else float(sorted(per)[len(per) // 2])
    e = {"knob": knob, "gain": gain, "certain": True, "protection": protection}
    if per is not None:
        e |= {"per": per, "gain_lo": min(per), "gain_hi": max(per)}
    return e


def test_of_two_changes_that_gain_the_same_the_one_that_keeps_protection_ranks_first() -> None:
    knobs = advise.NIC_KNOBS
    assert knobs.index(PASSTHROUGH) < knobs.index(GIB_PAGES)  # listed first: first on a tie
    # The same gain in every draw: 1 GiB pages (strict) go above passthrough (none).
    per = [0.5 + 0.1 * i for i in range(16)]
    ranked = advise.rank(
        [_candidate(PASSTHROUGH, "none", per), _candidate(GIB_PAGES, "strict", list(per))], knobs
    )
    assert [e["knob"] for e in ranked] == [GIB_PAGES, PASSTHROUGH]
    assert ranked[0]["note"].startswith("ranked above IOMMU passthrough (protection none)")
    assert "strict protection" in ranked[0]["note"] and ranked[1]["note"] == ""
    # No draws: equal gains at the files' values are a tie too.
    ranked = advise.rank(
        [_candidate(PASSTHROUGH, "none", None), _candidate(GIB_PAGES, "strict", None)], knobs
    )
    assert [e["knob"] for e in ranked] == [GIB_PAGES, PASSTHROUGH]
    assert "the same gain at the files' values" in ranked[0]["note"]
    # Passthrough gaining more in every draw keeps its place, with no note.
    more = [x + 0.2 for x in per]
    ranked = advise.rank(
        [_candidate(PASSTHROUGH, "none", more), _candidate(GIB_PAGES, "strict", per)], knobs
    )
    assert [e["knob"] for e in ranked] == [PASSTHROUGH, GIB_PAGES]
    assert all(e["note"] == "" for e in ranked)
    # Paired draws that overlap at their low ends are no tie where one gain lies far outside
    # the other's interval (8 against 0.3 to 3.3).
    wide = [float(i) for i in range(16)]
    narrow = [0.3 + 0.2 * i for i in range(16)]
    ranked = advise.rank(
        [_candidate(PASSTHROUGH, "none", wide), _candidate(GIB_PAGES, "strict", narrow)], knobs
    )
    assert [e["knob"] for e in ranked] == [PASSTHROUGH, GIB_PAGES]
    assert all(e["note"] == "" for e in ranked)
    # An uncertain gain is never lifted above a certain one, whatever it protects.
    unsure = _candidate(GIB_PAGES, "strict", per) | {"certain": False}
    ranked = advise.rank([_candidate(PASSTHROUGH, "none", per), unsure], knobs)
    assert [e["knob"] for e in ranked] == [PASSTHROUGH, GIB_PAGES]


def test_a_nic_on_rome_gets_1_gib_pages_before_passthrough_which_gains_no_more(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # 1 GiB IOMMU pages gain exactly what passthrough gains, and keep strict protection.
    argv = ["advise", "--host", "epyc-rome-2s", "--workload", "nic:100G,64B,random,window=1G"]
    assert main([*argv, "--no-progress", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    first = out["steps"][0]
    assert first["key"] == "mapping.page_bytes" and first["to"] == "1 GiB"
    assert first["protection"] == "strict"
    assert first["note"].startswith("ranked above IOMMU passthrough (protection none)")
    assert "ranked above IOMMU passthrough" in out["ticket"]
    names = [s["knob"] for s in out["singles"]]
    assert names.index("1 GiB IOMMU pages") < names.index("IOMMU passthrough")
    off = out["singles"][names.index("IOMMU passthrough")]
    gib = out["singles"][names.index("1 GiB IOMMU pages")]
    assert off["gain"] == pytest.approx(gib["gain"]) and off["note"] == ""
    assert out["total"]["protection"] == "strict"


def test_an_nvme_spec_past_the_simulator_names_its_own_terms() -> None:
    from dmalab import sim

    with pytest.raises(
        ScenarioError, match=r"nvme:1000000x4K: DRIVES is 1000000; valid: 1\.\.=256"
    ):
        advise.parse_workload("nvme:1000000x4K")
    with pytest.raises(ScenarioError, match=r"make 1600, above 1024: give threadsN"):
        advise.parse_workload("nvme:200x4K")
    assert advise.parse_workload("nvme:200x4K,threads64").table["threads"] == 64
    # The limits are the simulator's own: one past each is refused there too.
    for key, most in (("devices", advise.MAX_DRIVES), ("threads", advise.MAX_THREADS)):
        with pytest.raises(ScenarioError, match=rf"workload\.{key}.*1\.\.={most}\b"):
            sim.run("grace-nvme8-strict", overrides={"workload": {key: most + 1, "ios": 10}})


def test_a_draw_the_model_refuses_is_left_out_of_the_gain_not_counted_as_zero(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A draw the model refuses for one configuration (None) has no gain there: it is counted
    and left out of the interval. Counted as a gain of 0 it pulled the low end to exactly 0
    (seen when a host file's draws turned range invalidation off without its limit)."""
    measure = advise.Advisor.measure

    def refusing(self: advise.Advisor, mapping: Any) -> Any:  # noqa: ANN401
        rep, drawn = measure(self, mapping)
        if mapping.get("flush") == "deferred":
            drawn = [None, None, *drawn[2:]]
        return rep, drawn

    monkeypatch.setattr(advise.Advisor, "measure", refusing)
    r = advise.advise(SERIAL_HOST, _nvme(), samples=8, keep="lazy")
    flush = next(e for e in r["singles"] if e["knob"].value == "deferred")
    assert flush["refused_draws"] == 2 and flush["per"][:2] == [None, None]
    assert flush["gain_lo"] > 0.0 and flush["certain"]
