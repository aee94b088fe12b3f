"""The README's examples print what the commands print today: each ```text block that starts
with `$ dmalab ...` is run, and every line it shows must be a line of the command's output, in
order (a `...` marks where the README leaves lines out). Commands whose numbers are measured on this
machine (`bench iova` times the allocators) are checked for their header only."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCK = re.compile(r"```text\n(\$ dmalab [^\n]*)\n(.*?)```", re.S)
MEASURED = {"bench iova"}
"""Commands whose figures are timed here, not modelled: only their shape is compared."""


def _examples() -> list[tuple[str, list[str]]]:
    out = []
    for m in BLOCK.finditer(README.read_text()):
        shown = []
        for line in m.group(2).splitlines():
            if line.strip() != "...":
                shown.append(line.rstrip())
        out.append((m.group(1)[2:], shown))
    return out


@pytest.mark.parametrize(("command", "shown"), _examples(), ids=lambda v: str(v)[:40])
def test_the_readme_example_is_what_the_command_prints(command: str, shown: list[str]) -> None:
    argv = shlex.split(command)[1:]
    env = os.environ | {"COLUMNS": "300", "NO_COLOR": "1", "TERM": "dumb"}
    done = subprocess.run(
        [sys.executable, "-m", "dmalab", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr[-2000:]
    printed = [ln.rstrip() for ln in done.stdout.splitlines()]
    measured = any(" ".join(argv).startswith(m) for m in MEASURED)
    at = 0
    for line in shown if not measured else shown[:1]:
        if not line.strip():
            continue
        try:
            at = printed.index(line, at) + 1
        except ValueError:
            pytest.fail(
                f"README line not printed by `{command}`:\n{line}\n--- printed:\n{done.stdout}"
            )
