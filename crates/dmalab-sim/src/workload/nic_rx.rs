//! A NIC receiving a stream of packets over a PCIe link, and what the TLP attributes (Relaxed
//! Ordering, No Snoop, ID-based Ordering) change for it: the PCIe counterparts of seed 004's
//! DMA hints, on a current platform.
//!
//! dmalab's model, per packet in turn:
//! - **Data.** The NIC writes the packet into its receive buffer (line aligned, one buffer per
//!   packet) as MWr TLPs cut where the platform's DMA engine and link cut writes
//!   ([`crate::bus::pcie`]). The first `cpu_owned_lines` lines of each buffer are still held by
//!   a core: the stack read the last packet's headers there before the buffer was recycled.
//! - **Completion.** Every `completions_per_write` packets of a function
//!   ([`crate::bus::device`]) the NIC writes their completion records to the function's
//!   completion ring. A core holds that line (the driver
//!   polls it), and the write must be visible only after the data it announces: the driver
//!   reads a buffer once it sees its completion.
//! - **Descriptor reads.** When a function has used its cached receive descriptors, it reads
//!   `descriptors_per_fetch` more before it places the packet; the read may not pass earlier
//!   writes (B2), so it waits for the previous packets' writes to be visible.
//! - **Functions.** Packets go round robin to `functions` requesters (SR-IOV virtual functions
//!   or several physical ones), each with its own rings: IDO relaxes ordering only between
//!   different ones, so a function's descriptor read need not wait for the others' packets.
//!
//! The descriptor and completion sizes and batching are the platform's `[device_dma]` values;
//! on `xeon-broadwell-2s` they describe the XL710's transmit queue, taken as the receive
//! queue's too (its receive descriptors may be 16 or 32 bytes).
//!
//! The link's upstream direction carries every TLP back to back; the root complex
//! ([`crate::bus::ordering`]) decides when each write is visible and when a full set of write
//! trackers stalls the link. The NIC offers packets as fast as the link takes them, so the
//! figures are those of a saturated queue. The rate is taken over the second half of the run
//! (at least 1024 packets, so that the queue has filled); a completion's latency is timed from
//! the first data of the last packet it announces. The NIC is taken to fetch descriptors early enough that a read's wait
//! does not hold up the data; the wait is reported. Deterministic: no random draw.

use crate::bus::device::DeviceEngine;
use crate::bus::memory::lines_touched;
use crate::bus::ordering::{Attributes, InboundTlp, Kind, OrderedWrites, RootComplex, TlpTiming};
use crate::bus::pcie::{payload_bytes, request_header_bytes, PcieLink};
use crate::bus::trace::Direction;
use crate::config::platform::Platform;
use crate::error::{invalid_arg, Result, SimError};
use crate::workload::nic_tx::Safety;
use serde::{Deserialize, Serialize};

/// Where the model places the receive buffers, the completion ring and the descriptor ring.
const DATA_BASE: u64 = 1 << 32;
const COMPLETION_RING: u64 = 1 << 31;
const DESCRIPTOR_RING: u64 = (1 << 31) + (1 << 20);
/// Bytes of each function's ring the model walks around (256 functions fit in 1 MiB).
const RING_BYTES: u64 = 4096;
/// Buffers the model cycles through.
const BUFFERS: u64 = 512;

/// The largest packet: a 9000-byte MTU frame with its Ethernet header, rounded up.
pub const MAX_PACKET_BYTES: u64 = 9216;
/// The longest run.
pub const MAX_PACKETS: u64 = 65_536;
/// The shortest run: the second half must find the root complex's queue filled.
pub const MIN_PACKETS: u64 = 1024;
/// The most functions.
pub const MAX_FUNCTIONS: u64 = 256;

/// One receive stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NicRxScenario {
    /// Bytes the NIC writes per packet, 64..=9216.
    pub packet_bytes: u64,
    /// Packets in the run, 1024..=65536.
    pub packets: u64,
    /// Requesters the packets are spread over, 1..=256.
    pub functions: u64,
    /// Lines at the head of each buffer a core still holds, 0 up to the packet's lines.
    pub cpu_owned_lines: u64,
}

impl NicRxScenario {
    /// Check the ranges, naming the field.
    pub fn validate(&self, line_bytes: u64) -> Result<()> {
        if !(64..=MAX_PACKET_BYTES).contains(&self.packet_bytes) {
            let valid = format!("64..={MAX_PACKET_BYTES}");
            return Err(invalid_arg("packet_bytes", self.packet_bytes, valid));
        }
        if !(MIN_PACKETS..=MAX_PACKETS).contains(&self.packets) {
            let valid = format!("{MIN_PACKETS}..={MAX_PACKETS}");
            return Err(invalid_arg("packets", self.packets, valid));
        }
        if !(1..=MAX_FUNCTIONS).contains(&self.functions) {
            let valid = format!("1..={MAX_FUNCTIONS}");
            return Err(invalid_arg("functions", self.functions, valid));
        }
        let lines = self.packet_bytes.div_ceil(line_bytes);
        if self.cpu_owned_lines > lines {
            let valid = format!(
                "0..={lines} (the lines of a {}-byte packet)",
                self.packet_bytes
            );
            return Err(invalid_arg("cpu_owned_lines", self.cpu_owned_lines, valid));
        }
        Ok(())
    }
}

/// The attributes the NIC puts on each kind of TLP.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RxAttributes {
    /// On the packet data writes.
    pub data: Attributes,
    /// On the completion writes.
    pub completion: Attributes,
    /// On the descriptor read requests.
    pub descriptor_read: Attributes,
}

/// A receive stream's figures.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NicRxRecord {
    /// Packet data rate, Gbit/s.
    pub gbit_s: f64,
    /// Packets per second, millions.
    pub mpackets_s: f64,
    /// The share of the time the link's upstream direction carried TLPs, %.
    pub link_busy_pct: f64,
    /// `link` when the link is busy at least 99% of the time, else `root complex`.
    pub limit: &'static str,
    /// Mean time from the first data TLP of the last packet a completion write announces to
    /// that write being visible, ns (none when no completion is written in the window).
    pub completion_latency_ns: Option<f64>,
    /// Mean time a write waited for earlier writes it may not pass, ns.
    pub order_wait_ns: f64,
    /// Per packet, the time the link stood still for want of a write tracker, ns.
    pub tracker_wait_ns: f64,
    /// Mean time from a descriptor read's arrival to its data, ns (0 without reads).
    pub descriptor_read_ns: f64,
    /// Of that, the time it waited for earlier writes, ns.
    pub descriptor_read_wait_ns: f64,
}

/// A platform's PCIe link, memory path, device engine and root-complex ordering, or an error
/// naming what it lacks.
pub fn parts(p: &Platform) -> Result<(&PcieLink, RootComplex, &DeviceEngine)> {
    let (link, memory, engine) = p.device_dma_path()?;
    let ordering = p.pcie_ordering.ok_or_else(|| SimError::NotDescribed {
        platform: p.name.clone(),
        what: "a root complex's inbound ordering ([pcie_ordering])".into(),
    })?;
    Ok((link, RootComplex::new(ordering, memory)?, engine))
}

/// What a TLP is for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Role {
    Data,
    Completion,
    DescriptorRead,
}

/// The TLPs of the run, in the order the NIC sends them, each with its packet and role.
fn tlps(
    link: &PcieLink,
    engine: &DeviceEngine,
    sc: &NicRxScenario,
    attrs: &RxAttributes,
) -> Vec<(InboundTlp, u64, Role)> {
    let line = link.params().cache_line_bytes;
    let stride = sc.packet_bytes.div_ceil(4096) * 4096;
    let mut out = Vec::new();
    let write = |at: u64, upto: u64, requester, attrs, owned| InboundTlp {
        kind: Kind::Write,
        requester,
        attrs,
        wire_ps: link
            .tlp_time(request_header_bytes(at), payload_bytes(at, upto))
            .0,
        lines: lines_touched(at, upto - at, line),
        cpu_owned: owned,
    };
    // Each function has its own rings and counts its own packets.
    let functions = usize::try_from(sc.functions).unwrap_or(1);
    let mut received = vec![0u64; functions];
    for k in 0..sc.packets {
        let f = usize::try_from(k % sc.functions).unwrap_or(0);
        let requester = u32::try_from(f).unwrap_or(u32::MAX);
        let ring = u64::try_from(f).unwrap_or(0) * RING_BYTES;
        let nth = received[f];
        received[f] += 1;
        let per_fetch = engine.descriptors_per_fetch;
        if engine.descriptor_bytes > 0 && nth % per_fetch == 0 {
            let bytes = engine.descriptor_bytes * per_fetch;
            let at = DESCRIPTOR_RING + ring + (nth / per_fetch * bytes) % RING_BYTES;
            for (r_at, r_upto) in link.request_spans(Direction::Read, at, at + bytes, 4096) {
                let tlp = InboundTlp {
                    kind: Kind::Read,
                    requester,
                    attrs: attrs.descriptor_read,
                    wire_ps: link.tlp_time(request_header_bytes(r_at), 0).0,
                    lines: lines_touched(r_at, r_upto - r_at, line),
                    cpu_owned: false,
                };
                out.push((tlp, k, Role::DescriptorRead));
            }
        }
        let buffer = DATA_BASE + (k % BUFFERS) * stride;
        let owned_end = buffer + sc.cpu_owned_lines * line;
        let end = buffer + sc.packet_bytes;
        for (at, upto) in
            link.request_spans(Direction::Write, buffer, end, engine.granularity_bytes)
        {
            let tlp = write(at, upto, requester, attrs.data, at < owned_end);
            out.push((tlp, k, Role::Data));
        }
        let batch = engine.completions_per_write;
        if engine.completion_bytes > 0 && (nth + 1) % batch == 0 {
            let bytes = engine.completion_bytes * batch;
            let at = COMPLETION_RING + ring + (nth / batch * bytes) % RING_BYTES;
            for (c_at, c_upto) in link.request_spans(Direction::Write, at, at + bytes, 4096) {
                let tlp = write(c_at, c_upto, requester, attrs.completion, true);
                out.push((tlp, k, Role::Completion));
            }
        }
    }
    out
}

/// The receive stream `sc` with the NIC setting `attrs`.
pub fn run(
    link: &PcieLink,
    rc: &RootComplex,
    engine: &DeviceEngine,
    sc: &NicRxScenario,
    attrs: &RxAttributes,
) -> Result<NicRxRecord> {
    sc.validate(link.params().cache_line_bytes)?;
    let sent = tlps(link, engine, sc, attrs);
    let inbound: Vec<InboundTlp> = sent.iter().map(|(t, _, _)| *t).collect();
    let timing = rc.run(&inbound);
    // Each packet's first TLP of any kind, and its first data TLP, by packet.
    let n = usize::try_from(sc.packets).unwrap_or(0);
    let (mut first, mut first_data) = (vec![u64::MAX; n], vec![u64::MAX; n]);
    for ((_, k, role), t) in sent.iter().zip(&timing) {
        let k = usize::try_from(*k).unwrap_or(0);
        first[k] = first[k].min(t.start_ps);
        if *role == Role::Data {
            first_data[k] = first_data[k].min(t.start_ps);
        }
    }
    // The rate is that at which packets start, from the middle packet to the last one: the
    // link, the trackers and the ordering all throttle the starts, and the drain at the end
    // is left out.
    let (half, last) = (sc.packets / 2, sc.packets - 1);
    let window_ps = (first[n - 1] - first[n / 2]).max(1) as f64;
    let packets = (last - half) as f64;
    let measured = || {
        sent.iter()
            .zip(&timing)
            .filter(move |((_, k, _), _)| (half..last).contains(k))
    };
    let sum = |f: &dyn Fn(&TlpTiming) -> u64, role: Option<Role>| -> f64 {
        measured()
            .filter(|((_, _, r), _)| role.is_none_or(|want| *r == want))
            .map(|(_, t)| f(t) as f64)
            .sum()
    };
    let wire: f64 = measured().map(|((t, _, _), _)| t.wire_ps as f64).sum();
    let link_busy = wire / window_ps;
    let (mut latency, mut count) = (0.0, 0.0);
    for ((_, k, role), t) in measured() {
        if *role == Role::Completion {
            latency += (t.done_ps - first_data[usize::try_from(*k).unwrap_or(0)]) as f64;
            count += 1.0;
        }
    }
    let count_of = |role| measured().filter(|((_, _, r), _)| *r == role).count() as f64;
    let reads = count_of(Role::DescriptorRead);
    let read = Some(Role::DescriptorRead);
    let writes = count_of(Role::Data) + count_of(Role::Completion);
    // An empty sum of floats is -0.0: figures of no TLPs are 0.
    let mean_ns = |total_ps: f64, n: f64| if n > 0.0 { total_ps / n / 1000.0 } else { 0.0 };
    let payload_bits = packets * (sc.packet_bytes * 8) as f64;
    Ok(NicRxRecord {
        gbit_s: payload_bits / window_ps * 1000.0,
        mpackets_s: packets / window_ps * 1e6,
        link_busy_pct: link_busy * 100.0,
        limit: if link_busy >= 0.99 {
            "link"
        } else {
            "root complex"
        },
        completion_latency_ns: (count > 0.0).then(|| latency / count / 1000.0),
        order_wait_ns: mean_ns(
            sum(&|t| t.order_wait_ps, Some(Role::Data))
                + sum(&|t| t.order_wait_ps, Some(Role::Completion)),
            writes,
        ),
        tracker_wait_ns: mean_ns(sum(&|t| t.tracker_wait_ps, None), packets),
        descriptor_read_ns: mean_ns(sum(&|t| t.done_ps - t.arrive_ps, read), reads),
        descriptor_read_wait_ns: mean_ns(sum(&|t| t.order_wait_ps, read), reads),
    })
}

/// One attribute set on one kind of TLP and what it does to the stream.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AttributeGain {
    /// Which TLPs carry it: `data`, `completion` or `all`.
    pub tlps: &'static str,
    /// `relaxed-ordering`, `no-snoop` or `id-based-ordering`.
    pub attribute: &'static str,
    /// The stream with it set.
    pub record: NicRxRecord,
    /// Rate gain over no attributes, %.
    pub gain_pct: f64,
    /// Completion latency change, % (none without completions).
    pub latency_change_pct: Option<f64>,
    /// Whether a driver may set it.
    pub safety: Safety,
    /// Why.
    pub why: &'static str,
}

/// The stream with no attributes set, and with each single attribute set.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AttributeReport {
    /// How the platform's root complex orders writes.
    pub ordered_writes: OrderedWrites,
    /// The stream with every attribute clear (strict PCI ordering, snooped).
    pub baseline: NicRxRecord,
    /// Each single attribute.
    pub gains: Vec<AttributeGain>,
}

/// The single attribute changes, with whether a driver may make each.
fn single_changes(
    sc: &NicRxScenario,
) -> Vec<(
    &'static str,
    &'static str,
    RxAttributes,
    Safety,
    &'static str,
)> {
    let ro = Attributes {
        relaxed_ordering: true,
        ..Attributes::default()
    };
    let ns = Attributes {
        no_snoop: true,
        ..Attributes::default()
    };
    let ido = Attributes {
        id_based_ordering: true,
        ..Attributes::default()
    };
    let none = RxAttributes::default();
    let data_ns_safety = if sc.cpu_owned_lines > 0 {
        (
            Safety::Unsafe,
            "a core still holds lines of the buffer: a write that skips the snoop leaves its \
             stale copy, and the stack may read it",
        )
    } else {
        (
            Safety::DriverDecides,
            "correct only if no cache holds the buffer's lines: the driver must flush them or \
             never touch them before handing the buffer back",
        )
    };
    vec![
        (
            "data",
            "relaxed-ordering",
            RxAttributes { data: ro, ..none },
            Safety::DriverDecides,
            "correct when the driver reads a buffer only after its completion, which stays \
             ordered behind the data (A2a binds the later write); the driver knows its ring \
             protocol, the platform cannot",
        ),
        (
            "data",
            "no-snoop",
            RxAttributes { data: ns, ..none },
            data_ns_safety.0,
            data_ns_safety.1,
        ),
        (
            "completion",
            "relaxed-ordering",
            RxAttributes {
                completion: ro,
                ..none
            },
            Safety::Unsafe,
            "the completion may become visible before the data it announces: the driver can \
             hand up a packet not yet written",
        ),
        (
            "completion",
            "no-snoop",
            RxAttributes {
                completion: ns,
                ..none
            },
            Safety::Unsafe,
            "the driver polls the completion line from its cache: a write that skips the \
             snoop leaves the stale copy there",
        ),
        (
            "all",
            "id-based-ordering",
            RxAttributes {
                data: ido,
                completion: ido,
                descriptor_read: ido,
            },
            Safety::Safe,
            "each function's TLPs stay in order; only different functions' TLPs pass each \
             other, and functions share no ring",
        ),
    ]
}

/// The stream `sc` with no attributes and with each single one set.
pub fn attribute_gains(
    link: &PcieLink,
    rc: &RootComplex,
    engine: &DeviceEngine,
    sc: &NicRxScenario,
) -> Result<AttributeReport> {
    let baseline = run(link, rc, engine, sc, &RxAttributes::default())?;
    let mut gains = Vec::new();
    for (tlps, attribute, attrs, safety, why) in single_changes(sc) {
        let record = run(link, rc, engine, sc, &attrs)?;
        gains.push(AttributeGain {
            tlps,
            attribute,
            gain_pct: (record.gbit_s / baseline.gbit_s - 1.0) * 100.0,
            latency_change_pct: record
                .completion_latency_ns
                .zip(baseline.completion_latency_ns)
                .map(|(with, without)| (with / without - 1.0) * 100.0),
            record,
            safety,
            why,
        });
    }
    Ok(AttributeReport {
        ordered_writes: rc.params().ordered_writes,
        baseline,
        gains,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::platform::Picks;

    fn platform(picks: &[(&str, &str)]) -> Platform {
        let picks: Picks = picks
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Platform::builtin("xeon-broadwell-2s", &picks).unwrap()
    }

    fn scenario() -> NicRxScenario {
        NicRxScenario {
            packet_bytes: 1514,
            packets: 1024,
            functions: 1,
            cpu_owned_lines: 1,
        }
    }

    fn report(p: &Platform, sc: &NicRxScenario) -> AttributeReport {
        let (link, rc, engine) = parts(p).unwrap();
        attribute_gains(link, &rc, engine, sc).unwrap()
    }

    fn gain<'a>(r: &'a AttributeReport, tlps: &str, attribute: &str) -> &'a AttributeGain {
        r.gains
            .iter()
            .find(|g| g.tlps == tlps && g.attribute == attribute)
            .unwrap()
    }

    #[test]
    fn a_pipelined_root_complex_streams_at_the_link_rate() {
        let r = report(&platform(&[]), &scenario());
        assert_eq!(r.baseline.limit, "link", "{:?}", r.baseline);
        // A Gen3 x8 link carries 1514-byte packets at about 55 Gbit/s of payload.
        assert!(
            (45.0..62.0).contains(&r.baseline.gbit_s),
            "{:?}",
            r.baseline
        );
        let ro = gain(&r, "data", "relaxed-ordering");
        assert!(ro.gain_pct.abs() < 0.5, "{ro:?}");
    }

    #[test]
    fn a_serialized_root_complex_gains_from_relaxed_data() {
        let p = platform(&[("root_complex", "serialized")]);
        let r = report(&p, &scenario());
        assert_eq!(r.baseline.limit, "root complex");
        let ro = gain(&r, "data", "relaxed-ordering");
        assert!(ro.gain_pct > 50.0, "{ro:?}");
        assert!(ro.latency_change_pct.unwrap() < 0.0, "{ro:?}");
    }

    #[test]
    fn the_completion_is_never_visible_before_its_data_unless_it_is_relaxed() {
        let p = platform(&[("root_complex", "serialized")]);
        let (link, rc, engine) = parts(&p).unwrap();
        let sc = scenario();
        for (attrs, ordered) in [
            (RxAttributes::default(), true),
            (
                RxAttributes {
                    data: Attributes {
                        relaxed_ordering: true,
                        ..Attributes::default()
                    },
                    ..RxAttributes::default()
                },
                true,
            ),
            (
                RxAttributes {
                    completion: Attributes {
                        relaxed_ordering: true,
                        ..Attributes::default()
                    },
                    ..RxAttributes::default()
                },
                false,
            ),
        ] {
            let sent = tlps(link, engine, &sc, &attrs);
            let inbound: Vec<InboundTlp> = sent.iter().map(|(t, _, _)| *t).collect();
            let timing = rc.run(&inbound);
            let mut data_done = 0;
            let mut early = 0;
            for ((_, _, role), t) in sent.iter().zip(&timing) {
                match role {
                    Role::Data => data_done = data_done.max(t.done_ps),
                    Role::Completion if t.done_ps < data_done => early += 1,
                    _ => {}
                }
            }
            // Ordered, none is early; relaxed, a serialized root complex lets most pass.
            assert_eq!(early == 0, ordered, "{early} early completions");
        }
    }

    #[test]
    fn ido_frees_reads_of_other_functions_only() {
        let p = platform(&[]);
        let one = report(&p, &scenario());
        let ido = gain(&one, "all", "id-based-ordering");
        assert_eq!(
            ido.record.descriptor_read_wait_ns,
            one.baseline.descriptor_read_wait_ns
        );
        let many = NicRxScenario {
            functions: 4,
            ..scenario()
        };
        let r = report(&p, &many);
        let ido = gain(&r, "all", "id-based-ordering");
        assert!(
            ido.record.descriptor_read_wait_ns < r.baseline.descriptor_read_wait_ns,
            "{ido:?} vs {:?}",
            r.baseline
        );
    }

    #[test]
    fn no_snoop_is_unsafe_when_a_core_holds_buffer_lines() {
        let r = report(&platform(&[]), &scenario());
        assert_eq!(gain(&r, "data", "no-snoop").safety, Safety::Unsafe);
        let clean = NicRxScenario {
            cpu_owned_lines: 0,
            ..scenario()
        };
        let r = report(&platform(&[]), &clean);
        assert_eq!(gain(&r, "data", "no-snoop").safety, Safety::DriverDecides);
    }

    #[test]
    fn bad_scenarios_name_the_field() {
        let p = platform(&[]);
        let (link, rc, engine) = parts(&p).unwrap();
        let bad = NicRxScenario {
            cpu_owned_lines: 99,
            ..scenario()
        };
        let err = run(link, &rc, engine, &bad, &RxAttributes::default()).unwrap_err();
        assert!(err.to_string().contains("cpu_owned_lines"), "{err}");
        let bad = NicRxScenario {
            packets: 1,
            ..scenario()
        };
        let err = run(link, &rc, engine, &bad, &RxAttributes::default()).unwrap_err();
        assert!(err.to_string().contains("packets"), "{err}");
        let zx1 = Platform::builtin("hp-rx2600-zx1", &Picks::new()).unwrap();
        assert!(parts(&zx1).is_err());
    }

    #[test]
    fn an_engine_without_descriptors_or_completions_reports_none_or_zero() {
        let p = platform(&[]);
        let (link, rc, engine) = parts(&p).unwrap();
        let bare = DeviceEngine {
            descriptor_bytes: 0,
            completion_bytes: 0,
            ..engine.clone()
        };
        let r = attribute_gains(link, &rc, &bare, &scenario()).unwrap();
        assert_eq!(r.baseline.completion_latency_ns, None);
        assert!(r.gains.iter().all(|g| g.latency_change_pct.is_none()));
        let read = r.baseline.descriptor_read_ns;
        assert!(read == 0.0 && read.is_sign_positive(), "{read}");
    }

    #[test]
    fn the_shortest_run_agrees_with_a_long_one() {
        let p = platform(&[("root_complex", "serialized")]);
        let many = NicRxScenario {
            functions: 4,
            ..scenario()
        };
        let short = report(&p, &many);
        let long = report(
            &p,
            &NicRxScenario {
                packets: 8192,
                ..many
            },
        );
        for (s, l) in short.gains.iter().zip(&long.gains) {
            assert!((s.gain_pct - l.gain_pct).abs() < 2.0, "{s:?} vs {l:?}");
        }
    }
}
