"""``dmalab hints``: what each DMA hint would gain for a NIC's stream, and is it safe?"""

from __future__ import annotations

import argparse

from dmalab.cli import options
from dmalab.types import HintReport


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``hints``."""
    p = sub.add_parser(
        "hints",
        help="what each DMA hint would gain for a NIC's stream, and whether a driver may set it",
        description=(
            "Run a NIC's send stream (netperf UDP_STREAM or TCP_STREAM) through a platform's "
            "hinted PCI host bridge (hp-rx2600-zx1: HP ZX1's bus adapter) under the firmware's "
            "DMA hints, then under each single change of them: prefetch depth, block size, "
            "relaxed ordering and read current, for each mapping (consistent, streaming) and "
            "read command (MR, MRL, MRM). Prints the rate, the gain against the firmware's "
            "defaults and whether the hint is safe: performance only, the driver's to decide "
            "(relaxing order is correct only if the device never relies on a register write "
            "reaching it before data it reads after, which the driver knows and the firmware "
            "cannot), or known to break the machine."
        ),
    )
    p.add_argument(
        "--platform",
        default="hp-rx2600-zx1",
        help="a platform with a hinted PCI bridge and a [nic_tx] section (default hp-rx2600-zx1)",
    )
    p.add_argument("--protocol", choices=("udp", "tcp"), default="udp", help="default udp")
    p.add_argument(
        "--message-bytes",
        type=options.u64,
        default=1024,
        help="bytes per send (UDP: at most the MTU less 28; TCP: checked only, the stack sends "
        "full-sized segments; default 1024)",
    )
    p.add_argument("--mtu-bytes", type=options.u64, default=1500, help="576..=9000 (default 1500)")
    p.add_argument(
        "--all",
        action="store_true",
        help="list every change, not only those that move the rate by 0.1%% or more or are "
        "not plainly safe",
    )
    options.add_choice(p)
    options.add_format(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Measure the stream under each hint; print a table or JSON."""
    from dmalab import sim

    report = sim.nic_hints(
        args.platform,
        args.protocol,
        args.message_bytes,
        args.mtu_bytes,
        options.choices(args.choice),
    )
    if args.format == "json":
        options.dump(report)
    else:
        _print(report, args.all)
    return 0


def _print(report: HintReport, every: bool) -> None:
    fw = report["firmware"]
    console = options.console()
    console.print(
        f"firmware defaults: {fw['mbit_s']:.2f} Mbit/s ({fw['limit']}-bound); per frame "
        f"descriptor {fw['descriptor_ns']:.0f} ns, frame read {fw['frame_read_ns']:.0f} ns "
        f"({fw['extra_commands_per_frame']:.2f} more commands for PIO writes), "
        f"NIC {fw['nic_ns']:.0f} ns, "
        f"wire {fw['wire_ns']:.0f} ns"
    )
    numbers = ["Mbit/s", "gain"]
    t = options.plain_table(["mapping", "command", "hint", *numbers, "safety"], numbers)
    gains = sorted(report["gains"], key=lambda g: -g["gain_pct"])
    shown = [g for g in gains if every or abs(g["gain_pct"]) >= 0.1 or g["safety"] != "safe"]
    for g in shown:
        t.add_row(
            g["mapping"],
            g["command"],
            g["hint"],
            f"{g['mbit_s']:.2f}",
            f"{g['gain_pct']:+.2f}%",
            g["safety"],
        )
    console.print(t)
    hidden = len(gains) - len(shown)
    if hidden:
        console.print(
            f"{hidden} other safe changes move the rate by less than 0.1% (--all lists them)."
        )
    why = sorted({(g["safety"], g["hint"], g["why"]) for g in shown if g["safety"] != "safe"})
    for safety, hint, text in why:
        console.print(f"{safety} ({hint}): {text}")
