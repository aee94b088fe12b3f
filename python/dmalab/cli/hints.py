"""``dmalab hints``: what each DMA hint would gain for a NIC's stream, and is it safe?

On a hinted PCI bridge (the ZX1 of seed 004) the hints are the bridge's per-mapping bits; on a
PCIe platform with a ``[pcie_ordering]`` section they are the TLP attributes (Relaxed Ordering,
No Snoop, ID-based Ordering) of a NIC's receive stream."""

from __future__ import annotations

import argparse
from typing import Any

from dmalab.cli import options
from dmalab.types import AttributeReport, HintReport, ScsiHintReport


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
            "cannot), or known to break the machine. Each row names the stage that limits the "
            "stream with the change: bus (the card's reads), nic (its own work), wire or sender "
            "(the sending host's CPUs); a card that reads frames ahead into its own buffer "
            "hides its reads, and with them every hint, until they are the slowest stage. On a "
            "PCIe platform with a "
            "[pcie_ordering] section (xeon-broadwell-2s) it runs a NIC's receive stream instead "
            "(data writes, completion writes, descriptor reads) with no TLP "
            "attributes, then with each single one: Relaxed Ordering or No Snoop on the data or "
            "the completion writes, ID-based Ordering on all; --choice root_complex=serialized "
            "shows a root complex that does not pipeline ordered writes."
        ),
    )
    p.add_argument(
        "--platform",
        default="hp-rx2600-zx1",
        help="a platform with a hinted PCI bridge and a [nic_tx] section, or a PCIe platform "
        "with a [pcie_ordering] section (default hp-rx2600-zx1)",
    )
    p.add_argument(
        "--workload",
        choices=("nic", "scsi"),
        default="nic",
        help="PCI: nic, the NIC's send stream (default), or scsi, a SCSI controller's write "
        "stream (seed 004's 53c1010 under dd: its SCRIPTS' control reads and its data bursts, "
        "two channels on one bus, the disks' limit; the platform's [scsi_tx] section)",
    )
    p.add_argument("--protocol", choices=("udp", "tcp"), default="udp", help="PCI: default udp")
    p.add_argument(
        "--message-bytes",
        type=options.u64,
        default=1024,
        help="PCI: bytes per send (UDP: at most the MTU less 28; TCP: checked only, the stack "
        "sends full-sized segments; default 1024)",
    )
    p.add_argument(
        "--mtu-bytes", type=options.u64, default=1500, help="PCI: 576..=9000 (default 1500)"
    )
    p.add_argument(
        "--packet-bytes",
        type=options.u64,
        default=1514,
        help="PCIe: bytes the NIC writes per received packet, 64..=9216 (default 1514)",
    )
    p.add_argument(
        "--packets", type=options.u64, default=4096, help="PCIe: 1024..=65536 (default 4096)"
    )
    p.add_argument(
        "--functions",
        type=options.u64,
        default=1,
        help="PCIe: requesters (virtual functions) the packets are spread over, 1..=256 "
        "(default 1)",
    )
    p.add_argument(
        "--cpu-owned-lines",
        type=options.u64,
        default=1,
        help="PCIe: lines at the head of each buffer a core still holds from the last packet, "
        "0 up to the packet's lines; each write touching them pays one snoop to take them back "
        "(default 1: the headers the stack read)",
    )
    p.add_argument(
        "--all",
        action="store_true",
        help="PCI: list every change, not only those that move the rate by 0.1%% or more or "
        "are not plainly safe (on PCIe every attribute is always listed)",
    )
    options.add_choice(p)
    options.add_format(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Measure the stream under each hint; print a table or JSON."""
    from dmalab import sim

    choices = options.choices(args.choice)
    info = sim.platform_info(args.platform, choices)
    on_pcie = info["bus"].startswith("PCIe")
    if on_pcie:
        options.refuse(
            args,
            ("workload", "protocol", "message_bytes", "mtu_bytes", "all"),
            f"applies to a hinted PCI bridge's send stream; {args.platform} is PCIe "
            f"({info['bus']}): the receive stream's options are --packet-bytes, --packets, "
            "--functions and --cpu-owned-lines, and every attribute is always listed",
        )
    else:
        options.refuse(
            args,
            ("packet_bytes", "packets", "functions", "cpu_owned_lines"),
            f"applies to a PCIe platform's receive stream; {args.platform} has a PCI bus "
            f"({info['bus']}): the send stream's options are --protocol, --message-bytes and "
            "--mtu-bytes",
        )
    if on_pcie:
        pcie = sim.pcie_hints(
            args.platform,
            args.packet_bytes,
            args.packets,
            args.functions,
            args.cpu_owned_lines,
            choices,
        )
        if args.format != "table":
            options.output(args, pcie, rows=pcie["gains"])
        else:
            _print_pcie(pcie)
        return 0
    if args.workload == "scsi":
        options.refuse(
            args,
            ("protocol", "message_bytes", "mtu_bytes"),
            "applies to the NIC's send stream; --workload scsi runs the SCSI controller's "
            "write stream, which the platform's [scsi_tx] section describes whole",
        )
        scsi = sim.scsi_hints(args.platform, choices)
        if args.format != "table":
            options.output(args, scsi, rows=scsi["gains"])
        else:
            _print_scsi(scsi, args.all)
        return 0
    report = sim.nic_hints(
        args.platform,
        args.protocol,
        args.message_bytes,
        args.mtu_bytes,
        choices,
    )
    if args.format != "table":
        options.output(args, report, rows=report["gains"])
    else:
        _print(report, args.all)
    return 0


def _print(report: HintReport, every: bool) -> None:
    fw = report["firmware"]
    console = options.console()
    console.print(
        f"firmware defaults on {report['bus']}: {fw['mbit_s']:.2f} Mbit/s ({fw['limit']}-bound)"
    )
    nic = f"NIC {fw['nic_ns']:.0f} ns " + (
        f"(reads {fw['card_frames']} frames ahead)"
        if fw["card_frames"] >= 2
        else "(reads on its serial path)"
    )
    host = f", sending host {fw['sender_ns']:.0f} ns" if fw.get("sender_ns") is not None else ""
    if fw.get("doorbell") == "paced":
        host += (
            ", send ring full: the doorbell is paced by completions and splits "
            f"{fw['stopped_share']:.0%} of the frames' reads"
        )
    console.print(
        f"per frame: descriptor {fw['descriptor_ns']:.0f} ns, frame read "
        f"{fw['frame_read_ns']:.0f} ns ({fw['extra_commands_per_frame']:.2f} more commands for "
        f"PIO writes), {nic}, wire {fw['wire_ns']:.0f} ns{host}"
    )
    rows = [{**g, "rate": f"{g['mbit_s']:.2f}"} for g in report["gains"]]
    shown = _gain_table(console, rows, "Mbit/s", every)
    if report["bus"].startswith("PCI-X"):
        console.print(
            "On PCI-X only the ordering hint is changed: prefetch depth and block size do not "
            "apply there (seed 004 4.3, 4.4) and read current is not modelled."
        )
    _safety_notes(console, shown)


def _gain_table(
    console: Any,  # noqa: ANN401 - a rich Console
    gains: list[dict[str, Any]],
    unit: str,
    every: bool,
) -> list[dict[str, Any]]:
    """Print the changes that move the rate by 0.1% or more or are not plainly safe (every
    change with ``every``), best first, each with its ``rate`` text; returns those shown."""
    numbers = [unit, "gain"]
    t = options.plain_table(["mapping", "command", "hint", *numbers, "limit", "safety"], numbers)
    ranked = sorted(gains, key=lambda g: -g["gain_pct"])
    shown = [g for g in ranked if every or abs(g["gain_pct"]) >= 0.1 or g["safety"] != "safe"]
    for g in shown:
        t.add_row(
            g["mapping"],
            g["command"],
            g["hint"],
            g["rate"],
            f"{g['gain_pct']:+.2f}%",
            g["limit"],
            g["safety"],
        )
    console.print(t)
    hidden = len(ranked) - len(shown)
    if hidden:
        console.print(
            f"{hidden} other safe changes move the rate by less than 0.1% (--all lists them)."
        )
    return shown


def _safety_notes(console: Any, shown: list[dict[str, Any]]) -> None:  # noqa: ANN401
    """Why each change shown that is not plainly safe is not."""
    why = sorted({(g["safety"], g["hint"], g["why"]) for g in shown if g["safety"] != "safe"})
    for safety, hint, text in why:
        console.print(f"{safety} ({hint}): {text}")


def _print_scsi(report: ScsiHintReport, every: bool) -> None:
    fw = report["firmware"]
    console = options.console()
    console.print(
        f"firmware defaults on {report['bus']}: {fw['mb_s']:.1f} MB/s (limit: {fw['limit']})"
    )
    console.print(
        f"per command on one channel: control reads {fw['control_ns']:.0f} ns "
        f"({fw['command_read']} and {fw['entry_read']}, consistent) + data reads "
        f"{fw['data_ns']:.0f} ns ({fw['data_read']}, streaming); limits: a channel's PCI path "
        f"{fw['channel_pci_mb_s']:.1f}, the channels {fw['channels_mb_s']:.1f}, the PCI bus "
        f"{fw['bus_mb_s']:.1f}, the disks {fw['array_mb_s']:.1f} MB/s"
    )
    rows = [{**g, "rate": f"{g['mb_s']:.1f}"} for g in report["gains"]]
    _safety_notes(console, _gain_table(console, rows, "MB/s", every))


def _print_pcie(report: AttributeReport) -> None:
    b = report["baseline"]
    console = options.console()
    console.print(
        f"no attributes ({report['ordered_writes']} root complex): {b['gbit_s']:.2f} Gbit/s "
        f"(limit: {b['limit']}, link {b['link_busy_pct']:.0f}% busy); a write waits "
        f"{b['order_wait_ns']:.0f} ns for earlier writes; the link stalls "
        f"{b['tracker_wait_ns']:.0f} ns per packet for trackers; completion visible "
        f"{_ns(b['completion_latency_ns'])} after the data starts; descriptor read "
        f"{b['descriptor_read_ns']:.0f} ns "
        f"({b['descriptor_read_wait_ns']:.0f} ns behind writes)"
    )
    numbers = ["Gbit/s", "gain", "completion", "read wait"]
    t = options.plain_table(["TLPs", "attribute", *numbers, "safety"], numbers)
    for g in report["gains"]:
        r = g["record"]
        t.add_row(
            g["tlps"],
            g["attribute"],
            f"{r['gbit_s']:.2f}",
            f"{g['gain_pct']:+.1f}%",
            _ns(r["completion_latency_ns"]),
            f"{r['descriptor_read_wait_ns']:.0f} ns",
            g["safety"],
        )
    console.print(t)
    for g in report["gains"]:
        console.print(f"{g['safety']} ({g['tlps']} {g['attribute']}): {g['why']}")


def _ns(value: float | None) -> str:
    """Nanoseconds, or ``n/a`` where nothing was timed."""
    return "n/a" if value is None else f"{value:.0f} ns"
