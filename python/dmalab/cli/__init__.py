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
from collections.abc import Sequence
from typing import NoReturn

from dmalab import DmalabError, __version__
from dmalab.cli import (
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
    vhost,
)

COMMANDS = (
    bench,
    trace,
    reproduce,
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
    args = build_parser().parse_args(argv)
    # What the command was given, for the provenance its output carries.
    args.argv = list(sys.argv[1:] if argv is None else argv)
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
        return _error(str(e))


_EXCERPT = re.compile(r"\s*\d*\s*\|")
"""A line of a parser's source excerpt, such as ``1 | x = [`` or ``  |  ^``."""


def _error(message: str) -> int:
    """Write ``message`` as one line, ``dmalab: error: ...``, and give the exit status, 2. A
    message of several lines (a TOML parser's, with its source excerpt) keeps its other lines,
    joined by ': '."""
    lines = [ln.strip() for ln in message.splitlines() if ln.strip()]
    if len(lines) > 1:
        lines = [ln for ln in lines if not _EXCERPT.match(ln)]
    print(f"dmalab: error: {': '.join(lines)}", file=sys.stderr)
    return 2
