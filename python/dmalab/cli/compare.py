"""``dmalab compare A B``: two runs side by side, metric by metric and component by component."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from dmalab import ScenarioError, compare
from dmalab.cli import options

if TYPE_CHECKING:
    from dmalab.compare import Comparison, Row


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``compare``."""
    p = sub.add_parser(
        "compare",
        help="two runs side by side: what differs in their inputs, each metric and component",
        description=(
            "Compare two runs. Each of A and B is a run saved with `dmalab run ... --format json "
            "> FILE.json`, or a scenario (a built-in name or a TOML file) run now, with --set "
            "and --choice applied to both of those run now. Prints the inputs that differ, then "
            "every metric and every breakdown component: A, B, B - A and the change relative to "
            "A, with its sign (+ means B is larger)."
        ),
    )
    p.add_argument("a", metavar="A", help="saved run (.json), scenario file or built-in name")
    p.add_argument("b", metavar="B", help="the same, compared against A")
    options.add_set(p)
    options.add_choice(p)
    options.add_format(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Load or run both, compare, print."""
    picks = options.choices(args.choice)
    changes = options.overrides(args.set)
    saved = [s.endswith(".json") for s in (args.a, args.b)]
    if all(saved) and (picks or changes):
        raise ScenarioError("--set and --choice apply to scenarios run now; A and B are saved runs")
    a, b = (
        compare.load(s, None if was_saved else changes, None if was_saved else picks)
        for s, was_saved in zip((args.a, args.b), saved, strict=True)
    )
    result = compare.compare(a, b)
    if args.format != "table":
        rows = [
            {"kind": "input", "name": i["input"], "a": i["a"], "b": i["b"]}
            for i in result["inputs"]
        ]
        options.emit(result, args.format, rows=[*rows, *result["rows"]], command=args.argv)
        return 0
    _print(result)
    return 0


def _fmt(v: float | None) -> str:
    if v is None:
        return "-"
    if v == int(v) or abs(v) >= 1000:
        return f"{v:,.0f}"
    return f"{v:,.1f}" if abs(v) >= 100 else f"{v:.4g}"


def _change(r: Row) -> str:
    if r["change"] is None or r["sign"] == "=":
        return r["sign"] or "-"
    return f"{r['change']:+.1%}"


def _print(c: Comparison) -> None:
    from rich.table import Table

    console = options.console()
    console.print(f"A = {c['a']}, B = {c['b']}")
    if c["inputs"]:
        t = Table(title="inputs that differ")
        for col in ("input", "A", "B"):
            t.add_column(col)
        for i in c["inputs"]:
            t.add_row(i["input"], str(i["a"]), str(i["b"]))
        console.print(t)
    else:
        console.print("the inputs are the same")
    for kind, title in (("metric", "metrics"), ("component", "time per operation (us)")):
        t = Table(title=title)
        t.add_column("metric" if kind == "metric" else "component")
        for col in ("A", "B", "B - A", "change"):
            t.add_column(col, justify="right")
        for r in c["rows"]:
            if r["kind"] == kind:
                t.add_row(r["name"], _fmt(r["a"]), _fmt(r["b"]), _fmt(r["diff"]), _change(r))
        console.print(t)
