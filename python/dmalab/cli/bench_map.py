"""``dmalab bench map``: map and unmap latency with N CPUs on one IOMMU domain."""

from __future__ import annotations

import argparse
import itertools
from typing import Any

from dmalab import sim
from dmalab.cli import options
from dmalab.types import MapBenchRecord


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``bench map``."""
    from dmalab.mapbench import DIRECTIONS, FLUSHES

    p = sub.add_parser(
        "map",
        help="map and unmap latency with N CPUs at once (the kernel's DMA map benchmark)",
        description=(
            "Simulate N CPUs each mapping a buffer of --granule pages for a device of "
            "--dma-bits, unmapping it, and so on, on one IOMMU domain of the platform, with the "
            "real IOVA allocator inside. Reports the mean and standard deviation of map and "
            "unmap latency in microseconds, as the kernel's dma_map_benchmark does, and where "
            "the time goes: the allocator and its lock (taken when an operation reaches its "
            "shared structure; a contended lock moves between CPUs), page-table writes, and the "
            "invalidation interface every CPU shares (strict: one invalidation and wait per "
            "unmap, served in order, or on an SMMUv3 host ([iommu_hw] invalidation = "
            "shared-sync) batched behind one CMD_SYNC, with one command per page where it has "
            "no range invalidation; lazy: per-CPU flush queues of 256, a full one flushes the "
            "domain). Each CPU first runs 256 uncounted pairs. Lists (comma-separated) run one "
            "record per combination."
        ),
    )
    options.add_platform(p, default="xeon-broadwell-2s")
    p.add_argument(
        "--threads",
        type=options.int_list(options.integer(1, 256)),
        default=[1],
        metavar="N[,N...]",
        help="CPUs mapping at once, 1..=256 (default 1)",
    )
    p.add_argument(
        "--granule",
        type=options.integer(1, 1024),
        default=1,
        metavar="PAGES",
        help="pages per mapping, 1..=1024 (default 1)",
    )
    p.add_argument(
        "--dma-bits",
        type=options.one_of((32, 64)),
        default=None,
        help="the device's DMA mask in address bits, 32 or 64 (default: with --device, the "
        "device's own addressing, else 32, as the kernel's benchmark)",
    )
    p.add_argument(
        "--direction",
        choices=DIRECTIONS,
        default="bidirectional",
        help=f"the mappings' DMA direction: {', '.join(DIRECTIONS)} (default bidirectional)",
    )
    p.add_argument(
        "--flush",
        type=options.name_list(FLUSHES),
        default=None,
        help="strict, lazy or all (default: the host kernel's default, as the host file states "
        "it in [iommu] default_flush: lazy on xeon-broadwell-2s and epyc-rome-2s, strict on the "
        "Arm hosts; strict where the file states none)",
    )
    p.add_argument(
        "--node",
        type=options.integer(-1, 1),
        default=-1,
        help="the node the CPUs run on, as the kernel tool's -n: -1 (default: unbound, spread "
        "over the sockets, taken as alternating), 0 (the device's socket) or 1 (the other, on "
        "a two-socket host: each invalidation's wait status crosses the socket link back)",
    )
    options.add_allocators(p, ["magazines+rbtree"], "magazines+rbtree, Linux's design")
    p.add_argument(
        "--maps",
        type=options.integer(1, 1_000_000),
        default=4096,
        metavar="N",
        help="counted map-unmap pairs per CPU, 1..=1000000 (default 4096)",
    )
    p.add_argument(
        "--as-kernel",
        action="store_true",
        help="print each run as the kernel's dma_map_benchmark prints it (its header line, then "
        "the map and unmap averages and standard deviations in us, cut to its 100 ns units), to "
        "put beside the tool's own output; calibrate fit --kind dma-map-benchmark reads it back. "
        "seconds: the simulated run's length, rounded up",
    )
    options.add_device(p)
    options.add_intervals(p)
    options.add_choice(p)
    options.add_format(p)
    options.add_no_progress(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run every combination and print a table or JSON."""
    from dmalab.mapbench import FIGURES

    options.refuse_draws(args)
    if args.as_kernel and args.format != "table":
        options.refuse(args, ("format",), "--as-kernel prints the kernel tool's own text")
    if args.device:
        # The device in the host's slot: its addressing sets the DMA mask unless one is given.
        args.platform = sim.with_device(args.platform, args.device)
        if args.dma_bits is None:
            bits = next(
                p["value"]
                for p in sim.platform_info(args.platform)["params"]
                if p["field"] == "bus.pcie.addressing_bits"
            )
            args.dma_bits = int(bits)
    if args.dma_bits is None:
        args.dma_bits = 32
    if args.flush is None:
        from dmalab import mapbench

        args.flush = [mapbench.default_flush(args.platform)]
    combos = list(itertools.product(args.allocator, args.flush, args.threads))
    records: list[MapBenchRecord] = []
    line = options.ProgressLine(enabled=not args.no_progress and len(combos) > 1)
    note = ""
    with line:
        for i, (allocator, flush, threads) in enumerate(combos):
            line.update(i, len(combos), f"{allocator} {flush} {threads} CPUs")

            def one(
                d: dict[str, Any] | None,
                allocator: str = allocator,
                flush: str = flush,
                threads: int = threads,
            ) -> MapBenchRecord:
                return _one(args, allocator, flush, threads, d)

            rec = one(None)
            if not args.no_intervals:
                from dmalab import intervals

                def call(d: dict[str, Any], one: Any = one) -> list[dict[str, Any]]:  # noqa: ANN401
                    return [dict(one(d))]

                drawn = intervals.over_draws(
                    args.platform,
                    call,
                    options.choices(args.choice),
                    samples=args.samples,
                    seed=args.seed,
                )
                drawn.attach([rec], FIGURES)  # type: ignore[list-item]
                note = options.drawn_note(args.platform, drawn)
            records.append(rec)
        line.update(len(combos), len(combos), "done")
    if args.as_kernel:
        import sys

        sys.stdout.write("".join(kernel_output(r) for r in records))
    elif args.format != "table":
        options.output(args, records)
    else:
        _print_table(records)
        if not args.no_intervals and records:
            options.intervals_note(args, [note])
    return 0


def _one(
    args: argparse.Namespace,
    allocator: str,
    flush: str,
    threads: int,
    draws: dict[str, Any] | None = None,
) -> MapBenchRecord:
    """One combination's record (with ``draws`` in place of the platform files' values)."""
    from dmalab import mapbench

    return mapbench.run(
        args.platform,
        threads=threads,
        granule_pages=args.granule,
        dma_bits=args.dma_bits,
        direction=args.direction,
        flush=flush,
        allocator=allocator,
        maps_per_thread=args.maps,
        node=args.node,
        choices=options.choices(args.choice),
        draws=draws,
    )


def _top(parts: list[tuple[str, float]]) -> str:
    """The largest part and its microseconds."""
    name, us = max(parts, key=lambda p: p[1])
    return f"{name} {us:.2f}"


def _print_table(records: list[MapBenchRecord]) -> None:
    from dmalab import intervals

    spans = bool(records) and "top_params" in records[0]
    numbers = ["CPUs", "map us", "sd", "unmap us", "sd ", "inv busy", "lock busy"]
    t = options.plain_table(
        ["allocator", "flush", *numbers, "largest map part", "largest unmap part"]
        + (["unmap driven by"] if spans else []),
        numbers,
    )
    for r in records:
        t.add_row(
            r["allocator"],
            r["flush"],
            str(r["threads"]),
            intervals.figure(r, "map_us", ".3f"),
            f"{r['map_sd_us']:.3f}",
            intervals.figure(r, "unmap_us", ".3f"),
            f"{r['unmap_sd_us']:.3f}",
            f"{r['invalidation_busy']:.0%}",
            f"{r['allocator_lock_busy']:.0%}",
            _top(r["map_parts"]),
            _top(r["unmap_parts"]),
            *([intervals.drivers(r, "unmap_us")] if spans else []),
        )
    options.console().print(t)


KERNEL_DIRECTIONS = {
    "bidirectional": "BIDIRECTIONAL",
    "to-device": "TO_DEVICE",
    "from-device": "FROM_DEVICE",
}
"""Each direction as the kernel's tool names it."""


def kernel_output(r: MapBenchRecord) -> str:
    """One run as ``dma_map_benchmark`` prints it: the tool sums each thread's latencies in
    units of 100 ns and prints the mean and standard deviation of those units over 10 with one
    decimal, so a value is cut (not rounded) to 0.1 us."""
    import math

    def cut(us: float) -> str:
        return f"{math.floor(us * 10 + 1e-9) / 10:.1f}"

    seconds = math.ceil(r["maps_per_thread"] * (r["map_us"] + r["unmap_us"]) / 1e6)
    return (
        f"dma mapping benchmark: threads:{r['threads']} seconds:{max(seconds, 1)} node:{r['node']} "
        f"dir:{KERNEL_DIRECTIONS[r['direction']]} granule: {r['granule_pages']}\n"
        f"average map latency(us):{cut(r['map_us'])} standard deviation:{cut(r['map_sd_us'])}\n"
        f"average unmap latency(us):{cut(r['unmap_us'])} "
        f"standard deviation:{cut(r['unmap_sd_us'])}\n"
    )
