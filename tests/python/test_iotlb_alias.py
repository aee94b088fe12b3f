"""``dmalab iotlb-alias``: concurrent streams against a set-associative IOTLB."""

from __future__ import annotations

import json

import pytest

from dmalab import ScenarioError, _native
from dmalab.cli import main


def _cell(streams: int, ways: int, align: str) -> dict[str, object]:
    return {
        "allocator": "bitmap",
        "streams": streams,
        "iotlb_entries": 64,
        "iotlb_ways": ways,
        "io_bytes": 65536,
        "tlp_bytes": 256,
        "align": align,
        "flush": "strict",
        "ios_per_stream": 50,
    }


def test_size_aligned_streams_thrash_a_set_beyond_its_ways_and_colour_spreads_them() -> None:
    four = _native.iotlb_alias("xeon-broadwell-2s", _cell(4, 4, "size"))
    eight = _native.iotlb_alias("xeon-broadwell-2s", _cell(8, 4, "size"))
    colored = _native.iotlb_alias("xeon-broadwell-2s", _cell(8, 4, "color"))
    assert four["thrash_misses_per_io"] == 0 and four["iotlb_sets"] == 16
    assert eight["misses_per_io"] == eight["tlps_per_io"] == 256
    assert colored["thrash_misses_per_io"] == 0
    assert eight["walk_us_per_io"] > 10 * four["walk_us_per_io"]


def test_bad_geometry_names_the_field(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ScenarioError, match="iotlb_entries"):
        _native.iotlb_alias("xeon-broadwell-2s", {**_cell(1, 4, "size"), "iotlb_entries": 48})
    with pytest.raises(SystemExit) as exit_:
        main(["iotlb-alias", "--iotlb", "64by4"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "ENTRIESxWAYS" in err


def test_the_command_gives_a_row_per_cell(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["iotlb-alias", "--streams", "1,8", "--align", "size,color", "--ios", "20"]
    assert main([*args, "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert len(rows) == 2 * 2 * 2  # aligns x default geometries x streams
    assert {r["align"] for r in rows} == {"size", "color"}
    assert main(args) == 0
    assert "IOTLB aliasing" in capsys.readouterr().out
