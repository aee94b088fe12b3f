"""dmalab.claims and ``dmalab reproduce``'s exit status: the rows that fail for a documented
reason are expected failures (exit 0); any other failure, or a listed row that passes, exits 1."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from dmalab import _native, claims, sim
from dmalab.cli import main

ROOT = Path(__file__).resolve().parents[2]


def _with_row_drawn(
    monkeypatch: pytest.MonkeyPatch, claim: str, case: str, draws: dict[str, Any]
) -> None:
    """``sim.reproduce`` as it is, but claim row ``claim``/``case`` modelled with the platform's
    ``draws`` in place of its file's values (the model itself, not a hand-set result)."""
    real = sim.reproduce

    def drawn(ids: list[str] | None = None) -> tuple[list[Any], list[dict[str, Any]]]:
        rows, platforms = real(ids)
        for r in rows:
            if (r["id"], r["case"]) == (claim, case):
                (out,) = _native.reproduce_drawn(claim, case, [draws])
                r["modelled"], r["passed"] = out["modelled"], out["passed"]
        return rows, platforms

    monkeypatch.setattr(sim, "reproduce", drawn)


def test_reproduce_exits_0_with_the_expected_failures_counted_apart(
    capsys: pytest.CaptureFixture[str],
) -> None:
    n = len(claims.EXPECTED_FAILURES)
    assert main(["reproduce"]) == 0
    captured = capsys.readouterr()
    first = captured.out.splitlines()[0]
    assert re.fullmatch(
        rf"(\d+) of (\d+) claim rows pass: \d+ predicted, \d+ by a parameter fitted to that "
        rf"row's own number; {n} fail as expected, each for a documented reason; 0 fail "
        r"unexpectedly\.",
        first,
    ), first
    passed, total = (int(x) for x in first.split(" claim")[0].split(" of "))
    assert passed + n == total
    assert captured.out.count("expected FAIL") >= n
    assert captured.err == ""

    assert main(["reproduce", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    status = [r["status"] for r in rows]
    assert status.count("expected-fail") == n and status.count("pass") == total - n
    listed = {(e.id, e.case): e for e in claims.EXPECTED_FAILURES}
    for r in rows:
        if r["status"] == "expected-fail":
            e = listed[(r["id"], r["case"])]
            assert r["passed"] is False
            assert r["expected_failure"] == {"reason": e.reason, "docs": list(e.docs)}
        else:
            assert "expected_failure" not in r


def test_a_passing_row_broken_in_the_model_exits_1_and_is_named(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    case = "unaligned (Linux)"
    assert main(["reproduce", "P1-TPUT"]) == 0
    capsys.readouterr()
    # The bridge's read fetch at the top of its physical range: 500 Mbit/s against 777.
    _with_row_drawn(monkeypatch, "P1-TPUT", case, {"bus.pci.read_fetch_latency_ns": 3000})
    assert main(["reproduce", "P1-TPUT"]) == 1
    captured = capsys.readouterr()
    assert "1 fail unexpectedly" in captured.out and "FAIL" in captured.out
    assert captured.err.strip() == f"unexpected failure: P1-TPUT {case}"
    assert main(["reproduce", "P1-TPUT", "--format", "json"]) == 1
    rows = json.loads(capsys.readouterr().out)
    assert [r["status"] for r in rows] == ["fail", "pass"]


def test_an_expected_failure_that_starts_to_pass_exits_1_and_is_named(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    case = "streaming MRM, read current off (extra row: seed 004 Table 5)"
    assert claims.expected_failure({"id": "P4X-1010-CURRENT", "case": case}) is not None
    assert main(["reproduce", "P4X-1010-CURRENT"]) == 0
    capsys.readouterr()
    # Disks that take only 210 MB/s: the published 208 is then within 5%.
    _with_row_drawn(monkeypatch, "P4X-1010-CURRENT", case, {"scsi_tx.array_mb_s": 210})
    assert main(["reproduce", "P4X-1010-CURRENT"]) == 1
    captured = capsys.readouterr()
    assert "1 expected to fail pass" in captured.out and "pass, UNEXPECTED" in captured.out
    assert captured.err.startswith(f"expected failure now passes: P4X-1010-CURRENT {case}")
    assert main(["reproduce", "P4X-1010-CURRENT", "--format", "json"]) == 1
    (row,) = [r for r in json.loads(capsys.readouterr().out) if r["case"] == case]
    assert row["status"] == "unexpected-pass" and row["expected_failure"]["reason"]


def test_a_listed_row_that_no_claim_row_matches_exits_1(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    stale = claims.ExpectedFailure("P1-TPUT", "unaligned (AIX)", "a case renamed", ("x",))
    monkeypatch.setattr(claims, "EXPECTED_FAILURES", (*claims.EXPECTED_FAILURES, stale))
    assert main(["reproduce", "P1-TPUT"]) == 1
    assert "expected failure matches no row: P1-TPUT unaligned (AIX)" in capsys.readouterr().err
    # A claim that was not run says nothing of the entries of others.
    assert main(["reproduce", "P0-TPUT"]) == 0


def _slug(heading: str) -> str:
    """A Markdown heading's anchor, as GitHub makes it."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_every_expected_failure_is_explained_where_it_points() -> None:
    doc = (ROOT / "docs" / "CLAIMS.md").read_text()
    section = doc.split("\n## Expected failures\n", 1)[1]
    for e in claims.EXPECTED_FAILURES:
        assert e.reason and e.docs[0] == claims.CLAIMS_DOC
        assert f"| {e.id} | {e.case} |" in section, (e.id, e.case)
        for ref in e.docs:
            path, _, anchor = ref.partition("#")
            text = (ROOT / path).read_text()
            headings = {_slug(h) for h in re.findall(r"^#+ (.+)$", text, re.M)}
            assert not anchor or anchor in headings, ref
    keys = [(e.id, e.case) for e in claims.EXPECTED_FAILURES]
    assert len(keys) == len(set(keys))


def test_status_of_each_kind_of_row() -> None:
    e = claims.ExpectedFailure("X", "a", "why", ("docs",))
    rows: list[dict[str, Any]] = [
        {"id": "X", "case": "a", "passed": False},
        {"id": "X", "case": "a", "passed": True},
        {"id": "X", "case": "b", "passed": False},
        {"id": "X", "case": "b", "passed": True},
    ]
    claims.annotate(rows, [e])
    assert [r["status"] for r in rows] == ["expected-fail", "unexpected-pass", "fail", "pass"]
    assert rows[0]["expected_failure"] == {"reason": "why", "docs": ["docs"]}
    assert "expected_failure" not in rows[2]
    found = claims.verdict(rows, [e])
    assert not found.ok
    assert found.problems() == [
        "unexpected failure: X b",
        "expected failure now passes: X a (take it off dmalab.claims.EXPECTED_FAILURES and "
        "docs/CLAIMS.md)",
    ]
    assert claims.verdict(rows[:1], [e]).ok
