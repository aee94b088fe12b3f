"""The claim rows that fail for a documented reason, and each row's status against that list.

The claims themselves are data in the repository's ``claims/seedNNN.toml`` files, built into the
native module; which of their rows the model does not reproduce, and why, is data here
(:data:`EXPECTED_FAILURES`): each entry names one row (claim id and case), says in a sentence or
two why it fails, and points to the documents that explain it at length. ``dmalab reproduce``
reads the list: a row on it that fails is an expected failure (exit status 0); a row on it that
passes, or a row off it that fails, is a surprise (exit status 1), so the list stays true.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

__all__ = [
    "EXPECTED_FAILURES",
    "ExpectedFailure",
    "Status",
    "Verdict",
    "annotate",
    "expected_failure",
    "status",
    "verdict",
]

Status = Literal["pass", "expected-fail", "fail", "unexpected-pass"]
"""A claim row's status: it passes; it fails, as :data:`EXPECTED_FAILURES` says it does; it
fails, though not listed; it passes, though listed as failing."""

CLAIMS_DOC = "docs/CLAIMS.md#expected-failures"
"""Where the claims' documentation gives every expected failure's reason."""


@dataclass(frozen=True)
class ExpectedFailure:
    """One claim row that the model does not reproduce, for a documented reason."""

    id: str
    """The claim's id, such as ``P4-RO-UDP``."""
    case: str
    """The row's case, exactly as ``dmalab reproduce`` prints it."""
    reason: str
    """Why the row fails, in a sentence or two."""
    docs: tuple[str, ...]
    """The documents (paths from the repository's root, with an anchor where it helps) that
    explain it, the claims' documentation first."""

    def plain(self) -> dict[str, Any]:
        """The entry as plain data for JSON: ``reason`` and ``docs``."""
        return {"reason": self.reason, "docs": list(self.docs)}


_CARD_BUFFER = "docs/results/2026-11-28-seed004-card-buffer.md"
_SCSI = "docs/results/2026-12-06-seed004-scsi.md"
_TABLES = "docs/results/2026-12-06-seed004-tables.md"

_ORDERING = (
    "The BCM5701 reads frames ahead into its 96 KiB buffer, so its reads are not the slowest "
    "stage (the sending CPU is) and relaxed ordering, which only shortens those reads, gains "
    "nothing; within the model any ordering gain comes with a prefetch change several times "
    "larger, which the passing P4-PF-NIC rules out."
)
_PREFETCH = (
    "The 53c1010's SCRIPTS run from on-chip RAM and read control data 1 to 8 bytes at a time "
    "(Memory Read), so the consistent MRM hints reach none of its reads; even with every data "
    "burst read under them, depth 0 stays above 193 MB/s and depth 1 at 223 MB/s."
)

EXPECTED_FAILURES: tuple[ExpectedFailure, ...] = (
    ExpectedFailure(
        "P4-RO-UDP",
        "streaming MRM",
        _ORDERING,
        (CLAIMS_DOC, f"{_CARD_BUFFER}#why-the-three-rows-cannot-pass-within-these-rules"),
    ),
    ExpectedFailure(
        "P4-RO-UDP",
        "streaming ALL",
        _ORDERING,
        (CLAIMS_DOC, f"{_CARD_BUFFER}#why-the-three-rows-cannot-pass-within-these-rules"),
    ),
    ExpectedFailure(
        "P4-RO-1080",
        "ordering relaxed",
        _ORDERING,
        (CLAIMS_DOC, f"{_CARD_BUFFER}#why-the-three-rows-cannot-pass-within-these-rules"),
    ),
    ExpectedFailure(
        "P4-PF-SCSI",
        "consistent MRM, prefetch depth 0",
        _PREFETCH,
        (CLAIMS_DOC, f"{_SCSI}#why-the-prefetch-column-is-out-of-reach"),
    ),
    ExpectedFailure(
        "P4-PF-SCSI",
        "consistent MRM, prefetch depth 1",
        _PREFETCH,
        (CLAIMS_DOC, f"{_SCSI}#why-the-prefetch-column-is-out-of-reach"),
    ),
    ExpectedFailure(
        "P4X-1010-CURRENT",
        "streaming MRM, read current off (extra row: seed 004 Table 5)",
        "With read current off each data burst takes its lines' ownership, about 4% more time "
        "on the PCI path; the model's channels have room to spare, so the disks' limit still "
        "binds at 223 MB/s, while the seed's controller seems to have run nearer its PCI limit.",
        (
            CLAIMS_DOC,
            f"{_SCSI}#published-beside-modelled",
            f"{_TABLES}#table-5-53c1010-relaxed-ordering-and-read-current-mbs",
        ),
    ),
    ExpectedFailure(
        "P4X-E1000-TCP",
        "8 KB messages (extra row: seed 004 Table 4)",
        "The seed measures a 70 Mbit/s drop with 8 KB messages under both e1000 drivers and "
        "cannot explain it (its 7.1); the model's TCP stream at MTU 9000 is wire-bound at every "
        "message size.",
        (
            CLAIMS_DOC,
            f"{_CARD_BUFFER}#what-it-predicts",
            f"{_TABLES}#tables-3-and-4-intel-82546eb-e1000-mtu-9000-mbits",
        ),
    ),
)
"""Every claim row expected to fail, with why: the one place this list lives. A change that
makes a listed row pass, or another row fail, must change this list (and docs/CLAIMS.md)."""


def expected_failure(
    row: Mapping[str, Any], table: Iterable[ExpectedFailure] | None = None
) -> ExpectedFailure | None:
    """The entry of ``table`` (default :data:`EXPECTED_FAILURES`) for claim ``row``, if any."""
    for e in EXPECTED_FAILURES if table is None else table:
        if e.id == row["id"] and e.case == row["case"]:
            return e
    return None


def status(row: Mapping[str, Any], table: Iterable[ExpectedFailure] | None = None) -> Status:
    """Claim ``row``'s status against ``table`` (default :data:`EXPECTED_FAILURES`)."""
    expected = expected_failure(row, table) is not None
    if row["passed"]:
        return "unexpected-pass" if expected else "pass"
    return "expected-fail" if expected else "fail"


def annotate(
    rows: Iterable[dict[str, Any]], table: Iterable[ExpectedFailure] | None = None
) -> None:
    """Give each claim row its ``status`` and, where ``table`` (default
    :data:`EXPECTED_FAILURES`) lists it, ``expected_failure`` (its ``reason`` and ``docs``)."""
    entries = tuple(EXPECTED_FAILURES if table is None else table)
    for r in rows:
        e = expected_failure(r, entries)
        r["status"] = status(r, entries)
        if e is None:
            r.pop("expected_failure", None)
        else:
            r["expected_failure"] = e.plain()


@dataclass(frozen=True)
class Verdict:
    """What a set of claim rows says against the list of expected failures."""

    failed: list[dict[str, Any]]
    """Rows that fail and are not listed."""
    now_pass: list[dict[str, Any]]
    """Rows that are listed as failing and pass."""
    missing: list[ExpectedFailure]
    """Listed rows of a claim that was run, which no row of it matches (a case renamed)."""

    @property
    def ok(self) -> bool:
        """Whether the rows agree with the list: exit status 0."""
        return not (self.failed or self.now_pass or self.missing)

    def problems(self) -> list[str]:
        """One line per disagreement, naming the row."""
        out = [f"unexpected failure: {r['id']} {r['case']}" for r in self.failed]
        out += [
            f"expected failure now passes: {r['id']} {r['case']} (take it off "
            "dmalab.claims.EXPECTED_FAILURES and docs/CLAIMS.md)"
            for r in self.now_pass
        ]
        out += [
            f"expected failure matches no row: {e.id} {e.case} (fix dmalab.claims."
            "EXPECTED_FAILURES)"
            for e in self.missing
        ]
        return out


def verdict(
    rows: Sequence[Mapping[str, Any]], table: Iterable[ExpectedFailure] | None = None
) -> Verdict:
    """Rows ``rows`` (every row of each claim they hold) against ``table`` (default
    :data:`EXPECTED_FAILURES`)."""
    entries = tuple(EXPECTED_FAILURES if table is None else table)
    ran = {r["id"] for r in rows}
    seen = {(r["id"], r["case"]) for r in rows}
    return Verdict(
        failed=[dict(r) for r in rows if status(r, entries) == "fail"],
        now_pass=[dict(r) for r in rows if status(r, entries) == "unexpected-pass"],
        missing=[e for e in entries if e.id in ran and (e.id, e.case) not in seen],
    )
