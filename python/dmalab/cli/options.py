"""What the commands share: option parsers and adders, the one console factory, JSON output."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Collection, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from dmalab import ScenarioError

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

    from dmalab import _native

T = TypeVar("T")

DEFAULT_PLATFORM = "ibm-p660-m2plus"
U64_MAX = 2**64 - 1


def integer(
    lo: int | None = None, hi: int | None = None, span: str | None = None
) -> Callable[[str], int]:
    """An argparse ``type``: an integer in decimal or with a 0x/0o/0b prefix, in ``lo..=hi``
    where they are given (``span`` writes the range in the error, such as ``0..=2^64-1``)."""
    span = span or f"{'' if lo is None else lo}..={'' if hi is None else hi}"

    def parse(text: str) -> int:
        try:
            n = int(text, 0)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if (lo is not None and n < lo) or (hi is not None and n > hi):
            raise argparse.ArgumentTypeError(f"{text} is outside {span}")
        return n

    return parse


u64 = integer(0, U64_MAX, "0..=2^64-1")
"""A non-negative 64-bit integer."""


def given(args: argparse.Namespace, dest: str) -> bool:
    """Whether the option whose ``dest`` this is was given on the command line (not left at
    its default). ``main`` records which were; a namespace made elsewhere (a test's) falls
    back to the value: given when it is not None, False or empty."""
    named = getattr(args, "given", None)
    if named is None:
        return getattr(args, dest, None) not in (None, False, [])
    return dest in named


def flag(dest: str) -> str:
    """The option's flag, ``--page-bytes`` for ``page_bytes``."""
    return "--" + dest.replace("_", "-")


def refuse(args: argparse.Namespace, dests: Collection[str], why: str) -> None:
    """Refuse the first of ``dests`` that was given, as ``--FLAG: why``: an option that does
    not apply is an error, never silently ignored."""
    for dest in dests:
        if given(args, dest):
            raise ScenarioError(f"{flag(dest)}: {why}")


def finite(text: str) -> float:
    """An argparse ``type``: a finite number (not inf or nan)."""
    import math

    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not math.isfinite(x):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    return x


def nonempty(text: str) -> str:
    """An argparse ``type``: a name or a path, not empty."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a name or a file, got ''")
    return text


def choice(text: str) -> tuple[str, str]:
    """An argparse ``type`` for ``--choice NAME=OPTION``."""
    name, sep, option = text.partition("=")
    if not sep or not name or not option:
        raise argparse.ArgumentTypeError(
            f"expected NAME=OPTION (such as firmware=2001), got {text!r}"
        )
    return name, option


def once(flag: str, pairs: Iterable[tuple[str, Any]]) -> None:
    """Refuse a key that ``pairs`` (an option's KEY=VALUE settings, in the order given) give
    twice, as ``--set workload.ios: given twice (1, then 2); ...``: the later one is never
    silently kept."""
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise ScenarioError(
                f"{flag} {key}: given twice ({_shown(seen[key])}, then {_shown(value)}); "
                "give each key once"
            )
        seen[key] = value


def _shown(value: Any) -> str:  # noqa: ANN401 - a setting's value
    """A setting's value as the user wrote it, near enough: ``2``, ``per-cpu``, ``true``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(map(_shown, value))
    return str(value)


def choices(pairs: list[tuple[str, str]] | None) -> dict[str, str] | None:
    """The ``--choice`` pairs given, as a mapping (None for none); a name given twice is
    refused."""
    once("--choice", pairs or [])
    return dict(pairs) if pairs else None


def setting(text: str) -> tuple[list[str], Any]:
    """An argparse ``type`` for ``--set TABLE.KEY=VALUE``: the key's path and its value, read as
    a TOML value (``2``, ``"per-cpu"``, ``true``) or, failing that, as a bare string."""
    from dmalab.keys import all_finite, toml_value

    key, sep, raw = text.partition("=")
    path = key.strip().split(".")
    if not sep or not raw.strip() or not all(path):
        raise argparse.ArgumentTypeError(
            f"expected TABLE.KEY=VALUE (such as workload.sockets=2), got {text!r}"
        )
    value = toml_value(raw)
    if not all_finite(value):
        raise argparse.ArgumentTypeError(f"{key.strip()}: {raw.strip()} is not a finite number")
    return path, value


def overrides(settings: list[tuple[list[str], Any]] | None) -> dict[str, Any] | None:
    """The ``--set`` settings given, as a nested table of scenario keys (None for none)."""
    if not settings:
        return None
    once("--set", ((".".join(path), value) for path, value in settings))
    table: dict[str, Any] = {}
    for path, value in settings:
        node = table
        for part in path[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ScenarioError(
                    f"--set {'.'.join(path)}: {part} was set to a value, not a table of keys"
                )
        node[path[-1]] = value
    return table


def add_set(p: argparse.ArgumentParser) -> None:
    """``--set TABLE.KEY=VALUE``, repeatable: change a scenario's key for this run."""
    p.add_argument(
        "--set",
        action="append",
        type=setting,
        metavar="TABLE.KEY=VALUE",
        help="change one of the scenario's keys for this run, such as workload.sockets=2 or "
        'mapping.flush=per-cpu (repeatable, each key once; values are TOML: 2, "lazy", true)',
    )


def one_of(values: tuple[int, ...]) -> Callable[[str], int]:
    """An argparse ``type``: an integer that is one of ``values``."""
    valid = ", ".join(map(str, values))

    def parse(text: str) -> int:
        n = integer()(text)
        if n not in values:
            raise argparse.ArgumentTypeError(f"{text} is not one of {valid}")
        return n

    return parse


def int_list(kind: Callable[[str], int]) -> Callable[[str], list[int]]:
    """An argparse ``type``: comma-separated values of ``kind`` (at least one)."""

    def parse(text: str) -> list[int]:
        values = [kind(part.strip()) for part in text.split(",") if part.strip()]
        if not values:
            raise argparse.ArgumentTypeError(f"expected N[,N...], got {text!r}")
        return values

    return parse


def listed(kind: Callable[[str], T]) -> Callable[[str], list[T]]:
    """An argparse ``type`` for an option that takes a list as several words, each of them
    comma-separated values of ``kind`` (``--threads 1,2`` or ``--threads 1 2``); use it with
    ``nargs="+"`` and ``action=Flatten``."""

    def parse(text: str) -> list[T]:
        values = [kind(part.strip()) for part in text.split(",") if part.strip()]
        if not values:
            raise argparse.ArgumentTypeError(f"expected a value, got {text!r}")
        return values

    return parse


class Flatten(argparse.Action):
    """Store the values of a ``nargs="+"`` option whose ``type`` gives lists (see
    :func:`listed`) as one list."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,  # noqa: ANN401 - the lists the type gave
        option_string: str | None = None,
    ) -> None:
        setattr(namespace, self.dest, [v for part in values for v in part])


def name_list(valid: tuple[str, ...]) -> Callable[[str], list[str]]:
    """An argparse ``type``: comma-separated names from ``valid`` (``all`` for every one)."""

    def parse(text: str) -> list[str]:
        if text == "all":
            return list(valid)
        names = [t.strip() for t in text.split(",") if t.strip()]
        bad = [n for n in names if n not in valid]
        if bad or not names:
            raise argparse.ArgumentTypeError(
                f"{', '.join(bad) or repr(text)} is not one of {', '.join(valid)}, all"
            )
        return names

    return parse


def add_format(p: argparse.ArgumentParser) -> None:
    """``--format {table,json,csv,parquet}``."""
    p.add_argument(
        "--format",
        choices=["table", "json", "csv", "parquet"],
        default="table",
        help="output format: a table to read, JSON (with provenance: dmalab version, date, "
        "host, platform and the hash of its resolved parameters), CSV (one row per record, "
        "nested fields flattened, the provenance as its last columns) or Parquet (the CSV's "
        "rows, to a file: > FILE.parquet; needs pip install 'dmalab[parquet]')",
    )


def add_platform(
    p: argparse.ArgumentParser,
    default: str = DEFAULT_PLATFORM,
    help: str | None = None,
) -> None:
    """``--platform NAME``: a built-in platform name or a platform TOML file."""
    p.add_argument(
        "--platform",
        type=nonempty,
        default=default,
        help=help
        or f"built-in platform name or a platform TOML file (default {default}; "
        "`dmalab platforms` lists them)",
    )


def add_device(p: argparse.ArgumentParser, many: bool = False, kind: str = "pcie") -> None:
    """``--device NAME|FILE``: a device of ``kind`` (``pcie`` or ``copy-engine``) for the
    host's slot of that kind instead of its own (with ``many``, a comma-separated list or
    ``all``)."""
    from dmalab import sim

    of_kind = sim.devices(kind)
    listed = ", ".join(of_kind)
    slot = "PCIe slot" if kind == "pcie" else "copy-engine slot"
    trains = (
        "; the link trains to the lower generation, width and payload size of the two ends"
        if kind == "pcie"
        else ""
    )

    def one(text: str) -> str:
        name = nonempty(text)
        try:
            theirs = sim.device_info(name)["kind"]
        except Exception:
            return name  # an unknown device: loading the platform names the valid ones
        if theirs != kind:
            raise argparse.ArgumentTypeError(
                f"{name} is a {theirs} device; this takes a {kind} device ({listed})"
            )
        return name

    def names(text: str) -> list[str]:
        if text == "all":
            return of_kind
        parts = [t.strip() for t in text.split(",")]
        if not all(parts):
            raise argparse.ArgumentTypeError(f"expected NAME|FILE[,...] or all, got {text!r}")
        return list(dict.fromkeys(one(t) for t in parts))  # each once, in order

    if many:
        p.add_argument(
            "--device",
            type=names,
            default=None,
            metavar="NAME|FILE[,...]",
            help=f"devices for the host's {slot} instead of its own: built-in names "
            f"({listed}), device files, or all{trains} (default: the host's own device)",
        )
        return
    p.add_argument(
        "--device",
        type=one,
        default=None,
        metavar="NAME|FILE",
        help=f"a device for the host's {slot} instead of its own: a built-in name ({listed}) "
        f"or a device file{trains} (default: the host's own device)",
    )


def add_choice(
    p: argparse.ArgumentParser,
    help: str = "pick an option the platform offers, such as firmware=2001 (repeatable, each "
    "NAME once)",
) -> None:
    """``--choice NAME=OPTION``, repeatable."""
    p.add_argument("--choice", action="append", type=choice, metavar="NAME=OPTION", help=help)


def add_allocators(p: argparse.ArgumentParser, default: list[str] | None, says: str) -> None:
    """``--allocator NAME[,NAME...]`` (or ``all``) from the allocators the simulations run;
    ``says`` is what the default is, for the help."""
    from dmalab.mapbench import ALLOCATORS

    p.add_argument(
        "--allocator",
        type=name_list(ALLOCATORS),
        default=default,
        help=f"{', '.join(ALLOCATORS)} or all (default {says})",
    )


def poll(call: Callable[[_native.Progress], T], show: Callable[[int, int], None]) -> T:
    """Run ``call(progress)`` on a worker thread (a native run releases the GIL) and pass its
    ``(done, total)`` to ``show`` every tenth of a second until it returns; returns its result.
    A Ctrl-C cancels the run (it stops within a few thousand operations) and is raised."""
    import time
    from concurrent.futures import ThreadPoolExecutor

    from dmalab import _native

    progress = _native.Progress()
    with ThreadPoolExecutor(max_workers=1) as pool:
        future = pool.submit(call, progress)
        try:
            while not future.done():
                show(*progress.get())
                time.sleep(0.1)
        except KeyboardInterrupt:
            # The run is on the worker thread, where Python sees no signal: stop it, so that
            # leaving the pool does not wait for the whole run.
            progress.cancel()
            raise
        return future.result()


class ProgressLine:
    """The progress line of a long command, on stderr: ``[done/total] what``.

    On a terminal it is one line redrawn in place (a carriage return, the text, blanks over
    what is left of a longer one; at most ten times a second, cut to the terminal's width so
    that it never wraps); :meth:`close` ends it with a newline. In a pipe or a file it is a
    whole line at most every ``every`` seconds, and the last one (done = total) always: a log
    gets a few lines, never one per update. Written straight to the console's file, as rich's
    ``print`` drops a carriage return. Use it as a context manager, or call :meth:`close`.
    """

    def __init__(
        self,
        out: Console | None = None,
        *,
        enabled: bool = True,
        every: float = 5.0,
        clock: Callable[[], float] | None = None,
    ) -> None:
        import time

        self.out = out or console(stderr=True)
        self.enabled = enabled
        self.terminal = self.out.is_terminal
        self.every = 0.1 if self.terminal else every
        self.clock = clock or time.monotonic
        self._last: float | None = None
        self._shown = ""
        self._drawn = 0
        self._open = False

    def update(self, done: int, total: int, what: str = "") -> None:
        """Show ``done`` of ``total`` (a count alone where ``total`` is 0: not known ahead) and
        what is at work, if it is time to."""
        if not self.enabled:
            return
        count = f"{done:,}/{total:,}" if total > 0 else f"{done:,}"
        text = f"[{count}] {what}".rstrip()
        now = self.clock()
        last = total > 0 and done >= total
        if text == self._shown or (
            not last and self._last is not None and now - self._last < self.every
        ):
            return
        self._last = now
        self._shown = text
        file = self.out.file
        if self.terminal:
            text = text[: max(self.out.width - 1, 10)]
            # Blanks over the rest of a longer line drawn before.
            file.write("\r" + text.ljust(self._drawn))
            self._drawn = max(self._drawn, len(text))
            self._open = True
        else:
            file.write(text + "\n")
        file.flush()

    def close(self) -> None:
        """End the line drawn on a terminal (nothing to do elsewhere)."""
        if self._open:
            self.out.file.write("\n")
            self.out.file.flush()
            self._open = False

    def __enter__(self) -> ProgressLine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def add_no_progress(
    p: argparse.ArgumentParser,
    help: str = "no progress on stderr",
) -> None:
    """``--no-progress``."""
    p.add_argument("--no-progress", action="store_true", help=help)


def add_intervals(p: argparse.ArgumentParser, samples: int = 64) -> None:
    """``--no-intervals``, ``--samples`` and ``--seed``: prediction intervals over the
    platform's uncertain parameters (see :mod:`dmalab.intervals`)."""
    p.add_argument(
        "--no-intervals",
        action="store_true",
        help="one run with every parameter at its file's value, no interval (faster)",
    )
    p.add_argument(
        "--samples",
        type=one_of((8, 16, 32, 64, 128, 256, 512)),
        default=samples,
        metavar="N",
        help="draws of the uncertain parameters per interval (a Latin hypercube; assumed ones "
        "over their ranges, fitted ones over their fit ranges, cited ones over their stated "
        f"precision): 8, 16, 32, 64, 128, 256 or 512 (default {samples})",
    )
    p.add_argument(
        "--seed",
        type=integer(0, (1 << 32) - 1, "0..=4294967295"),
        default=1,
        help="seed of the draws (default 1): the same seed gives the same intervals",
    )


def refuse_draws(args: argparse.Namespace) -> None:
    """With ``--no-intervals``, refuse ``--samples`` and ``--seed`` (which set the draws it
    turns off) rather than ignore them."""
    if args.no_intervals:
        refuse(args, ("samples", "seed"), "sets the interval's draws; --no-intervals draws none")


INTERVALS_NOTE = (
    "value [lo, hi]: the 5th to 95th percentile over {draws} draws of the platform's uncertain "
    "parameters (assumed ones over their ranges, fitted ones over their fit ranges, cited ones "
    "over their stated precision; seed {seed}); driven by: the parameters that move the figure "
    "most, with their squared rank correlation. --no-intervals for one run."
)
"""The line under a table with intervals, saying what they are."""


def intervals_note(args: argparse.Namespace, notes: list[str]) -> None:
    """Print what the table's intervals are, and per platform how many parameters were drawn
    and how many draws the model refused."""
    text = INTERVALS_NOTE.format(draws=args.samples, seed=args.seed)
    console().print("\n".join([text, *notes]), markup=False, soft_wrap=True)


def drawn_note(name: str, drawn: Any) -> str:  # noqa: ANN401 - an intervals.Drawn
    """One platform's line under a table with intervals."""
    return (
        f"{name}: {len(drawn.fields)} uncertain parameters drawn, "
        f"{len(drawn.refused)} of {len(drawn.rows)} draws refused by the model"
    )


def console(stderr: bool = False) -> Console:
    """The console every command writes through: stdout (data) or stderr (progress, logs).

    A non-empty NO_COLOR turns off every style, colours and bold alike (plain text, no escape
    sequences, even on a terminal). It highlights nothing on its own, and gives a file or a pipe
    whole rows, not rows wrapped to an imagined 80-column screen.
    """
    from rich.console import Console

    plain = bool(os.environ.get("NO_COLOR"))
    out = Console(
        stderr=stderr, no_color=plain, color_system=None if plain else "auto", highlight=False
    )
    if not out.is_terminal:
        out.width = 200
    return out


def plain_table(columns: list[str], right: Collection[str] = ()) -> Table:
    """A borderless table of ``columns``, those in ``right`` (numbers) right-justified."""
    from rich.table import Table

    t = Table(box=None, pad_edge=False)
    for col in columns:
        t.add_column(col, justify="right" if col in right else "left")
    return t


def writable(path: str | None, flag: str) -> None:
    """Refuse, before any work, an output file ``path`` (given as ``flag``) whose folder does
    not exist or is not a folder, so that a long run is not lost at its end."""
    if path is None:
        return
    from pathlib import Path

    folder = Path(path).resolve().parent
    if not folder.is_dir():
        raise ScenarioError(f"{flag} {path}: the folder {folder} does not exist")
    if Path(path).is_dir():
        raise ScenarioError(f"{flag} {path}: is a folder, not a file")


def add_force(p: argparse.ArgumentParser, option: str, kind: str) -> None:
    """``--force``: overwrite the file ``option`` names though it holds something other than
    ``kind`` (which :func:`output_file` refuses without it)."""
    p.add_argument(
        "--force",
        action="store_true",
        help=f"overwrite the {option} file even when it holds something other than {kind} "
        f"(such as a sweep's results); without it such a file is refused before any work",
    )


def output_file(
    args: argparse.Namespace,
    dest: str,
    kinds: Collection[str],
    what: str,
    path: str | None = None,
) -> None:
    """Refuse, before any work, the output file of the option whose ``dest`` this is (or
    ``path``, a file written beside it) when it cannot be written (see :func:`writable`) or
    already holds something other than one of ``kinds`` (``what`` in words, such as
    ``trace-event JSON``), unless ``--force`` was given: a file of another kind (a sweep's
    results where a timeline would go) is never overwritten by mistake. An empty file holds
    nothing to lose."""
    from dmalab import files

    path = path if path is not None else getattr(args, dest)
    if path is None:
        return
    writable(path, flag(dest))
    held = files.holds(path)
    if held is None or held == files.EMPTY or held in kinds or getattr(args, "force", False):
        return
    raise ScenarioError(
        f"{flag(dest)} {path}: the file holds {held}, not {what}; pass --force to overwrite it"
    )


def dump(data: Any) -> None:  # noqa: ANN401 - any JSON value
    """Write ``data`` to stdout as JSON."""
    json.dump(data, sys.stdout, indent=1)
    sys.stdout.write("\n")


def emit(
    data: Any,  # noqa: ANN401 - a record or a list of them
    fmt: str,
    *,
    rows: list[Any] | None = None,
    platform: str | None = None,
    choices: dict[str, str] | None = None,
    command: list[str] | None = None,
) -> None:
    """Write a command's data to stdout as ``fmt`` (``json``, ``csv`` or ``parquet``), with its
    provenance (``command``: the arguments the command was given, recorded as ``dmalab
    ARGS...``).

    JSON: ``data`` as it is, a record gaining a ``provenance`` key (a list: each record). CSV:
    ``rows`` (default: ``data`` if a list, else ``[data]``) one per line, nested fields
    flattened (see :func:`dmalab.cli.tabular.flatten`), then the provenance's columns. A record
    with a ``platform`` (and ``choices``) of its own is hashed on that platform, else on
    ``platform``.
    """
    from dmalab.cli import tabular

    records = data if isinstance(data, list) else [data]
    if isinstance(data, dict) and isinstance(data.get("platform"), str):
        # A single result names the platform it ran on (a trace scenario's own, say).
        platform, choices = data["platform"], data.get("choices") or choices
    stamps = tabular.Stamps(platform, choices, command)
    if fmt == "json":
        for r in records:
            if isinstance(r, dict):
                r["provenance"] = stamps.full(r)
        dump(data)
        return
    table = rows if rows is not None else records
    flat = [tabular.flatten(r) | stamps.columns(r) for r in table]
    if fmt == "parquet":
        tabular.write_parquet(flat, sys.stdout.buffer, last=tabular.PROVENANCE_COLUMNS)
    else:
        tabular.write_csv(flat, sys.stdout, last=tabular.PROVENANCE_COLUMNS)


def output(
    args: argparse.Namespace,
    data: Any,  # noqa: ANN401 - a record or a list of them
    rows: list[Any] | None = None,
) -> None:
    """:func:`emit` in the format ``--format`` asked, on the ``--platform`` and ``--choice``
    options the command has (if any)."""
    emit(
        data,
        args.format,
        rows=rows,
        platform=getattr(args, "platform", None),
        choices=choices(getattr(args, "choice", None)),
        command=getattr(args, "argv", None),
    )
