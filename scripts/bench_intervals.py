"""How long intervals take: each command with its default intervals against the same command
with --no-intervals, in this process, three rounds, medians and their ratio.

    .venv/bin/python scripts/bench_intervals.py [--rounds N]

The targets (docs/results/2026-11-27-intervals.md): a bench dma size sweep of one host and
device under 30 s with intervals, a seed 003 run under 10 s. A benchmark, not a test: the
machines are shared, so it prints what it measured and judges nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import time

from dmalab.cli import main

CASES = {
    "bench dma --sweep size (xeon-broadwell-2s + intel-xl710, 45 points)": [
        "bench",
        "dma",
        "--sweep",
        "size",
        "--no-progress",
    ],
    "run p3-rbtree-strict (seed 003, 1M I/Os)": ["run", "p3-rbtree-strict", "--no-progress"],
    "bench map --threads 16 (xeon-broadwell-2s)": [
        "bench",
        "map",
        "--threads",
        "16",
        "--no-progress",
    ],
}


def timed(argv: list[str]) -> float:
    """Seconds one command takes, its output thrown away."""
    sink = io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(sink), contextlib.redirect_stderr(sink):
        code = main(argv)
    if code != 0:
        raise SystemExit(f"dmalab {' '.join(argv)} exited {code}: {sink.getvalue()[-500:]}")
    return time.perf_counter() - start


def run() -> None:
    """Time every case both ways and print the medians and their ratio."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3, help="rounds per case (default 3)")
    args = ap.parse_args()
    print(f"{'case':<70} {'one run s':>10} {'intervals s':>12} {'ratio':>6}")
    for name, argv in CASES.items():
        plain, drawn = [], []
        for _ in range(args.rounds):
            plain.append(timed([*argv, "--no-intervals"]))
            drawn.append(timed(argv))
        p, d = statistics.median(plain), statistics.median(drawn)
        print(f"{name:<70} {p:>10.2f} {d:>12.2f} {d / p:>6.1f}")


if __name__ == "__main__":
    run()
