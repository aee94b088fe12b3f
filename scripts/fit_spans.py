"""How far each shipped fitted parameter may move with every claim it was fitted to still
passing: its ``fit_range``, the fit's uncertainty as the claims' tolerances leave it.

For each parameter a claim row names in ``fitted_here``, every other value held as the file has
it: from the file's value, the largest and the smallest integer inside its physical ``range``
for which every row naming it still passes (integer bisection, taking the passing values to be
one interval around the file's value), or for a string parameter the options of its range with
which they pass. Run by hand (some claims take a minute a parameter):

    .venv/bin/python scripts/fit_spans.py            # print them
    .venv/bin/python scripts/fit_spans.py --write    # and write fit_range into the files

``tests/python/test_fit_spans.py`` recomputes the cheap ones and checks the files against them.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from dmalab import _native, sim

ROOT = Path(__file__).resolve().parent.parent


def passes(rows: Iterable[dict[str, Any]], param: str, value: object) -> bool:
    """Whether every claim row passes with ``param`` at ``value``."""
    for r in rows:
        (out,) = _native.reproduce_drawn(r["id"], r["case"], [{param: value}])
        if "error" in out or not out["passed"]:
            return False
    return True


def _edge(ok: Callable[[int], bool], good: int, bad: int) -> int:
    """The passing integer next to the first failing one between ``good`` (passes) and
    ``bad`` (fails)."""
    while abs(bad - good) > 1:
        mid = (good + bad) // 2
        if ok(mid):
            good = mid
        else:
            bad = mid
    return good


def span(platform: str, param: str, rows: list[dict[str, Any]]) -> list[Any]:
    """The fit range of ``param`` on ``platform``: ``[lo, hi]``, or the passing options."""
    rec = next(p for p in _native.platform_info(platform)["params"] if p["field"] == param)
    rng = rec["range"]
    if isinstance(rng, list):
        return [o for o in rng if passes(rows, param, o)]
    value = int(rec["value"].split()[0])

    def ok(x: int) -> bool:
        return passes(rows, param, x)

    lo, hi = rng["lo"], rng["hi"]
    top = hi if ok(hi) else _edge(ok, value, hi)
    bottom = lo if ok(lo) else _edge(ok, value, lo)
    return [bottom, top]


def fitted_rows(ids: list[str] | None = None) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Each (platform, parameter) that a claim row was fitted to, with those rows. A fitted
    parameter whose claims name no checked row (fitted to a baseline a claim's rows are
    relative to, such as P3-IOPS's IOMMU-disabled rate) gets the rows of the same claim ids."""
    rows, _ = sim.reproduce(ids)
    out: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        for p in dict.fromkeys(r["fitted_here"]):
            out.setdefault((r["platform"], p), []).append(dict(r))
    for platform in dict.fromkeys(r["platform"] for r in rows):
        for rec in _native.platform_info(platform)["params"]:
            if rec["provenance"]["kind"] != "fitted" or (platform, rec["field"]) in out:
                continue
            named = {c.split(" ", 1)[0] for c in rec.get("claims", [])}
            mine = [dict(r) for r in rows if r["platform"] == platform and r["id"] in named]
            if mine:
                out[(platform, rec["field"])] = mine
    return out


def source_file(platform: str, param: str) -> Path:
    """The shipped file that states ``param`` as fitted: the platform's, or its device's."""
    key = param.rsplit(".", 1)[1]
    candidates = [ROOT / "platforms" / f"{platform}.toml", *sorted((ROOT / "devices").glob("*"))]
    for f in candidates:
        text = f.read_text()
        if re.search(rf"^{re.escape(key)} = \{{[^\n]*fitted = ", text, re.M) and (
            f.parent.name == "platforms" or _default_of(platform, f.stem)
        ):
            return f
    raise LookupError(f"{platform}: no shipped file states {param} as fitted")


def _default_of(platform: str, device: str) -> bool:
    text = (ROOT / "platforms" / f"{platform}.toml").read_text()
    return re.search(rf'^default_\w+ = "{re.escape(device)}"', text, re.M) is not None


def write(path: Path, param: str, fit: list[Any]) -> None:
    """Put ``fit_range = fit`` into the fitted line of ``param``'s key in ``path``."""
    key = param.rsplit(".", 1)[1]
    text = path.read_text()
    pattern = re.compile(
        rf"^({re.escape(key)} = \{{[^\n]*fitted = [^\n]*?)(, fit_range = [^\]]*\])?( \}})$", re.M
    )
    shown = "[" + ", ".join(f'"{v}"' if isinstance(v, str) else str(v) for v in fit) + "]"
    new, n = pattern.subn(lambda m: f"{m.group(1)}, fit_range = {shown}{m.group(3)}", text)
    if n != 1:
        raise LookupError(f"{path}: {n} fitted lines for {key}")
    path.write_text(new)


def main(argv: list[str] | None = None) -> int:
    """Print (and with --write, write) every fitted parameter's fit range."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", action="store_true", help="write fit_range into the files")
    ap.add_argument("ids", nargs="*", help="claim ids (default: all)")
    args = ap.parse_args(argv)
    for (platform, param), rows in fitted_rows(args.ids or None).items():
        fit = span(platform, param, rows)
        where = source_file(platform, param)
        print(f"{platform} {param}: fit_range {fit} ({where.relative_to(ROOT)})", flush=True)
        if args.write:
            write(where, param, fit)
    return 0


if __name__ == "__main__":
    sys.exit(main())
