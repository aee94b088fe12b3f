//! Inbound ordering at a PCIe root complex, and what a TLP's attributes relax: Relaxed Ordering
//! (RO), No Snoop (NS) and ID-based Ordering (IDO). A platform's `[pcie_ordering]` section.
//!
//! The rules, from the PCI Express Base Specification 4.0, §2.4.1 (Table 2-40) and §2.2.6.5,
//! restated in dmalab's words:
//! - **Writes behind writes (A2).** A posted write may not become visible before an earlier
//!   posted write, unless it carries RO, or it carries IDO and the two come from different
//!   requesters (functions). The rule binds the later write: a write without RO still waits for
//!   every earlier write, RO or not, so a device's completion write (no RO) stays behind the
//!   data it announces even when the data carries RO.
//! - **Reads behind writes (B2).** A read request may not pass an earlier posted write unless
//!   it carries IDO and the two come from different requesters. RO does not free a read.
//! - **Completions behind writes (D2)** going the same way: a completion with RO may pass a
//!   posted write. It is the PCIe form of seed 004's "PIOW/DMAR" hint (DMA read returns
//!   passing the CPU's programmed-I/O writes). It is not modelled here: on a PCIe link a
//!   completion held behind a doorbell write waits one TLP's serialisation and is never
//!   disconnected and fetched again as on the ZX1's PCI bus ([`crate::bus::lba`]).
//! - **No Snoop (§2.2.6.5).** The requester promises that no cache holds the lines, so the
//!   root complex may skip the snoop. The promise is the driver's to keep.
//!
//! dmalab's model of a root complex honouring them:
//! - **Write trackers.** Each posted write holds one of `write_trackers` from its arrival until
//!   it is visible (ordered in the coherent fabric). When all are held the link stalls: the
//!   root port's posted credits are the trackers, and the next posted write starts only when
//!   one frees (a read request, on non-posted credits, goes ahead).
//! - **A write's own service** is the memory path's `root_complex_ns`, plus the first line's
//!   write (`llc_ns` where writes allocate in the last-level cache, else `dram_ns`) and
//!   `line_ns` per further line, plus `snoop_ns` for the coherence lookup, plus `cpu_owned_ns`
//!   when a core's private cache holds one of its lines (the snoop must take the line back).
//!   No Snoop skips both snoop terms.
//! - **Ordered writes.** A write is visible no earlier than every earlier write it may not
//!   pass. A `pipelined` root complex starts every write's service on arrival (it fetches
//!   ownership ahead) and holds only the visibility; a `serialized` one starts an ordered
//!   write's service only once the writes before it are visible.
//! - **Reads.** The root complex holds a read request until the writes it may not pass are
//!   visible, then its data is ready one line read (`root_complex_ns + dram_ns`) later. Reads
//!   hold no write tracker, and writes never wait for reads (A3: posted requests pass
//!   non-posted ones).

use crate::bus::memory::MemoryPath;
use crate::config::params::{ParamReader, Valid};
use crate::error::Result;
use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::collections::{BTreeMap, BinaryHeap};

const TRACKERS: Valid = Valid::Range(1, 4096);
const NS: Valid = Valid::Range(0, 100_000);

/// How a root complex orders writes that may not pass each other.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OrderedWrites {
    /// Every write's service starts on arrival; only its visibility waits for earlier writes.
    Pipelined,
    /// An ordered write's service starts once the writes before it are visible.
    Serialized,
}

impl OrderedWrites {
    /// The names used in platform files.
    pub const NAMES: [&'static str; 2] = ["pipelined", "serialized"];
}

/// The root complex's inbound ordering (a platform's `[pcie_ordering]` section).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct OrderingParams {
    /// Posted writes the root complex holds at once, each until it is visible.
    pub write_trackers: u64,
    /// How writes that may not pass each other are handled.
    pub ordered_writes: OrderedWrites,
    /// A snooped write's coherence lookup, which No Snoop skips.
    pub snoop_ns: u64,
    /// More when a core's private cache holds a line the write touches.
    pub cpu_owned_ns: u64,
}

impl OrderingParams {
    /// Read the section under `prefix`.
    pub fn read(r: &mut ParamReader<'_>, prefix: &str) -> Result<OrderingParams> {
        let f = |n: &str| format!("{prefix}.{n}");
        let ordered = r.choice(&f("ordered_writes"), &OrderedWrites::NAMES)?;
        Ok(OrderingParams {
            write_trackers: TRACKERS.read(r, &f("write_trackers"))?,
            ordered_writes: if ordered == "serialized" {
                OrderedWrites::Serialized
            } else {
                OrderedWrites::Pipelined
            },
            snoop_ns: NS.read(r, &f("snoop_ns"))?,
            cpu_owned_ns: NS.read(r, &f("cpu_owned_ns"))?,
        })
    }

    /// Check parameters built in code against the ranges [`OrderingParams::read`] enforces.
    pub fn validate(&self) -> Result<()> {
        TRACKERS.check("write_trackers", self.write_trackers)?;
        NS.check("snoop_ns", self.snoop_ns)?;
        NS.check("cpu_owned_ns", self.cpu_owned_ns)
    }
}

/// The attribute bits of one TLP.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attributes {
    /// Relaxed Ordering.
    pub relaxed_ordering: bool,
    /// No Snoop.
    pub no_snoop: bool,
    /// ID-based Ordering.
    pub id_based_ordering: bool,
}

/// What an inbound TLP asks of the root complex.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A posted memory write.
    Write,
    /// A memory read request.
    Read,
}

/// One TLP from the device, in the order the device sends them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InboundTlp {
    /// Write or read.
    pub kind: Kind,
    /// The requester (function) that sent it.
    pub requester: u32,
    /// Its attribute bits.
    pub attrs: Attributes,
    /// Its serialisation on the link, ps.
    pub wire_ps: u64,
    /// Cache lines it touches (at least 1; a write's service grows with them, a read is
    /// charged one line read whatever its size).
    pub lines: u64,
    /// Whether a core's private cache holds one of those lines (writes only: the snoop that
    /// takes it back is charged once per write).
    pub cpu_owned: bool,
}

/// When one TLP got where, ps from the first TLP's start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TlpTiming {
    /// It began on the link.
    pub start_ps: u64,
    /// Its last byte reached the root complex.
    pub arrive_ps: u64,
    /// A write is visible; a read's data is ready.
    pub done_ps: u64,
    /// Of the time from arrival to `done_ps`, what was spent waiting for earlier writes.
    pub order_wait_ps: u64,
    /// How long it waited for a free write tracker before it could start.
    pub tracker_wait_ps: u64,
}

/// A root complex applying the ordering rules to one device's inbound TLPs.
#[derive(Clone, Debug)]
pub struct RootComplex {
    params: OrderingParams,
    /// A one-line write's service without the snoop terms, ps.
    write_ps: u64,
    /// Each further line of a write, ps.
    line_ps: u64,
    snoop_ps: u64,
    owned_ps: u64,
    /// A read's data after it is let through, ps.
    read_ps: u64,
}

impl RootComplex {
    /// The root complex of a platform's memory path with these ordering parameters.
    pub fn new(params: OrderingParams, memory: &MemoryPath) -> Result<RootComplex> {
        params.validate()?;
        let line_write_ns = if memory.write_allocate {
            memory.llc_ns
        } else {
            memory.dram_ns
        };
        Ok(RootComplex {
            params,
            write_ps: (memory.root_complex_ns + line_write_ns) * 1000,
            line_ps: memory.line_ns * 1000,
            snoop_ps: params.snoop_ns * 1000,
            owned_ps: params.cpu_owned_ns * 1000,
            read_ps: memory.one_line_read_ns() * 1000,
        })
    }

    /// The parameters.
    pub fn params(&self) -> &OrderingParams {
        &self.params
    }

    /// A write's own service time, ps: what it takes with nothing ahead of it.
    pub fn write_service_ps(&self, t: &InboundTlp) -> u64 {
        let mut ps = self.write_ps + self.line_ps * t.lines.saturating_sub(1);
        if !t.attrs.no_snoop {
            ps += self.snoop_ps;
            if t.cpu_owned {
                ps += self.owned_ps;
            }
        }
        ps
    }

    /// Time `tlps`, sent back to back in this order, through the root complex.
    pub fn run(&self, tlps: &[InboundTlp]) -> Vec<TlpTiming> {
        let trackers = usize::try_from(self.params.write_trackers).unwrap_or(usize::MAX);
        // The visibility times of the writes holding a tracker, earliest first.
        let mut held: BinaryHeap<Reverse<u64>> = BinaryHeap::new();
        let mut link_free = 0u64;
        // The latest visibility of any earlier write, and of each requester's.
        let mut all_visible = 0u64;
        let mut visible_by: BTreeMap<u32, u64> = BTreeMap::new();
        let mut out = Vec::with_capacity(tlps.len());
        for t in tlps {
            let link_ready = link_free;
            let mut start = link_free;
            if t.kind == Kind::Write {
                while held.peek().is_some_and(|Reverse(v)| *v <= start) {
                    held.pop();
                }
                if held.len() >= trackers {
                    if let Some(Reverse(free)) = held.pop() {
                        start = start.max(free);
                    }
                }
            }
            let arrive = start + t.wire_ps;
            link_free = arrive;
            let may_pass_all = t.kind == Kind::Write && t.attrs.relaxed_ordering;
            let floor = if may_pass_all {
                0
            } else if t.attrs.id_based_ordering {
                visible_by.get(&t.requester).copied().unwrap_or(0)
            } else {
                all_visible
            };
            let (done, own) = match t.kind {
                Kind::Write => {
                    let service = self.write_service_ps(t);
                    let done = match self.params.ordered_writes {
                        OrderedWrites::Pipelined => (arrive + service).max(floor),
                        OrderedWrites::Serialized => arrive.max(floor) + service,
                    };
                    held.push(Reverse(done));
                    all_visible = all_visible.max(done);
                    let mine = visible_by.entry(t.requester).or_insert(0);
                    *mine = (*mine).max(done);
                    (done, service)
                }
                Kind::Read => (arrive.max(floor) + self.read_ps, self.read_ps),
            };
            out.push(TlpTiming {
                start_ps: start,
                arrive_ps: arrive,
                done_ps: done,
                order_wait_ps: done - arrive - own,
                tracker_wait_ps: start - link_ready,
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bus::memory::tests::two_socket as memory;

    fn params(ordered: OrderedWrites, trackers: u64) -> OrderingParams {
        OrderingParams {
            write_trackers: trackers,
            ordered_writes: ordered,
            snoop_ns: 10,
            cpu_owned_ns: 100,
        }
    }

    fn write(requester: u32, attrs: Attributes, owned: bool) -> InboundTlp {
        InboundTlp {
            kind: Kind::Write,
            requester,
            attrs,
            wire_ps: 36_000,
            lines: 4,
            cpu_owned: owned,
        }
    }

    fn rc(ordered: OrderedWrites, trackers: u64) -> RootComplex {
        RootComplex::new(params(ordered, trackers), &memory()).unwrap()
    }

    const RO: Attributes = Attributes {
        relaxed_ordering: true,
        no_snoop: false,
        id_based_ordering: false,
    };

    #[test]
    fn service_adds_lines_snoop_and_owner() {
        let r = rc(OrderedWrites::Pipelined, 32);
        let plain = write(0, Attributes::default(), false);
        // 200 + 20 (LLC) + 3 x 2 (lines) + 10 (snoop).
        assert_eq!(r.write_service_ps(&plain), 236_000);
        assert_eq!(r.write_service_ps(&write(0, plain.attrs, true)), 336_000);
        let ns = Attributes {
            no_snoop: true,
            ..Attributes::default()
        };
        assert_eq!(r.write_service_ps(&write(0, ns, true)), 226_000);
    }

    #[test]
    fn a_slow_write_holds_later_ordered_writes_but_not_relaxed_ones() {
        let r = rc(OrderedWrites::Pipelined, 32);
        let slow = write(0, Attributes::default(), true);
        let next = write(0, Attributes::default(), false);
        let t = r.run(&[slow, next]);
        // The second arrives at 72 ns and is ready at 72 + 236 = 308 ns, but the first is
        // visible only at 36 + 336 = 372 ns.
        assert_eq!(t[1].done_ps, t[0].done_ps);
        assert_eq!(t[1].order_wait_ps, 372_000 - 308_000);
        let t = r.run(&[slow, write(0, RO, false)]);
        assert_eq!((t[1].done_ps, t[1].order_wait_ps), (72_000 + 236_000, 0));
    }

    #[test]
    fn a_write_without_ro_waits_for_earlier_relaxed_writes() {
        let r = rc(OrderedWrites::Pipelined, 32);
        let data = write(0, RO, true);
        let completion = write(0, Attributes::default(), false);
        let t = r.run(&[data, completion]);
        assert!(t[1].done_ps >= t[0].done_ps);
    }

    #[test]
    fn serialized_writes_start_after_the_previous_is_visible() {
        let r = rc(OrderedWrites::Serialized, 32);
        let w = write(0, Attributes::default(), false);
        let t = r.run(&[w, w, w]);
        assert_eq!(t[0].done_ps, 36_000 + 236_000);
        assert_eq!(t[1].done_ps, t[0].done_ps + 236_000);
        assert_eq!(t[2].done_ps, t[1].done_ps + 236_000);
        let t = r.run(&[w, write(0, RO, false)]);
        assert_eq!(t[1].done_ps, 72_000 + 236_000);
    }

    #[test]
    fn ido_orders_only_within_a_requester() {
        let r = rc(OrderedWrites::Serialized, 32);
        let ido = Attributes {
            id_based_ordering: true,
            ..Attributes::default()
        };
        let t = r.run(&[
            write(0, ido, false),
            write(1, ido, false),
            write(0, ido, false),
        ]);
        assert_eq!(t[1].order_wait_ps, 0);
        assert_eq!(t[2].done_ps, t[0].done_ps + 236_000);
    }

    #[test]
    fn reads_wait_for_writes_unless_ido_from_another_requester() {
        let r = rc(OrderedWrites::Pipelined, 32);
        let w = write(0, Attributes::default(), true);
        let read = |requester, attrs| InboundTlp {
            kind: Kind::Read,
            requester,
            attrs,
            wire_ps: 4_000,
            lines: 2,
            cpu_owned: false,
        };
        let t = r.run(&[w, read(0, RO)]);
        assert_eq!(t[1].done_ps, t[0].done_ps + 280_000);
        let ido = Attributes {
            id_based_ordering: true,
            ..Attributes::default()
        };
        let t = r.run(&[w, read(1, ido)]);
        assert_eq!((t[1].done_ps, t[1].order_wait_ps), (40_000 + 280_000, 0));
        let t = r.run(&[w, read(0, ido)]);
        assert!(t[1].order_wait_ps > 0);
    }

    #[test]
    fn full_trackers_stall_the_link() {
        let r = rc(OrderedWrites::Pipelined, 2);
        let w = write(0, RO, false);
        let t = r.run(&[w, w, w]);
        // The third waits for the first's tracker: visible at 36 + 236 = 272 ns.
        assert_eq!(t[2].start_ps, 272_000);
        assert_eq!(t[2].tracker_wait_ps, 272_000 - 72_000);
    }

    #[test]
    fn parameters_out_of_range_are_refused() {
        let p = OrderingParams {
            write_trackers: 0,
            ..params(OrderedWrites::Pipelined, 1)
        };
        let err = RootComplex::new(p, &memory()).unwrap_err();
        assert!(err.to_string().contains("write_trackers"), "{err}");
    }
}
