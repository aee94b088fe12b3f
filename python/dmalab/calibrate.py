"""``dmalab calibrate copy``: measure this machine's memcpy and write it as a platform section."""

from __future__ import annotations

import datetime
import json
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
    of a packet copy between host and guest buffers), with where and when it was measured."""
    fit = next(f for f in cal["fits"] if not f["in_cache"] and f["aligned"])
    where = f"measured here by dmalab calibrate copy on {cal['machine']}, {cal['date']}"
    return "\n".join(
        [
            f"# {where}",
            f"# fit of out-of-cache aligned copies of 64 B to 64 KiB: largest error "
            f"{fit['max_relative_error']:.0%}",
            "[copy]",
            f'setup_ns = {{ value = {round(fit["setup_ns"])}, source = "{where}" }}',
            f'bytes_per_us = {{ value = {round(fit["bytes_per_us"])}, source = "{where}" }}',
            'remote_slowdown_pct = { value = 40, assumed = "not measured: one run does not '
            'place buffers on another NUMA node" }',
            "",
        ]
    )
