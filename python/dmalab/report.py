"""One self-contained HTML page to hand a colleague: the published claims and how each fares,
a run's metrics, breakdown and latency distribution (interactive plotly charts), and the
parameters of every platform involved with the source of each.

The page needs no network: the chart library is inlined once, nothing is fetched. Plotly is an
optional extra (``pip install 'dmalab[report]'``).
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dmalab import sim, tidy
from dmalab.extras import require
from dmalab.provenance import platform_sha256, provenance

if TYPE_CHECKING:
    from dmalab.types import ClaimRow, RunReport
    from dmalab.validate import Result

_STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 2em auto; max-width: 72em; color: #222; }
h1 { font-size: 1.6em; } h2 { margin-top: 2em; border-bottom: 1px solid #ccc; }
table { border-collapse: collapse; margin: 0.5em 0; }
th, td { padding: 2px 8px; border-bottom: 1px solid #eee; text-align: left; vertical-align: top; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
td.fail { background: #fde8e8; } .pass { color: #1a7f37; } .fail { color: #b42318; }
.fit { color: #8a6d00; } .muted { color: #666; } details { margin: 0.5em 0; }
summary { cursor: pointer; font-weight: 600; }
"""


def _e(v: object) -> str:
    return html.escape("" if v is None else str(v))


def _num(v: object) -> str:
    if isinstance(v, float):
        return f"{v:,.6g}"
    if isinstance(v, int) and not isinstance(v, bool):
        return f"{v:,}"
    return _e(v)


def _table(header: Iterable[str], rows: Iterable[Iterable[str]], klass: str = "") -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "\n".join(f"<tr>{''.join(r)}</tr>" for r in rows)
    return f'<table class="{klass}"><thead><tr>{head}</tr></thead><tbody>\n{body}</tbody></table>'


def claims_section(rows: list[ClaimRow]) -> str:
    """The claims, published beside modelled, failures highlighted, fits marked."""
    passed = sum(r["passed"] for r in rows)
    fits = sum(1 for r in rows if r["passed"] and r["fitted_here"])
    out = [
        "<h2 id='claims'>Published claims</h2>",
        f"<p>{passed} of {len(rows)} claim rows pass: {passed - fits} predicted, {fits} by a "
        "parameter fitted to that row's own number (<span class='fit'>fit</span>); "
        f"{len(rows) - passed} fail.</p>",
    ]
    body = []
    for r in rows:
        err = "" if r["error"] is None else f"{r['error'] * 100:+.1f}%"
        result = (
            "<span class='pass'>pass</span>" if r["passed"] else "<span class='fail'>FAIL</span>"
        )
        fit = "<span class='fit'>fit</span>" if r["fitted_here"] else ""
        klass = "" if r["passed"] else " class='fail'"
        body.append(
            [
                f"<td{klass}>{_e(r['id'])}</td>",
                f"<td>{_e(r['case'])}</td>",
                f"<td>{_num(r['published'])}</td>",
                f"<td>{_num(r['modelled'])}</td>",
                f"<td>{_e(r['unit'])}</td>",
                f"<td class='num'>{err}</td>",
                f"<td>{_e(r['tolerance'])}</td>",
                f"<td>{result} {fit}</td>",
            ]
        )
    header = ("id", "case", "published", "modelled", "unit", "error", "tolerance", "result")
    out.append(_table(header, body, "claims"))
    return "\n".join(out)


def _figure_html(fig: Any, first: bool) -> str:  # noqa: ANN401 - a plotly Figure
    # The first chart carries the library inline; the others use it.
    return str(
        fig.to_html(
            full_html=False, include_plotlyjs=True if first else False, include_mathjax=False
        )
    )


def run_section(r: RunReport) -> str:
    """A run: what made it, its metrics, the breakdown as a bar chart and a table, and the
    latency histogram."""
    go = require("plotly.graph_objects", "report", "dmalab report")
    inputs = tidy.run_inputs(r)
    row = tidy.run_results(r)
    out = [f"<h2 id='run'>Run: {_e(r['scenario'])} on {_e(r['platform'])}</h2>"]
    out.append(
        _table(
            ("input", "value"),
            ([f"<td>{_e(k)}</td>", f"<td>{_e(v)}</td>"] for k, v in inputs.items()),
        )
    )
    metrics = tidy.MODEL_RESULTS
    out.append(
        _table(
            ("metric", "value"),
            ([f"<td>{_e(m)}</td>", f"<td class='num'>{_num(row[m])}</td>"] for m in metrics),
        )
    )
    parts = sorted(r["breakdown_us"].items(), key=lambda kv: -kv[1])
    out.append("<h3>Time per operation, by component (us)</h3>")
    bar = go.Figure(go.Bar(x=[v for _, v in parts], y=[k for k, _ in parts], orientation="h"))
    bar.update_layout(
        height=60 + 24 * len(parts),
        margin={"l": 240, "r": 20, "t": 20, "b": 40},
        xaxis_title="us per operation",
        yaxis={"autorange": "reversed"},
    )
    out.append(f"<div id='breakdown-chart'>{_figure_html(bar, True)}</div>")
    out.append(
        _table(
            ("component", "us"),
            ([f"<td>{_e(k)}</td>", f"<td class='num'>{v:.4f}</td>"] for k, v in parts),
        )
    )
    buckets = r["latency_histogram"]
    if buckets:
        hist = go.Figure(
            go.Bar(
                x=[(b["low_us"] * b["high_us"]) ** 0.5 for b in buckets],
                y=[b["count"] for b in buckets],
                width=[b["high_us"] - b["low_us"] for b in buckets],
            )
        )
        hist.update_layout(
            height=320,
            margin={"l": 60, "r": 20, "t": 20, "b": 40},
            xaxis={"type": "log", "title": "latency, us (quarter-octave buckets)"},
            yaxis={"title": "operations", "type": "log"},
        )
        out.append("<h3>Latency distribution</h3>")
        out.append(f"<div id='latency-chart'>{_figure_html(hist, False)}</div>")
    return "\n".join(out)


def platforms_section(names: Iterable[str]) -> str:
    """Each platform's parameters with their provenance, folded."""
    out = ["<h2 id='platforms'>Platforms and the source of every parameter</h2>"]
    for name in sorted(set(names)):
        info = sim.platform_info(name)
        kinds: dict[str, int] = {}
        for p in info["params"]:
            kinds[p["provenance"]["kind"]] = kinds.get(p["provenance"]["kind"], 0) + 1
        counts = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
        rows = (
            [
                f"<td>{_e(p['field'])}</td>",
                f"<td>{_e(p['value'])}</td>",
                f"<td>{_e(p['provenance']['kind'])}</td>",
                f"<td>{_e(p['option'] or '')}</td>",
                f"<td class='muted'>{_e(p['provenance']['note'])}</td>",
            ]
            for p in info["params"]
        )
        out.append(
            f"<details><summary>{_e(name)}: {_e(info['description'])} "
            f"<span class='muted'>({len(info['params'])} parameters: {counts}; "
            f"sha256 {_e(platform_sha256(name))})</span></summary>"
            + _table(("parameter", "value", "kind", "option", "source or note"), rows)
            + "</details>"
        )
    return "\n".join(out)


def advice_section(result: Mapping[str, Any]) -> str:
    """``dmalab advise``'s answer: the paragraph for a ticket, the steps in order and every
    single change, each gain with its interval and the protection it leaves."""
    from dmalab import advise

    plain = advise.plain(result)
    gain = advise.gain_text

    steps = (
        [
            f"<td>{i}</td>",
            f"<td>{_e(s['knob'])}</td>",
            f"<td>{_e(s['to'])}</td>",
            f"<td>{_e(gain(s))}</td>",
            f"<td>{_e(s['protection'])}</td>",
            f"<td class='muted'>{_e(s['how'])}</td>",
        ]
        for i, s in enumerate(plain["steps"], 1)
    )
    singles = (
        [
            f"<td>{_e(s['knob'])}</td>",
            f"<td>{_e(gain(s))}</td>",
            f"<td>{_e(s['protection'])}</td>",
            f"<td>{'yes' if s['allowed'] else 'no: ' + s['why_not']}</td>",
            f"<td class='muted'>{_e(s['limit'])}</td>",
        ]
        for s in plain["singles"]
    )
    return "\n".join(
        [
            f"<h2 id='advice'>Advice: {_e(plain['host'])}, {_e(plain['workload'])} "
            f"({_e(plain['goal'])}, keep protection {_e(plain['keep_protection'])})</h2>",
            f"<p>{_e(plain['ticket'])}</p>",
            _table(("step", "knob", "to", "gain", "protection", "how to set it"), steps),
            "<h3>Each change alone, from today</h3>",
            _table(("knob", "gain", "protection", "advised", "limit after"), singles),
        ]
    )


def validation_section(summary: Result, figures: Result | None, first: bool) -> str:
    """``dmalab validate``'s summary by host and experiment and, from ``figures`` (a run of a
    few directories, with intervals), one chart per experiment: each directory's measured
    curve over its modelled band, as the study's own figures draw them. ``first``: whether
    this section's first chart must carry the chart library."""
    from dmalab import validate

    go = require("plotly.graph_objects", "report", "dmalab report")

    def pct(x: float | None) -> str:
        return "-" if x is None else f"{x:.0%}"

    def signed(x: float | None) -> str:
        return "-" if x is None else f"{x:+.1%}"

    def rows(by: list[str]) -> Iterable[list[str]]:
        for r in validate.summarise(summary, by):
            yield [
                *(f"<td>{_e(r[b])}</td>" for b in by),
                f"<td class='num'>{r['points']}</td>",
                f"<td class='num'>{pct(r['within_10pct'])}</td>",
                f"<td class='num'>{signed(r['median_error'])}</td>",
                f"<td class='num'>{pct(r['coverage'])}</td>",
                f"<td class='num'>{pct(r['median_half_width'])}</td>",
                f"<td class='num'>{r['not_expressible']}</td>",
            ]

    numbers = ("points", "within 10%", "median error", "coverage", "half-width", "not expr.")
    ran = sum(p.modelled is not None for p in summary.points)
    out = [
        "<h2 id='validation'>Validation against real machines</h2>",
        f"<p>{ran} of {len(summary.points)} measured rows of the pcie-bench corpus "
        f"({len(summary.platforms)} directories) run through the model, each host built from "
        "its own system dump. Error: modelled / measured - 1; coverage: the share of points "
        "inside the modelled interval.</p>",
        _table(("host", "unit", *numbers), rows(["host", "unit"]), "validation"),
        _table(("experiment", *numbers), rows(["experiment"]), "validation"),
    ]
    if figures is None:
        return "\n".join(out)
    palette = ("#636efa", "#ef553b", "#00cc96", "#ab63fa", "#ffa15a", "#19d3f3")
    dirs = sorted({p.dir for p in figures.points})
    out.append("<h3>Measured (solid, markers) over modelled (dashed) and its interval (band)</h3>")
    for k, (title, file, test, x, size) in enumerate(validate.FIGURES):
        fig = go.Figure()
        for i, d in enumerate(dirs):
            pts = sorted(
                (p for p in validate.figure_points(figures.points, file, test, size) if p.dir == d),
                key=lambda p: getattr(p, x),
            )
            if not pts:
                continue
            colour = palette[i % len(palette)]
            xs = [getattr(p, x) for p in pts]
            if pts[0].lo is not None:
                fig.add_trace(
                    go.Scatter(
                        x=xs,
                        y=[p.lo for p in pts],
                        mode="lines",
                        line={"width": 0},
                        showlegend=False,
                        hoverinfo="skip",
                    )
                )
                fig.add_trace(
                    go.Scatter(
                        x=xs,
                        y=[p.hi for p in pts],
                        mode="lines",
                        line={"width": 0},
                        fill="tonexty",
                        opacity=0.2,
                        fillcolor=colour,
                        showlegend=False,
                        hoverinfo="skip",
                    )
                )
            fig.add_trace(
                go.Scatter(
                    x=xs,
                    y=[p.measured for p in pts],
                    mode="lines+markers",
                    name=f"{d} measured",
                    line={"color": colour},
                )
            )
            fig.add_trace(
                go.Scatter(
                    x=xs,
                    y=[p.modelled for p in pts],
                    mode="lines",
                    name=f"{d} modelled",
                    line={"color": colour, "dash": "dash"},
                )
            )
        unit = "median latency, ns" if test.startswith("LAT") else "bandwidth, Gbit/s"
        fig.update_layout(
            title=title,
            height=380,
            margin={"l": 60, "r": 20, "t": 40, "b": 40},
            xaxis={"title": x, "type": "log" if x == "window_bytes" else "linear"},
            yaxis={"title": unit},
        )
        out.append(
            f"<div class='validation-chart' id='validation-chart-{k}'>"
            f"{_figure_html(fig, first and k == 0)}</div>"
        )
    return "\n".join(out)


def build(
    claims: list[ClaimRow] | None,
    run: RunReport | None,
    title: str = "dmalab report",
    advice: Mapping[str, Any] | None = None,
    validation: tuple[Result, Result | None] | None = None,
) -> str:
    """The page: provenance, claims (if given), the run (if given), the validation (if given:
    the summary's result and the figures'), the advice (if given), the platforms involved."""
    prov = provenance()
    parts = [
        "<!DOCTYPE html>",
        "<html lang='en'><head><meta charset='utf-8'>",
        f"<title>{_e(title)}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{_e(title)}</h1>",
        f"<p class='muted'>dmalab {_e(prov['dmalab_version'])}, {_e(prov['created_utc'])}, "
        f"on {_e(prov['host'])} (Python {_e(prov['python'])}).</p>",
    ]
    platforms: list[str] = []
    if claims is not None:
        parts.append(claims_section(claims))
        platforms += [c["platform"] for c in claims]
    if run is not None:
        parts.append(run_section(run))
        platforms.append(run["platform"])
    if validation is not None:
        parts.append(validation_section(*validation, first=run is None))
    if advice is not None:
        parts.append(advice_section(advice))
        platforms.append(advice["host"])
    if platforms:
        parts.append(platforms_section(platforms))
    parts.append("</body></html>")
    return "\n".join(parts)


def write(
    path: str | Path,
    claims: list[ClaimRow] | None,
    run: RunReport | None,
    advice: Mapping[str, Any] | None = None,
    validation: tuple[Result, Result | None] | None = None,
) -> Path:
    """Build the page and write it to ``path``, whole or not at all."""
    from dmalab.files import write_atomic

    return write_atomic(path, build(claims, run, advice=advice, validation=validation))
