"""``dmalab advise``: for a host and a workload, which knobs to change, in what order, for what
gain (with its interval) and at what cost in DMA protection.

What it covers today:

- block I/O (``nvme:...``) through a host's IOMMU, run by the run model, with the knobs of the
  DMA mapping layer: the IOMMU's translation (passthrough or page tables), its invalidation
  (strict, lazy with one global flush queue, lazy with per-CPU flush queues of a chosen depth)
  and the IOVA allocator;
- a NIC's packet DMA (``nic:...``), run by ``bench dma``'s model of the device's reads or writes
  over its link, root complex, memory and IOMMU, with the knobs that act there: the IOMMU (on or
  off), its page size (4 KiB, 2 MiB, 1 GiB, where the host's IOMMU maps them), the buffers' NUMA
  node and the Max_Read_Request_Size.

- a map-heavy driver (``map:...``): N CPUs mapping and unmapping buffers on one IOMMU domain as
  the kernel's DMA map benchmark does (``bench map``'s model), with the invalidation policy and
  the IOVA allocator.

Each knob carries what allows it (a kernel parameter, a sysfs or setpci write, a build constant,
hugepage-backed buffers, or an embedding of the allocator library) and the protection it leaves.

The search: from today's configuration, every single change is run (the best single changes),
then a greedy search adds, one at a time, the change that most improves the combination so far,
rerunning every remaining change on top of it (so interactions are seen), until no change
improves it by more than its noise. Every configuration runs over the same draws of the
platform's uncertain parameters (:mod:`dmalab.intervals`), so a gain is a paired ratio per
draw; its interval is the 5th to 95th percentile over the draws. A gain whose interval holds
zero is "uncertain" and never ranked above a certain one. Of two changes that gain the same
within the interval (the interval of their paired difference holds zero), the one that keeps
more protection ranks first, and its ``note`` says so (:func:`rank`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dmalab import DmalabError, ScenarioError, _native, fit, sim

GOALS = ("throughput", "latency", "cpu")
"""What a gain is measured in: operations per second (higher is better), the 99th percentile
latency, or the CPU time an operation costs (lower is better)."""

PROTECTIONS = ("strict", "lazy", "any")
"""What ``--keep-protection`` keeps: ``strict`` (no stale mapping after an unmap returns and no
device reaching memory it was not given), ``lazy`` (stale mappings for a bounded window, never
all memory), or ``any``."""

LEVEL = {"strict": 2, "lazy": 1, "none": 0}
"""Protection levels, higher is safer."""

BASELINE: dict[str, Any] = {
    "translation": "page-table",
    "flush": "strict",
    "allocator": "magazines+rbtree",
}
"""Today's configuration where the user states none: the Linux DMA layer in strict mode with
its cached red-black tree allocator (the nearest of the run model's designs to Linux's
``iova.c`` with its range cache)."""

MIN_GAIN = 0.01
"""The least gain at the files' values (1%) for a change to be a step: less is within what the
models' rounding and a run's length move."""

NOISE = 1e-4
"""A gain smaller than this (0.01%) either way is none: the models' discrete events move a
figure by that much between two configurations that differ in nothing that binds, and a
ranking or a "never loses" test must not turn on it."""

ADVISE_IOS = 20_000
"""I/Os a run of the search counts by default, after its warm-up (:data:`WARM_UP_WAVES`): short
enough for dozens of runs with their draws in under a minute on two cores."""

WARM_UP_WAVES = 2
"""Waves of the I/Os in flight (threads x depth) an nvme: run makes before it counts: the first
wave's IOVAs all come from the allocator's tree (its caches start empty), which with 2,048 in
flight and 20,000 counted made most of the allocator lock's wait (19.7 us an I/O on
hisilicon-kunpeng920-2s, 0.4 us once the run was 1,000,000 I/Os long). The second lets the
queues settle."""


@dataclass(frozen=True)
class Knob:
    """One setting the search may change: a ``[mapping]`` key and its value, with how to set
    it and what it does to protection."""

    name: str
    key: str
    value: Any
    how: str
    """How to set it (Linux kernel parameter, sysfs, build constant or library)."""
    allowed: str
    """What must hold for it to be settable."""
    settable: bool = True
    """Whether a user can set it today; a change no software offers yet (dmalab's planner) is
    listed with its gain and never made a step."""


KNOBS: tuple[Knob, ...] = (
    Knob(
        "IOMMU passthrough",
        "translation",
        "passthrough",
        "kernel parameter iommu.passthrough=1 (x86: iommu=pt), or per group: "
        "echo identity > /sys/kernel/iommu_groups/N/type (device unbound)",
        "a kernel with IOMMU passthrough support; the device must be trusted",
    ),
    Knob(
        "IOMMU page tables",
        "translation",
        "page-table",
        "kernel parameter iommu.passthrough=0, or per group: "
        "echo DMA > /sys/kernel/iommu_groups/N/type",
        "an IOMMU with DMA-API translation",
    ),
    Knob(
        "strict invalidation",
        "flush",
        "strict",
        "kernel parameter iommu.strict=1, or per group: echo DMA > /sys/kernel/iommu_groups/N/type",
        "always",
    ),
    Knob(
        "lazy invalidation, one flush queue",
        "flush",
        "deferred",
        "kernel parameter iommu.strict=0 (or per group: echo DMA-FQ > "
        "/sys/kernel/iommu_groups/N/type); one shared queue rather than one per CPU is the "
        "IOMMU driver's choice, not a user setting",
        "an IOMMU driver with flush-queue support that asks for a single queue",
    ),
    Knob(
        "lazy invalidation, per-CPU flush queues",
        "flush",
        "per-cpu",
        "kernel parameter iommu.strict=0 (the DMA layer keeps a flush queue per CPU), or per "
        "group: echo DMA-FQ > /sys/kernel/iommu_groups/N/type",
        "an IOMMU driver with flush-queue support",
    ),
    Knob(
        "per-CPU flush queues of 64 entries",
        "high_water",
        64,
        "a kernel build constant (IOVA_FQ_SIZE in drivers/iommu/dma-iommu.c)",
        "lazy invalidation; a rebuilt kernel",
    ),
    Knob(
        "per-CPU flush queues of 1024 entries",
        "high_water",
        1024,
        "a kernel build constant (IOVA_FQ_SIZE in drivers/iommu/dma-iommu.c)",
        "lazy invalidation; a rebuilt kernel",
    ),
    Knob(
        "complete each I/O on its submitting CPU",
        "workload.completion",
        "submitter",
        "echo 2 > /sys/block/DEV/queue/rq_affinity (the block layer completes, and the driver "
        "unmaps, on the CPU that submitted the I/O; the interrupt's CPU passes it on)",
        "always (a block-layer setting; the hand-over's cost is not modelled)",
    ),
    Knob(
        "segtree IOVA allocator",
        "allocator",
        "segtree",
        "not a kernel setting: a VMM or user-space driver that embeds dmalab-iova "
        "(AllocatorKind::SegTree, its default)",
        "the mapping layer is yours (a VMM or a user-space driver)",
    ),
    Knob(
        "bitmap IOVA allocator",
        "allocator",
        "bitmap",
        "not a kernel setting: a VMM or user-space driver that embeds dmalab-iova "
        "(AllocatorKind::Bitmap)",
        "the mapping layer is yours (a VMM or a user-space driver)",
    ),
    Knob(
        "red-black tree IOVA allocator without caches",
        "allocator",
        "rbtree",
        "not a kernel setting: a VMM or user-space driver that embeds dmalab-iova "
        "(AllocatorKind::RbTree)",
        "the mapping layer is yours (a VMM or a user-space driver)",
    ),
)
"""The knobs the search may turn on a block workload, each to one value."""

NIC_BASELINE: dict[str, Any] = {"iommu": "on", "page_bytes": 4096}
"""A NIC's DMA today where the user states nothing else: through the IOMMU in 4 KiB pages, as
the Linux DMA API maps a driver's buffers; the buffers' node and the read request size are the
workload's and the files'."""

HUGEPAGE_HOW = (
    "back the rings and buffers with {size} hugepages and map them through VFIO (DPDK, SPDK) "
    "or a driver that maps hugepage-backed buffers, so that each IOMMU entry maps a whole {size}"
)

MPS_KEY = "bus.pcie.max_payload_bytes"
TAGS_KEY = "bus.pcie.max_outstanding_read_requests"
FETCH_KEY = "device_dma.descriptors_per_fetch"
COMPLETIONS_KEY = "device_dma.completions_per_write"
BATCH_KEYS = (FETCH_KEY, COMPLETIONS_KEY)

NIC_KNOBS: tuple[Knob, ...] = (
    Knob(
        "IOMMU passthrough",
        "iommu",
        "off",
        "kernel parameter iommu.passthrough=1 (x86: iommu=pt), or per group: "
        "echo identity > /sys/kernel/iommu_groups/N/type (device unbound)",
        "a kernel with IOMMU passthrough support; the device must be trusted",
    ),
    Knob(
        "2 MiB IOMMU pages",
        "page_bytes",
        2 << 20,
        HUGEPAGE_HOW.format(size="2 MiB"),
        "an IOMMU that maps 2 MiB pages (the host's iommu_hw.max_page_bytes); buffers in hugepages",
    ),
    Knob(
        "1 GiB IOMMU pages",
        "page_bytes",
        1 << 30,
        HUGEPAGE_HOW.format(size="1 GiB"),
        "an IOMMU that maps 1 GiB pages (the host's iommu_hw.max_page_bytes); buffers in hugepages",
    ),
    Knob(
        "buffers in the device's NUMA node",
        "memory",
        "local",
        "allocate rings and buffers on the device's node (numactl --membind, the driver's "
        "node-local allocation) and steer its interrupts there (IRQ affinity)",
        "memory on the device's node",
    ),
    Knob(
        "Max_Read_Request_Size 4096",
        "bus.pcie.max_read_request_bytes",
        4096,
        "setpci -s BDF CAP_EXP+0x08.w=0x5000:0x7000 (Device Control: MRRS 4096 bytes)",
        "always (a device's read request size is software's to set)",
    ),
)
"""The knobs the search may turn on a NIC's DMA, each to one value; :func:`link_knobs` adds
those whose value is the host's and the device's (Max_Payload_Size, 10-bit tags)."""


BATCHING = (
    (
        FETCH_KEY,
        "descriptor batching, {n} per fetch",
        "ring the doorbell once per burst of {n} or more packets, so the NIC reads {n} "
        "descriptors in one request: the kernel does so under load (xmit_more), a poll-mode "
        "driver by its transmit burst size",
        "a device that reads descriptors in bursts (the device file's range reaches it)",
    ),
    (
        COMPLETIONS_KEY,
        "completion batching, {n} per write",
        "let the NIC report {n} sends in one completion write (completion coalescing or "
        "compression where the driver offers it: ethtool -C IFACE tx-frames N, or the "
        "driver's own flag)",
        "a device that coalesces completions (the device file's range reaches it)",
    ),
)
"""The batching knobs: a device file's key, the knob's name, how to set it and what allows it
(``{n}``: the top of the device's range)."""


def link_knobs(caps: Mapping[str, Any]) -> tuple[Knob, ...]:
    """The link's knobs whose value comes from the two ends (``caps``, from
    :func:`host_caps`): Max_Payload_Size raised to the largest both support, and 10-bit tags
    where the device is a 10-Bit Tag Requester and the root port a Completer (a device or
    root port that is not never gets the knob)."""
    out = []
    if MPS_KEY in caps:
        out.append(
            Knob(
                "Max_Payload_Size to the largest both ends support",
                MPS_KEY,
                caps[MPS_KEY],
                "kernel parameter pci=pcie_bus_perf (each device's Max_Payload_Size set as large "
                "as it and its parent support), or setpci on the device and its root port: "
                "Device Control bits 7:5",
                "always (the trained value is the lower of the two ends' Max_Payload_Size "
                "Supported)",
            )
        )
    if caps.get("ten_bit_reads"):
        out.append(
            Knob(
                "10-bit tags",
                TAGS_KEY,
                caps["ten_bit_reads"],
                "set 10-Bit Tag Requester Enable in the device's Device Control 2 (setpci -s BDF "
                "CAP_EXP+0x28.w=0x1000:0x1000), where the kernel has not set it",
                "the device a 10-Bit Tag Requester and the root port a 10-Bit Tag Completer "
                "(Device Capabilities 2, bits 17 and 16)",
            )
        )
    hi = caps.get("batch_hi", {})
    for key, name, how, allowed in BATCHING:
        n = hi.get(key, 0)
        if n > caps.get(key, n):
            out.append(Knob(name.format(n=n), key, n, how.format(n=n), allowed))
    return tuple(out)


MAP_BASELINE: dict[str, Any] = {"flush": "strict", "allocator": "magazines+rbtree"}
"""A map-heavy driver today: the Linux DMA layer in strict mode with its cached red-black tree
allocator (as :data:`BASELINE`)."""

MAP_KNOBS: tuple[Knob, ...] = (
    Knob(
        "lazy invalidation",
        "flush",
        "lazy",
        "kernel parameter iommu.strict=0, or per group: echo DMA-FQ > "
        "/sys/kernel/iommu_groups/N/type",
        "an IOMMU driver with flush-queue support",
    ),
    *(k for k in KNOBS if k.key == "allocator"),
    Knob(
        "magazines in front of a bitmap IOVA allocator",
        "allocator",
        "magazines+bitmap",
        "not a kernel setting: a VMM or user-space driver that embeds dmalab-iova "
        "(AllocatorKind::Magazines(Bitmap))",
        "the mapping layer is yours (a VMM or a user-space driver)",
    ),
)
"""The knobs the search may turn on a map-heavy driver, each to one value."""

VHOST_BASELINE: dict[str, Any] = {"policy": "cpu-only"}
"""A vhost backend today: every copy on its core, as vhost-net and DPDK's vhost library do
without an asynchronous copy engine; the mbuf size and the placement are the workload's."""

VHOST_ENGINE_HOW = (
    "DPDK vhost's asynchronous data path with a DMA device driving the copies "
    "(rte_vhost_async_dma_configure; the vhost sample application's --dmas option)"
)

VHOST_KNOBS: tuple[Knob, ...] = (
    Knob(
        "copies on the copy engine",
        "policy",
        "engine-only",
        VHOST_ENGINE_HOW,
        "a copy engine in the host's copy-engine slot that the backend can drive",
    ),
    Knob(
        "copies of 2 KiB and more on the copy engine",
        "policy",
        "threshold",
        VHOST_ENGINE_HOW + ", copies shorter than 2048 bytes (3072 with the engine in the "
        "other node) left on the core: a length threshold of the application's own",
        "a copy engine in the host's copy-engine slot that the backend can drive",
    ),
    Knob(
        "each copy where it finishes soonest (dmalab's planner)",
        "policy",
        "planner",
        "not a setting of today's backends: a backend that places each copy by its modelled "
        "cost, each engine's backlog and placement (dmalab's planner, either node's engine)",
        "a copy engine in the host's copy-engine slot; a backend that embeds the planner",
        settable=False,
    ),
    Knob(
        "4 KiB mbufs",
        "mbuf_bytes",
        4096,
        "the mbuf pool's data room (rte_pktmbuf_pool_create's data_room_size; testpmd "
        "--mbuf-size=4096)",
        "a backend whose mbuf pool the user sizes (DPDK)",
    ),
    Knob(
        "8 KiB mbufs",
        "mbuf_bytes",
        8192,
        "the mbuf pool's data room (rte_pktmbuf_pool_create's data_room_size; testpmd "
        "--mbuf-size=8192)",
        "a backend whose mbuf pool the user sizes (DPDK)",
    ),
    Knob(
        "guest memory and buffers in the backend core's node",
        "placement",
        "local",
        "back the guest's memory on the core's node (QEMU -object memory-backend-file,...,"
        "host-nodes=N,policy=bind) and pin the backend thread there (taskset), with the copy "
        "engine of that node",
        "memory on the core's node",
    ),
)
"""The knobs the search may turn on a vhost backend, each to one value."""

MAP_PAIRS = 1024
"""Map and unmap pairs per CPU in a run of the search: enough for the flush queue and the
caches to reach their steady state, short enough for dozens of runs a minute."""


@dataclass
class Workload:
    """A workload as the user stated it: the run model's ``[workload]`` table (block), or the
    ``bench dma`` point and the rate asked (nic)."""

    spec: str
    kind: str
    table: dict[str, Any]
    rate_gbit_s: float = 0.0
    today: dict[str, Any] = field(default_factory=dict)
    """Settings of today's configuration the spec states (a NIC's ``mps=``)."""


NIC = re.compile(
    r"nic:(?P<rate>\d+(?:\.\d+)?)[Gg],(?P<size>\d+)[Bb]?"
    r"(?P<opts>(?:,(?:tx|rx|random|remote|window=\d+[KkMmGg]?|mps=\d+))*)"
)

SCALE = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}


def _once(spec: str, opts: list[str], words: Mapping[str, str]) -> None:
    """Refuse a workload spec that sets one of its options twice (``window=1G,window=4K``,
    ``rx,tx``, ``granule2,granule4``): the later one is never silently kept. An option is
    the name before ``=`` or its digits, or the setting a word stands for (``words``)."""
    seen: dict[str, str] = {}
    for o in opts:
        key = words.get(o) or re.sub(r"=.*|\d+$", "", o)
        if key in seen:
            raise ScenarioError(
                f"--workload {spec}: {key} given twice ({seen[key]}, then {o}); give it once"
            )
        seen[key] = o


def _parse_nic(spec: str) -> Workload | None:
    """``nic:RATEG,SIZE[B][,tx|rx][,window=N[K|M|G]][,random][,remote][,mps=N]``, or None."""
    m = NIC.fullmatch(spec.strip())
    if not m:
        return None
    opts = [o for o in m["opts"].split(",") if o]
    _once(spec, opts, {"tx": "direction", "rx": "direction"})
    window = 8 << 20
    for o in opts:
        if o.startswith("window="):
            n = o.removeprefix("window=")
            unit = n[-1].lower() if n[-1].isalpha() else ""
            window = int(n.rstrip("KkMmGg")) * SCALE[unit]
    size = int(m["size"])
    if not 1 <= size <= 1 << 20 or size > window:
        raise ScenarioError(
            f"--workload {spec}: packet size {size} bytes; valid: 1 to 1048576 and no larger "
            f"than the window ({window} bytes)"
        )
    table = {
        "direction": "write" if "rx" in opts else "read",
        "size_bytes": size,
        "offset_bytes": 0,
        "window_bytes": window,
        "access": "random" if "random" in opts else "seq",
        "memory": "remote" if "remote" in opts else "local",
        "cache": "warm",
    }
    rate = float(m["rate"])
    if not 0 < rate <= 1600:
        raise ScenarioError(f"--workload {spec}: rate {rate} Gbit/s; valid: above 0, to 1600")
    today: dict[str, Any] = {}
    for o in opts:
        if o.startswith("mps="):
            mps = int(o.removeprefix("mps="))
            if mps not in (128, 256, 512, 1024, 2048, 4096):
                raise ScenarioError(
                    f"--workload {spec}: mps={mps}; valid: today's Max_Payload_Size, one of "
                    "128, 256, 512, 1024, 2048, 4096 bytes"
                )
            today[MPS_KEY] = mps
    return Workload(spec, "nic", table, rate, today)


NVME = re.compile(
    r"nvme:(?P<drives>\d+)x(?P<size>\d+)(?P<unit>[KkMm]?)(?:,qd(?P<qd>\d+))?"
    r"(?:,threads(?P<threads>\d+))?(?:,queues(?P<queues>\d+))?(?:,sockets(?P<sockets>\d+))?"
    r"(?:,(?P<irq>irq))?(?:,(?P<op>read))?"
)


MAX_DRIVES = 256
"""The most drives a block workload takes (the simulator's ``workload.devices``)."""
MAX_THREADS = 1024
"""The most submitting threads (the simulator's ``workload.threads``)."""
THREADS_PER_DRIVE = 8
"""Submitting threads per drive where the spec names none."""

SPECS = (
    "nvme:DRIVESxSIZE[,qdDEPTH][,threadsN][,queuesN][,socketsN][,irq][,read] (such as "
    "nvme:8x4K,qd32) or "
    "vhost:PACKET[K][,mbufN[K]][,local|engine-remote|min-remote|max-remote] (such as "
    "vhost:64K) or "
    "nic:RATEG,SIZE[B][,tx|rx][,window=N[K|M|G]][,random][,remote][,mps=N] (such as "
    "nic:100G,64B) or "
    "map:THREADS[,granuleN][,bitsN][,to-device|from-device|bidirectional] (such as map:16)"
)
"""The workload specs ``advise`` reads."""


MAP = re.compile(
    r"map:(?P<threads>\d+)(?P<opts>(?:,(?:granule\d+|bits\d+|to-device|from-device|"
    r"bidirectional))*)"
)


def _parse_map(spec: str) -> Workload | None:
    """``map:THREADS[,granuleN][,bitsN][,to-device|from-device|bidirectional]``, or None."""
    m = MAP.fullmatch(spec.strip())
    if not m:
        return None
    table: dict[str, Any] = {
        "threads": int(m["threads"]),
        "granule_pages": 1,
        "dma_bits": 32,
        "direction": "bidirectional",
        "maps_per_thread": MAP_PAIRS,
    }
    opts = [o for o in m["opts"].split(",") if o]
    _once(spec, opts, {d: "direction" for d in ("to-device", "from-device", "bidirectional")})
    for o in opts:
        if o.startswith("granule"):
            table["granule_pages"] = int(o.removeprefix("granule"))
        elif o.startswith("bits"):
            table["dma_bits"] = int(o.removeprefix("bits"))
        else:
            table["direction"] = o
    return Workload(spec, "map", table)


VHOST_PLACEMENTS = ("local", "engine-remote", "min-remote", "max-remote")
"""Where the core, the engine and the buffers sit (``vhost``'s placements): everything in the
core's node; the engine and memory in the other; the guest's memory in the other; both
buffers in the other."""

VHOST_POLICIES = ("cpu-only", "engine-only", "threshold", "planner")
"""Who copies in a vhost backend (``vhost_run``'s policies): its core, the copy engine, the
seed's length thresholds, or dmalab's planner."""

VHOST = re.compile(
    r"vhost:(?P<packet>\d+)(?P<unit>[Kk]?)(?:,mbuf(?P<mbuf>\d+)(?P<munit>[Kk]?))?"
    rf"(?:,(?P<placement>{'|'.join(VHOST_PLACEMENTS)}))?"
)

VHOST_PACKETS = 2000
"""Packets a vhost run of the search moves: far more than an engine ring's 1024 copies in
flight of 2 KiB mbufs (32 a 64 KiB packet), so every ring reaches its steady state."""


def _parse_vhost(spec: str) -> Workload | None:
    """``vhost:PACKET[K][,mbufN[K]][,PLACEMENT]``, or None."""
    m = VHOST.fullmatch(spec.strip())
    if not m:
        return None
    packet = int(m["packet"]) * (1024 if m["unit"] else 1)
    mbuf = int(m["mbuf"]) * (1024 if m["munit"] else 1) if m["mbuf"] else 2048
    if not 64 <= packet <= 1 << 20:
        raise ScenarioError(f"--workload {spec}: packet of {packet} bytes; valid: 64 to 1048576")
    if not 64 <= mbuf <= 1 << 16:
        raise ScenarioError(f"--workload {spec}: mbuf of {mbuf} bytes; valid: 64 to 65536")
    table = {
        "packet_bytes": packet,
        "mbuf_bytes": mbuf,
        "placement": m["placement"] or "local",
        "packets": VHOST_PACKETS,
    }
    return Workload(spec, "vhost", table)


def parse_workload(spec: str, ios: int = ADVISE_IOS) -> Workload:
    """A short workload spec:

    - ``nvme:DRIVESxSIZE[,qdDEPTH][,threadsN][,queuesN][,socketsN][,irq][,read]``: random
      reads of SIZE bytes (K or M suffix) to DRIVES drives, DEPTH in flight per thread, N
      submitting threads (default 8 per drive, depth 32), N queues per drive shared by the
      threads (default one per thread), threads and drives spread over N sockets (default 1),
      and with ``irq`` each I/O completed on the CPU its queue's interrupt lands on rather than
      its submitter;
    - ``nic:RATEG,SIZE[B][,tx|rx][,window=N][,random][,remote][,mps=N]``: a NIC moving
      packets of SIZE bytes at up to RATE Gbit/s, reading them from memory (tx, the default)
      or writing them (rx), over buffers spanning the window (default 8 MiB), in ring order or
      at random, in the device's NUMA node or the other, with today's Max_Payload_Size N where
      it is below the trained value;
    - ``map:THREADS[,granuleN][,bitsN][,DIRECTION]``: THREADS CPUs mapping and unmapping
      buffers of N pages (default 1) under a DMA mask of N bits (default 32), as the kernel's
      DMA map benchmark does;
    - ``vhost:PACKET[K][,mbufN[K]][,PLACEMENT]``: a vhost backend on one core moving packets
      of PACKET bytes (64 KiB with TSO) into a guest, cut into mbufs (default 2 KiB), with the
      guest's memory and the buffers placed as ``vhost`` names it (default local).

    Other kinds are refused, naming what is known."""
    nic = _parse_nic(spec) or _parse_map(spec) or _parse_vhost(spec)
    if nic is not None:
        return nic
    m = NVME.fullmatch(spec.strip())
    if not m:
        raise ScenarioError(f"--workload {spec}: expected {SPECS}")
    scale = {"": 1, "k": 1024, "m": 1 << 20}[m["unit"].lower()]
    drives = int(m["drives"])
    # Named in the user's own terms (the scenario's keys would name workload.threads for a
    # drive count, as the threads follow the drives).
    if not 1 <= drives <= MAX_DRIVES:
        raise ScenarioError(f"--workload {spec}: DRIVES is {drives}; valid: 1..={MAX_DRIVES}")
    if not m["threads"] and THREADS_PER_DRIVE * drives > MAX_THREADS:
        raise ScenarioError(
            f"--workload {spec}: {THREADS_PER_DRIVE} submitting threads per drive make "
            f"{THREADS_PER_DRIVE * drives}, above {MAX_THREADS}: give threadsN "
            f"(N in 1..={MAX_THREADS})"
        )
    table: dict[str, Any] = {
        "kind": "block",
        "devices": drives,
        "io_bytes": int(m["size"]) * scale,
        "queue_depth": int(m["qd"] or 32),
        "threads": int(m["threads"] or THREADS_PER_DRIVE * drives),
        "ios": ios,
    }
    table["warm_up_ios"] = WARM_UP_WAVES * table["threads"] * table["queue_depth"]
    if m["queues"]:
        table["queues_per_device"] = int(m["queues"])
    if m["sockets"]:
        table["sockets"] = int(m["sockets"])
    if m["irq"]:
        table["completion"] = "queue-interrupt"
    return Workload(spec, "block", table)


WORKLOAD_KEYS: dict[str, dict[str, type]] = {
    "nvme": {
        "drives": int,
        "io_bytes": int,
        "queue_depth": int,
        "threads": int,
        "queues_per_device": int,
        "sockets": int,
        "completion": str,
    },
    "nic": {
        "rate_gbit_s": float,
        "size_bytes": int,
        "direction": str,
        "window_bytes": int,
        "access": str,
        "memory": str,
        "max_payload_bytes": int,
    },
    "map": {"threads": int, "granule_pages": int, "dma_bits": int, "direction": str},
    "vhost": {"packet_bytes": int, "mbuf_bytes": int, "placement": str},
}
"""The keys a workload file's ``[workload]`` takes, by its ``kind``."""


def read_workload_file(path: str, ios: int = ADVISE_IOS) -> tuple[Workload, dict[str, Any]]:
    """A workload written as TOML: ``[workload]`` with ``kind = "nvme" | "nic" | "map"`` and
    that kind's keys (:data:`WORKLOAD_KEYS`; those left out take the short spec's defaults),
    and an optional ``[today]`` table of today's configuration (``flush``, ``allocator``,
    ``translation``, ``high_water`` for nvme and map). Errors name the file and the key."""
    import tomllib

    from dmalab.files import reason

    try:
        with open(path, "rb") as f:
            doc = tomllib.load(f)
    except OSError as e:
        raise ScenarioError(f"--workload {path}: {reason(e)}") from None
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise ScenarioError(f"--workload {path}: not a readable TOML file: {e}") from None
    w = doc.get("workload")
    if not isinstance(w, dict):
        raise ScenarioError(
            f"--workload {path}: needs a [workload] table with kind = nvme|nic|map|vhost"
        )
    kind = w.get("kind")
    if kind not in WORKLOAD_KEYS:
        raise ScenarioError(
            f"--workload {path}: workload.kind is {kind!r}; valid: {', '.join(WORKLOAD_KEYS)}"
        )
    keys = WORKLOAD_KEYS[kind]
    for k, v in w.items():
        if k == "kind":
            continue
        if k not in keys:
            raise ScenarioError(
                f"--workload {path}: workload.{k} is not a key of a {kind} workload; valid: "
                f"{', '.join(keys)}"
            )
        want = keys[k]
        ok = (
            isinstance(v, str)
            if want is str
            else isinstance(v, int | float) and not isinstance(v, bool)
        )
        if not ok or (want is int and not isinstance(v, int)):
            raise ScenarioError(
                f"--workload {path}: workload.{k} is {v!r}; expected {want.__name__}"
            )
    extra = set(doc) - {"workload", "today"}
    if extra:
        raise ScenarioError(
            f"--workload {path}: unknown table {sorted(extra)[0]}; valid: workload, today"
        )
    today = doc.get("today", {})
    if not isinstance(today, dict) or (kind == "nic" and today):
        raise ScenarioError(
            f"--workload {path}: [today] holds nvme and map workloads' mapping keys and a vhost "
            "workload's policy; a nic workload states its setup in [workload]"
        )
    if kind == "nvme":
        spec = (
            f"nvme:{w.get('drives', 1)}x{w.get('io_bytes', 4096)},qd{w.get('queue_depth', 32)}"
            + (f",threads{w['threads']}" if "threads" in w else "")
            + (f",queues{w['queues_per_device']}" if "queues_per_device" in w else "")
            + (f",sockets{w['sockets']}" if "sockets" in w else "")
        )
        completion = w.get("completion", "submitter")
        if completion not in ("submitter", "queue-interrupt"):
            raise ScenarioError(
                f"--workload {path}: workload.completion is {completion!r}; valid: submitter, "
                "queue-interrupt"
            )
        spec += ",irq" if completion == "queue-interrupt" else ""
    elif kind == "nic":
        opts = [
            "rx" if w.get("direction", "tx") == "rx" else "tx",
            f"window={w.get('window_bytes', 8 << 20)}",
        ]
        opts += [o for o in ("random", "remote") if o in (w.get("access"), w.get("memory"))]
        if "max_payload_bytes" in w:
            opts.append(f"mps={w['max_payload_bytes']}")
        for key, valid in (
            ("direction", ("tx", "rx")),
            ("access", ("seq", "random")),
            ("memory", ("local", "remote")),
        ):
            if key in w and w[key] not in valid:
                raise ScenarioError(
                    f"--workload {path}: workload.{key} is {w[key]!r}; valid: {', '.join(valid)}"
                )
        spec = f"nic:{w.get('rate_gbit_s', 100)}G,{w.get('size_bytes', 64)}B," + ",".join(opts)
    elif kind == "vhost":
        place = w.get("placement", "local")
        spec = f"vhost:{w.get('packet_bytes', 65536)},mbuf{w.get('mbuf_bytes', 2048)},{place}"
        if not VHOST.fullmatch(spec):
            raise ScenarioError(
                f"--workload {path}: workload.placement is {place!r}; valid: "
                f"{', '.join(VHOST_PLACEMENTS)}"
            )
    else:
        spec = (
            f"map:{w.get('threads', 1)},granule{w.get('granule_pages', 1)},"
            f"bits{w.get('dma_bits', 32)},{w.get('direction', 'bidirectional')}"
        )
    workload = parse_workload(spec, ios)
    workload.spec = path
    return workload, dict(today)


def protection(report: Mapping[str, Any]) -> tuple[str, str]:
    """The protection a run's configuration leaves, by what the configuration allows (not by
    what one run happened to see): ``none`` where the device reaches all memory, ``lazy`` where
    an unmapped page stays mapped until a deferred flush, ``strict`` otherwise; with a line
    giving the exposure this run measured. A NIC's DMA (``bench dma``) through the IOMMU is
    mapped per buffer and unmapped strictly; a larger IOMMU page maps the rest of its page
    too."""
    if report.get("kind") == "vhost":
        rec = report["record"]
        if rec["engine_copies"]:
            return "strict", (
                "the engine reaches only what the backend maps for it through the IOMMU (the "
                "guest's memory and its own buffers, as VFIO maps them), as the core did"
            )
        return "strict", "no device DMA: the backend's core does every copy"
    if report.get("kind") == "map":
        if report["record"]["flush"] == "lazy":
            return "lazy", "an unmapped page stays reachable until the flush queue's next flush"
        return "strict", "every unmap invalidates the IOTLB before it returns"
    if report.get("kind") == "nic":
        rec = report["record"]
        if rec["iommu"] == "off":
            return "none", "the device reaches all memory"
        page = rec["page_bytes"]
        if page > 4096:
            return "strict", (
                f"each buffer's whole {size_text(page)} IOMMU page is mapped with it (no stale "
                "entry after an unmap)"
            )
        return "strict", "each buffer mapped in 4 KiB pages, unmapped strictly"
    m = report["mapper"]
    if m["all_memory_reachable"] or report["translation"] in ("passthrough", "none"):
        return "none", "the device reaches all memory"
    exp = m["exposure"]
    seen = (
        f"{exp['pages_exposed']:,} unmapped pages seen reachable, up to "
        f"{exp['max_window_ps'] / 1e6:.1f} us"
    )
    flush = report["flush"]
    if flush["policy"] != "strict":
        bound = flush["timeout"] / 1e6
        return "lazy", (
            f"an unmapped page stays reachable until a flush: every {flush['high_water']} "
            f"unmaps or {bound:,.0f} us at most; this run: {seen}"
        )
    if exp["pages_exposed"]:
        return "lazy", seen
    return "strict", "no page reachable after its unmap returns"


def figure(report: Mapping[str, Any], goal: str) -> float:
    """The goal's figure of a run: ops/s, p99 latency (us), or CPU time per operation (us, the
    CPU-side components of the breakdown). For a NIC: the Gbit/s its DMA moves, up to the rate
    asked, or one DMA's latency (ns)."""
    if report.get("kind") == "vhost":
        rec = report["record"]
        if goal == "throughput":
            return float(rec["gbit_per_s"])
        packet_us = vhost_packet_us(rec)
        return packet_us * float(rec["core_busy_fraction"]) if goal == "cpu" else packet_us
    if report.get("kind") == "map":
        rec = report["record"]
        pair = float(rec["map_us"]) + float(rec["unmap_us"])
        if goal == "throughput":
            return rec["threads"] * 1e6 / pair if pair else 0.0
        return pair
    if report.get("kind") == "nic":
        rec = report["record"]
        if goal == "throughput":
            return min(float(rec["bandwidth_gbit_s"]), float(report["rate_gbit_s"]))
        return float(rec["latency_ns"])
    if goal == "throughput":
        return float(report["ops_per_s"])
    if goal == "latency":
        return float(report["latency_p99_us"])
    return sum(float(v) for k, v in report["breakdown_us"].items() if k not in DEVICE_PARTS)


def vhost_packet_us(rec: Mapping[str, Any]) -> float:
    """A vhost run's time per packet in its steady state, us (its packets over its rate)."""
    bits = float(rec["scenario"]["packet_bytes"]) * 8
    rate = float(rec["gbit_per_s"])
    return bits / (rate * 1e3) if rate else float("inf")


DEVICE_PARTS = frozenset({"device", "translation (IOTLB misses)"})
"""Breakdown components a device, not a CPU, spends: left out of the CPU goal."""


def gain(base: float, new: float, goal: str) -> float:
    """The relative gain of ``new`` over ``base`` (positive is better; within :data:`NOISE`
    of zero, zero)."""
    if goal == "throughput":
        g = new / base - 1.0 if base else 0.0
    else:
        g = base / new - 1.0 if new else 0.0
    return 0.0 if abs(g) < NOISE else g


def limiting(report: Mapping[str, Any]) -> str:
    """The two largest parts of an operation's time, of its whole: what limits it. For a NIC:
    the part that limits its DMA, or the rate asked where the DMA keeps up with it."""
    if report.get("kind") == "map":
        rec = report["record"]
        parts = [("map: " + n, v) for n, v in rec["map_parts"]]
        parts += [("unmap: " + n, v) for n, v in rec["unmap_parts"]]
        top = sorted(parts, key=lambda kv: (-kv[1], kv[0]))[:2]
        named = ", ".join(f"{n} {v:.3f} us" for n, v in top if v > 0)
        pair = float(rec["map_us"]) + float(rec["unmap_us"])
        return (
            f"{named} of {pair:.3f} us a pair (invalidation busy {rec['invalidation_busy']:.0%}, "
            f"allocator lock busy {rec['allocator_lock_busy']:.0%})"
        )
    if report.get("kind") == "vhost":
        rec = report["record"]
        busy = float(rec["core_busy_fraction"])
        parts = sorted(rec["core_ns_per_packet"].items(), key=lambda kv: (-kv[1], kv[0]))
        names = {"packet": "packet work", "engine_handoff": "engine hand-off"}
        core = ", ".join(f"{names.get(n, n)} {ns / 1e3:.2f} us" for n, ns in parts if ns > 0)
        per = f"{vhost_packet_us(rec):.2f} us a packet; the core's: {core}"
        if busy >= 0.99:
            return f"the backend core, busy {busy:.0%} ({per})"
        return f"the copy engine, the core busy {busy:.0%} ({per})"
    if report.get("kind") == "nic":
        rec = report["record"]
        bw, rate = float(rec["bandwidth_gbit_s"]), float(report["rate_gbit_s"])
        if bw >= rate:
            return f"the rate asked, {rate:g} Gbit/s (the DMA could move {bw:.1f})"
        miss = rec.get("iotlb_miss_rate")
        iotlb = f", IOTLB miss rate {miss:.2f}" if miss is not None else ""
        return f"{rec['limit']} at {bw:.1f} Gbit/s of the {rate:g} asked{iotlb}"
    parts = report["breakdown_us"]
    top = sorted(parts.items(), key=lambda kv: (-kv[1], kv[0]))[:2]
    named = ", ".join(f"{name} {us:.3f} us" for name, us in top if us > 0)
    return f"{named} of {sum(parts.values()):.3f} us an operation"


def _parts(report: Mapping[str, Any]) -> tuple[dict[str, float], str]:
    """A run's parts that ``moved`` compares, and their unit: an operation's time by component
    (block, us), a pair's (map, us), the core's time per packet (vhost, us), or each part's
    busy share (nic, %)."""
    kind = report.get("kind")
    if kind == "nic":
        busy = report["record"]["utilisation"]
        return {name: 100.0 * float(b) for name, b in busy}, "% busy"
    if kind == "vhost":
        per = report["record"]["core_ns_per_packet"]
        names = {"packet": "packet work", "engine_handoff": "engine hand-off"}
        return {names.get(k, k): float(v) / 1e3 for k, v in per.items()}, "us"
    if kind == "map":
        rec = report["record"]
        out: dict[str, float] = {}
        for side in ("map", "unmap"):
            for name, v in rec[f"{side}_parts"]:
                out[f"{side}: {name}"] = float(v)
        return out, "us"
    return {k: float(v) for k, v in report["breakdown_us"].items()}, "us"


def moved(before: Mapping[str, Any], after: Mapping[str, Any], top: int = 2) -> str:
    """The parts a change moves most, as ``name before -> after``: what explains its gain in
    the breakdown the command prints."""
    a, unit = _parts(before)
    b, _ = _parts(after)
    floor = 0.5 if unit == "% busy" else 0.01
    deltas = sorted(
        ((abs(b.get(k, 0.0) - a.get(k, 0.0)), k) for k in a.keys() | b.keys()),
        key=lambda dk: (-dk[0], dk[1]),
    )
    fmt = "{:.0f}" if unit == "% busy" else "{:.2f}"
    out = [
        f"{k} {fmt.format(a.get(k, 0.0))} -> {fmt.format(b.get(k, 0.0))} {unit}"
        for d, k in deltas[:top]
        if d >= floor
    ]
    return "; ".join(out) or "no part moves"


class Advisor:
    """Runs configurations of one workload on one host, nominal and over shared draws."""

    def __init__(
        self,
        host: str,
        workload: Workload,
        goal: str,
        *,
        samples: int = 16,
        seed: int = 1,
        workers: int | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> None:
        from dmalab import intervals

        self.host, self.workload, self.goal = host, workload, goal
        self.samples = samples
        self.draws = intervals.draws(host, samples=samples, seed=seed)[2] if samples else []
        self.workers = workers
        self.progress = progress
        self.runs = 0
        self.planned = 1
        """Configurations the search has planned so far (today's, then each candidate)."""
        self._cache: dict[
            tuple[tuple[str, Any], ...], tuple[dict[str, Any], list[float | None]]
        ] = {}

    def scenario(self, mapping: Mapping[str, Any]) -> dict[str, Any]:
        """The run scenario of this host, workload and mapping (a ``workload.KEY`` of the
        mapping is a workload setting, such as where completions run)."""
        table = dict(self.workload.table)
        ours = {}
        for k, v in mapping.items():
            if k.startswith("workload."):
                table[k.removeprefix("workload.")] = v
            else:
                ours[k] = v
        return {"platform": self.host, "mapping": ours, "workload": table}

    def nic_record(self, config: Mapping[str, Any], d: Mapping[str, Any] | None) -> dict[str, Any]:
        """A NIC configuration's ``bench dma`` point on this host, with draws ``d``: the
        configuration's point fields (iommu, page size, memory) and parameters (dotted paths,
        set over the draws)."""
        from dmalab import devdma

        point = dict(self.workload.table)
        params = {k: v for k, v in config.items() if "." in k}
        point |= {k: v for k, v in config.items() if "." not in k}
        (rec,) = devdma.measure(self.host, [point], draws=dict(d or {}) | params or None)
        return {"kind": "nic", "record": rec, "rate_gbit_s": self.workload.rate_gbit_s}

    def measure(self, mapping: Mapping[str, Any]) -> tuple[dict[str, Any], list[float | None]]:
        """The nominal report and the goal's figure at every draw (cached per mapping; None at
        a draw where the model refuses the configuration)."""
        key = tuple(sorted(mapping.items()))
        if key not in self._cache:
            spec = self.scenario(mapping)
            todo: list[dict[str, Any] | None] = [None, *self.draws]

            def one(d: dict[str, Any] | None) -> Any:  # noqa: ANN401 - a RunReport
                try:
                    if self.workload.kind == "nic":
                        return self.nic_record(mapping, d)
                    if self.workload.kind == "vhost":
                        t = self.workload.table | dict(mapping)
                        vhost = _native.vhost_run(
                            self.host,
                            t["packet_bytes"],
                            t["mbuf_bytes"],
                            t["placement"],
                            t["policy"],
                            t["packets"],
                            draws=d,
                        )
                        return {"kind": "vhost", "record": vhost}
                    if self.workload.kind == "map":
                        from dmalab import mapbench

                        rec = mapbench.run(self.host, **self.workload.table, **mapping, draws=d)
                        return {"kind": "map", "record": rec}
                    return sim.run(spec, name="advise", draws=d)
                except DmalabError:
                    # A draw where the host cannot take this configuration (its IOMMU drawn
                    # without the page size, say): the knob cannot be set there, so it changes
                    # nothing in that draw. At the files' values the error stands.
                    if d is None:
                        raise
                    return None

            import os

            n = self.workers or os.cpu_count() or 1
            with ThreadPoolExecutor(max_workers=n) as pool:
                reports = list(pool.map(one, todo))
            self.runs += len(todo)
            if self.progress:
                self.progress(len(self._cache) + 1, max(self.planned, len(self._cache) + 1))
            nominal = dict(reports[0])
            drawn = [None if r is None else figure(r, self.goal) for r in reports[1:]]
            self._cache[key] = (nominal, drawn)
        return self._cache[key]


def applies(knob: Knob, mapping: Mapping[str, Any], caps: Mapping[str, Any] | None = None) -> bool:
    """Whether ``knob`` changes ``mapping`` and makes sense on it, given the host's
    capabilities ``caps`` (:func:`host_caps`): a flush-queue depth only with per-CPU flush
    queues; no flush or allocator change without translation; an IOMMU page size only with
    the IOMMU on, and only one the host's IOMMU maps; a vhost copy policy other than the
    core's only where the host has a copy engine; a link setting only where it raises today's
    value (today's is the mapping's, else the files')."""
    caps = caps or {}
    if mapping.get(knob.key) == knob.value:
        return False
    if knob.key == "policy":
        return bool(caps.get("engine")) or knob.value == "cpu-only"
    if knob.key == "page_bytes":
        return mapping.get("iommu") == "on" and int(knob.value) <= int(caps.get("max_page", 4096))
    if knob.key.startswith("workload."):
        now = mapping.get(
            knob.key, caps.get("workload", {}).get(knob.key.removeprefix("workload."))
        )
        return now is not None and now != knob.value
    if knob.key.startswith(("bus.pcie.", "device_dma.")):
        now = mapping.get(knob.key, caps.get(knob.key))
        return now is None or int(knob.value) > int(now)
    if knob.key == "high_water":
        return mapping.get("flush") == "per-cpu"
    if knob.key in ("flush", "allocator") and "translation" in mapping:
        return mapping.get("translation") == "page-table"
    return True


def allowed_by(level: str, keep: str) -> bool:
    """Whether a configuration whose protection is ``level`` may be advised under ``keep``."""
    need = {"strict": LEVEL["strict"], "lazy": LEVEL["lazy"], "any": LEVEL["none"]}[keep]
    return LEVEL[level] >= need


def advise(
    host: str,
    workload: Workload,
    *,
    goal: str = "throughput",
    keep: str = "any",
    base: Mapping[str, Any] | None = None,
    samples: int = 16,
    seed: int = 1,
    workers: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """The advice for ``workload`` on ``host`` (see the module's description): ``singles`` (each
    allowed single change with its gain, interval and protection, best first), ``steps`` (the
    greedy combination, in the order to apply them), the limiting part before and after, and a
    paragraph for a ticket."""
    import numpy as np

    if goal not in GOALS:
        raise ScenarioError(f"--goal {goal}: valid: {', '.join(GOALS)}")
    nic = workload.kind == "nic"
    if nic and goal == "cpu":
        raise ScenarioError(
            "--goal cpu: a NIC's DMA costs no CPU in the model it runs on; valid here: "
            "throughput, latency"
        )
    if keep not in PROTECTIONS:
        raise ScenarioError(f"--keep-protection {keep}: valid: {', '.join(PROTECTIONS)}")
    adv = Advisor(
        host, workload, goal, samples=samples, seed=seed, workers=workers, progress=progress
    )
    kind = workload.kind
    caps = host_caps(host) | {"workload": workload.table}
    knobs = (
        NIC_KNOBS + link_knobs(caps)
        if nic
        else {"map": MAP_KNOBS, "vhost": VHOST_KNOBS}.get(kind, KNOBS)
    )
    starts: dict[str, dict[str, Any]] = {
        "nic": NIC_BASELINE,
        "map": MAP_BASELINE,
        "vhost": VHOST_BASELINE,
    }
    today = dict(starts.get(kind, BASELINE)) | dict(base or {})
    if nic:
        today.setdefault("memory", workload.table["memory"])
        today |= workload.today
    if kind == "vhost":
        for key in ("mbuf_bytes", "placement"):
            today.setdefault(key, workload.table[key])
    start, start_drawn = adv.measure(today)
    start_level, start_why = protection(start)

    def rate(
        mapping: dict[str, Any], ref: dict[str, Any], ref_drawn: list[float | None]
    ) -> dict[str, Any]:
        rep, drawn = adv.measure(mapping)
        level, why = protection(rep)
        g = gain(figure(ref, goal), figure(rep, goal), goal)
        entry: dict[str, Any] = {
            "gain": g,
            "figure": figure(rep, goal),
            "protection": level,
            "protection_detail": why,
            "limit": limiting(rep),
            "moved": moved(ref, rep),
            "report": rep,
        }
        if drawn:
            # A draw the model refused (either side) has no gain: left out of the interval,
            # not counted as a gain of zero; kept as None so that draws stay paired by index.
            per: list[float | None] = [
                None if b is None or n is None else gain(b, n, goal)
                for b, n in zip(ref_drawn, drawn, strict=True)
            ]
            ran = [p for p in per if p is not None]
            if ran:
                lo, hi = (float(x) for x in np.percentile(ran, (5.0, 95.0)))
                entry |= {"gain_lo": lo, "gain_hi": hi, "certain": lo > 0 or hi < 0}
            else:
                entry["certain"] = False
            entry |= {"per": per, "refused_draws": len(per) - len(ran)}
        else:
            entry["certain"] = True
        return entry

    def worth(e: dict[str, Any]) -> bool:
        # A step gains at least MIN_GAIN at the files' values and at the 95th percentile, and
        # loses nothing at the 5th: a certain gain, or an uncertain one that never hurts
        # (ranked after). One whose draws nearly all gain less than MIN_GAIN is no step.
        g = e["gain"]
        return bool(g >= MIN_GAIN and e.get("gain_hi", g) >= MIN_GAIN and e.get("gain_lo", g) >= 0)

    def candidates(
        mapping: dict[str, Any], ref: dict[str, Any], drawn: list[float | None]
    ) -> list[dict[str, Any]]:
        out = []
        todo = [k for k in knobs if applies(k, mapping, caps)]
        adv.planned += len(todo)
        for k in todo:
            trial = mapping | {k.key: k.value}
            if k.key == "flush" and k.value == "per-cpu":
                trial.setdefault("high_water", 256)
            e = rate(trial, ref, drawn) | {"knob": k, "mapping": trial}
            e["allowed"] = allowed_by(e["protection"], keep) and k.settable
            e["why_not"] = (
                "" if e["allowed"] else "protection" if k.settable else "no software sets it yet"
            )
            out.append(e)
        return rank(out, knobs)

    singles = candidates(today, start, start_drawn)
    steps: list[dict[str, Any]] = []
    current, cur_rep, cur_drawn = today, start, start_drawn
    for _ in range(len(knobs)):
        options = [e for e in candidates(current, cur_rep, cur_drawn) if e["allowed"]]
        best = next((e for e in options if worth(e)), None)
        if best is None:
            break
        steps.append(best)
        current = best["mapping"]
        cur_rep, cur_drawn = adv.measure(current)
    total = rate(current, start, start_drawn) if steps else None
    return {
        "host": host,
        "workload": workload.spec,
        "kind": workload.kind,
        "scenario_workload": workload.table,
        "goal": goal,
        "keep_protection": keep,
        "today": today,
        "today_figure": figure(start, goal),
        "today_protection": start_level,
        "today_protection_detail": start_why,
        "limit_before": limiting(start),
        "singles": singles,
        "steps": steps,
        "advised": current,
        "total": total,
        "limit_after": limiting(cur_rep),
        "samples": samples,
        "seed": seed,
        "runs": adv.runs,
    }


def same_gain(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Whether two changes (from the same configuration) gain the same within the interval:
    over shared draws, each one's gain at the files' values lies inside the other's interval,
    and the 5th to 95th percentile of the difference of their paired gains holds zero (neither
    gains more in 95% of the draws); with no draws, their gains at the files' values are equal
    (within :data:`NOISE`). Both tests, so that two wide intervals over few draws do not make
    a gain several times another's a tie."""
    import numpy as np

    pa, pb = a.get("per"), b.get("per")
    if pa and pb and len(pa) == len(pb):

        def inside(x: Mapping[str, Any], y: Mapping[str, Any]) -> bool:
            g = float(x["gain"])
            return float(y["gain_lo"]) - NOISE <= g <= float(y["gain_hi"]) + NOISE

        diff = [x - y for x, y in zip(pa, pb, strict=True) if x is not None and y is not None]
        if diff and "gain_lo" in a and "gain_lo" in b:
            lo, hi = (float(x) for x in np.percentile(diff, (5.0, 95.0)))
            return inside(a, b) and inside(b, a) and lo <= NOISE and hi >= -NOISE
    return abs(float(a["gain"]) - float(b["gain"])) <= NOISE


def rank(entries: list[dict[str, Any]], knobs: Sequence[Knob]) -> list[dict[str, Any]]:
    """``entries`` (changes rated from one configuration, each with its ``knob``, ``gain``,
    ``certain``, ``protection`` and, over draws, ``gain_lo`` and ``per``) best first: a certain
    gain before any uncertain one; then the larger gain, the larger gain at the 5th percentile,
    and on a tie the knob listed first in ``knobs`` (the lighter change: 2 MiB pages before
    1 GiB ones). Then a change that keeps more protection goes above each one just before it
    that gains the same within the interval (:func:`same_gain`) and is as certain, and its
    ``note`` says so (``ranked above IOMMU passthrough: ...``); every other ``note`` is
    empty."""

    def key(e: Mapping[str, Any]) -> tuple[bool, float, float, int]:
        lo = e.get("gain_lo", e["gain"])
        return (not (e["certain"] and e["gain"] > 0), -e["gain"], -lo, knobs.index(e["knob"]))

    def sure(e: Mapping[str, Any]) -> bool:
        return bool(e["certain"] and e["gain"] > 0)

    out: list[dict[str, Any]] = []
    for e in sorted(entries, key=key):
        e["note"] = ""
        at = len(out)
        while (
            at > 0
            and LEVEL[e["protection"]] > LEVEL[out[at - 1]["protection"]]
            and sure(e) == sure(out[at - 1])
            and same_gain(e, out[at - 1])
        ):
            at -= 1
        if at < len(out):
            above = out[at]
            same = (
                "the two gain the same within the interval (neither gains more in 95% of the draws)"
                if e.get("per") and above.get("per")
                else "the same gain at the files' values"
            )
            e["note"] = (
                f"ranked above {above['knob'].name} (protection {above['protection']}): {same}, "
                f"and this keeps {e['protection']} protection"
            )
        out.insert(at, e)
    return out


def size_text(n: int) -> str:
    """Bytes as a table shows a page: ``4 KiB``, ``2 MiB``, ``1 GiB``."""
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if n >= 1 << shift and n % (1 << shift) == 0:
            return f"{n >> shift} {unit}"
    return f"{n} B"


def host_caps(host: str) -> dict[str, Any]:
    """What the host (with its device) can be set to, from its files' values: the largest
    IOMMU page (``max_page``, 4 KiB where the host does not say), whether a copy engine sits
    in its copy-engine slot (``engine``), the link's trained Max_Payload_Size and read tags,
    and the reads the device keeps in flight with 10-bit tags where both ends support them
    (``ten_bit_reads``)."""
    info = sim.platform_info(host)["params"]
    params = {r["field"]: r["value"] for r in info}
    caps: dict[str, Any] = {
        "max_page": int(params.get("iommu_hw.max_page_bytes", 4096)),
        "engine": "dma_engine.bytes_per_us" in params,
    }
    for key in (MPS_KEY, TAGS_KEY, *BATCH_KEYS):
        if key in params:
            caps[key] = int(params[key])
    ranges: dict[str, Any] = {r["field"]: r.get("range") for r in info}
    caps["batch_hi"] = {
        k: int(ranges[k]["hi"]) for k in BATCH_KEYS if isinstance(ranges.get(k), dict)
    }
    completer = str(params.get("bus.pcie.ten_bit_tag_completer", "")).strip('"') == "yes"
    reads = params.get("bus.pcie.ten_bit_tag_reads")
    if completer and reads is not None:
        caps["ten_bit_reads"] = int(reads)
    return caps


def unit(goal: str, kind: str = "block") -> str:
    """The goal's figure and its unit, for a table."""
    if kind == "nic":
        return {"throughput": "Gbit/s", "latency": "ns"}[goal]
    if kind == "map":
        return {"throughput": "pairs/s", "latency": "us a pair", "cpu": "CPU us a pair"}[goal]
    if kind == "vhost":
        return {"throughput": "Gbit/s", "latency": "us a packet", "cpu": "core us a packet"}[goal]
    return {"throughput": "ops/s", "latency": "p99 us", "cpu": "CPU us/op"}[goal]


def ticket(result: Mapping[str, Any]) -> str:
    """A short paragraph a person can paste into a ticket."""
    goal = result["goal"]
    head = (
        f"On {result['host']} with {result['workload']}, today's configuration "
        f"({_mapping_text(result['today'])}) is limited by {result['limit_before']}."
    )
    if not result["steps"]:
        return head + (
            " No change the search may make (keeping protection "
            f"{result['keep_protection']}) gains 1% or more without a loss at the 5th "
            "percentile."
        )
    total = result["total"]
    changes = "; then ".join(
        f"{s['knob'].name} ({s['knob'].how}; it moves {s['moved']}"
        + (f"; {s['note']}" if s.get("note") else "")
        + ")"
        for s in result["steps"]
    )
    interval = f" [{total['gain_lo']:+.0%}, {total['gain_hi']:+.0%}]" if "gain_lo" in total else ""
    sure = "" if total["certain"] else " (uncertain: the interval holds zero)"
    return (
        f"{head} Change: {changes}. Predicted {goal} gain {total['gain']:+.0%}{interval}{sure} "
        f"(5th to 95th percentile over {result['samples']} draws of the host's uncertain "
        f"parameters). Protection: {result['today_protection']} -> {total['protection']} "
        f"({total['protection_detail']}). After it, the limit is {result['limit_after']}."
    )


def _mapping_text(m: Mapping[str, Any]) -> str:
    parts = [f"{k} {v}" for k, v in sorted(m.items())]
    return ", ".join(parts)


def gain_text(e: Mapping[str, Any]) -> str:
    """A gain as a table shows it: ``+12.3% [+4.5%, +20.1%]``, then ``uncertain`` where its
    interval holds zero."""
    text = f"{e['gain']:+.1%}"
    if e.get("gain_lo") is not None:
        text += f" [{e['gain_lo']:+.1%}, {e['gain_hi']:+.1%}]"
    return text + ("" if e["certain"] else " uncertain")


def entry(e: Mapping[str, Any]) -> dict[str, Any]:
    """A single change or a step as plain data (no run report)."""
    k = e["knob"]
    out = {
        "knob": k.name,
        "key": k.key if "." in k.key else f"mapping.{k.key}",
        "to": size_text(k.value) if k.key == "page_bytes" else k.value,
        "gain": e["gain"],
        "gain_lo": e.get("gain_lo"),
        "gain_hi": e.get("gain_hi"),
        "certain": e["certain"],
        "protection": e["protection"],
        "protection_detail": e["protection_detail"],
        "allowed": e["allowed"],
        "why_not": e["why_not"],
        "how": k.how,
        "requires": k.allowed,
        "limit": e["limit"],
        "moved": e["moved"],
        "note": e.get("note", ""),
    }
    return out


def plain(result: Mapping[str, Any]) -> dict[str, Any]:
    """The advice as plain data (no run reports): for JSON, CSV and the HTML report."""
    total = result["total"]
    return {k: v for k, v in result.items() if k not in ("singles", "steps", "total")} | {
        "singles": [entry(e) for e in result["singles"]],
        "steps": [entry(e) for e in result["steps"]],
        "total": None
        if total is None
        else {k: total.get(k) for k in ("gain", "gain_lo", "gain_hi", "certain", "protection")},
        "ticket": ticket(result),
    }


LIKE_BY_CPU = (
    ("AMD", "epyc-rome-2s"),
    ("Intel", "xeon-broadwell-2s"),
    ("Xeon", "xeon-broadwell-2s"),
)
"""The built-in host an inspected one is modelled like, by a word of its CPU's name, where the
user names none: the same vendor's server of the files (an Arm server's CPU name in
``/proc/cpuinfo`` is seldom a model name, so it is named with ``--like``)."""

INSPECTED_LINK = ("generation", "lanes", "max_payload_bytes", "read_completion_boundary_bytes")
"""The root port keys an inspected host replaces with what its device's link shows."""


@dataclass
class Inspected:
    """An inspected host as ``advise`` runs it."""

    platform: str
    """``PLATFORM_FILE+DEVICE_FILE``, both written under the work folder."""
    today: dict[str, str | None]
    """``iommu``: the IOMMU configuration the host shows (``passthrough``, ``lazy``,
    ``strict``, ``none`` without an IOMMU, or None where it could not be read)."""
    note: str
    """A line saying what was read and what was taken from the host modelled like it."""
    label: str
    """How reports name the host: its root and the host it is modelled like."""


def inspected_host(
    workdir: Path, like: str | None = None, root: str = "/", bdf: str | None = None
) -> Inspected:
    """The host ``inspect`` reads at ``root`` as a platform ``advise`` can run: the file of
    ``like`` (a built-in host or a file; by default the built-in host of the CPU's vendor,
    :data:`LIKE_BY_CPU`) with its root port's link keys (:data:`INSPECTED_LINK`) replaced by
    what the device ``bdf`` (default: the first PCIe network or storage function) shows, and
    that device, as ``inspect --out`` writes it, in its slot. Every other value is ``like``'s,
    as it states it. Today's IOMMU configuration is the one the host shows."""
    from dmalab import inspect as ins
    from dmalab.files import write_atomic

    host = ins.inspect(root)
    d = ins._pick(host, bdf)
    if d is None or d.pcie is None:
        raise ScenarioError(
            f"--inspect: no PCI Express function to advise for on {root} (a virtual machine's "
            "devices are emulated); name a host file with --host instead"
        )
    if like is None:
        cpu = host.cpu or ""
        like = next((h for word, h in LIKE_BY_CPU if word in cpu), None)
        if like is None:
            raise ScenarioError(
                f"--like: this host's CPU ({cpu or 'unknown'}) is none the files model by "
                "default; name the built-in host it is most like (such as grace-2s for an Arm "
                "server)"
            )
    link, config = d.pcie, f"{d.path}/config"
    read: dict[str, tuple[object, str]] = {
        "max_payload_bytes": (link.mps, f"{config}: PCIe Device Control, Max_Payload_Size"),
        "read_completion_boundary_bytes": (
            link.rcb_bytes,
            f"{config}: PCIe Link Control, Read Completion Boundary",
        ),
    }
    if link.speed_gts in ins.GENERATION:
        read["generation"] = (ins.GENERATION[link.speed_gts], f"{d.path}/current_link_speed")
    if link.width:
        read["lanes"] = (link.width, f"{d.path}/current_link_width")
    lines, section = [], ""
    for line in fit.platform_text(like).splitlines():
        stripped = line.strip()
        if stripped.startswith("["):
            section = stripped
        key = stripped.split("=", 1)[0].strip() if "=" in stripped else ""
        if not section and key == "default_device":
            continue
        if section == "[bus.pcie]" and key in read:
            value, note = read.pop(key)
            line = ins._param(key, value, "inspected", f"{note} (the link as trained)")
        lines.append(line)
    if read:
        raise ScenarioError(
            f"--like {like}: its [bus.pcie] states no {', '.join(sorted(read))} for the "
            "inspected link to replace; name a host with a PCIe root port"
        )
    workdir.mkdir(parents=True, exist_ok=True)
    platform = workdir / "inspected.toml"
    write_atomic(platform, "\n".join(lines) + "\n")
    device = workdir / ins.device_file_name("inspected", d)
    write_atomic(device, ins.device_toml(d, device.stem))
    iommu = host.flush if host.iommu_driver else "none"
    gen = ins.GENERATION.get(link.speed_gts or 0.0, "?")
    note = (
        f"inspected {root}: {d.bdf} ({d.driver or 'no driver'}) at Gen{gen} x{link.width}, "
        f"MPS {link.mps}, MRRS {link.mrrs}, IOMMU {iommu or 'unknown'}"
        + (f" (from {host.flush_from})" if host.flush_from else "")
        + f"; every other value {like}'s"
    )
    label = f"{'this host' if root == '/' else root} (inspected, like {like})"
    return Inspected(f"{platform}+{device}", {"iommu": iommu}, note, label)


def today_from(kind: str, iommu: str | None) -> dict[str, Any]:
    """Today's configuration of a ``kind`` workload where the host shows its IOMMU
    configuration ``iommu`` (see :class:`Inspected`; None: the defaults)."""
    if iommu in (None, "strict") or kind == "vhost":
        return {}
    off = iommu in ("passthrough", "none")
    if kind == "nic":
        return {"iommu": "off"} if off else {}
    if kind == "map":
        if off:
            raise ScenarioError(
                f"--inspect: the host's IOMMU is {iommu}, so a driver's maps cost no IOMMU work "
                "and there is nothing for a map: workload to advise"
            )
        return {"flush": "lazy"}
    if off:
        return {"translation": "passthrough" if iommu == "passthrough" else "none"}
    return {"flush": "per-cpu", "high_water": 256}
