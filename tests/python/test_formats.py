"""`--format json` carries provenance; `--format csv` gives one flat row per record with the
provenance as its last columns, on every data command."""

from __future__ import annotations

import csv
import io
import json

import pytest

from dmalab import __version__
from dmalab.cli import main, tabular
from dmalab.provenance import created_utc, platform_sha256


def _csv(capsys: pytest.CaptureFixture[str], argv: list[str]) -> list[dict[str, str]]:
    assert main([*argv, "--format", "csv"]) in (0, 1)
    return list(csv.DictReader(io.StringIO(capsys.readouterr().out)))


def _json(capsys: pytest.CaptureFixture[str], argv: list[str]) -> object:
    assert main([*argv, "--format", "json"]) in (0, 1)
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize(
    ("argv", "rows", "column"),
    [
        (["trace", "p1-tx-unaligned"], 5, "command"),
        (["reproduce", "P1-TPUT", "P3-DEFER"], 3, "published"),
        (
            [
                "run",
                "p3-rbtree-deferred",
                "--set",
                "workload.ios=500",
                "--no-progress",
                "--no-intervals",
            ],
            1,
            "flush",
        ),
        (["platforms"], None, "kind"),
        (["platforms", "hp-rx2600-zx1"], None, "provenance_kind"),
        (["hints"], None, "gain_pct"),
        (["copybreak", "--frame-bytes", "1000"], 2, "policy"),
        (["vhost", "--packets", "100"], None, "placement"),
    ],
)
def test_csv_rows_end_with_provenance(
    capsys: pytest.CaptureFixture[str], argv: list[str], rows: int | None, column: str
) -> None:
    table = _csv(capsys, argv)
    assert table and (rows is None or len(table) == rows)
    header = list(table[0])
    assert column in header
    assert header[-3:] == ["dmalab_version", "created_utc", "platform_sha256"]
    assert all(r["dmalab_version"] == __version__ for r in table)


def test_json_carries_provenance_with_the_platform_hash(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1764115200")
    run = _json(
        capsys,
        ["run", "p3-bitmap-strict", "--set", "workload.ios=500", "--no-progress", "--no-intervals"],
    )
    assert isinstance(run, dict)
    prov = run["provenance"]
    assert prov["dmalab_version"] == __version__
    assert prov["created_utc"] == "2025-11-26T00:00:00Z"
    assert prov["platform"] == "intel-vtd-2008-server"
    assert prov["platform_sha256"] == platform_sha256("intel-vtd-2008-server", {"device": "hba"})
    assert prov["command"][:3] == ["dmalab", "run", "p3-bitmap-strict"]
    # The resolved scenario is in the report itself: every default filled in.
    assert run["allocator"] == "bitmap" and run["flush"] == {"policy": "strict"}
    assert run["workload"]["queue_depth"] == 1
    claims = _json(capsys, ["reproduce", "P1-TPUT"])
    assert isinstance(claims, list) and all("provenance" in c for c in claims)
    assert {c["provenance"]["platform"] for c in claims} == {"ibm-p660-m2plus"}


def test_the_platform_hash_follows_the_resolved_parameters() -> None:
    base = platform_sha256("ibm-p660-m2plus")
    assert base == platform_sha256("ibm-p660-m2plus", {})
    assert base is not None and len(base) == 16
    assert platform_sha256("ibm-p660-m2plus", {"firmware": "2001"}) != base
    assert platform_sha256("no-such-platform") is None


def test_created_utc_honours_source_date_epoch(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "0")
    assert created_utc() == "1970-01-01T00:00:00Z"
    monkeypatch.delenv("SOURCE_DATE_EPOCH")
    assert created_utc().endswith("Z")


def test_flatten_names_columns_as_identifiers() -> None:
    row = tabular.flatten(
        {"a": {"b c": 1}, "parts": [["map: IOVA", 2.0]], "xs": [1, 2], "ok": True}
    )
    assert row == {"a_b_c": 1, "parts_map_iova": 2.0, "xs": "[1, 2]", "ok": True}
    out = io.StringIO()
    tabular.write_csv([row, {"new": None}], out)
    lines = out.getvalue().splitlines()
    assert lines[0] == "a_b_c,parts_map_iova,xs,ok,new"
    assert lines[1] == '1,2.0,"[1, 2]",true,'
    assert lines[2] == ",,,,"


def test_parquet_holds_the_csv_rows(
    tmp_path: object, capfdbinary: pytest.CaptureFixture[bytes]
) -> None:
    import pandas as pd

    assert main(["platforms", "hp-rx2600-zx1", "--format", "parquet"]) == 0
    data = capfdbinary.readouterr().out
    frame = pd.read_parquet(io.BytesIO(data))
    assert list(frame.columns[-3:]) == ["dmalab_version", "created_utc", "platform_sha256"]
    assert "bus.pci.lba.ioc_line_ns" in set(frame["field"])
    # A parameter's value is a number or a name: the column is kept as text.
    assert {type(v) for v in frame["value"]} == {str}


def test_a_missing_extra_names_what_to_install(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: object
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "pyarrow", None)
    assert main(["trace", "p1-tx-aligned", "--format", "parquet"]) == 2
    assert "pip install 'dmalab[parquet]'" in capsys.readouterr().err
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert main(["plot", "crossover", "--out", f"{tmp_path}/x.png"]) == 2
    assert "pip install 'dmalab[plot]'" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "p3-iommu-off", "--no-progress", "--timeline", "{missing}/t.json"],
        ["report", "--claims", "--run", "none", "--out", "{missing}/r.html"],
        ["inspect", "--out", "{missing}/p.toml"],
        ["run", "p3-iommu-off", "--no-progress", "--timeline", "{folder}"],
    ],
)
def test_an_output_that_cannot_be_written_is_refused_before_the_work(
    tmp_path: object, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    folder = str(tmp_path)
    missing = f"{folder}/no-such-folder"
    args = [a.format(missing=missing, folder=folder) for a in argv]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "does not exist" in err or "is a folder" in err
