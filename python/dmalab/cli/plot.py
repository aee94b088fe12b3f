"""``dmalab plot KIND``: write a plot to a PNG or SVG file. Each kind is its own subcommand,
so that ``dmalab plot KIND --help`` says what that plot shows and lists only its options."""

from __future__ import annotations

import argparse

from dmalab.cli import options

KINDS = {
    "crossover": (
        "xeon-8180-cbdma",
        "the copy time by length of the CPU and of the platform's copy engine, local and "
        "remote, with the lengths where the engine wins",
    ),
    "dma": (
        "xeon-broadwell-2s",
        "`bench dma`'s sweep: bandwidth and latency of reads and writes, local and remote, warm "
        "and cold, by transfer size (4 B to 8 KiB) or by host offset (0..63), each point marked "
        "with the part that limits it",
    ),
    "copy": (
        "xeon-broadwell-2s",
        "`bench copy`'s latency of one synchronous copy by size, CPU against copy engine",
    ),
    "iotlb": (
        "all",
        "`bench dma --iommu on --sweep window`: random 64-byte reads over windows of 4 KiB to "
        "64 MiB mapped once in 4 KiB and 2 MiB pages (miss rate, latency, table reads), for one "
        "platform or `all` with an IOMMU",
    ),
    "map": (
        "xeon-broadwell-2s",
        "`bench map`'s mean map and unmap latency by CPU count (1 to 64), rbtree and segtree, "
        "strict and lazy",
    ),
    "validate": (
        "the shipped corpus's hosts, each from its dump",
        "the validation against the pcie-bench corpus: per experiment, each host's plain "
        "directory measured over the modelled curve and its band (8 draws)",
    ),
}
"""Each plot kind: its default platform and what it shows."""

# The options only some kinds take: each kind's parser lists those it takes, and holds the
# others hidden so that giving one is refused with the reason, not as an unknown option.
ONLY = {"device": ("dma", "iotlb"), "sweep": ("dma",), "size": ("dma",)}


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``plot`` and one subcommand per kind."""
    pl = sub.add_parser(
        "plot",
        help="write a plot to a PNG or SVG file",
        description="Write a plot to a PNG or SVG file. "
        + " ".join(f"`{kind}`: {what}." for kind, (_, what) in KINDS.items())
        + " Each kind takes --help.",
    )
    kinds = pl.add_subparsers(dest="what", required=True, metavar="KIND")
    for kind, (platform, what) in KINDS.items():
        p = kinds.add_parser(kind, help=what.split(":")[0], description=f"Write a plot of {what}.")
        default = "all platforms with [iommu_hw] and a device" if platform == "all" else platform
        p.add_argument(
            "--platform",
            type=options.nonempty,
            help=f"platform name or file (default {default}"
            + ("; `all` for every one" if kind == "iotlb" else "")
            + ")",
        )
        p.add_argument(
            "--device",
            type=options.nonempty,
            metavar="NAME|FILE",
            help="a device for the host's PCIe slot instead of its own (a built-in name or a "
            "device file; `dmalab platforms` lists them)"
            if kind in ONLY["device"]
            else argparse.SUPPRESS,
        )
        p.add_argument(
            "--sweep",
            choices=["size", "offset"],
            default="size",
            help="by transfer size (4 B to 8 KiB) or by host offset 0..63 (default size)"
            if kind in ONLY["sweep"]
            else argparse.SUPPRESS,
        )
        p.add_argument(
            "--size",
            type=options.integer(1, 1 << 24, "1..=16777216"),
            default=64,
            help="with --sweep offset: bytes per DMA, 1..=16777216 (default 64)"
            if kind in ONLY["size"]
            else argparse.SUPPRESS,
        )
        p.add_argument(
            "--out",
            type=options.nonempty,
            required=True,
            help="output file, .png or .svg, written whole (a temporary file, then renamed); a "
            "file there that is not an image of that kind is refused unless --force",
        )
        options.add_force(p, "--out", "an image")
        if kind == "dma":
            options.add_intervals(p, samples=32)
        p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Write the plot; say where on stderr. Every figure opened is closed, whatever happens
    (a refused input while a figure is drawn left it open in a long-lived process)."""
    try:
        return _run(args)
    finally:
        import sys

        if "matplotlib.pyplot" in sys.modules:
            sys.modules["matplotlib.pyplot"].close("all")


def _run(args: argparse.Namespace) -> int:
    from dmalab import DmalabError, files, plot, sim

    for dest, kinds in ONLY.items():
        if args.what not in kinds:
            options.refuse(
                args, (dest,), f"applies to the {' and '.join(kinds)} plot, not {args.what}"
            )
    if args.what == "dma":
        options.refuse_draws(args)
    if args.what == "dma" and args.sweep != "offset":
        options.refuse(args, ("size",), "applies to the dma plot with --sweep offset")
    # Refuse a bad file name or a missing folder before the work, not after it.
    if not str(args.out).lower().endswith((".png", ".svg")):
        raise DmalabError(f"--out {args.out}: the file must end in .png or .svg")
    image = files.PNG if str(args.out).lower().endswith(".png") else files.SVG
    options.output_file(args, "out", (image,), image)
    default = KINDS[args.what][0]
    platform = args.platform or default
    if args.what == "validate":
        options.refuse(args, ("platform",), "the validation's hosts are built from their dumps")
        path = plot.validation(args.out)
    elif args.what == "map":
        path = plot.map_bench(platform, args.out)
    elif args.what == "iotlb":
        names = sim.platforms_with("iommu_hw", "device_dma") if platform == "all" else [platform]
        names = [sim.with_device(n, args.device) for n in names]
        path = plot.iotlb(names, args.out)
    elif args.what == "dma":
        host = sim.with_device(platform, args.device)
        samples = 0 if args.no_intervals else args.samples
        path = plot.dma(host, args.out, args.sweep, args.size, samples=samples, seed=args.seed)
    elif args.what == "copy":
        path = plot.sync_copy(platform, args.out)
    else:
        path = plot.crossover(platform, args.out)
    options.console(stderr=True).print(f"wrote {path}")
    return 0
