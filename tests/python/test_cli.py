"""The dmalab command line: help, argument errors, and a small benchmark run in both formats."""

from __future__ import annotations

import json

import pytest

from dmalab.cli import main

SMALL = ["bench", "iova", "--quick", "--no-progress", "--workloads", "nic-ring", "--threads", "1"]


def test_help_explains(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["bench", "iova", "--help"])
    assert e.value.code == 0
    out = capsys.readouterr().out
    assert "map-unmap-1page" in out
    assert "--format" in out


def test_bad_threads_name_the_range(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as e:
        main(["bench", "iova", "--threads", "0"])
    assert e.value.code == 2
    assert "1..=64" in capsys.readouterr().err


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
    keys |= {"bytes_per_live_mapping", "default"}
    for r in records:
        assert keys <= r.keys()
        assert r["ops_per_s"] > 0
        assert r["p50_ns"] <= r["p99_ns"] <= r["p999_ns"]
    assert [r["default"] for r in records] == [True, False]


def test_table_output(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*SMALL, "--allocators", "segtree", "magazines+rbtree"]) == 0
    out = capsys.readouterr().out
    assert "segtree *" in out
    assert "nic-ring 1T ops/s vs magazines+rbtree" in out
