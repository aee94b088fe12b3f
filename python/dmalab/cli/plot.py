"""``dmalab plot``: write a plot to a PNG or SVG file."""

from __future__ import annotations

import argparse

from dmalab.cli import options


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``plot``."""
    pl = sub.add_parser(
        "plot",
        help="write a plot to a PNG or SVG file",
        description="Write a plot: `crossover` is the copy time by length of the CPU and of "
        "the platform's copy engine, local and remote, with the lengths where the engine wins; "
        "`dma` is `bench dma`'s sweep (bandwidth and latency of reads and writes, local and "
        "remote, warm and cold, each point marked with the part that limits it); `copy` is "
        "`bench copy`'s latency of one synchronous copy by size, CPU against copy engine; `iotlb` "
        "is `bench dma --iommu on --sweep window`: random 64-byte reads over windows of 4 KiB to "
        "64 MiB mapped once in 4 KiB and 2 MiB pages (miss rate, latency, table reads), for one "
        "platform or `all` with an IOMMU; `map` is `bench map`'s mean map and unmap latency "
        "by CPU count (1 to 64), rbtree and segtree, strict and lazy.",
    )
    pl.add_argument("what", choices=["crossover", "dma", "copy", "iotlb", "map"], help="which plot")
    pl.add_argument(
        "--platform",
        help="platform name or file (default: xeon-8180-cbdma for crossover, "
        "xeon-broadwell-2s for dma, copy and map, all platforms with [iommu_hw] for iotlb)",
    )
    pl.add_argument(
        "--device",
        metavar="NAME|FILE",
        help="dma and iotlb: a device for the host's PCIe slot instead of its own (a built-in "
        "name or a device file; `dmalab platforms` lists them)",
    )
    pl.add_argument(
        "--sweep",
        choices=["size", "offset"],
        default="size",
        help="dma: by transfer size (4 B to 8 KiB) or by host offset 0..63 (default size)",
    )
    pl.add_argument(
        "--size",
        type=options.integer(1, 1 << 24, "1..=16777216"),
        default=64,
        help="dma --sweep offset: bytes per DMA (default 64)",
    )
    pl.add_argument("--out", required=True, help="output file, .png or .svg")
    options.add_intervals(pl, samples=32)
    pl.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Write the plot; say where on stderr."""
    from dmalab import DmalabError, plot, sim

    if args.device and args.what not in ("dma", "iotlb"):
        raise DmalabError(f"--device: applies to the dma and iotlb plots, not {args.what}")
    if args.what != "dma" and (args.no_intervals or args.samples != 32 or args.seed != 1):
        raise DmalabError(
            f"--no-intervals, --samples, --seed: apply to the dma plot's bands, not {args.what}"
        )
    if args.what == "map":
        path = plot.map_bench(args.platform or "xeon-broadwell-2s", args.out)
    elif args.what == "iotlb":
        names = (
            sim.platforms_with("iommu_hw", "device_dma")
            if args.platform in (None, "all")
            else [args.platform]
        )
        names = [sim.with_device(n, args.device) for n in names]
        path = plot.iotlb(names, args.out)
    elif args.what == "dma":
        host = sim.with_device(args.platform or "xeon-broadwell-2s", args.device)
        samples = 0 if args.no_intervals else args.samples
        path = plot.dma(host, args.out, args.sweep, args.size, samples=samples, seed=args.seed)
    elif args.what == "copy":
        path = plot.sync_copy(args.platform or "xeon-broadwell-2s", args.out)
    else:
        path = plot.crossover(args.platform or "xeon-8180-cbdma", args.out)
    options.console(stderr=True).print(f"wrote {path}")
    return 0
