"""The ``dmalab`` command line: one module per command, each with ``register(sub)`` (its parser,
with ``func`` set to its ``run``) and ``run(args) -> int`` (the exit status); the options they
share and the one console factory are in :mod:`dmalab.cli.options`.

Data goes to stdout, progress and logs to stderr.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from dmalab import DmalabError, __version__
from dmalab.cli import (
    bench,
    calibrate,
    copybreak,
    platforms,
    plot,
    reproduce,
    run,
    trace,
    vhost,
)

COMMANDS = (bench, trace, reproduce, copybreak, platforms, run, plot, calibrate, vhost)
"""The command modules, in the order ``dmalab --help`` lists them."""


def build_parser() -> argparse.ArgumentParser:
    """The argument parser (exposed for tests and documentation)."""
    p = argparse.ArgumentParser(
        prog="dmalab",
        description="dmalab: what DMA costs, where the time goes, which knob fixes it.",
    )
    p.add_argument("--version", action="version", version=f"dmalab {__version__}")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for command in COMMANDS:
        command.register(sub)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status (2 on a dmalab error, with the message on stderr)."""
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args))
    except DmalabError as e:
        print(f"dmalab: error: {e}", file=sys.stderr)
        return 2
    except OSError as e:
        if isinstance(e, BrokenPipeError):
            # The reader (such as `head`) went away: stop quietly, as Unix tools do.
            sys.stderr.close()
            return 0
        # A file the user named could not be read or written.
        print(f"dmalab: error: {e}", file=sys.stderr)
        return 2
