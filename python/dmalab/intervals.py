"""Prediction intervals: each figure with the span it takes when the platform's uncertain
parameters move over the ranges their files state.

The parameters are those that state a ``range`` and are not read off a host: ``assumed``
ones over the range they could physically take, ``fitted`` ones over their ``fit_range`` (the
values with which the claims they were fitted to still pass), ``source`` ones known only to a
precision over that precision (an ``exact`` one is not drawn). A Latin
hypercube (``scipy.stats.qmc``, seeded, so the same seed gives the same interval) draws
``samples`` points of the unit cube, one coordinate per parameter, each parameter's span cut
into ``samples`` strata and each stratum drawn once. (Not a Sobol sequence: at 64 points in 60
dimensions its columns are correlated, 0.75 between some pairs, so a parameter would be blamed
for its neighbour's effect.) Each coordinate is the
parameter's quantile in its range (log-uniform over a range spanning more than a factor of 2,
uniform otherwise, snapped to a value the model accepts; the draw is done in the core, see
``ParamRecord::draw``). The model runs once per draw, on every core, and the interval is the
5th to 95th percentile of the draws' figures (``KEY_lo``, ``KEY_hi`` beside each ``KEY``); the
figure itself stays the run with every parameter at its file's value. A file's value is the
median of its own draws (see ``ParamRecord::draw``), yet a figure at a knee (a bound that every
drawn deviation lowers, such as a rate at the point where two limits meet) can lie beyond the
draws' percentiles: the interval is then stretched to the figure, and :attr:`Drawn.beyond` says
which figures were.

What drives an interval (``top_params``): a forward stepwise regression on ranks over the same
draws. The parameter whose rank correlates most with the figure's ranks is named first, the
figure's ranks are regressed on the parameters named so far, and the next is the one that
correlates most with what is left; each is given with the share of the figure's rank variance
it adds (``rho2``). This costs no run beyond the interval's own; it is a cheaper screen than
Sobol indices (it sees monotone effects, not interactions), and a parameter that only
correlates with a named one by chance of the design is not named after it. Among k parameters
that do nothing, the largest of k correlations over n draws reaches about z/sqrt(n - 1) with z
the two-sided normal quantile of 0.05/k (a Bonferroni bound: 3.3 for 60 parameters), so a step
stops below that floor: with 64 draws and 60 parameters |rho| > 0.42, with 32 draws > 0.60. A
parameter that moves a figure weakly may go unnamed; one that is named is not noise.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from dmalab import sim

if TYPE_CHECKING:
    from dmalab.types import RunReport

LEVEL = (5.0, 95.0)
"""The percentiles of the draws an interval spans."""

SAMPLES = 64
"""Draws per interval by default."""


def noise_rho(draws: int, params: int) -> float:
    """The rank correlation that ``params`` inert parameters' largest reaches over ``draws``
    draws with 5% chance (Bonferroni): only a parameter above it is named as a driver."""
    from statistics import NormalDist

    z = NormalDist().inv_cdf(1 - 0.025 / max(params, 1))
    return min(1.0, z / math.sqrt(max(draws - 1, 1)))


DRAWN_KINDS = ("assumed", "fitted", "source")
"""The provenances whose parameters an interval draws where they state a range (a value read
off a host by ``inspect`` is taken as it is)."""


def uncertain(platform: str, choices: Mapping[str, str] | None = None) -> list[str]:
    """The dotted paths of ``platform``'s parameters that state a range and are not read off
    a host: what an interval draws."""
    info = sim.platform_info(platform, dict(choices or {}))
    fields: dict[str, None] = {}
    for rec in info["params"]:
        if rec.get("range") is not None and rec["provenance"]["kind"] in DRAWN_KINDS:
            fields[rec["field"]] = None
    return list(fields)


def design(
    k: int, samples: int = SAMPLES, seed: int = 1, names: Sequence[str] | None = None
) -> list[list[float]]:
    """``samples`` rows of ``k`` quantiles in ``[0, 1)``: a Latin hypercube, seeded.

    With ``names`` (one per column, the parameters drawn), each column is its own stratified
    permutation seeded by ``seed`` and its name, so that a parameter's draws do not depend on
    which other parameters a platform states: adding a key to a file moves no other figure's
    interval. (A Latin hypercube's columns are independent permutations of the strata, so this
    is one too.)"""
    if samples < 2 or samples & (samples - 1):
        raise ValueError(f"samples: {samples}; valid: a power of two, 2 or more")
    if k == 0:
        return [[] for _ in range(samples)]
    if names is not None:
        import hashlib

        import numpy as np

        if len(names) != k:
            raise ValueError(f"names: {len(names)} given for {k} columns")
        cols = []
        for name in names:
            key = int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "big")
            rng = np.random.default_rng([seed, key])
            cols.append((rng.permutation(samples) + rng.random(samples)) / samples)
        return [[float(c[i]) for c in cols] for i in range(samples)]
    from scipy.stats import qmc

    rows = qmc.LatinHypercube(d=k, seed=seed).random(samples)
    return [[float(x) for x in row] for row in rows]


def draws(
    platform: str,
    choices: Mapping[str, str] | None = None,
    *,
    samples: int = SAMPLES,
    seed: int = 1,
) -> tuple[list[str], list[list[float]], list[dict[str, Any]]]:
    """The fields ``platform`` draws, the design's rows, and for each row the drawn values
    (parameter path to value) that the commands' ``draws`` arguments take."""
    from dmalab import _native

    fields = uncertain(platform, choices)
    rows = design(len(fields), samples, seed, fields)
    picks = dict(choices) if choices else None
    return fields, rows, _native.platform_draws(platform, fields, rows, picks)


def over_draws(
    platform: str,
    call: Callable[[dict[str, Any]], list[dict[str, Any]]],
    choices: Mapping[str, str] | None = None,
    *,
    samples: int = SAMPLES,
    seed: int = 1,
    progress: Callable[[int, int], None] | None = None,
    workers: int | None = None,
) -> Drawn:
    """Run ``call(draws)`` (a model run that returns its records, the nominal run's points in
    the same order) on every draw of ``platform``'s uncertain parameters, on ``workers``
    threads (default: as many as there are cores; the runs release the GIL); a run the model
    refuses (a :class:`dmalab.DmalabError`) counts as refused. ``progress(done, total)``
    counts draws."""
    import os
    from concurrent.futures import ThreadPoolExecutor

    from dmalab import DmalabError

    fields, rows, values = draws(platform, choices, samples=samples, seed=seed)

    def one(d: dict[str, Any]) -> dict[str, Any]:
        try:
            return {"records": call(d)}
        except DmalabError as e:
            return {"error": str(e)}

    outcomes: list[dict[str, Any]] = []
    with ThreadPoolExecutor(max_workers=workers or os.cpu_count() or 1) as pool:
        for o in pool.map(one, values):
            outcomes.append(o)
            if progress:
                progress(len(outcomes), len(values))
    return Drawn(fields, rows, outcomes)


def attach_run(
    report: RunReport,
    rerun: Callable[[dict[str, Any]], RunReport],
    *,
    samples: int = 32,
    seed: int = 1,
    workers: int | None = None,
) -> Drawn:
    """Give the run ``report`` its intervals: ``rerun(draws)`` runs the same scenario with
    ``draws`` in place of the files' values, once per draw of its platform's uncertain
    parameters; ``KEY_lo``, ``KEY_hi``, ``top_params`` and ``draws`` are added to ``report``
    for each of :data:`dmalab.tidy.RUN_FIGURES`."""
    from dmalab.tidy import RUN_FIGURES

    def call(d: dict[str, Any]) -> list[dict[str, Any]]:
        return [dict(rerun(d))]

    drawn = over_draws(
        report["platform"], call, report["choices"], samples=samples, seed=seed, workers=workers
    )
    drawn.attach([report], RUN_FIGURES)  # type: ignore[list-item]
    return drawn


class Drawn:
    """The draws of one interval run: the design, the fields it draws, and for each draw the
    records (or ``None`` where the model refused that combination, with its reason)."""

    def __init__(
        self,
        fields: Sequence[str],
        rows: Sequence[Sequence[float]],
        outcomes: Sequence[Mapping[str, Any]],
    ) -> None:
        self.fields = list(fields)
        self.rows = [list(r) for r in rows]
        self.beyond: set[tuple[int, str]] = set()
        """After :meth:`attach`: the (record, key) pairs whose figure lay beyond the draws'
        percentiles, their interval stretched to it."""
        self.records: list[list[dict[str, Any]] | None] = []
        self.refused: list[str] = []
        for o in outcomes:
            if "error" in o:
                self.records.append(None)
                self.refused.append(str(o["error"]))
            else:
                self.records.append(list(o["records"]))

    def attach(
        self,
        records: Sequence[dict[str, Any]],
        keys: Sequence[str],
        level: tuple[float, float] = LEVEL,
        top: int = 3,
        drivers: bool = True,
    ) -> None:
        """Add ``KEY_lo`` and ``KEY_hi`` beside each figure ``KEY`` of ``keys`` in each of
        ``records`` (the nominal run's, in the draws' order), and ``top_params``: per key, the
        parameters that move it most, as ``{"param", "rho2"}`` dicts (not with ``drivers``
        false: a caller that shows none of them saves the regressions). A figure beyond the
        draws' percentiles stretches its interval to it, and is listed in :attr:`beyond`."""
        import numpy as np

        ok = [i for i, r in enumerate(self.records) if r is not None]
        if not ok:
            raise ValueError(
                f"every one of the {len(self.records)} draws was refused by the model; "
                f"the first: {self.refused[0] if self.refused else '?'}"
            )
        quantiles = np.array([self.rows[i] for i in ok], dtype=float)
        drawn = [r for r in (self.records[i] for i in ok) if r is not None]
        # The drawn parameters' standardised ranks are the same for every record: once.
        cols = _standard_columns(quantiles) if drivers else {}
        # Every record's figures in every draw (draws by records by keys), and their
        # percentiles in one pass: the same numbers as figure by figure.
        figures = np.array(
            [[[float(rec[key]) for key in keys] for rec in d] for d in drawn], dtype=float
        ).reshape(len(drawn), len(records), len(keys))
        bounds = np.percentile(figures, level, axis=0)
        for j, rec in enumerate(records):
            tops: dict[str, list[dict[str, Any]]] = {}
            for k, key in enumerate(keys):
                ys = figures[:, j, k]
                lo, hi = float(bounds[0, j, k]), float(bounds[1, j, k])
                value = rec.get(key)
                if (
                    isinstance(value, int | float)
                    and math.isfinite(value)
                    and not lo <= value <= hi
                ):
                    # A figure at a knee, beyond its draws: the interval reaches it.
                    self.beyond.add((j, key))
                    lo, hi = min(lo, float(value)), max(hi, float(value))
                rec[f"{key}_lo"] = lo
                rec[f"{key}_hi"] = hi
                if drivers:
                    tops[key] = _drivers(quantiles, ys, self.fields, top, cols)
            if drivers:
                rec["top_params"] = tops
            rec["draws"] = len(ok)


def _standard(v: Any) -> Any:  # noqa: ANN401 - a numpy array
    """``v``'s ranks, centred and scaled to unit length (zero where they do not vary)."""
    import numpy as np
    from scipy.stats import rankdata

    r = rankdata(v)
    r = r - r.mean()
    norm = float(np.sqrt(r @ r))
    return r / norm if norm else r


def _standard_columns(x: Any) -> dict[int, Any]:  # noqa: ANN401 - a numpy array
    """Each column of ``x`` (draws by fields) that varies, standardised by :func:`_standard`."""
    import numpy as np

    return {c: _standard(x[:, c]) for c in range(x.shape[1]) if float(np.ptp(x[:, c])) > 0.0}


def _drivers(
    x: Any,  # noqa: ANN401 - a numpy array, draws by fields
    y: Any,  # noqa: ANN401 - a numpy array, one figure per draw
    fields: Sequence[str],
    top: int,
    cols: dict[int, Any] | None = None,
) -> list[dict[str, Any]]:
    """Up to ``top`` fields by forward stepwise regression on ranks (see the module's
    description), each with the share of the figure's rank variance it adds. ``cols``: the
    columns of ``x`` as :func:`_standard_columns` gives them, where the caller has them."""
    import numpy as np

    if float(np.ptp(y)) == 0.0:
        return []
    n = len(y)
    floor = noise_rho(n, len(fields))
    ry = _standard(y)
    if cols is None:
        cols = _standard_columns(x)
    chosen: list[int] = []
    residual = ry
    explained = 0.0
    out: list[dict[str, Any]] = []
    for _ in range(top):
        norm = float(np.sqrt(residual @ residual))
        if norm == 0.0:
            break
        scores = {c: float(v @ residual) / norm for c, v in cols.items() if c not in chosen}
        if not scores:
            break
        best = max(scores, key=lambda c: (abs(scores[c]), -c))
        if abs(scores[best]) <= floor:
            break
        chosen.append(best)
        a = np.column_stack([cols[c] for c in chosen])
        coef, *_ = np.linalg.lstsq(a, ry, rcond=None)
        residual = ry - a @ coef
        r2 = 1.0 - float(residual @ residual)
        out.append({"param": fields[best], "rho2": round(r2 - explained, 3)})
        explained = r2
    return out


def interval_text(value: float, lo: float, hi: float, fmt: str) -> str:
    """``value [lo, hi]`` in the format ``fmt`` (such as ``.2f``)."""
    return f"{value:{fmt}} [{lo:{fmt}}, {hi:{fmt}}]"


def figure(r: Mapping[str, Any], key: str, fmt: str, scale: float = 1.0) -> str:
    """A record's figure ``key`` (divided by ``scale``), with its interval where it has one."""
    if f"{key}_lo" in r:
        lo, hi = r[f"{key}_lo"] / scale, r[f"{key}_hi"] / scale
        return interval_text(r[key] / scale, lo, hi, fmt)
    return f"{r[key] / scale:{fmt}}"


def drivers(r: Mapping[str, Any], key: str, top: int = 2) -> str:
    """The parameters that move a record's figure ``key`` most, with their squared rank
    correlation, or ``-``."""
    tops = r.get("top_params", {}).get(key, [])
    return ", ".join(f"{t['param']} ({t['rho2']:.2f})" for t in tops[:top]) or "-"


def fit_intervals(
    rows: Sequence[dict[str, Any]],
    *,
    samples: int = 16,
    seed: int = 1,
    progress: Callable[[int, int], None] | None = None,
) -> None:
    """For each claim row that passes by a fit (``fitted_here``), the same claim modelled with
    those fitted parameters drawn from their physical ranges instead: ``fit_interval`` on the
    row, with the 5th to 95th percentile of the modelled number (``lo``, ``hi``), whether the
    published number lies inside (``covers``), the share of draws that still pass, and the
    fields drawn. A fit that only its own number pins shows here as a wide interval."""
    todo = [r for r in rows if r["passed"] and r["fitted_here"]]
    for n, r in enumerate(todo):
        fields = list(dict.fromkeys(r["fitted_here"]))
        r["fit_interval"] = _claim_interval(r, fields, samples, seed, physical=True)
        if progress:
            progress(n + 1, len(todo))


def predict_intervals(
    rows: Sequence[dict[str, Any]],
    *,
    samples: int = 16,
    seed: int = 1,
    progress: Callable[[int, int], None] | None = None,
) -> None:
    """For each claim row that no fit was made to (a prediction, passing or not), the claim
    modelled with every uncertain parameter of its platform drawn (an assumed one over its
    range, a fitted one over its ``fit_range``): ``interval`` on the row, with the same
    entries as ``fit_interval`` (the 5th to 95th percentile, whether the published number lies
    inside, the share of draws that pass)."""
    todo = [r for r in rows if not r["fitted_here"]]
    for n, r in enumerate(todo):
        fields = uncertain(r["platform"], r.get("choices") or None)
        r["interval"] = _claim_interval(r, fields, samples, seed)
        if progress:
            progress(n + 1, len(todo))


def _claim_interval(
    r: Mapping[str, Any], fields: list[str], samples: int, seed: int, *, physical: bool = False
) -> dict[str, Any]:
    """Claim row ``r`` modelled over ``samples`` draws of ``fields`` (see
    :func:`fit_intervals`), fitted ones over their physical range where ``physical``."""
    import numpy as np

    from dmalab import _native

    rows_q = design(len(fields), samples, seed, fields)
    # The claim's own options (a slot, a firmware) pick which record each field is drawn from.
    picks = dict(r.get("choices") or {}) or None
    values = _native.platform_draws(r["platform"], fields, rows_q, picks, physical=physical)
    outs = _native.reproduce_drawn(r["id"], r["case"], values)
    got = [o for o in outs if "error" not in o]
    nums = [float(o["modelled"]) for o in got if isinstance(o["modelled"], int | float)]
    entry: dict[str, Any] = {
        "fields": fields,
        "draws": len(got),
        "refused": len(outs) - len(got),
        "passed_share": (sum(bool(o["passed"]) for o in got) / len(got)) if got else None,
    }
    if nums and isinstance(r["published"], int | float):
        lo, hi = (float(x) for x in np.percentile(nums, LEVEL))
        entry |= {"lo": lo, "hi": hi, "covers": lo <= float(r["published"]) <= hi}
    return entry


def swings(
    platform: str,
    value: Callable[[dict[str, Any] | None], float],
    choices: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """For each of ``platform``'s uncertain parameters (see :func:`uncertain`), ``value`` (one
    figure of one model run, given draws or ``None`` for the file's values) with that parameter
    alone at the low and at the high end of its range, the others at their files' values; the
    swing is their difference over the file's figure. Largest swing first (a tornado)."""
    from dmalab import _native

    fields = uncertain(platform, choices)
    picks = dict(choices) if choices else None
    nominal = value(None)
    out: list[dict[str, Any]] = []
    for f in fields:
        lo_d, hi_d = _native.platform_draws(platform, [f], [[0.0], [1.0]], picks)
        at_lo, at_hi = value(lo_d), value(hi_d)
        out.append(
            {
                "param": f,
                "lo": lo_d.get(f),
                "hi": hi_d.get(f),
                "nominal": nominal,
                "at_lo": at_lo,
                "at_hi": at_hi,
                "swing": (at_hi - at_lo) / nominal if nominal else 0.0,
            }
        )
    out.sort(key=lambda r: (-abs(float(r["swing"])), str(r["param"])))
    return out
