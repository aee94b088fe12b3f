"""``dmalab reproduce``: the published claims dmalab models, each against its tolerance."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from dmalab import ScenarioError, claims, sim
from dmalab.cli import options

if TYPE_CHECKING:
    from collections.abc import Callable

    from rich.console import Console
    from rich.table import Table

    from dmalab.types import ClaimRow


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``reproduce``."""
    rp = sub.add_parser(
        "reproduce",
        help="run the published claims dmalab can model and check each against its tolerance",
        description=(
            "Run every claim of docs/CLAIMS.md that dmalab models so far (or the ids given) on its "
            "machine's platform file and print: id, published, modelled, error, pass/fail, and "
            "whether a platform parameter was fitted to that very number; then every platform "
            "parameter that is fitted or assumed rather than cited. A row that fails for a "
            "documented reason (dmalab.claims.EXPECTED_FAILURES, docs/CLAIMS.md's expected "
            "failures) is an expected failure, shown with its reason and counted apart. Exit "
            "status 1 if any other row fails or if an expected failure passes (each named on "
            "stderr), else 0."
        ),
    )
    rp.add_argument(
        "ids", nargs="*", metavar="ID", help="claim ids, such as P1-TX-UNALIGNED (default: all)"
    )
    options.add_format(rp)
    rp.add_argument(
        "--verbose",
        action="store_true",
        help="print each claim's trace or breakdown; for each row that passes by a fit the "
        "same claim with the fitted parameters drawn from their physical ranges (16 draws), "
        "and for each predicted row (no fit) with every uncertain parameter of its platform "
        "drawn (assumed ones over their ranges, fitted ones over their fit ranges; 16 draws): "
        "the 5th to 95th percentile of the "
        "modelled number, whether the published one lies inside, and how many draws still "
        "pass (JSON: fit_interval, interval)",
    )
    rp.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Check the claims; exit status 1 if a row fails that is not an expected failure, or an
    expected failure passes (each such row named on stderr)."""
    known = sim.claim_ids()
    bad = [i for i in args.ids if i not in known]
    if bad:
        raise ScenarioError(f"unknown claim {', '.join(bad)}; known: {', '.join(known)}")
    rows, platforms = sim.reproduce(args.ids or None)
    claims.annotate(rows)  # type: ignore[arg-type]
    if args.verbose:
        from dmalab import intervals

        with options.ProgressLine(enabled=args.format == "table") as line:

            def progress(what: str) -> Callable[[int, int], None]:
                return lambda i, n: line.update(i, n, f"{what} drawn")

            intervals.fit_intervals(rows, progress=progress("fitted rows"))  # type: ignore[arg-type]
            intervals.predict_intervals(rows, progress=progress("predicted rows"))  # type: ignore[arg-type]
    if args.format != "table":
        # The breakdown is a page of text: JSON keeps it, a CSV row would not read.
        csv_rows = [{k: v for k, v in r.items() if k != "breakdown"} for r in rows]
        options.output(args, rows, rows=csv_rows)
    else:
        _print_claims(rows, platforms, options.console(), verbose=args.verbose)
    found = claims.verdict(rows)
    if found.ok:
        return 0
    err = options.console(stderr=True)
    for problem in found.problems():
        err.print(problem, markup=False, soft_wrap=True)
    return 1


def _fmt_value(v: Any) -> str:  # noqa: ANN401
    return f"{v:g}" if isinstance(v, int | float) else str(v)


def _print_claims(
    rows: list[ClaimRow],
    platforms: list[dict[str, Any]],
    console: Console,
    *,
    verbose: bool,
) -> None:
    narrow = console.width < WIDE_COLUMNS
    console.print(summary(rows))
    console.print(_table(rows, narrow=narrow))
    if narrow:
        console.print("(a text cut short with … is whole with --verbose or --format json)")
    console.print(
        "'fitted here' ('fit'): a platform parameter was fitted to this row's own published "
        "number, so its pass is a fit, not a prediction."
    )
    for line in expected_lines(rows, verbose=verbose):
        console.print(line, markup=False)
    if not verbose:
        n = sum(len(p["uncited"]) for p in platforms)
        console.print(
            f"{n} platform parameters are fitted or assumed rather than cited: --verbose lists "
            "them, and `dmalab platforms NAME` shows every parameter with its source."
        )
        console.print("(--verbose also shows each claim's trace or stage breakdown)")
        return
    from rich.table import Table

    for p in platforms:
        t = Table(title=f"{p['platform']}: parameters not taken from a cited source")
        for c in ("parameter", "value", "kind", "option", "note"):
            t.add_column(c, overflow="fold")
        for rec in p["uncited"]:
            prov = rec["provenance"]
            t.add_row(rec["field"], rec["value"], prov["kind"], rec["option"] or "", prov["note"])
        console.print(t)
    console.print(_fit_table(rows))
    console.print(fit_summary(rows), markup=False)
    console.print(_fit_table(rows, key="interval"))
    console.print(predict_summary(rows), markup=False)
    for r in rows:
        console.print(f"\n[bold]{r['id']}[/bold] {r['case']}")
        console.print(f"source: {r['source']}", markup=False)
        if r.get("expected_failure"):
            # Its reason and documents are in the list above the tables, printed once.
            what = "now passes" if r["passed"] else "fails"
            console.print(f"expected failure ({what}): its reason is listed above", markup=False)
        console.print(r["breakdown"], markup=False)


RESULT: dict[claims.Status, str] = {
    "pass": "pass",
    "expected-fail": "expected FAIL",
    "fail": "FAIL",
    "unexpected-pass": "pass, UNEXPECTED",
}
"""How the claims table shows each status."""


def expected_lines(rows: list[ClaimRow], *, verbose: bool) -> list[str]:
    """Below the table: what 'expected FAIL' means and where the reasons are; ``verbose``, each
    listed row (an expected failure, or one that now passes) with its reason and the documents
    that explain it."""
    listed = [r for r in rows if r.get("expected_failure")]
    if not listed:
        return []
    head = (
        "'expected FAIL': the row fails for a documented reason (dmalab.claims.EXPECTED_FAILURES"
        f"; {claims.CLAIMS_DOC} gives each)"
    )
    if not verbose:
        return [head + "; --verbose prints the reasons."]
    out = [head + ":"]
    for r in listed:
        known = r["expected_failure"]
        now = " [passes now: take it off the list]" if r["passed"] else ""
        docs = "; ".join(known["docs"])
        out.append(f"- {r['id']} {r['case']}{now}: {known['reason']} See {docs}.")
    return out


WIDE_COLUMNS = 150
"""Below this many columns the claims table leaves out the tolerance, folds the unit into the
case and cuts long texts (a list of bus commands) short: --verbose and --format json have
them whole."""


def _table(rows: list[ClaimRow], *, narrow: bool) -> Table:
    """The claims table: every column on a wide screen; on a narrow one (an 80-column terminal)
    the claim (id, case and unit), published, modelled, error and the result, words whole."""
    from rich import box
    from rich.table import Table

    title = "Published claims reproduced (docs/CLAIMS.md)"
    if narrow:
        table = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False)
        table.add_column("claim: case (unit)", ratio=1)
        for c in ("published", "modelled"):
            table.add_column(c, no_wrap=True, overflow="ellipsis", max_width=12)
        table.add_column("error", justify="right", no_wrap=True)
        table.add_column("result", no_wrap=True)
    else:
        table = Table(title=title)
        for c in ("id", "case", "published", "modelled", "unit", "error", "tolerance"):
            table.add_column(c, justify="right" if c == "error" else "left")
        table.add_column("passed")
        table.add_column("fit", no_wrap=True)
    for r in rows:
        err = "" if r["error"] is None else f"{r['error'] * 100:+.1f}%"
        passed = RESULT[r["status"]]
        published, modelled = _fmt_value(r["published"]), _fmt_value(r["modelled"])
        if narrow:
            result = f"{passed}, fit" if r["fitted_here"] and r["passed"] else passed
            claim = f"{r['id']}: {r['case']} ({r['unit']})"
            table.add_row(claim, published, modelled, err, result)
        else:
            fit = "fitted here" if r["fitted_here"] else ""
            table.add_row(
                r["id"], r["case"], published, modelled, r["unit"], err, r["tolerance"], passed, fit
            )
    return table


def _fit_table(rows: list[ClaimRow], key: str = "fit_interval") -> Table:
    """The rows that pass by a fit, with the fitted parameters drawn from their ranges (``key``
    ``fit_interval``), or the predicted rows with every uncertain parameter drawn
    (``interval``)."""
    from rich.table import Table

    fitted = key == "fit_interval"
    title = (
        "rows that pass by a fit, with the fitted parameters drawn from their ranges"
        if fitted
        else "predicted rows (no fit), with every uncertain parameter drawn"
    )
    t = Table(title=title)
    drawn = "drawn" if fitted else "parameters drawn"
    for c in ("id", "case", drawn, "published", "modelled [5th, 95th]", "inside", "draws pass"):
        t.add_column(c, overflow="fold")
    for r in rows:
        fi = r.get("fit_interval") if fitted else r.get("interval")
        if not fi:
            continue
        if "lo" in fi:
            span = f"{_fmt_value(r['modelled'])} [{fi['lo']:.4g}, {fi['hi']:.4g}]"
            inside = "yes" if fi["covers"] else "no"
        else:
            span, inside = f"{_fmt_value(r['modelled'])} (not a number)", "-"
        share = "-" if fi["passed_share"] is None else f"{fi['passed_share']:.0%}"
        t.add_row(
            r["id"],
            r["case"],
            ", ".join(fi["fields"]) if fitted else str(len(fi["fields"])),
            _fmt_value(r["published"]),
            span,
            inside,
            f"{share} of {fi['draws']}",
        )
    return t


def _coverage(entries: list[dict[str, Any]]) -> tuple[int, int]:
    """Of interval ``entries``, how many have a number and how many of those hold the
    published one."""
    numeric = [e for e in entries if "lo" in e]
    return len(numeric), sum(1 for e in numeric if e["covers"])


def fit_summary(rows: list[ClaimRow]) -> str:
    """How many fitted rows' intervals hold the published number, and how many draws pass."""
    fitted = [e for r in rows if (e := r.get("fit_interval"))]
    numeric, covered = _coverage(fitted)
    return (
        f"{len(fitted)} rows pass by a fit; with the fitted parameters drawn from their physical "
        f"ranges instead, {covered} of the {numeric} with a number hold the published one "
        "inside their 5th to 95th percentile; 'draws pass' is how often a draw still passes: "
        "a low share is a fit that only its own number pins."
    )


def predict_summary(rows: list[ClaimRow]) -> str:
    """How many predicted rows' intervals hold the published number."""
    predicted = [e for r in rows if (e := r.get("interval"))]
    numeric, covered = _coverage(predicted)
    return (
        f"{len(predicted)} rows are predicted (no fit); with every uncertain parameter of their "
        "platforms drawn (assumed ones over their ranges, fitted ones over their fit ranges), "
        f"{covered} of the {numeric} with "
        "a number hold the published one inside their 5th to 95th percentile."
    )


def summary(rows: list[ClaimRow]) -> str:
    """What a reader needs first: how many rows pass, how many of those are fits, and how many
    fail as expected (for a documented reason), fail unexpectedly, or pass though expected to
    fail; each row is counted once."""
    status = [r["status"] for r in rows]
    passed = [r for r, s in zip(rows, status, strict=True) if s == "pass"]
    fits = sum(1 for r in passed if r["fitted_here"])
    line = (
        f"{len(passed)} of {len(rows)} claim rows pass: {len(passed) - fits} predicted, "
        f"{fits} by a parameter fitted to that row's own number; "
        f"{status.count('expected-fail')} fail as expected, each for a documented reason; "
        f"{status.count('fail')} fail unexpectedly"
    )
    if now := status.count("unexpected-pass"):
        line += f"; {now} expected to fail pass"
    return line + "."
