"""``dmalab calibrate copy``: measure this machine's memcpy and write it as a platform section."""

from __future__ import annotations

import datetime
import json
import math
import platform as host
from pathlib import Path
from typing import Any

from dmalab import _native


def machine_description() -> str:
    """The CPU model (from /proc/cpuinfo where there is one), cores and the OS."""
    model = host.processor() or host.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    import os

    return f"{model}, {os.cpu_count()} logical CPUs, {host.system()} {host.release()}"


def copy(quick: bool = False) -> dict[str, Any]:
    """Measure and fit; the result has ``points``, ``fits``, ``machine`` and ``date``."""
    result: dict[str, Any] = json.loads(_native.calibrate_copy(quick=quick))
    result["machine"] = machine_description()
    result["date"] = datetime.date.today().isoformat()
    return result


def platform_section(cal: dict[str, Any]) -> str:
    """The ``[copy]`` section of a platform file, from the out-of-cache, aligned fit (the case
    of a packet copy between host and guest buffers), with where and when it was measured.
    Each measured value states its precision as a ``range``: the value give or take the fit's
    largest relative error over its points (at least 5%, a run's spread on a shared machine),
    so that intervals drawn on the written file carry what the measurement leaves open."""
    fit = next(f for f in cal["fits"] if not f["in_cache"] and f["aligned"])
    where = f"measured here by dmalab calibrate copy on {cal['machine']}, {cal['date']}"
    spread = max(float(fit["max_relative_error"]), PRECISION_FLOOR)

    def measured(key: str, value: float, least: int) -> str:
        v = max(round(value), least)
        lo = max(least, math.floor(v * (1 - spread) + 1e-9))
        hi = max(v, math.ceil(v * (1 + spread) - 1e-9))
        note = f"{where}; precision: the fit's largest error, {spread:.0%}"
        return f'{key} = {{ value = {v}, source = "{note}", range = [{lo}, {hi}] }}'

    return "\n".join(
        [
            f"# {where}",
            f"# fit of out-of-cache aligned copies of 64 B to 64 KiB: largest error "
            f"{fit['max_relative_error']:.0%}",
            "[copy]",
            measured("setup_ns", fit["setup_ns"], 0),
            measured("bytes_per_us", fit["bytes_per_us"], 1),
            'remote_slowdown_pct = { value = 40, assumed = "not measured: one run does not '
            "place buffers on another NUMA node; range 20 to 120%: a socket link's 40 to 140 ns "
            'added to a local line of 80 to 150 ns", range = [20, 120] }',
            "",
        ]
    )


PRECISION_FLOOR = 0.05
"""The least precision a measured value states (a fraction of it)."""
