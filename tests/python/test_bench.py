"""dmalab.bench: cells, progress and the target checks derived from one run's records."""

from __future__ import annotations

from typing import Any

import pytest

import dmalab
from dmalab import _native, bench


def rec(allocator: str, workload: str, threads: int, ops: float, **kw: float) -> dict[str, Any]:
    r = {"allocator": allocator, "workload": workload, "threads": threads, "ops_per_s": ops}
    r |= {"p50_ns": 10.0, "p99_ns": 15.0, "p999_ns": 18.0, "bytes_per_live_mapping": 4.0}
    return r | kw


def test_checks_compute_ratios_from_records() -> None:
    records = [
        rec("segtree", "mixed", 1, 30.0),
        rec("rbtree", "mixed", 1, 10.0),
        rec("vm-allocator", "mixed", 1, 2.0),
        rec("magazines+rbtree", "mixed", 1, 40.0),
        rec("segtree", "mixed", 2, 50.0),
        rec("segtree", "fragmented-32bit", 1, 1.0, p50_ns=10.0, p999_ns=25.0),
        rec("segtree", "nic-ring", 1, 1.0, bytes_per_live_mapping=20.0),
    ]
    got = {c.name: (round(c.value, 3), c.passed) for c in bench.checks(records)}
    assert got["mixed 1T ops/s vs rbtree"] == (3.0, True)
    assert got["mixed 1T ops/s vs vm-allocator"] == (15.0, True)
    assert got["mixed 1T ops/s vs magazines+rbtree"] == (0.75, False)
    assert got["mixed 2T/1T ops/s"] == (1.667, False)
    assert got["fragmented-32bit 1T p99.9/p50"] == (2.5, False)
    assert got["nic-ring 1T bytes per live 1-page mapping"] == (20.0, False)


def test_checks_hold_the_design_to_its_leads_over_linux_rcache() -> None:
    records = [
        rec("segtree", "nic-ring", 1, 12.0),
        rec("linux-rcache", "nic-ring", 1, 10.0),
        rec("segtree", "mixed", 1, 50.0),
        rec("linux-rcache", "mixed", 1, 10.0),
        rec("segtree", "fragmented-32bit", 1, 70.0, p999_ns=20.0),
        rec("linux-rcache", "fragmented-32bit", 1, 1.0, p999_ns=2100.0),
    ]
    got = {c.name: (round(c.value, 3), c.target, c.passed) for c in bench.checks(records)}
    assert got["nic-ring 1T ops/s vs linux-rcache"] == (1.2, ">= 1.2x", True)
    assert got["mixed 1T ops/s vs linux-rcache"] == (5.0, ">= 6x", False)
    assert got["fragmented-32bit 1T ops/s vs linux-rcache"] == (70.0, ">= 65x", True)
    assert got["fragmented-32bit 1T p99.9 below linux-rcache's"] == (105.0, ">= 100x", True)


def test_run_cells_reports_progress() -> None:
    seen: list[tuple[int, int]] = []
    records = bench.run_cells(
        ["segtree"], ["map-unmap-1page"], [1], progress=lambda i, n, _: seen.append((i, n))
    )
    assert len(records) == 1
    assert seen == [(0, 1), (1, 1)]


def test_run_cells_runs_a_workloads_allocators_as_one_group() -> None:
    seen: list[tuple[int, int, str]] = []
    records = bench.run_cells(
        ["segtree", "rbtree"],
        ["map-unmap-1page"],
        [1],
        progress=lambda i, n, what: seen.append((i, n, what)),
    )
    assert [r["allocator"] for r in records] == ["segtree", "rbtree"]
    assert all(r["workload"] == "map-unmap-1page" and r["ops_per_s"] > 0 for r in records)
    assert seen == [(0, 2, "map-unmap-1page / 1 thread: segtree, rbtree"), (2, 2, "done")]


def test_a_group_with_an_unknown_allocator_names_it() -> None:
    with pytest.raises(dmalab.BenchError, match="unknown allocator"):
        _native.bench_iova_group(["segtree", "nope"], "mixed", 1)


def test_unknown_workload_raises_bench_error() -> None:
    with pytest.raises(dmalab.BenchError, match="unknown workload"):
        bench.run_cells(["segtree"], ["nope"], [1])


def test_allocator_error_keeps_its_class() -> None:
    with pytest.raises(dmalab.DmalabError):
        bench.run_cells(["segtree"], ["mixed"], [1], address_bits=8)


def test_a_domain_too_small_for_the_workload_is_refused() -> None:
    lo, hi = _native.bench_address_bits("nic-ring", 1)
    assert (lo, hi) == (25, 64)
    assert _native.bench_address_bits("nic-ring", 2)[0] == 26
    with pytest.raises(
        dmalab.BenchError, match=r"address_bits 13 is outside the valid range 25\.\.=64"
    ):
        bench.run_cells(["segtree"], ["nic-ring"], [1], address_bits=13)
    with pytest.raises(dmalab.BenchError, match="unknown workload"):
        _native.bench_address_bits("nope", 1)
