"""Tidy results: a sweep's rows carry their inputs, every column is queryable, the breakdown
comes long too, and every row says what made it."""

from __future__ import annotations

import math

from dmalab import __version__, sim, tidy

BASE = {
    "platform": "intel-vtd-2008-server",
    "workload": {"kind": "block", "io_bytes": 1024, "ios": 2000},
}


def _sweep() -> list[dict]:
    return [
        {**BASE, "mapping": {"translation": "page-table", "allocator": a, "flush": f}}
        for a in ("rbtree", "bitmap", "segtree")
        for f in ("strict", "deferred", "per-cpu")
    ]


def test_a_3x3_sweep_is_selected_by_its_inputs_without_a_join() -> None:
    wide, long = sim.run_frames(_sweep(), workers=2)
    assert len(wide) == 9
    one = wide.query("allocator == 'rbtree' and flush == 'deferred'")
    assert len(one) == 1
    assert one.iloc[0]["flush_high_water"] == 250
    assert set(wide["allocator"]) == {"rbtree", "bitmap", "segtree"}
    assert set(wide["flush"]) == {"strict", "deferred", "per-cpu"}
    # Strict invalidation leaves nothing reachable after unmap; deferred does.
    strict = wide.query("flush == 'strict'")["pages_exposed_after_unmap"]
    assert (strict == 0).all()
    assert (wide.query("flush == 'deferred'")["pages_exposed_after_unmap"] > 0).all()
    assert (wide["workload_ios"] == 2000).all()
    assert wide["platform_sha256"].nunique() == 1
    assert (wide["dmalab_version"] == __version__).all()
    # The long breakdown sums to the wide one, run by run.
    per_run = long.groupby("run")["time_us"].sum()
    wide_cols = [c for c in wide.columns if c.startswith("breakdown_")]
    for i, total in per_run.items():
        assert math.isclose(total, wide.loc[i, wide_cols].sum(), rel_tol=1e-12)
    assert set(long["side"]) == {"host"}


def test_every_column_is_an_identifier_and_df_query_takes_it() -> None:
    wide = sim.runs(_sweep()[:2])
    for col in wide.columns:
        assert col.isidentifier(), col
        value = wide[col].iloc[0]
        if value is None or (isinstance(value, float) and math.isnan(value)):
            continue
        assert len(wide.query(f"{col} == @value")) >= 1, col


def test_network_runs_split_the_breakdown_by_side() -> None:
    spec = {
        "platform": "powerlinux-7r2",
        "mapping": {},
        "workload": {"kind": "udp-rr", "transactions": 200, "instances": 4},
    }
    wide, long = sim.run_frames([spec])
    assert set(long["side"]) == {"client", "server"}
    assert "choice_slot" in wide.columns
    assert "breakdown_client_stack_per_message_us" in wide.columns


def test_claims_frame_keeps_numbers_and_texts_apart() -> None:
    frame = sim.claims_frame(["P1-TX-ALIGNED", "P1-TPUT"])
    assert frame["published"].dtype == float
    trace = frame[frame["id"] == "P1-TX-ALIGNED"].iloc[0]
    assert math.isnan(trace["published"]) and trace["published_text"].startswith("MRM 512")
    tput = frame[frame["id"] == "P1-TPUT"].iloc[0]
    assert tput["published"] == 777 and tput["published_text"] == "777"
    assert frame["fitted_here"].dtype == bool


def test_slugs_are_identifiers() -> None:
    assert tidy.slug("map: IOVA allocation") == "map_iova_allocation"
    assert tidy.slug("translation (IOTLB misses)") == "translation_iotlb_misses"
    assert tidy.slug("2nd") == "x_2nd"
    assert tidy.split_component("client stack (per message)") == ("client", "stack (per message)")
    assert tidy.split_component("device") == ("host", "device")


def test_a_100m_io_run_holds_its_memory_and_reports_its_tail() -> None:
    """Latencies go into a histogram, not a list: 100M I/Os (8 bytes each would be 800 MB)
    run in a process whose peak resident memory stays under 50 MB."""
    import json
    import subprocess
    import sys

    # The peak is read from VmHWM, which starts anew at exec (ru_maxrss would carry the forking
    # test process's own peak into the child).
    code = (
        "import json, re; from dmalab import sim; "
        "r = sim.run('p3-iommu-off', overrides={'workload': {'ios': 100_000_000}}); "
        "kib = int(re.search(r'VmHWM:\\s+(\\d+)', open('/proc/self/status').read())[1]); "
        "print(json.dumps({'kib': kib, "
        "'n': r['dma_transfers'], 'p999': r['latency_p99_9_us'], 'max': r['latency_max_us']}))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    got = json.loads(out.stdout)
    assert got["n"] == 100_000_000
    assert got["p999"] > 0 and got["max"] >= got["p999"]
    assert got["kib"] < 50 * 1024, got
