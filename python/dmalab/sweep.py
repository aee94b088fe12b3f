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
units, ``breakdown_*_us``) plus ``cell_id`` (a hash of the scenario and the cell's keys), one
``axis_<key>`` column per grid key, ``spec_hash`` (a hash of the resolved sweep: scenario, the
scenario file's bytes, [set], [grid], [sample]) and ``spec_file`` (the sweep file's name). The
simulator's own speed is left out, so the same cell gives the same row on any worker;
``created_utc`` is the sweep's start. With intervals (``dmalab sweep`` gives them unless told
``--no-intervals``; :attr:`Sweep.intervals` in Python), each cell's figures have ``KEY_lo`` and
``KEY_hi`` (the 5th to 95th percentile over that many draws of the platform's assumed and
fitted parameters), ``KEY_driven_by`` and ``interval_draws``, and the draws and their seed
enter ``spec_hash``. A Parquet file also carries its sweeps in its key-value
metadata (``dmalab.sweep``: each spec hash with its file and resolved spec).

An output file belongs to the sweep that wrote it: a sweep resumes its own file (its rows are
skipped), refuses a file of another sweep, or a file that is not a sweep's (unless told to
replace it, or to append to it), and saves atomically (a temporary file in the same folder,
then a rename), so that neither a refusal nor an interrupt ever loses a row already saved. Each
save holds an exclusive lock on the file (``FILE.lock`` beside it) while it reads the file again,
merges its own rows in and writes it: sweeps appending to one file at once keep every row of
each.
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
from typing import TYPE_CHECKING, Any, Literal

from dmalab import ScenarioError, sim, tidy
from dmalab.files import locked
from dmalab.keys import nest

if TYPE_CHECKING:
    from dmalab.types import RunReport

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
    path: str | None = None
    """The sweep file it was read from, if any (``spec_file`` in its rows)."""
    intervals: int = 0
    """Draws per cell for each figure's interval (``KEY_lo``, ``KEY_hi``; see
    :mod:`dmalab.intervals`); 0 for none."""
    interval_seed: int = 1
    """The seed of those draws."""

    def resolved(self) -> dict[str, Any]:
        """What the sweep's results depend on: the scenario (and its file's SHA-256 when it is
        a file), the [set] keys, the grid and the sample."""
        scenario_sha = None
        if self.scenario.endswith(".toml"):
            try:
                scenario_sha = hashlib.sha256(Path(self.scenario).read_bytes()).hexdigest()
            except OSError:
                scenario_sha = None  # the run itself says what is wrong with it
        return {
            "scenario": self.scenario,
            "scenario_sha256": scenario_sha,
            "set": dict(sorted(self.fixed.items())),
            "grid": self.grid,
            "sample": None if self.sample is None else {"count": self.sample, "seed": self.seed},
        } | (
            {"intervals": {"samples": self.intervals, "seed": self.interval_seed}}
            if self.intervals
            else {}
        )

    def spec_hash(self) -> str:
        """The sweep's identity (``spec_hash`` in its rows): the first 16 hex digits of the
        SHA-256 of :meth:`resolved`."""
        text = json.dumps(self.resolved(), separators=(",", ":"), default=str)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

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
    except UnicodeDecodeError:
        raise ScenarioError(f"{p}: not a sweep file (binary, not TOML text)") from None
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
        seen: set[str] = set()
        for v in values:
            # Two equal values would be one cell twice (the same cell_id).
            text = json.dumps(v, sort_keys=True, default=str)
            if text in seen:
                raise ScenarioError(f"{p}: grid.{key!r} gives {v!r} twice; valid: each value once")
            seen.add(text)
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
    return Sweep(scenario, grid, fixed, count, seed, data.get("description"), str(path))


def cell_id(scenario: str, keys: Mapping[str, Any]) -> str:
    """The cell's identity: the first 16 hex digits of the SHA-256 of its scenario and keys."""
    text = json.dumps([scenario, sorted(keys.items())], separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def run_cell(
    scenario: str,
    fixed: Mapping[str, Any],
    cell: Mapping[str, Any],
    created: str,
    intervals: tuple[int, int] = (0, 1),
) -> dict[str, Any]:
    """One cell's row (see the module's description); with ``intervals`` (draws, seed) of
    more than 0 draws, each figure's interval beside it (run on this thread: the cells
    already fill the workers)."""
    keys = dict(fixed) | dict(cell)
    report = sim.run(scenario, overrides=nest(keys))
    samples, seed = intervals
    if samples:
        from dmalab import intervals as iv

        def rerun(d: dict[str, Any]) -> RunReport:
            return sim.run(scenario, overrides=nest(keys), draws=d)

        iv.attach_run(report, rerun, samples=samples, seed=seed, workers=1)
    row = {"cell_id": cell_id(scenario, keys)}
    row.update({f"axis_{tidy.slug(k)}": v for k, v in cell.items()})
    full = tidy.run_row(report, created)
    row.update({k: v for k, v in full.items() if k not in tidy.SPEED})
    return row


def run_batch(
    scenario: str,
    fixed: Mapping[str, Any],
    cells: list[dict[str, Any]],
    created: str,
    intervals: tuple[int, int] = (0, 1),
) -> list[dict[str, Any]]:
    """Several cells' rows, in order (the unit of work a Ray task takes)."""
    return [run_cell(scenario, fixed, c, created, intervals) for c in cells]


Mode = Literal["resume", "replace", "append"]
"""What a sweep does with an ``out`` that exists: ``resume`` (the default) skips the cells
already in it and refuses a file of another sweep or one that is not a sweep's; ``replace``
overwrites it; ``append`` keeps its rows, whatever sweep they came from, and adds this sweep's
(resuming its own)."""


@dataclass
class Outcome:
    """What a sweep did."""

    cells: int
    skipped: int
    ran: int
    wall_s: float
    out: str
    rows: list[dict[str, Any]]
    """This sweep's rows, in cell order (an appended file's other rows are left out)."""


class Interrupted(KeyboardInterrupt):
    """A sweep stopped by Ctrl-C (a KeyboardInterrupt): ``kept`` of its ``total`` cells are
    saved in ``out`` (every row the file held before is still there), and the same call
    resumes; ``mode`` is the mode the stopped sweep ran in."""

    def __init__(self, kept: int, total: int, out: str, mode: Mode) -> None:
        super().__init__(f"{kept:,} of {total:,} cells kept in {out}")
        self.kept, self.total, self.out, self.mode = kept, total, out, mode


META_KEY = b"dmalab.sweep"
"""The Parquet key-value metadata key of a sweep file: JSON ``{"specs": {HASH: {"file": ...,
"spec": ...}}}``, one entry per sweep whose rows the file holds."""

_HASH = r"[0-9a-f]{16}"
_REPLACE = "pass --replace to overwrite it"
_EITHER = "pass --replace to overwrite it or --append to add to it"


def _first_line(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


def _read(out: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The rows of an existing sweep file and its metadata's sweeps (Parquet), or nothing when
    there is no file; a file that is empty, cut short, not CSV or Parquet, or not a sweep's
    (no ``cell_id`` column, or a row without one) is refused, and left as it is."""
    import pandas as pd

    if not out.exists():
        return [], {}
    if out.stat().st_size == 0:
        raise ScenarioError(f"--out {out} is empty, not a sweep's results; {_REPLACE}")
    specs: dict[str, Any] = {}
    if out.suffix == ".parquet":
        from dmalab.extras import require

        pa = require("pyarrow", "parquet", "a Parquet sweep output")
        pq = require("pyarrow.parquet", "parquet", "a Parquet sweep output")

        try:
            table = pq.read_table(out)
            raw = (table.schema.metadata or {}).get(META_KEY)
            if raw is not None:
                specs = dict(json.loads(raw).get("specs", {}))
            frame = table.to_pandas()
        except (ValueError, AttributeError, pa.ArrowException) as e:
            raise ScenarioError(
                f"--out {out} is not a readable Parquet file ({_first_line(e)}); {_REPLACE}"
            ) from None
    else:
        with out.open("rb") as f:
            f.seek(-1, os.SEEK_END)
            if f.read(1) != b"\n":
                raise ScenarioError(
                    f"--out {out} ends mid-row (cut short?), not a sweep's results; {_REPLACE}"
                )
        try:
            text = {c: str for c in ("cell_id", "spec_hash", "spec_file")}
            frame = pd.read_csv(out, dtype=text)
        except ValueError as e:  # not text, not CSV (UnicodeDecodeError, ParserError, ...)
            raise ScenarioError(
                f"--out {out} is not readable CSV ({_first_line(e)}); {_REPLACE}"
            ) from None
    if "cell_id" not in frame.columns:
        raise ScenarioError(
            f"--out {out} is not a sweep's results (it has no cell_id column); {_REPLACE}"
        )
    for col in ("cell_id", "spec_hash"):
        # Every row has a cell_id; a spec_hash is missing only on rows from before them.
        values = (
            frame[col] if col == "cell_id" else frame.get(col, pd.Series(dtype=object)).dropna()
        )
        if not values.astype(str).str.fullmatch(_HASH).all():
            raise ScenarioError(
                f"--out {out} has a row whose {col} is not 16 hex digits (a damaged file?); "
                f"{_REPLACE}"
            )
    return frame.to_dict("records"), specs


def _name(specs: Mapping[str, Any], rows: list[dict[str, Any]], spec: str) -> str:
    """A sweep's hash and the file it was read from, as known: ``abc (other.toml?)``."""
    entry = specs.get(spec)
    name = entry.get("file") if isinstance(entry, Mapping) else None
    if not isinstance(name, str):
        name = next((r.get("spec_file") for r in rows if r.get("spec_hash") == spec), None)
    return f"{spec} ({name}?)" if isinstance(name, str) and name else spec


def _split(
    out: Path,
    rows: list[dict[str, Any]],
    specs: Mapping[str, Any],
    sweep: Sweep,
    spec: str,
    order: Mapping[str, int],
    mode: Mode,
) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
    """An existing file's rows as those of other sweeps (kept as they are) and this sweep's
    (by cell_id, skipped when run again); refuses the file when it holds another sweep's rows
    and ``mode`` does not say to add to it. A file from before spec hashes is this sweep's
    when every row is one of its cells, and another sweep's otherwise."""
    ours: dict[str, dict[str, Any]] = {}
    others: list[dict[str, Any]] = []
    legacy = bool(rows) and all(not isinstance(r.get("spec_hash"), str) for r in rows)
    if legacy and all(r["cell_id"] in order for r in rows):
        for r in rows:
            ours[r["cell_id"]] = r | {"spec_hash": spec, "spec_file": sweep.path}
        return others, ours
    for r in rows:
        if r.get("spec_hash") == spec and r["cell_id"] in order:
            ours[r["cell_id"]] = r
        else:
            others.append(r)
    if others and mode == "resume":
        this = f"spec {spec} ({sweep.path or 'this sweep'})"
        hashes = list(dict.fromkeys(r.get("spec_hash") for r in others))
        names = [
            f"spec {_name(specs, rows, h)}" if isinstance(h, str) else "a sweep without spec_hash"
            for h in hashes[:3]
        ]
        more = f" and {len(hashes) - 3} more sweeps" if len(hashes) > 3 else ""
        held = f"results of {', '.join(names)}{more}"
        raise ScenarioError(f"--out {out} holds {held}, not {this}; {_EITHER}")
    return others, ours


def _frame(rows: list[dict[str, Any]]) -> Any:  # noqa: ANN401 - a pandas DataFrame
    import pandas as pd

    frame = pd.DataFrame(rows)
    for col in frame.columns:
        kinds = {type(v) for v in frame[col] if v is not None and v == v}
        if len(kinds) > 1 and not kinds <= {int, float}:
            # A column of several kinds (grids of numbers and names, appended sweeps) as text,
            # which is what Parquet's one type per column asks.
            frame[col] = [None if v is None or v != v else str(v) for v in frame[col]]
    return frame


def _write(out: Path, rows: list[dict[str, Any]], specs: Mapping[str, Any]) -> None:
    """Write ``rows`` to ``out`` whole or not at all (see :func:`dmalab.files.write_atomic`):
    when anything stops the write (an error, Ctrl-C), ``out`` is as it was."""
    from dmalab.files import write_atomic

    frame = _frame(rows)
    if out.suffix == ".parquet":
        from dmalab.extras import require

        pa = require("pyarrow", "parquet", "a Parquet sweep output")
        pq = require("pyarrow.parquet", "parquet", "a Parquet sweep output")

        table = pa.Table.from_pandas(frame, preserve_index=False)
        meta = dict(table.schema.metadata or {})
        meta[META_KEY] = json.dumps({"specs": dict(specs)}, default=str).encode()
        table = table.replace_schema_metadata(meta)
        write_atomic(out, lambda tmp: pq.write_table(table, tmp))
    else:
        write_atomic(out, lambda tmp: frame.to_csv(tmp, index=False))


def run(
    sweep: Sweep,
    out: str | Path,
    *,
    workers: int | None = None,
    ray_address: str | None = None,
    use_ray: bool = False,
    progress: Callable[[int, int], None] | None = None,
    checkpoint_s: float = 5.0,
    mode: Mode = "resume",
) -> Outcome:
    """Run every cell not already in ``out`` (``.parquet`` or ``.csv``) and write all rows there,
    in cell order, saving what is done every ``checkpoint_s`` seconds and when stopped (an
    exception or Ctrl-C), so that the same call resumes. On threads by default, or on Ray
    (``use_ray``: a local Ray with ``workers`` CPUs, or the cluster at ``ray_address``).

    An ``out`` that exists is resumed when it is this sweep's, and refused (a ScenarioError,
    the file untouched) when it is another sweep's or not a sweep's, unless ``mode`` says to
    replace it or append to it (see :data:`Mode`). Ctrl-C raises :class:`Interrupted`, saying
    how many cells are kept."""
    out = Path(out)
    if out.suffix not in (".parquet", ".csv"):
        raise ScenarioError(f"--out {out}: the file must end in .parquet or .csv")
    if mode not in ("resume", "replace", "append"):
        raise ScenarioError(f"mode {mode!r}; valid: resume, replace, append")
    start = time.monotonic()
    cells = sweep.cells()
    spec = sweep.spec_hash()
    ids = [cell_id(sweep.scenario, sweep.fixed | c) for c in cells]
    order = {cid: i for i, cid in enumerate(ids)}
    others: list[dict[str, Any]] = []
    done: dict[str, dict[str, Any]] = {}
    specs: dict[str, Any] = {}
    if mode != "replace":
        with locked(out):
            rows, specs = _read(out)
            others, done = _split(out, rows, specs, sweep, spec, order, mode)
    specs[spec] = {"file": sweep.path, "spec": sweep.resolved()}
    mine_spec = specs[spec]
    replacing = mode == "replace"  # until the first save, the file's rows are not kept
    todo = [c for c, cid in zip(cells, ids, strict=True) if cid not in done]
    skipped = len(cells) - len(todo)
    from dmalab.provenance import created_utc

    created = created_utc()
    new: dict[str, dict[str, Any]] = {}
    tag = {"spec_hash": spec, "spec_file": sweep.path}
    kept = len(done)  # this sweep's rows in the file as last written
    last_save = time.monotonic()

    def ours() -> list[dict[str, Any]]:
        # One row a cell: a cell another run of this sweep wrote first and this one ran too
        # keeps this run's row.
        return sorted({**done, **new}.values(), key=lambda r: order[r["cell_id"]])

    def save() -> None:
        nonlocal kept, last_save, replacing
        if len(ours()) != kept:  # else nothing is new: the file already holds every row
            with locked(out):
                # The file as it is now: another sweep may have added to it since it was read
                # (sweeps appending to one file at once), and its rows stay.
                theirs, specs_now = others, specs
                if not replacing:
                    rows_now, specs_now = _read(out)
                    theirs, in_file = _split(out, rows_now, specs_now, sweep, spec, order, "append")
                    for cid, r in in_file.items():
                        if cid not in done and cid not in new:
                            done[cid] = r  # a row of this sweep another process wrote
                    specs_now = dict(specs_now) | {spec: mine_spec}
                mine = ours()
                held = {str(r.get("spec_hash")) for r in theirs} | {spec}
                _write(out, [*theirs, *mine], {h: v for h, v in specs_now.items() if h in held})
                replacing = False
            kept = len(mine)
        last_save = time.monotonic()

    def take(rows: list[dict[str, Any]]) -> None:
        for r in rows:
            new[r["cell_id"]] = r | tag
        if progress:
            progress(skipped + len(new), len(cells))
        if time.monotonic() - last_save >= checkpoint_s:
            save()

    n = workers or os.cpu_count() or 1
    batches = _batches(todo, n)
    try:
        try:
            if use_ray:
                _on_ray(sweep, batches, created, n, ray_address, take)
            else:
                _on_threads(sweep, batches, created, n, take)
        finally:
            save()
    except KeyboardInterrupt:
        # Saved rows stay saved; a save that was cut short left the file as it was before.
        raise Interrupted(kept, len(cells), str(out), mode) from None
    return Outcome(len(cells), skipped, len(new), time.monotonic() - start, str(out), ours())


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
        iv = (sweep.intervals, sweep.interval_seed)
        pending = {
            pool.submit(run_batch, sweep.scenario, sweep.fixed, b, created, iv) for b in batches
        }
        try:
            while pending:
                finished, pending = wait(pending, return_when=FIRST_COMPLETED)
                # Every batch that finished is taken (and so saved) before an error that
                # finished beside it stops the sweep.
                errors = [e for e in (f.exception() for f in finished) if e is not None]
                for f in finished:
                    if f.exception() is None:
                        take(f.result())
                if errors:
                    raise errors[0]
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

    if address:
        _check_ray_address(address)
    ray = require("ray", "ray", "dmalab sweep --ray")
    started_here = not ray.is_initialized()
    if started_here:
        if address:
            try:
                ray.init(address=address, log_to_driver=False)
            except (ValueError, ConnectionError, RuntimeError) as e:
                # A malformed address, or no cluster there: one line, not Ray's traceback.
                raise ScenarioError(f"--ray {address}: {str(e).splitlines()[0]}") from None
        else:
            ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False)
    try:
        task = ray.remote(run_batch)
        iv = (sweep.intervals, sweep.interval_seed)
        pending = [task.remote(sweep.scenario, sweep.fixed, b, created, iv) for b in batches]
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


RAY_CONNECT_S = 5.0
"""Seconds to wait for a cluster's address to answer before giving up."""


def _check_ray_address(address: str) -> None:
    """Refuse, within :data:`RAY_CONNECT_S`, a cluster address where nothing answers (Ray
    itself retries for minutes). For a loopback address, keep Ray on loopback: Ray otherwise
    swaps 127.0.0.1 for this machine's interface address, where a head started with
    ``--node-ip-address=127.0.0.1`` may not be reachable. This is Ray's own switch for a
    single-machine cluster (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``: the node's address is
    the loopback one); it must be set before Ray is imported, and a value already set wins."""
    import ipaddress
    import os
    import socket

    host, sep, port = address.removeprefix("ray://").rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ScenarioError(f"--ray {address}: not HOST:PORT (such as 127.0.0.1:6379)")
    try:
        with socket.create_connection((host, int(port)), timeout=RAY_CONNECT_S):
            pass
    except OSError as e:
        why = "no answer" if isinstance(e, TimeoutError) else (e.strerror or str(e)).lower()
        raise ScenarioError(
            f"--ray {address}: no Ray cluster answers there ({why} within {RAY_CONNECT_S:g} s)"
        ) from None
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if loopback:
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
