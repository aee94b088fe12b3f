"""Plots dmalab writes on request (matplotlib is imported only here, when a plot is made)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dmalab import ScenarioError, _native


def _target(out: str | Path) -> Path:
    """`out` as a path, if it ends in .png or .svg (else a ScenarioError); matplotlib set to
    draw to files."""
    path = Path(out)
    if path.suffix.lower() not in (".png", ".svg"):
        raise ScenarioError(f"--out {out}: the file must end in .png or .svg")
    from dmalab.extras import require

    require("matplotlib", "plot", "plotting").use("Agg")
    return path


def _savefig(fig: Any, path: Path) -> None:  # noqa: ANN401 - a Figure
    """Save ``fig`` to ``path`` whole or not at all (see :func:`dmalab.files.write_atomic`),
    in the format its suffix names."""
    from dmalab.files import write_atomic

    write_atomic(path, lambda tmp: fig.savefig(tmp, format=path.suffix.lstrip(".").lower()))


def _save_figure(fig: Any, path: Path, title: str) -> Path:  # noqa: ANN401 - a Figure
    """Title, lay out, save to `path` and close `fig`."""
    import matplotlib.pyplot as plt

    fig.suptitle(title)
    fig.tight_layout()
    _savefig(fig, path)
    plt.close(fig)
    return path


def _save_log_log(
    fig: Any,  # noqa: ANN401 - a matplotlib Figure, imported lazily
    ax: Any,  # noqa: ANN401 - its Axes
    path: Path,
    xlabel: str,
    ylabel: str,
    title: str,
) -> Path:
    """Log-log axes with labels, title, legend and grid; save to `path` and close."""
    import matplotlib.pyplot as plt

    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)
    ax.grid(True, which="both", linewidth=0.3)
    fig.tight_layout()
    _savefig(fig, path)
    plt.close(fig)
    return path


def crossover(platform: str, out: str | Path, max_len: int = 65536) -> Path:
    """Write the copy-time curve of `platform` (CPU and copy engine, local and remote) to `out`.

    The file type follows the suffix (``.png`` or ``.svg``). Returns the path written.
    """
    path = _target(out)
    import matplotlib.pyplot as plt

    data = _native.copy_curve(platform, max_len)
    pts = data["points"]
    lengths = [p["len_bytes"] for p in pts]
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for key, label, style in (
        ("cpu_local_ns", "CPU copy, memory local", "-"),
        ("cpu_remote_ns", "CPU copy, memory remote", "--"),
        ("engine_local_ns", "engine, in the core's node", "-"),
        ("engine_remote_ns", "engine, in the other node", "--"),
    ):
        ax.plot(lengths, [p[key] for p in pts], style, marker="o", markersize=3, label=label)
    crossovers = (
        (data["crossover_local_bytes"], "local"),
        (data["crossover_remote_bytes"], "remote"),
    )
    for x, label in crossovers:
        if x is not None:
            ax.axvline(x, color="grey", linewidth=0.8, linestyle=":")
            ax.annotate(
                f"{label} crossover {x} B",
                (x, ax.get_ylim()[1]),
                rotation=90,
                va="top",
                ha="right",
                fontsize=8,
            )
    return _save_log_log(
        fig,
        ax,
        path,
        "copy length, bytes",
        "time per copy in a stream, ns",
        f"CPU copy against copy engine: {data['platform']}",
    )


def sync_copy(platform: str, out: str | Path) -> Path:
    """Write ``bench copy``'s latency of one synchronous copy of `platform` by size (64 B to
    1 MiB) to `out`: the CPU and the copy engine, everything local and both buffers remote,
    with the first size from which the engine is faster at each placement."""
    path = _target(out)
    import matplotlib.pyplot as plt

    from dmalab import synccopy

    records = synccopy.measure(platform, synccopy.SIZES, ("local", "max-remote"))
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for placement, style in (("local", "-"), ("max-remote", "--")):
        rows = [r for r in records if r["placement"] == placement]
        sizes = [r["size_bytes"] for r in rows]
        for key, who, color in (("cpu_ns", "CPU copy", "C0"), ("engine_ns", "copy engine", "C1")):
            values = [float(r[key]) for r in rows]  # type: ignore[literal-required]
            label = f"{who}, {placement}"
            ax.plot(sizes, values, style, color=color, marker="o", markersize=3, label=label)
        first = next((r["size_bytes"] for r in rows if r["faster"] == "engine"), None)
        if first is not None:
            ax.axvline(first, color="grey", linewidth=0.8, linestyle=style)
    return _save_log_log(
        fig,
        ax,
        path,
        "copy size, bytes (grey lines: first size the engine wins)",
        "latency of one synchronous copy, ns",
        f"One synchronous copy, CPU against copy engine: {platform}",
    )


_LIMIT_MARKERS = {
    "engine contexts": "*",
    "device engine": "o",
    "link": "s",
    "link (requests)": "D",
    "tags": "^",
    "root complex": "v",
    "memory": "P",
    "socket link": "X",
}


def dma(
    platform: str,
    out: str | Path,
    sweep: str = "size",
    size: int = 64,
    window: int = 1 << 20,
    samples: int = 32,
    seed: int = 1,
) -> Path:
    """Write ``bench dma``'s sweep of `platform` to `out`: bandwidth and latency by transfer
    size (``sweep="size"``) or by host offset at `size` bytes (``sweep="offset"``), reads and
    writes, memory local and remote, cache warm and cold; each point's marker names the part
    that limits its bandwidth. With ``samples`` (0: none) the local, warm curves get a band:
    the 5th to 95th percentile over that many draws of the platform's assumed and fitted
    parameters (see :mod:`dmalab.intervals`). Returns the path written."""
    from dmalab import devdma

    if sweep not in ("size", "offset"):
        raise ScenarioError(f"sweep is {sweep!r}; valid: size, offset")
    path = _target(out)
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    every = devdma.DIMENSIONS
    sizes, offsets = (devdma.SIZES, (0,)) if sweep == "size" else ((size,), devdma.OFFSETS)
    pts = devdma.points(
        sizes=sizes,
        offsets=offsets,
        windows=[window],
        direction=every["direction"],
        memory=every["memory"],
        cache=("warm", "cold"),
    )
    if sweep == "size":
        x_of, xlabel = "size_bytes", "transfer size, bytes"
    else:
        x_of, xlabel = "offset_bytes", f"host offset from a line boundary, bytes ({size}-byte DMAs)"
    records = devdma.measure(platform, pts)
    if samples:
        banded = [i for i, p in enumerate(pts) if (p["memory"], p["cache"]) == ("local", "warm")]
        sub = [records[i] for i in banded]
        devdma.measure_intervals(
            platform, [pts[i] for i in banded], sub, samples=samples, seed=seed
        )
    fig, axes = plt.subplots(2, 2, figsize=(11, 7), sharex=True)
    seen: set[str] = set()
    for col, direction in enumerate(("read", "write")):
        for memory, cache, colour in (
            ("local", "warm", "tab:blue"),
            ("local", "cold", "tab:orange"),
            ("remote", "warm", "tab:green"),
            ("remote", "cold", "tab:red"),
        ):
            rows = [
                r
                for r in records
                if r["direction"] == direction and r["memory"] == memory and r["cache"] == cache
            ]
            xs = [r[x_of] for r in rows]  # type: ignore[literal-required]
            label = f"{memory}, {cache}"
            axes[0][col].plot(
                xs, [r["bandwidth_gbit_s"] for r in rows], color=colour, lw=1, label=label
            )
            axes[1][col].plot(xs, [r["latency_ns"] for r in rows], color=colour, lw=1)
            if rows and "bandwidth_gbit_s_lo" in rows[0]:
                for row, key in ((0, "bandwidth_gbit_s"), (1, "latency_ns")):
                    axes[row][col].fill_between(
                        xs,
                        [r[f"{key}_lo"] for r in rows],  # type: ignore[literal-required]
                        [r[f"{key}_hi"] for r in rows],  # type: ignore[literal-required]
                        color=colour,
                        alpha=0.15,
                        linewidth=0,
                        label=f"{label}: 5th-95th pct, {samples} draws" if row == 0 else None,
                    )
            for limit, marker in _LIMIT_MARKERS.items():
                sel = [r for r in rows if r["limit"] == limit]
                if not sel:
                    continue
                seen.add(limit)
                axes[0][col].scatter(
                    [r[x_of] for r in sel],  # type: ignore[literal-required]
                    [r["bandwidth_gbit_s"] for r in sel],
                    marker=marker,
                    s=14,
                    color=colour,
                )
        axes[0][col].set_title(f"DMA {direction}s")
        axes[1][col].set_xlabel(xlabel)
    axes[0][0].set_ylabel("bandwidth, Gbit/s (queue full)")
    axes[1][0].set_ylabel("latency of one DMA, ns")
    for ax in (a for row in axes for a in row):
        if sweep == "size":
            ax.set_xscale("log", base=2)
        ax.grid(True, which="both", linewidth=0.3)
    handles = [
        Line2D([], [], linestyle="", marker=m, color="black", label=f"limit: {name}")
        for name, m in _LIMIT_MARKERS.items()
        if name in seen
    ]
    axes[0][0].legend(fontsize=7, loc="upper left")
    axes[0][1].legend(handles=handles, fontsize=7, loc="upper left")
    fig.suptitle(f"Device DMA on {platform}, window {window} bytes, sequential")
    fig.tight_layout()
    _savefig(fig, path)
    plt.close(fig)
    return path


def iotlb(
    platforms: list[str],
    out: str | Path,
    windows: tuple[int, ...] | None = None,
    size: int = 64,
) -> Path:
    """Write the IOTLB window sweep to `out`: random `size`-byte device reads over windows of
    4 KiB to 64 MiB (or `windows`) mapped once in 4 KiB and 2 MiB pages, per platform: the
    IOTLB miss rate of the data requests, the latency of one read and the table lines each
    transfer's walks read. Returns the path written."""
    from dmalab import devdma

    path = _target(out)
    import matplotlib.pyplot as plt

    sweep = windows or devdma.WINDOWS
    pts = devdma.points(
        sizes=[size], windows=sweep, access=["random"], iommu=["on"], page_bytes=[4096, 2097152]
    )
    fig, axes = plt.subplots(1, 3, figsize=(14, 4.2), sharex=True)
    colours = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple"]
    for colour, name in zip(colours, platforms, strict=False):
        records = devdma.measure(name, pts)
        for page, style in ((4096, "-"), (2097152, "--")):
            rows = [r for r in records if r["page_bytes"] == page]
            xs = [r["window_bytes"] for r in rows]
            label = f"{name}, {'4 KiB' if page == 4096 else '2 MiB'} pages"
            ys = (
                [r["iotlb_miss_rate"] or 0.0 for r in rows],
                [r["latency_ns"] for r in rows],
                [r["walk_reads_per_transfer"] or 0.0 for r in rows],
            )
            for ax, y in zip(axes, ys, strict=True):
                ax.plot(xs, y, style, color=colour, lw=1.2, marker=".", label=label)
    titles = (
        "IOTLB miss rate (data requests)",
        f"latency of one {size}-byte read, ns",
        "table lines read per transfer",
    )
    for ax, title in zip(axes, titles, strict=True):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("window mapped once, bytes")
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="both", linewidth=0.3)
    axes[0].legend(fontsize=7, loc="upper left")
    title = f"Random {size}-byte device reads through the IOMMU, by window and page size"
    return _save_figure(fig, path, title)


def map_bench(
    platform: str,
    out: str | Path,
    threads: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64),
    allocators: tuple[str, ...] = ("rbtree", "segtree"),
    maps_per_thread: int = 1024,
) -> Path:
    """Write ``bench map``'s latency by CPU count to `out`: mean map and unmap latency of each
    allocator under strict and lazy invalidation on `platform`. Returns the path written."""
    from dmalab import mapbench

    path = _target(out)
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharex=True)
    colours = ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple"]
    for colour, allocator in zip(colours, allocators, strict=False):
        for flush, style in (("strict", "-"), ("lazy", "--")):
            rows = [
                mapbench.run(
                    platform,
                    threads=n,
                    allocator=allocator,
                    flush=flush,
                    maps_per_thread=maps_per_thread,
                )
                for n in threads
            ]
            label = f"{allocator}, {flush}"
            for ax, key in zip(axes, ("map_us", "unmap_us"), strict=True):
                ys = [r[key] for r in rows]  # type: ignore[literal-required]
                ax.plot(threads, ys, style, color=colour, marker=".", lw=1.2, label=label)
    for ax, what in zip(axes, ("map", "unmap"), strict=True):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("CPUs mapping at once")
        ax.set_title(f"mean {what} latency, us", fontsize=10)
        ax.grid(True, which="both", linewidth=0.3)
    axes[0].legend(fontsize=7, loc="upper left")
    return _save_figure(fig, path, f"The DMA map benchmark on {platform} (1-page mappings)")


def validation(out: str | Path, samples: int = 8) -> Path:
    """Write the validation's figures (:data:`dmalab.validate.FIGURES`) to `out`: for each
    experiment, the shipped corpus's plain directory of every host (IOMMU off, memory local),
    the measured curve (solid, markers) over the modelled one (dashed) and its band over
    ``samples`` draws (0: no band). Returns the path written."""
    path = _target(out)
    import matplotlib.pyplot as plt

    from dmalab import validate

    dirs = [d for d in validate.corpus_dirs() if d.iommu == "off" and d.memory == "local"]
    result = validate.run(dirs, samples=samples)
    figs = validate.FIGURES
    cols = 3
    rows = (len(figs) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(6 * cols, 4.2 * rows))
    names = sorted({p.dir for p in result.points})
    for ax, (title, file, test, x, size) in zip(axes.flat, figs, strict=False):
        for i, d in enumerate(names):
            pts = sorted(
                (p for p in validate.figure_points(result.points, file, test, size) if p.dir == d),
                key=lambda p: getattr(p, x),
            )
            if not pts:
                continue
            colour = f"C{i}"
            xs = [getattr(p, x) for p in pts]
            if pts[0].lo is not None:
                ax.fill_between(
                    xs,
                    [p.lo for p in pts],
                    [p.hi for p in pts],
                    color=colour,
                    alpha=0.15,
                    linewidth=0,
                )
            ax.plot(
                xs,
                [p.measured for p in pts],
                "-o",
                color=colour,
                markersize=2.5,
                linewidth=1,
                label=f"{d}",
            )
            ax.plot(xs, [p.modelled for p in pts], "--", color=colour, linewidth=1)
        ax.set_title(title, fontsize=10)
        ax.set_xlabel(x)
        if x == "window_bytes":
            ax.set_xscale("log", base=2)
        ax.set_ylabel("median latency, ns" if test.startswith("LAT") else "bandwidth, Gbit/s")
        ax.grid(True, linewidth=0.3)
    for ax in list(axes.flat)[len(figs) :]:
        ax.set_visible(False)
    axes.flat[0].legend(fontsize=7)
    band = f", band: 5th to 95th percentile of {samples} draws" if samples else ""
    return _save_figure(
        fig,
        path,
        f"pcie-bench corpus, plain directories: measured (solid) over modelled (dashed){band}",
    )
