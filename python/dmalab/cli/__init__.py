"""The ``dmalab`` command line: one module per command, each with ``register(sub)`` (its parser,
with ``func`` set to its ``run``) and ``run(args) -> int`` (the exit status); the options they
share and the one console factory are in :mod:`dmalab.cli.options`.

Data goes to stdout, progress and logs to stderr. Every bad input ends in one line on stderr,
``dmalab: error: ...``, and exit status 2. Ctrl-C ends in one line, ``dmalab: interrupted``
(with what was kept, when a command says), and exit status 130.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Collection, Sequence
from types import FrameType
from typing import NoReturn

from dmalab import DmalabError, __version__
from dmalab.cli import (
    advise,
    bench,
    calibrate,
    compare,
    copybreak,
    hints,
    inspect,
    iotlb_alias,
    iova_space,
    platforms,
    plot,
    report,
    reproduce,
    run,
    sweep,
    trace,
    validate,
    vhost,
)

COMMANDS = (
    bench,
    trace,
    reproduce,
    validate,
    report,
    copybreak,
    hints,
    platforms,
    inspect,
    run,
    sweep,
    compare,
    iova_space,
    iotlb_alias,
    plot,
    calibrate,
    vhost,
    advise,
)
"""The command modules, in the order ``dmalab --help`` lists them."""


class _Parser(argparse.ArgumentParser):
    """argparse, with its usage errors as one line (``dmalab: error: COMMAND: message``)."""

    def error(self, message: str) -> NoReturn:
        command = self.prog.removeprefix("dmalab").strip()
        self.exit(2, f"dmalab: error: {command + ': ' if command else ''}{message}\n")


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for tests and documentation)."""
    p = _Parser(
        prog="dmalab",
        description="dmalab: what DMA costs, where the time goes, which knob fixes it.",
    )
    p.add_argument("--version", action="version", version=f"dmalab {__version__}")
    p.add_argument(
        "--debug",
        action="store_true",
        help="on an unexpected error (a bug), print Python's traceback after the one line, for "
        "a bug report (also DMALAB_DEBUG=1)",
    )
    p.add_argument(
        "--max-memory",
        type=_size,
        metavar="SIZE",
        help="refuse, before it starts, a run estimated to need more memory than SIZE (bytes, "
        "or with a K, M, G or T suffix; default: what the machine has available). Also "
        "DMALAB_MAX_MEMORY",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.register(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (2 on a dmalab error, with the message on stderr).

    Argument errors exit (SystemExit) with status 2, as argparse does, after one line on stderr.
    Ctrl-C (a KeyboardInterrupt) returns 130, as a shell reports a SIGINT, after one line on
    stderr: ``dmalab: interrupted``, then the interrupt's message if it has one.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    # What the command was given, for the provenance its output carries.
    args.argv = list(sys.argv[1:] if argv is None else argv)
    # Which options were given, so that one that does not apply is refused, not ignored.
    args.given = given_options(parser, args.argv)
    nul = _holding_nul(args.argv)
    if nul is not None:
        return _error(f"{nul}: holds a NUL byte, which no name, number or file can hold")
    if args.max_memory is not None:
        import os

        os.environ["DMALAB_MAX_MEMORY"] = str(args.max_memory)
    restore = _stop_native_runs_on_ctrl_c()
    try:
        return int(args.func(args))
    except KeyboardInterrupt as e:
        print(f"dmalab: interrupted{': ' + str(e) if str(e) else ''}", file=sys.stderr)
        return 130
    except DmalabError as e:
        return _error(str(e))
    except OSError as e:
        if isinstance(e, BrokenPipeError):
            # The reader (such as `head`) went away: stop quietly, as Unix tools do.
            sys.stderr.close()
            return 0
        # A file the user named could not be read or written.
        return _error(_os_error(e, args.argv, _value_options(parser)))
    except Exception as e:  # a bug: one line, and the traceback on request
        return _internal_error(e, args.debug)
    finally:
        restore()


def _size(text: str) -> int:
    """``--max-memory``'s SIZE: bytes, or with a K, M, G or T suffix (binary units)."""
    m = re.fullmatch(r"\s*(\d+)\s*([KMGTkmgt]?)\s*", text)
    shift = {"": 0, "k": 10, "m": 20, "g": 30, "t": 40}
    if not m or int(m[1]) == 0 or int(m[1]) << shift[m[2].lower()] >= 1 << 63:
        raise argparse.ArgumentTypeError(
            f"{text!r}: a size above 0 in bytes, or with a K, M, G or T suffix (such as 8G)"
        )
    return int(m[1]) << shift[m[2].lower()]


def _stop_native_runs_on_ctrl_c() -> Callable[[], None]:
    """Make Ctrl-C stop every native run of this process within about a second, on whatever
    thread it runs (Python sees a signal on its main thread only), then raise
    KeyboardInterrupt as usual; returns what puts the previous handler back. Off the main
    thread (a command run from a test's thread) it changes nothing."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def on_sigint(signum: int, frame: FrameType | None) -> None:
        from dmalab import _native

        _native.interrupt()
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGINT, on_sigint)

    def restore() -> None:
        signal.signal(signal.SIGINT, previous)

    return restore


def _value_options(parser: argparse.ArgumentParser) -> frozenset[str]:
    """Every option string, of every command, that takes a value (``--out``, not
    ``--no-progress``)."""
    return frozenset(
        s
        for p in _parsers(parser)
        for a in p._actions
        if a.option_strings and a.nargs != 0
        for s in a.option_strings
    )


def _os_error(e: OSError, argv: Sequence[str], takes_value: Collection[str] = ()) -> str:
    """A file that could not be read or written, as one line that names it as the user gave
    it, with the option that gave it where one did (``--measurements m.csv: no such file``;
    ``takes_value``: the options that take a value), not Python's ``[Errno 2] No such file or
    directory: 'm.csv'``."""
    from dmalab.files import reason

    if e.filename is None:
        return reason(e)
    name = str(e.filename)
    for i, word in enumerate(argv):
        option, eq, value = word.partition("=")
        if eq and option.startswith("--") and value == name:
            return f"{option} {name}: {reason(e)}"
        if word == name:
            before = argv[i - 1] if i else ""
            flag = f"{before} " if before in takes_value else ""
            return f"{flag}{name}: {reason(e)}"
    return f"{name}: {reason(e)}"


def _holding_nul(argv: Sequence[str]) -> str | None:
    """The option (or the argument itself) of the first word of ``argv`` that holds a NUL
    byte (a command line cannot; a call of ``main`` can, and the OS refuses it in a path)."""
    for i, word in enumerate(argv):
        if "\0" in word:
            if word.startswith("--"):
                return word.partition("=")[0]
            before = argv[i - 1] if i else ""
            return before if before.startswith("--") else repr(word)
    return None


def _parsers(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """``parser`` and every subcommand's parser under it."""
    out = [parser]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in dict.fromkeys(action.choices.values()):
                out += _parsers(sub)
    return out


class _Unset:
    """The default put on every option while :func:`given_options` parses again."""


def given_options(parser: argparse.ArgumentParser, argv: Sequence[str]) -> frozenset[str]:
    """The ``dest`` of every option ``argv`` gives (on the command line, not by default):
    ``argv`` is parsed again with every option's default replaced by a marker."""
    unset = _Unset()
    saved: list[tuple[argparse.Action, object]] = []
    dests = set()
    for p in _parsers(parser):
        for action in p._actions:
            if not action.option_strings or action.default is argparse.SUPPRESS:
                continue
            dests.add(action.dest)
            # An append action copies its default before appending: it keeps None (a value
            # other than None means it was given).
            if not isinstance(action, argparse._AppendAction):
                saved.append((action, action.default))
                action.default = unset
    try:
        again = parser.parse_args(argv)
    finally:
        for action, default in saved:
            action.default = default
    return frozenset(
        k for k, v in vars(again).items() if k in dests and v is not None and v is not unset
    )


_EXCERPT = re.compile(r"\s*\d*\s*\|")
"""A line of a parser's source excerpt, such as ``1 | x = [`` or ``  |  ^``."""


DEBUG_ENV = "DMALAB_DEBUG"
"""Set (to anything but empty or 0) to print the traceback of an unexpected error."""


def _internal_error(e: Exception, debug: bool) -> int:
    """An error dmalab did not expect (a bug): one line that says so and how to see more;
    with ``--debug`` or :data:`DEBUG_ENV`, Python's traceback after it. Exit status 1."""
    import os

    first = (str(e).splitlines() or [""])[0]
    print(
        f"dmalab: internal error: {type(e).__name__}{': ' + first if first else ''} "
        f"(a bug: run again with --debug for the traceback, and report it)",
        file=sys.stderr,
    )
    if debug or os.environ.get(DEBUG_ENV, "") not in ("", "0"):
        import traceback

        traceback.print_exception(e, file=sys.stderr)
    return 1


def _error(message: str) -> int:
    """Write ``message`` as one line, ``dmalab: error: ...``, and give the exit status, 2. A
    message of several lines (a TOML parser's, with its source excerpt) keeps its other lines,
    joined by ': '."""
    lines = [ln.strip() for ln in message.splitlines() if ln.strip()]
    if len(lines) > 1:
        lines = [ln for ln in lines if not _EXCERPT.match(ln)]
    print(f"dmalab: error: {': '.join(lines)}", file=sys.stderr)
    return 2
