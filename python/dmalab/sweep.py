"""Design-space sweeps: a grid (or a seeded random sample) of scenario keys, each cell one run,
on local threads or on a Ray cluster, written as one tidy table (Parquet or CSV) that a later
sweep resumes from.

A sweep file::

    scenario = "p3-rbtree-deferred"        # a built-in scenario or a scenario file
    [set]                                  # keys every cell changes the same way (optional)
    "workload.ios" = 20000
    [grid]                                 # each key's values; the cells are their product
    "mapping.allocator" = ["rbtree", "bitmap", "segtree"]
    "mapping.flush" = ["strict", "deferred"]
    [sample]                               # optional: this many cells drawn from the grid
    count = 100
    seed = 1

A cell's row is what ``dmalab.sim.runs`` gives for its run (inputs as columns, results with
units, ``breakdown_*_us``) plus ``cell_id`` (a hash of the scenario and the cell's keys) and
one ``axis_<key>`` column per grid key. The simulator's own speed is left out, so the same cell
gives the same row on any worker; ``created_utc`` is the sweep's start.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import random
import time
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dmalab import ScenarioError, sim, tidy
from dmalab.keys import nest

MAX_CELLS = 1_000_000
"""The most cells one sweep file may describe."""


_KEYS = ("scenario", "set", "grid", "sample", "description")


@dataclass
class Sweep:
    """A sweep file, read and checked."""

    scenario: str
    grid: dict[str, list[Any]]
    fixed: dict[str, Any] = field(default_factory=dict)
    sample: int | None = None
    seed: int = 1
    description: str | None = None

    def cells(self) -> list[dict[str, Any]]:
        """The cells, in grid order (or drawing order for a sample), each a ``{key: value}``
        of its grid keys; a sample's repeats are dropped."""
        keys = list(self.grid)
        if self.sample is None:
            product = itertools.product(*self.grid.values())
            return [dict(zip(keys, values, strict=True)) for values in product]
        rng = random.Random(self.seed)
        out: dict[str, dict[str, Any]] = {}
        for _ in range(self.sample):
            cell = {k: rng.choice(self.grid[k]) for k in keys}
            out.setdefault(cell_id(self.scenario, self.fixed | cell), cell)
        return list(out.values())


def load(path: str | Path) -> Sweep:
    """Read and check a sweep file; every error names the key and what is valid."""
    p = Path(path)
    try:
        data = tomllib.loads(p.read_text())
    except tomllib.TOMLDecodeError as e:
        raise ScenarioError(f"{p}: not TOML ({e})") from None
    unknown = [k for k in data if k not in _KEYS]
    if unknown:
        raise ScenarioError(f"{p}: unknown key {unknown[0]!r}; valid: {', '.join(_KEYS)}")
    scenario = data.get("scenario")
    if not isinstance(scenario, str) or not scenario:
        raise ScenarioError(f"{p}: scenario must be a scenario name or file")
    if scenario.endswith(".toml") and not Path(scenario).is_absolute():
        # A scenario file is found beside the sweep file.
        scenario = str((p.parent / scenario).resolve())
    grid = data.get("grid")
    if not isinstance(grid, dict) or not grid:
        raise ScenarioError(f"{p}: [grid] must give at least one key with a list of values")
    for key, values in grid.items():
        if not isinstance(values, list) or not values:
            raise ScenarioError(f"{p}: grid.{key!r} must be a non-empty list of values")
        if "." not in key:
            raise ScenarioError(f"{p}: grid.{key!r}: a scenario key is TABLE.KEY (workload.ios)")
    fixed = data.get("set", {})
    if not isinstance(fixed, dict):
        raise ScenarioError(f"{p}: [set] must be a table of TABLE.KEY = value")
    size = 1
    for values in grid.values():
        size *= len(values)
    sample = data.get("sample")
    count, seed = None, 1
    if sample is not None:
        count, seed = sample.get("count"), sample.get("seed", 1)
        if not isinstance(count, int) or not 1 <= count <= MAX_CELLS:
            raise ScenarioError(f"{p}: sample.count must be an integer in 1..={MAX_CELLS}")
        if not isinstance(seed, int):
            raise ScenarioError(f"{p}: sample.seed must be an integer")
    elif size > MAX_CELLS:
        raise ScenarioError(f"{p}: the grid has {size:,} cells; valid: at most {MAX_CELLS:,}")
    return Sweep(scenario, grid, fixed, count, seed, data.get("description"))


def cell_id(scenario: str, keys: Mapping[str, Any]) -> str:
    """The cell's identity: the first 16 hex digits of the SHA-256 of its scenario and keys."""
    text = json.dumps([scenario, sorted(keys.items())], separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def run_cell(
    scenario: str, fixed: Mapping[str, Any], cell: Mapping[str, Any], created: str
) -> dict[str, Any]:
    """One cell's row (see the module's description)."""
    keys = dict(fixed) | dict(cell)
    report = sim.run(scenario, overrides=nest(keys))
    row = {"cell_id": cell_id(scenario, keys)}
    row.update({f"axis_{tidy.slug(k)}": v for k, v in cell.items()})
    full = tidy.run_row(report, created)
    row.update({k: v for k, v in full.items() if k not in tidy.SPEED})
    return row


def run_batch(
    scenario: str, fixed: Mapping[str, Any], cells: list[dict[str, Any]], created: str
) -> list[dict[str, Any]]:
    """Several cells' rows, in order (the unit of work a Ray task takes)."""
    return [run_cell(scenario, fixed, c, created) for c in cells]


@dataclass
class Outcome:
    """What a sweep did."""

    cells: int
    skipped: int
    ran: int
    wall_s: float
    out: str
    rows: list[dict[str, Any]]


def _read(out: Path) -> list[dict[str, Any]]:
    import pandas as pd

    if not out.exists():
        return []
    frame = pd.read_parquet(out) if out.suffix == ".parquet" else pd.read_csv(out)
    return frame.to_dict("records")  # type: ignore[return-value]


def _write(out: Path, rows: list[dict[str, Any]]) -> None:
    import pandas as pd

    frame = pd.DataFrame(rows)
    tmp = out.with_name(out.name + ".part")
    if out.suffix == ".parquet":
        from dmalab.extras import require

        require("pyarrow", "parquet", "a Parquet sweep output")
        frame.to_parquet(tmp, index=False)
    else:
        frame.to_csv(tmp, index=False)
    os.replace(tmp, out)


def run(
    sweep: Sweep,
    out: str | Path,
    *,
    workers: int | None = None,
    ray_address: str | None = None,
    use_ray: bool = False,
    progress: Callable[[int, int], None] | None = None,
    checkpoint_s: float = 5.0,
) -> Outcome:
    """Run every cell not already in ``out`` (``.parquet`` or ``.csv``) and write all rows there,
    in cell order, saving what is done every ``checkpoint_s`` seconds and when stopped (an
    exception or Ctrl-C), so that the same call resumes. On threads by default, or on Ray
    (``use_ray``: a local Ray with ``workers`` CPUs, or the cluster at ``ray_address``)."""
    out = Path(out)
    if out.suffix not in (".parquet", ".csv"):
        raise ScenarioError(f"--out {out}: the file must end in .parquet or .csv")
    start = time.monotonic()
    cells = sweep.cells()
    ids = [cell_id(sweep.scenario, sweep.fixed | c) for c in cells]
    order = {cid: i for i, cid in enumerate(ids)}
    done = {r["cell_id"]: r for r in _read(out) if r.get("cell_id") in order}
    todo = [c for c, cid in zip(cells, ids, strict=True) if cid not in done]
    skipped = len(cells) - len(todo)
    from dmalab.provenance import created_utc

    created = created_utc()
    new: dict[str, dict[str, Any]] = {}
    last_save = time.monotonic()

    def save() -> None:
        rows = sorted([*done.values(), *new.values()], key=lambda r: order[r["cell_id"]])
        _write(out, rows)

    def take(rows: list[dict[str, Any]]) -> None:
        nonlocal last_save
        for r in rows:
            new[r["cell_id"]] = r
        if progress:
            progress(skipped + len(new), len(cells))
        if time.monotonic() - last_save >= checkpoint_s:
            save()
            last_save = time.monotonic()

    n = workers or os.cpu_count() or 1
    batches = _batches(todo, n)
    try:
        if use_ray:
            _on_ray(sweep, batches, created, n, ray_address, take)
        else:
            _on_threads(sweep, batches, created, n, take)
    finally:
        save()
    rows = sorted([*done.values(), *new.values()], key=lambda r: order[r["cell_id"]])
    return Outcome(len(cells), skipped, len(new), time.monotonic() - start, str(out), rows)


def _batches(cells: list[dict[str, Any]], workers: int) -> list[list[dict[str, Any]]]:
    """Cells in batches: enough of them for every worker to stay busy and progress to move,
    few enough that a task's overhead stays small."""
    size = max(1, min(200, len(cells) // (workers * 8)))
    return [cells[i : i + size] for i in range(0, len(cells), size)]


def _on_threads(
    sweep: Sweep,
    batches: list[list[dict[str, Any]]],
    created: str,
    workers: int,
    take: Callable[[list[dict[str, Any]]], None],
) -> None:
    from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

    with ThreadPoolExecutor(max_workers=workers) as pool:
        pending = {pool.submit(run_batch, sweep.scenario, sweep.fixed, b, created) for b in batches}
        try:
            while pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                for f in finished:
                    take(f.result())
        except BaseException:
            for f in pending:
                f.cancel()
            raise


def _on_ray(
    sweep: Sweep,
    batches: list[list[dict[str, Any]]],
    created: str,
    workers: int,
    address: str | None,
    take: Callable[[list[dict[str, Any]]], None],
) -> None:
    from dmalab.extras import require

    ray = require("ray", "ray", "dmalab sweep --ray")
    started_here = not ray.is_initialized()
    if started_here:
        if address:
            ray.init(address=address, log_to_driver=False)
        else:
            ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
    try:
        task = ray.remote(run_batch)
        pending = [task.remote(sweep.scenario, sweep.fixed, b, created) for b in batches]
        while pending:
            finished, pending = ray.wait(pending, num_returns=1)
            for ref in finished:
                try:
                    take(ray.get(ref))
                except ray.exceptions.RayTaskError as e:
                    # A cell's own error (a bad key, say) as the error it is, not Ray's wrapper.
                    raise (e.cause if isinstance(e.cause, Exception) else e) from None
    finally:
        if started_here:
            ray.shutdown()
