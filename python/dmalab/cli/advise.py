"""``dmalab advise``: which knob fixes it, for what gain and at what cost in protection."""

from __future__ import annotations

import argparse
from typing import Any

from dmalab import ScenarioError, sim
from dmalab.cli import options


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``advise``."""
    from dmalab import advise

    p = sub.add_parser(
        "advise",
        help="which DMA-mapping knobs to change for a workload, the gain and the protection cost",
        description=(
            "For a host (with a device in its slot) and a workload: run today's configuration, "
            "every single change of the knobs the model has, then a greedy search that adds "
            "the best change to the combination so far and reruns every remaining one on top "
            "of it. Each configuration runs over "
            "the same --samples draws of the host's uncertain parameters, so each gain is given "
            "with its 5th to 95th percentile; a gain whose interval holds zero is 'uncertain' "
            "and never ranked above a certain one. Each knob says how to set it on Linux and "
            "what protection it leaves; --keep-protection strict never advises one that leaves "
            "stale mappings or all memory reachable. Block I/O (nvme:...) runs on the run "
            "model with the mapping knobs; a NIC's DMA (nic:...) on bench dma's model with the "
            "IOMMU, its page size, the buffers' node, MRRS, MPS and 10-bit tags (where both "
            "ends support them); a map-heavy driver (map:...) on "
            "bench map's model with the invalidation policy and the allocator; a vhost backend "
            "(vhost:...) on vhost's model with the copy engine (where the host has one), the "
            "mbuf size and the memory's node. Block I/O's knobs include where completions run "
            "(rq_affinity). Relaxed Ordering and No Snoop are not searched yet."
        ),
    )
    p.add_argument(
        "--host",
        type=options.nonempty,
        metavar="NAME|FILE",
        help="the host: a built-in platform, a platform file, or HOST+DEVICE (or --inspect)",
    )
    p.add_argument(
        "--inspect",
        action="store_true",
        help="advise this Linux host as `dmalab inspect` reads it (or the tree at --root): its "
        "device's link as trained and its IOMMU configuration as today's, every value the "
        "host cannot show taken from the built-in host it is --like",
    )
    p.add_argument(
        "--like",
        type=options.nonempty,
        metavar="NAME|FILE",
        help="with --inspect: the host whose values stand in for what an inspected host cannot "
        "show (default: by the CPU's vendor, epyc-rome-2s for AMD, xeon-broadwell-2s for Intel)",
    )
    p.add_argument(
        "--root",
        type=options.nonempty,
        metavar="DIR",
        help="with --inspect: the host's filesystem root, as `dmalab inspect --root` (default /)",
    )
    p.add_argument(
        "--inspect-device",
        type=options.nonempty,
        metavar="BDF",
        help="with --inspect: the PCI function to advise for (default: the first PCIe network "
        "or storage function)",
    )
    p.add_argument(
        "--device",
        type=options.nonempty,
        metavar="NAME|FILE",
        help="a device for the host's PCIe slot (a drive for nvme: workloads), such as "
        "samsung-pm1743 (default: the host's own)",
    )
    p.add_argument(
        "--workload",
        required=True,
        type=options.nonempty,
        metavar="SPEC",
        help="nvme:DRIVESxSIZE[,qdDEPTH][,threadsN][,queuesN][,socketsN][,irq][,read]: random "
        "reads of SIZE bytes (K or M suffix) to DRIVES drives, DEPTH in flight per thread "
        "(default 32), N submitting threads (default 8 per drive), N queues a drive shared by "
        "the threads (default one each), spread over N sockets (default 1), completed where "
        "the queue's interrupt lands with irq (default: on the submitter), such as "
        "nvme:8x4K,qd32; or "
        "nic:RATEG,SIZE[B][,tx|rx][,window=N[K|M|G]][,random][,remote][,mps=N]: a NIC's DMA of "
        "SIZE-byte packets at up to RATE Gbit/s, reading them (tx, default) or writing them "
        "(rx), over buffers spanning the window (default 8M), in ring order or at random, in "
        "the device's node or the other, with today's Max_Payload_Size where firmware left it "
        "below what both ends support (default: the trained value), such as nic:100G,64B; or "
        "map:THREADS[,granuleN][,bitsN][,to-device|from-device|bidirectional]: THREADS CPUs "
        "mapping and unmapping N-page buffers under an N-bit DMA mask, as the kernel's DMA map "
        "benchmark does, such as map:16; or "
        "vhost:PACKET[K][,mbufN[K]][,local|engine-remote|min-remote|max-remote]: a vhost "
        "backend on one core moving PACKET-byte packets (64K with TSO) into a guest in mbufs "
        "of N bytes (default 2048), its memory placed as `dmalab vhost` names it (default "
        "local), such as vhost:64K; or a FILE.toml with a [workload] table (kind = "
        "nvme|nic|map|vhost and the same fields by name) and an optional [today] table of "
        "today's mapping keys (a vhost workload's: policy)",
    )
    p.add_argument(
        "--goal",
        choices=advise.GOALS,
        default="throughput",
        help="what to improve: throughput (ops/s), latency (p99) or cpu (CPU time per "
        "operation) (default throughput)",
    )
    p.add_argument(
        "--keep-protection",
        choices=advise.PROTECTIONS,
        default="any",
        help="strict: advise nothing that leaves an unmapped page reachable or all memory "
        "reachable; lazy: nothing that leaves all memory reachable; any (default)",
    )
    p.add_argument(
        "--ios",
        type=options.integer(1_000, 10_000_000, "1000..=10000000"),
        default=advise.ADVISE_IOS,
        metavar="N",
        help=f"I/Os each run of an nvme: workload counts (default {advise.ADVISE_IOS:,}), "
        "after a warm-up of two waves of its I/Os in flight (threads x depth) that counts "
        "nowhere: the allocator's caches start empty",
    )
    options.add_set(p)
    options.add_intervals(p, samples=16)
    options.add_format(p)
    options.add_no_progress(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Search and print the advice (an inspected host's files live in a folder removed after
    the run)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="dmalab-advise-") as work:
        return _run(args, work)


def _run(args: argparse.Namespace, work: str) -> int:
    from dmalab import advise

    if args.workload.endswith(".toml"):
        workload, file_today = advise.read_workload_file(args.workload, args.ios)
    else:
        workload, file_today = advise.parse_workload(args.workload, args.ios), {}
    found = None
    if args.inspect:
        from pathlib import Path

        if args.host or args.device:
            given = "--host" if args.host else "--device"
            raise ScenarioError(f"{given}: --inspect reads the host and its device; give one")
        root = args.root or "/"
        if not Path(root).is_dir():
            raise ScenarioError(f"--root {root}: not a directory")
        found = advise.inspected_host(Path(work), args.like, root, args.inspect_device)
        host = found.platform
        file_today = advise.today_from(workload.kind, found.today["iommu"]) | file_today
    else:
        if not args.host:
            raise ScenarioError(
                "--host: give the host (a name, a file or HOST+DEVICE), or --inspect"
            )
        options.refuse(args, ("like", "root", "inspect_device"), "needs --inspect")
        host = sim.with_device(args.host, args.device) if args.device else args.host
    base: dict[str, Any] = dict(file_today)
    if workload.kind != "block":
        options.refuse(args, ("ios",), "sets the I/Os of an nvme: workload's runs")
    if workload.kind == "nic" and args.set:
        raise ScenarioError(
            "--set: a nic: workload states today's configuration in its spec (tx|rx, window, "
            "random, remote); the IOMMU starts on, in 4 KiB pages"
        )
    for section, keys in (options.overrides(args.set) or {}).items():
        if section != "mapping" or not isinstance(keys, dict):
            raise ScenarioError(
                f"--set {section}...: advise takes today's mapping only (mapping.translation, "
                "mapping.flush, mapping.high_water, mapping.allocator)"
            )
        base |= keys
    if workload.kind == "map" and set(base) - {"flush", "allocator"}:
        raise ScenarioError(
            "--set: a map: workload's configuration is mapping.flush (strict or lazy) and "
            "mapping.allocator"
        )
    if workload.kind == "vhost":
        policies = advise.VHOST_POLICIES
        if set(base) - {"policy"} or base.get("policy", "cpu-only") not in policies:
            raise ScenarioError(
                f"--set/[today]: a vhost: workload's configuration today is mapping.policy, one "
                f"of {', '.join(policies)} (its mbuf size and placement are in the spec)"
            )
    if args.no_intervals:
        options.refuse(args, ("samples", "seed"), "sets the intervals --no-intervals turns off")
    samples = 0 if args.no_intervals else args.samples
    with options.ProgressLine(enabled=not args.no_progress) as line:
        result = advise.advise(
            host,
            workload,
            goal=args.goal,
            keep=args.keep_protection,
            base=base,
            samples=samples,
            seed=args.seed,
            progress=lambda done, planned: line.update(done, planned, "configurations run"),
        )
    if found is not None:
        result["host"], result["host_note"] = found.label, found.note
    plain = advise.plain(result)
    if args.format != "table":
        options.output(args, plain, rows=plain["singles"])
        return 0
    _print(result, plain)
    return 0


def _print(result: dict[str, Any], plain: dict[str, Any]) -> None:
    from rich.table import Table

    from dmalab import advise

    out = options.console()
    unit = advise.unit(result["goal"], result["kind"])
    if result.get("host_note"):
        out.print(f"host: {result['host_note']}", markup=False)
    out.print(
        f"{result['host']}, {result['workload']}: today {advise._mapping_text(result['today'])}: "
        f"{result['today_figure']:,.4g} {unit}, protection {result['today_protection']} "
        f"({result['today_protection_detail']})\nlimit: {result['limit_before']}",
        markup=False,
    )
    t = Table(title=f"advice ({result['goal']}, keep protection {result['keep_protection']})")
    for c in (
        "step",
        "knob",
        "to",
        "gain",
        "what it moves",
        "protection",
        "how to set it on Linux",
    ):
        t.add_column(c, overflow="fold")
    for i, s in enumerate(plain["steps"], 1):
        t.add_row(
            str(i),
            s["knob"],
            str(s["to"]),
            advise.gain_text(s),
            s["moved"],
            s["protection"],
            s["how"],
        )
    out.print(t)
    for i, s in enumerate(plain["steps"], 1):
        if s["note"]:
            out.print(f"step {i}, {s['knob']}: {s['note']}", markup=False)
    t = Table(title="each change alone, from today (best first)")
    for c in ("knob", "gain", "protection", "advised", "limit after"):
        t.add_column(c, overflow="fold")
    for s in plain["singles"]:
        t.add_row(
            s["knob"],
            advise.gain_text(s),
            s["protection"],
            "yes" if s["allowed"] else f"no: {s['why_not']}",
            s["limit"],
        )
    out.print(t)
    for s in plain["singles"]:
        if s["note"]:
            out.print(f"{s['knob']}: {s['note']}", markup=False)
    out.print(plain["ticket"], markup=False, soft_wrap=True)
    if result["samples"]:
        out.print(
            f"gain [lo, hi]: 5th to 95th percentile of the paired gain over {result['samples']} "
            f"draws of the host's uncertain parameters (seed {result['seed']}); "
            f"{result['runs']} runs.",
            markup=False,
        )
