"""``dmalab bench dma``: a device's DMA over its link, root complex and memory, by point."""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from dmalab import DmalabError, sim
from dmalab.cli import options
from dmalab.types import DmaRecord

SWEEPS = ("none", "size", "offset", "window", "full")


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``bench dma``."""
    from dmalab.devdma import DIMENSIONS, PAGE_SIZES

    p = sub.add_parser(
        "dma",
        help="a device's DMA reads and writes: bandwidth, latency and the limiting part",
        description=(
            "Model a device's DMA engine moving data to or from host memory over its PCIe "
            "link, through the root complex and the memory path in cache lines. Bandwidth: the "
            "engine keeps its queue full over a host window of --window bytes; latency: one "
            "DMA at a time (median). The engine works on several DMAs at once (its contexts), "
            "and a read holds a tag over the whole round trip, the device's own side included, "
            "so where they bind latency sets bandwidth. Each point names the part that limits "
            "it (engine contexts, device engine, link, tags, root complex, memory, socket link, "
            "IOMMU walkers). With --iommu on the "
            "window is mapped once in pages of --page-bytes and every request is translated "
            "(IOTLB, walk caches, table walks through the memory path); records add the IOTLB "
            "miss rate of the data requests after a warm-up pass. Options that take a list "
            "accept comma-separated values (or `all`) and the points are their product."
        ),
    )
    p.add_argument(
        "--platform",
        default="xeon-broadwell-2s",
        help="a host with a memory path and a device (its own, or --device), or `all` for "
        "every such built-in one (default xeon-broadwell-2s)",
    )
    for field, values in DIMENSIONS.items():
        p.add_argument(
            f"--{field}",
            type=options.name_list(values),
            default=[values[0]],
            help=f"{', '.join(values)} or all (default {values[0]})",
        )
    p.add_argument(
        "--size",
        type=options.int_list(options.integer(1, 1 << 24, "1..=16777216")),
        default=None,
        metavar="BYTES[,BYTES...]",
        help="bytes per DMA, 1..=16777216 (default 64; --sweep size: 4 B to 8 KiB)",
    )
    p.add_argument(
        "--offset",
        type=options.int_list(options.integer(0, 4095)),
        default=None,
        metavar="BYTES[,...]",
        help="host offset from a cache-line boundary, 0..=4095 (default 0; --sweep offset: 0..63)",
    )
    p.add_argument(
        "--window",
        type=options.integer(1, 1 << 40, "1..=2^40"),
        default=None,
        metavar="BYTES",
        help="host buffer window the DMAs walk (default 1048576; raised to size + offset)",
    )
    p.add_argument(
        "--page-bytes",
        type=options.int_list(options.one_of(PAGE_SIZES)),
        default=[4096],
        metavar="BYTES[,...]",
        help="with --iommu on: page size of the window's mappings, 4096, 2097152 or "
        "1073741824 (default 4096); the platform must map it ([iommu_hw] max_page_bytes)",
    )
    p.add_argument(
        "--sweep",
        choices=SWEEPS,
        default="none",
        help="size: 4 B to 8 KiB in fine steps around line and MPS boundaries; offset: 0..63; "
        "window: 4 KiB to 64 MiB by powers of two (for --iommu on: the IOTLB's reach); "
        "full: size and offset, for every direction, memory and cache (default none: the "
        "points given)",
    )
    options.add_device(p, many=True)
    options.add_intervals(p)
    options.add_choice(p)
    options.add_format(p)
    options.add_no_progress(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Build the points, measure them per platform and print a table or JSON."""
    from dmalab import devdma

    if "on" not in args.iommu:
        options.refuse(
            args, ("page_bytes",), "applies with --iommu on (the pages the window is mapped in)"
        )
    if args.no_intervals:
        options.refuse(
            args, ("samples", "seed"), "sets the interval's draws; --no-intervals draws none"
        )
    hosts = devdma.platforms() if args.platform == "all" else [args.platform]
    platforms = [sim.with_device(h, d) for h in hosts for d in (args.device or [None])]
    dims = {f: getattr(args, f) for f in devdma.DIMENSIONS}
    if args.sweep == "full":
        options.refuse(
            args,
            ("direction", "access", "memory", "cache"),
            "--sweep full runs every direction, memory and cache, sequential access",
        )
        dims = {f: list(v) for f, v in devdma.DIMENSIONS.items()}
        dims["access"] = ["seq"]
        dims["iommu"] = args.iommu
    size_sweep = args.sweep in ("size", "full")
    offset_sweep = args.sweep in ("offset", "full")
    if size_sweep and args.size:
        raise DmalabError("--size: give sizes or --sweep size/full, not both")
    if offset_sweep and args.offset:
        raise DmalabError("--offset: give offsets or --sweep offset/full, not both")
    # (sizes, offsets) of each sweep asked for, or the points given.
    grids: list[tuple[Sequence[int], Sequence[int]]] = []
    if size_sweep:
        grids.append((devdma.SIZES, args.offset or [0]))
    if offset_sweep:
        grids.append((args.size or [64], devdma.OFFSETS))
    if not grids:
        grids.append((args.size or [64], args.offset or [0]))
    if args.sweep == "window" and args.window is not None:
        raise DmalabError("--window: give a window or --sweep window, not both")
    windows = devdma.WINDOWS if args.sweep == "window" else [args.window or 1 << 20]
    pts = [
        p
        for sizes, offsets in grids
        for p in devdma.points(
            sizes=sizes, offsets=offsets, windows=windows, page_bytes=args.page_bytes, **dims
        )
    ]
    records: list[DmaRecord] = []
    draws = 0 if args.no_intervals else args.samples
    # A one-socket host has no remote memory: where both homes were asked for, or every
    # host, its remote points are left out (said on stderr); one host asked for remote memory
    # alone is refused by the model.
    spread = len({p["memory"] for p in pts}) > 1 or args.platform == "all"
    by_host = {
        name: [p for p in pts if p["memory"] == "local"]
        if spread and devdma.sockets(name) == 1
        else pts
        for name in platforms
    }
    skipped = [n for n in platforms if len(by_host[n]) < len(pts)]
    if skipped:
        options.console(stderr=True).print(
            f"remote memory left out on {', '.join(skipped)}: one socket", markup=False
        )
    platforms = [n for n in platforms if by_host[n]]
    # Progress counts points: the nominal run's, then each draw's.
    total = sum(len(v) for v in by_host.values()) * (1 + draws)
    notes = []
    with options.ProgressLine(enabled=not args.no_progress and total > 64) as line:
        for k, name in enumerate(platforms):
            here = by_host[name]
            done_before = sum(len(by_host[n]) for n in platforms[:k]) * (1 + draws)

            def progress(i: int, n: int, name: str = name, base: int = done_before) -> None:
                line.update(base + i, total, name)

            choices = options.choices(args.choice)
            mine = devdma.measure(name, here, choices, progress)
            if draws:
                base = done_before + len(here)

                def drawn(
                    i: int, n: int, name: str = name, base: int = base, per: int = len(here)
                ) -> None:
                    progress(i * per, n, name, base)

                d = devdma.measure_intervals(
                    name, here, mine, choices, samples=draws, seed=args.seed, progress=drawn
                )
                notes.append(options.drawn_note(name, d))
            records += mine
    if args.format != "table":
        options.output(args, records)
    else:
        _print_table(records)
        if draws:
            options.intervals_note(args, notes)
    return 0


def _print_table(records: list[DmaRecord]) -> None:
    from dmalab import intervals

    translated = any(r["iommu"] == "on" for r in records)
    windows = len({r["window_bytes"] for r in records}) > 1
    extra = (["window"] if windows else []) + (["page", "miss"] if translated else [])
    spans = "bandwidth_gbit_s_lo" in records[0] if records else False
    numbers = [*extra, "Gbit/s", "lat ns", "Mtx/s", "lines", "TLPs"]
    last = ["limit (busy)"] + (["driven by"] if spans else [])
    t = options.plain_table(
        ["platform", "dir", "size", "off", "mem", "cache", *numbers, *last], numbers
    )
    for r in records:
        top = r["limit"]
        share = dict(r["utilisation"])[top]
        cells = [_bytes(r["window_bytes"])] if windows else []
        if translated:
            miss = r["iotlb_miss_rate"]
            on = r["iommu"] == "on"
            cells += [
                _bytes(r["page_bytes"]) if on else "-",
                "-" if miss is None else f"{miss:.2f}",
            ]
        t.add_row(
            r["platform"],
            r["direction"],
            str(r["size_bytes"]),
            str(r["offset_bytes"]),
            r["memory"],
            r["cache"],
            *cells,
            intervals.figure(r, "bandwidth_gbit_s", ".2f"),
            intervals.figure(r, "latency_ns", ".0f"),
            f"{r['transactions_per_s'] / 1e6:.2f}",
            f"{r['lines_per_transfer']:.2f}",
            f"{r['tlps_per_transfer']:.2f}",
            f"{top} ({share:.0%})",
            *([intervals.drivers(r, "bandwidth_gbit_s")] if spans else []),
        )
    options.console().print(t)


def _bytes(n: int) -> str:
    """A power-of-two byte count as K, M or G where it divides evenly."""
    for unit, shift in (("G", 30), ("M", 20), ("K", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift}{unit}"
    return str(n)
