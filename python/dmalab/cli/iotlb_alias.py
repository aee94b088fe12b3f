"""``dmalab iotlb-alias``: which placements alias in a set-associative IOTLB, and the cost."""

from __future__ import annotations

import argparse
import itertools
from typing import TYPE_CHECKING

from dmalab import _native
from dmalab.cli import options
from dmalab.mapbench import FLUSHES

if TYPE_CHECKING:
    from dmalab.types import AliasRecord

ALIGNS = ("size", "page", "color")


def _geometry(text: str) -> list[tuple[int, int]]:
    """``ENTRIESxWAYS`` pairs, comma-separated (``64x4,32x32``)."""
    out = []
    for part in filter(None, (t.strip() for t in text.split(","))):
        entries, _, ways = part.partition("x")
        try:
            out.append((int(entries), int(ways)))
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{part!r} is not ENTRIESxWAYS, such as 64x4 (64 entries in 4-way sets)"
            ) from None
    if not out:
        raise argparse.ArgumentTypeError("no geometry given; valid: ENTRIESxWAYS,...")
    return out


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``iotlb-alias``."""
    p = sub.add_parser(
        "iotlb-alias",
        help="what-if: concurrent DMA streams against a set-associative IOTLB, by allocator",
        description=(
            "Seed 003's open question: does the allocator's placement match the IOTLB's "
            "replacement? Concurrent DMA streams each map one I/O after another through the "
            "real allocator; their TLPs reach the IOMMU interleaved, and each is translated "
            "through an IOTLB of the given geometry (set = the page number's low bits). Streams "
            "whose current pages share a set evict each other once they outnumber its ways: "
            "the page is walked again for each TLP. A table by allocator, streams, geometry "
            "and placement: misses per I/O, thrash misses (beyond one per page), walk time."
        ),
    )
    options.add_platform(p, default="xeon-broadwell-2s")
    options.add_allocators(p, ["segtree"], "segtree")
    p.add_argument(
        "--streams",
        type=options.int_list(options.integer(1, 1024)),
        default=[1, 4, 8, 16, 32],
        help="concurrent streams, each 1..=1024 (default 1,4,8,16,32)",
    )
    p.add_argument(
        "--iotlb",
        type=_geometry,
        default=[(64, 4), (64, 64)],
        metavar="ENTRIESxWAYS,...",
        help="IOTLB geometries (default 64x4,64x64: 16 sets of 4 ways, fully associative)",
    )
    p.add_argument(
        "--io-bytes",
        type=options.int_list(options.integer(1, 1 << 24)),
        default=[65536],
        help="bytes per I/O, each 1..=2^24 (default 65536)",
    )
    p.add_argument(
        "--align",
        type=options.name_list(ALIGNS),
        default=["size"],
        help="size (Linux: aligned to the I/O's size), page, color (each stream starts in its "
        "own set: a what-if policy) or all (default size)",
    )
    p.add_argument(
        "--flush",
        type=options.name_list(FLUSHES),
        default=["strict"],
        help="strict, lazy or all (default strict)",
    )
    p.add_argument(
        "--tlp-bytes",
        type=options.one_of((64, 128, 256, 512, 1024, 2048, 4096)),
        default=256,
        help="bytes per TLP, a power of two in 64..=4096 (default 256)",
    )
    p.add_argument(
        "--ios",
        type=options.integer(1, 1_000_000),
        default=1000,
        metavar="N",
        help="I/Os per stream, 1..=1000000 (default 1000)",
    )
    options.add_choice(p)
    options.add_no_progress(p)
    options.add_format(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run every cell and print a table or JSON."""
    choices = options.choices(args.choice)
    records: list[AliasRecord] = []
    cells = list(
        itertools.product(
            args.allocator, args.io_bytes, args.align, args.flush, args.iotlb, args.streams
        )
    )
    # Progress in rounds (each stream's next I/O), over every cell.
    line = options.ProgressLine(enabled=not args.no_progress)
    with line:
        for i, cell in enumerate(cells):
            records.append(_cell(args, choices, cell, i, len(cells), line))
    if args.format != "table":
        options.output(args, records)
        return 0
    _print(records)
    return 0


def _cell(
    args: argparse.Namespace,
    choices: dict[str, str] | None,
    cell: tuple[str, int, str, str, tuple[int, int], int],
    i: int,
    cells: int,
    line: options.ProgressLine,
) -> AliasRecord:
    """Run cell ``i`` of ``cells``, its rounds shown on ``line``."""
    allocator, io, align, flush, (entries, ways), streams = cell
    point = {
        "allocator": allocator,
        "streams": streams,
        "iotlb_entries": entries,
        "iotlb_ways": ways,
        "io_bytes": io,
        "tlp_bytes": args.tlp_bytes,
        "align": align,
        "flush": flush,
        "ios_per_stream": args.ios,
    }
    return options.poll(
        lambda p: _native.iotlb_alias(args.platform, point, choices, p),
        lambda done, _total: line.update(
            i * args.ios + done, cells * args.ios, f"rounds, cell {i + 1} of {cells}"
        ),
    )


def _print(records: list[AliasRecord]) -> None:
    from rich.table import Table

    console = options.console()
    console.print(
        f"{records[0]['platform']}: {records[0]['tlp_bytes']}-byte TLPs, "
        f"{records[0]['ios_per_stream']} I/Os per stream"
    )
    t = Table(title="IOTLB aliasing: misses per I/O by placement")
    for name in ("allocator", "I/O bytes", "align", "flush", "IOTLB", "streams"):
        t.add_column(name, justify="right" if name in ("I/O bytes", "streams") else "left")
    for name in ("TLPs", "misses", "thrash", "miss rate", "walk us", "first-page sets"):
        t.add_column(name, justify="right")
    for r in records:
        t.add_row(
            r["allocator"],
            str(r["io_bytes"]),
            r["align"],
            r["flush"],
            f"{r['iotlb_entries']}x{r['iotlb_ways']}",
            str(r["streams"]),
            str(r["tlps_per_io"]),
            f"{r['misses_per_io']:.2f}",
            f"{r['thrash_misses_per_io']:.2f}",
            f"{r['miss_rate']:.3f}",
            f"{r['walk_us_per_io']:.2f}",
            f"{r['first_page_sets']:.1f}",
        )
    console.print(t)
