//! PCI Express links (generations 1 to 6, x1 to x32): how a DMA transfer becomes memory-request
//! and completion TLPs, and what each TLP costs on the wire of one direction of the link.
//!
//! Section numbers are those of the PCI Express Base Specification, revision 3.0 unless another
//! revision is named; the text below restates the rules in dmalab's words.
//!
//! - **Line rate.** Gen1 runs 2.5 GT/s and Gen2 5 GT/s per lane with 8b/10b encoding (§4.2.1);
//!   Gen3 8, Gen4 16 and Gen5 32 GT/s with 128b/130b encoding (§4.2.2). Gen6 runs 64 GT/s with
//!   PAM4 signalling in flit mode, with no line code (1b/1b): every 256-byte flit holds 236
//!   bytes of TLPs, 6 of data-link payload (DLP: Acks and flow-control credits), 8 of CRC and 6
//!   of FEC (PCIe 6.0, flit mode in ch. 4; the layout is summarised publicly at
//!   <https://blog.csdn.net/weixin_43770660/article/details/141707780>, and PCI-SIG's "PCIe 6.0
//!   Specification Webinar Q&A", <https://pcisig.com/node/10944>, describes the CRC and the
//!   interleaved FEC of each flit). [`PcieLink::raw_bytes_per_s`] is lanes times the rate after
//!   encoding (Gen1 x1: 250 MB/s; Gen3 x16: 15.75 GB/s; Gen6 x16: 128 GB/s).
//! - **TLP framing.** At 2.5 and 5 GT/s a TLP is framed by an STP symbol, a 2-byte sequence
//!   number, the header, the optional 4-byte ECRC (§2.7.1), a 4-byte LCRC and an END symbol
//!   (§3.5, §4.2.1). At 8 to 32 GT/s a 4-byte STP token, which also carries the sequence
//!   number, replaces STP and the sequence bytes, and there is no END (§4.2.2.3). In flit mode
//!   TLPs carry no framing and no LCRC (the flit's CRC and FEC protect them); their bytes are
//!   charged 256/236 of themselves for the flit overhead.
//! - **Headers.** Memory requests use a 3-DW header below 4 GiB, where the 32-bit format is
//!   required, and a 4-DW header at or above it (§2.2.4.1); completions use 3 DW (§2.2.9).
//!   Flit-mode headers of these types have the same sizes when no orthogonal header content is
//!   added (PCIe 6.0, flit-mode TLP formats in ch. 2); dmalab adds none. Payloads are whole
//!   DWs: a TLP carries every DW its bytes touch, with byte enables marking the valid bytes of
//!   the first and last (§2.2.5), so a transfer that starts or ends inside a DW pays for it.
//! - **DLLPs.** At 2.5 to 32 GT/s every Ack and every UpdateFC is a separate DLLP of 8 bytes on
//!   the wire: 6 bytes of DLLP (§3.4) plus framing, SDP and END symbols at 8b/10b or a 2-byte
//!   SDP token at 128b/130b (§4.2.2.3). A receiver acknowledges several TLPs at once (§3.5) and
//!   returns credits every few TLPs (§2.6.1); `tlps_per_ack` and `tlps_per_fc_update` amortise
//!   one DLLP of each kind over that many TLPs. dmalab charges these DLLPs to the direction of
//!   the TLPs they answer: strictly they travel the other way, so this is the cost on a link
//!   busy in both directions, the usual case for a NIC or an NVMe drive, and the convention of
//!   Xilinx WP350 ("Understanding Performance of PCI Express Systems"). Make both factors large
//!   to model an idle reverse direction. SKP ordered sets are not modelled (well under 1%).
//! - **Writes** are posted MWr TLPs of at most Max_Payload_Size bytes (§2.2.2) that never cross
//!   a 4 KiB boundary (§2.2.7), sent back to back; see [`TlpSplit`] for where the requester
//!   cuts them. Each MWr's partial cache lines cost the memory controller a read-modify-write.
//! - **Reads** are MRd TLPs of at most Max_Read_Request_Size bytes that never cross 4 KiB
//!   (§2.2.7), sent upstream as tags allow (`max_outstanding_read_requests`). The completer
//!   returns each request's data `read_latency_ns` after the request arrived, in CplD TLPs on
//!   the downstream direction, in request order. It splits as little as §2.3.1.1 allows: every
//!   completion but a request's last ends on a multiple of the Read Completion Boundary and
//!   carries at most Max_Payload_Size bytes, so the first runs from the request's address to
//!   the last RCB multiple within MPS, and the rest start on RCB multiples. Completions are
//!   never blocked by flow control: requesters advertise infinite completion credits (§2.6.1).
//!   A tag is free again when the last completion of its request has arrived.
//!
//! A worked example to check against: Intel's AN 456 ("PCI Express High Performance Reference
//! Design", 2018, "Throughput for Posted Writes") puts a 256-byte write with a 3-DW header at
//! 256 / (256 + 20) of the link, about 92%, before DLLPs; this module gives the same figure
//! when the DLLP factors are large, and about 90 to 91.5% with an Ack and an UpdateFC every
//! four TLPs.

use crate::bus::memctl::partial_lines;
use crate::bus::trace::{totals, transfer_end, Command, Direction, Trace, TraceEntry};
use crate::config::params::{ParamReader, Valid};
use crate::error::{invalid_arg, Result};
use crate::units::{BusAddr, Ps};

/// No memory request (and so no TLP of one) may cross a naturally aligned 4 KiB boundary
/// (§2.2.7).
pub const REQUEST_BOUNDARY_BYTES: u64 = 4096;

/// Bytes of one DLLP on the wire at 2.5 to 32 GT/s, framing included (§3.4, §4.2.2.3).
pub const DLLP_WIRE_BYTES: u64 = 8;

/// Bytes of a flit in flit mode (PCIe 6.0).
pub const FLIT_BYTES: u64 = 256;

/// Bytes of a flit that carry TLPs; the other 20 are 6 of DLP, 8 of CRC and 6 of FEC (PCIe 6.0).
pub const FLIT_TLP_BYTES: u64 = 236;

pub use crate::bus::trace::MAX_TRANSFER_BYTES;

/// Bytes of the optional end-to-end CRC (TLP digest, §2.7.1).
const ECRC_BYTES: u64 = 4;

/// Per-TLP framing at 8b/10b: STP, 2-byte sequence number, 4-byte LCRC, END (§4.2.1, §3.5).
const FRAMING_8B10B_BYTES: u64 = 1 + 2 + 4 + 1;

/// Per-TLP framing at 128b/130b: the 4-byte STP token (with the sequence number) and the
/// 4-byte LCRC (§4.2.2.3).
const FRAMING_128B130B_BYTES: u64 = 4 + 4;

/// A 3-DW header (32-bit memory requests, completions).
pub(crate) const HEADER_3DW_BYTES: u64 = 12;

/// A 4-DW header (memory requests at or above 4 GiB).
const HEADER_4DW_BYTES: u64 = 16;

const GENERATION: Valid = Valid::Range(1, 6);
const LANES: Valid = Valid::OneOf(&[1, 2, 4, 8, 12, 16, 32]);
const MAX_PAYLOAD: Valid = Valid::Pow2(128, 4096);
const MAX_READ_REQUEST: Valid = Valid::Pow2(128, 4096);
const COMPLETION_BOUNDARY: Valid = Valid::OneOf(&[64, 128]);
const ADDRESSING: Valid = Valid::OneOf(&[32, 64]);
const READ_LATENCY_NS: Valid = Valid::Range(0, 1_000_000);
const OUTSTANDING_READS: Valid = Valid::Range(1, 1024);
const TLPS_PER_DLLP: Valid = Valid::Range(1, 1024);
const CACHE_LINE: Valid = Valid::Pow2(4, 1024);
const READ_MODIFY_WRITE_NS: Valid = Valid::Range(0, 100_000);

/// Where a requester cuts a long DMA transfer into TLPs. Both keep every TLP within its size
/// limit (Max_Payload_Size for writes, Max_Read_Request_Size for reads) and inside one 4 KiB
/// block; the specification leaves the rest to the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TlpSplit {
    /// At naturally aligned multiples of the size limit: the first TLP runs to the first such
    /// multiple and the rest are whole and aligned (a DMA engine that never needs to look for
    /// 4 KiB boundaries, since the limit divides 4096; after the first TLP every write covers
    /// whole cache lines).
    Aligned,
    /// As long as allowed: each TLP takes the whole limit unless a 4 KiB boundary or the end of
    /// the transfer comes first (fewest TLPs).
    Largest,
}

impl TlpSplit {
    /// The names used in platform files.
    pub const NAMES: [&'static str; 2] = ["aligned", "largest"];

    fn parse(name: &str) -> Option<TlpSplit> {
        match name {
            "aligned" => Some(TlpSplit::Aligned),
            "largest" => Some(TlpSplit::Largest),
            _ => None,
        }
    }
}

/// The parameters of one PCIe link and of the device's and the root complex's use of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PcieParams {
    /// The link's generation, 1 to 6 (its data rate and encoding).
    pub generation: u64,
    /// The negotiated width: 1, 2, 4, 8, 12, 16 or 32 lanes.
    pub lanes: u64,
    /// Max_Payload_Size: the largest data payload of a TLP (a power of two, 128 to 4096).
    pub max_payload_bytes: u64,
    /// Max_Read_Request_Size: the most a read request may ask for (a power of two, 128 to 4096).
    pub max_read_request_bytes: u64,
    /// The Read Completion Boundary of the completer: 64 or 128 bytes (§2.3.1.1).
    pub read_completion_boundary_bytes: u64,
    /// The device's address width: 32 (3-DW requests only, buffers below 4 GiB) or 64 (4-DW
    /// requests for buffers at or above 4 GiB).
    pub addressing_bits: u64,
    /// Whether every TLP carries an ECRC.
    pub ecrc: bool,
    /// Where the device cuts transfers into TLPs.
    pub tlp_split: TlpSplit,
    /// From a read request's arrival at the root complex to its first completion leaving
    /// (root complex and memory time).
    pub read_latency_ns: u64,
    /// Read requests (tags) the device keeps outstanding at most.
    pub max_outstanding_read_requests: u64,
    /// TLPs acknowledged by one Ack DLLP (not used in flit mode).
    pub tlps_per_ack: u64,
    /// TLPs whose credits one UpdateFC DLLP returns (not used in flit mode).
    pub tlps_per_fc_update: u64,
    /// The cache-line size of the memory controller behind the root complex.
    pub cache_line_bytes: u64,
    /// The memory controller's time for one partial-line write (read, merge, write back).
    pub read_modify_write_ns: u64,
}

impl PcieParams {
    /// Read the parameters under `prefix` (such as `bus.pcie`), each as `{prefix}.{field}`,
    /// checking each against its valid range; `ecrc` is `"on"` or `"off"` and `tlp_split` is
    /// one of [`TlpSplit::NAMES`]. Where the platform describes its memory path,
    /// `derived_read_latency_ns` is that path's one-line read and the file must not also give
    /// `read_latency_ns`.
    pub fn read(
        r: &mut ParamReader<'_>,
        prefix: &str,
        derived_read_latency_ns: Option<u64>,
    ) -> Result<PcieParams> {
        let path = |field: &str| format!("{prefix}.{field}");
        let read_latency_ns = match derived_read_latency_ns {
            None => READ_LATENCY_NS.read(r, &path("read_latency_ns"))?,
            Some(ns) => {
                if r.has_table(&path("read_latency_ns")) {
                    return Err(r.invalid(
                        &path("read_latency_ns"),
                        &toml::Value::String("given".into()),
                        "absent: with a [memory] section the read latency is computed from it \
                         (memory.root_complex_ns + memory.dram_ns)",
                    ));
                }
                READ_LATENCY_NS.check("memory.root_complex_ns + memory.dram_ns", ns)?;
                ns
            }
        };
        Ok(PcieParams {
            generation: GENERATION.read(r, &path("generation"))?,
            lanes: LANES.read(r, &path("lanes"))?,
            max_payload_bytes: MAX_PAYLOAD.read(r, &path("max_payload_bytes"))?,
            max_read_request_bytes: MAX_READ_REQUEST.read(r, &path("max_read_request_bytes"))?,
            read_completion_boundary_bytes: COMPLETION_BOUNDARY
                .read(r, &path("read_completion_boundary_bytes"))?,
            addressing_bits: ADDRESSING.read(r, &path("addressing_bits"))?,
            ecrc: r.choice(&path("ecrc"), &["on", "off"])? == "on",
            tlp_split: TlpSplit::parse(&r.choice(&path("tlp_split"), &TlpSplit::NAMES)?)
                .unwrap_or(TlpSplit::Aligned),
            read_latency_ns,
            max_outstanding_read_requests: OUTSTANDING_READS
                .read(r, &path("max_outstanding_read_requests"))?,
            tlps_per_ack: TLPS_PER_DLLP.read(r, &path("tlps_per_ack"))?,
            tlps_per_fc_update: TLPS_PER_DLLP.read(r, &path("tlps_per_fc_update"))?,
            cache_line_bytes: CACHE_LINE.read(r, &path("cache_line_bytes"))?,
            read_modify_write_ns: READ_MODIFY_WRITE_NS.read(r, &path("read_modify_write_ns"))?,
        })
    }

    /// Check parameters built in code against the ranges [`PcieParams::read`] enforces.
    pub fn validate(&self) -> Result<()> {
        GENERATION.check("generation", self.generation)?;
        LANES.check("lanes", self.lanes)?;
        MAX_PAYLOAD.check("max_payload_bytes", self.max_payload_bytes)?;
        MAX_READ_REQUEST.check("max_read_request_bytes", self.max_read_request_bytes)?;
        COMPLETION_BOUNDARY.check(
            "read_completion_boundary_bytes",
            self.read_completion_boundary_bytes,
        )?;
        ADDRESSING.check("addressing_bits", self.addressing_bits)?;
        READ_LATENCY_NS.check("read_latency_ns", self.read_latency_ns)?;
        OUTSTANDING_READS.check(
            "max_outstanding_read_requests",
            self.max_outstanding_read_requests,
        )?;
        TLPS_PER_DLLP.check("tlps_per_ack", self.tlps_per_ack)?;
        TLPS_PER_DLLP.check("tlps_per_fc_update", self.tlps_per_fc_update)?;
        CACHE_LINE.check("cache_line_bytes", self.cache_line_bytes)?;
        READ_MODIFY_WRITE_NS.check("read_modify_write_ns", self.read_modify_write_ns)
    }
}

/// What a link's two ends state of 10-Bit Tags (PCI Express Base Specification 4.0, 2.2.6.2):
/// with them a requester keeps up to 768 non-posted requests in flight (tags whose two upper
/// bits are not both zero) instead of the 256 of an 8-bit Tag field. A device uses them only
/// where it is a 10-Bit Tag Requester, the root port a 10-Bit Tag Completer, and software sets
/// 10-Bit Tag Requester Enable (Device Control 2, bit 12). Both are optional keys of a link:
/// a file that states neither has no 10-bit tags.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TenBitTags {
    /// The root port completes requests with 10-bit tags (`ten_bit_tag_completer = "yes"`).
    pub completer: bool,
    /// The read requests the device keeps in flight once 10-bit tags are enabled
    /// (`ten_bit_tag_reads`); `None` where the device is no 10-Bit Tag Requester.
    pub requester_reads: Option<u64>,
}

/// The most non-posted requests a 10-bit Tag field allows in flight (PCIe 4.0, 2.2.6.2: tags
/// 256 to 1023).
pub const TEN_BIT_TAG_READS: u64 = 768;

impl TenBitTags {
    /// Read `{prefix}.ten_bit_tag_completer` (`"yes"` or `"no"`) and
    /// `{prefix}.ten_bit_tag_reads` (1 to 768), each where the file states it.
    pub fn read(r: &mut ParamReader<'_>, prefix: &str) -> Result<TenBitTags> {
        let completer = format!("{prefix}.ten_bit_tag_completer");
        let reads = format!("{prefix}.ten_bit_tag_reads");
        Ok(TenBitTags {
            completer: r.has_table(&completer) && r.choice(&completer, &["yes", "no"])? == "yes",
            requester_reads: if r.has_table(&reads) {
                Some(r.u64(&reads, 1..=TEN_BIT_TAG_READS)?)
            } else {
                None
            },
        })
    }

    /// The reads the device may keep in flight with 10-bit tags enabled, where both ends
    /// support them.
    pub fn usable_reads(&self) -> Option<u64> {
        self.requester_reads.filter(|_| self.completer)
    }
}

/// The wire time spent on one transfer, by kind, for the steady-state figures.
#[derive(Clone, Copy, Debug, Default)]
struct Costs {
    /// Serialisation of the TLPs that carry data (MWr or CplD) on their direction.
    data_ps: u128,
    /// Serialisation of the read requests on the other direction.
    request_ps: u128,
    /// The sum over read requests of the least time each holds its tag.
    tag_hold_ps: u128,
}

/// A PCIe link ready to turn DMA transfers into TLP traces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PcieLink {
    params: PcieParams,
    /// Picoseconds per byte on one direction is `ps_per_byte_num / ps_per_byte_den`.
    ps_per_byte_num: u128,
    ps_per_byte_den: u128,
}

impl PcieLink {
    /// A link with these parameters, checked by [`PcieParams::validate`].
    pub fn new(params: PcieParams) -> Result<PcieLink> {
        params.validate()?;
        let (mega_transfers_per_s, payload_bits, line_bits) = line_code(params.generation);
        // Bytes per second = lanes * MT/s * 1e6 * payload / (line * 8); its inverse in ps:
        // 1e12 * line * 8 / (lanes * MT/s * 1e6 * payload) = 8e6 * line / (lanes * MT/s * payload).
        let ps_per_byte_num = 8_000_000 * u128::from(line_bits);
        let ps_per_byte_den =
            u128::from(params.lanes) * u128::from(mega_transfers_per_s) * u128::from(payload_bits);
        Ok(PcieLink {
            params,
            ps_per_byte_num,
            ps_per_byte_den,
        })
    }

    /// The parameters.
    pub fn params(&self) -> &PcieParams {
        &self.params
    }

    /// The link's name for traces, such as `PCIe Gen3 x8`.
    pub fn name(&self) -> String {
        format!("PCIe Gen{} x{}", self.params.generation, self.params.lanes)
    }

    /// Bytes per second one direction of the link moves after line encoding (lanes times the
    /// per-lane rate), before any packet overhead; rounded down.
    pub fn raw_bytes_per_s(&self) -> u64 {
        let bytes = 1_000_000_000_000u128 * self.ps_per_byte_den / self.ps_per_byte_num;
        u64::try_from(bytes).unwrap_or(u64::MAX)
    }

    /// The TLPs of one DMA transfer of `len_bytes` at `addr`, timed from zero: MWr for a write;
    /// MRd and their CplD for a read, sorted by start time.
    pub fn transfer(&self, direction: Direction, addr: BusAddr, len_bytes: u64) -> Result<Trace> {
        let end = self.checked_end(addr, len_bytes)?;
        let entries = match direction {
            Direction::Write => self.write_entries(addr.0, end),
            Direction::Read => self.read_entries(addr.0, end),
        };
        let rmw = Ps::from_ns(self.params.read_modify_write_ns);
        let totals = totals(&entries, rmw);
        Ok(Trace {
            bus: self.name(),
            direction,
            addr,
            length_bytes: len_bytes,
            entries,
            totals,
        })
    }

    /// Data bytes over the wire time of the TLPs that carry them (MWr or CplD) times the raw
    /// rate: the share of the data direction's raw bandwidth that is payload.
    pub fn efficiency(&self, direction: Direction, addr: BusAddr, len_bytes: u64) -> Result<f64> {
        let end = self.checked_end(addr, len_bytes)?;
        let costs = self.costs(direction, addr.0, end);
        let capacity_bytes = costs.data_ps as f64 * self.raw_bytes_per_s() as f64 / 1e12;
        Ok(len_bytes as f64 / capacity_bytes)
    }

    /// The data rate of a long stream of such transfers, each starting as soon as the link
    /// allows: writes are bound by their MWr serialisation; reads by the slowest of the
    /// completions' direction, the requests' direction, and the tags (by Little's law, tags
    /// times their least hold time: request, read latency and the request's completions).
    pub fn effective_bandwidth_bytes_per_s(
        &self,
        direction: Direction,
        addr: BusAddr,
        len_bytes: u64,
    ) -> Result<u64> {
        let end = self.checked_end(addr, len_bytes)?;
        let c = self.costs(direction, addr.0, end);
        let tags = u128::from(self.params.max_outstanding_read_requests);
        let tag_bound_ps = c.tag_hold_ps.div_ceil(tags);
        let period_ps = c.data_ps.max(c.request_ps).max(tag_bound_ps).max(1);
        let bytes_per_s = u128::from(len_bytes) * 1_000_000_000_000 / period_ps;
        Ok(u64::try_from(bytes_per_s).unwrap_or(u64::MAX))
    }

    /// One transfer's time from its first TLP's start to its last byte.
    pub fn latency(&self, direction: Direction, addr: BusAddr, len_bytes: u64) -> Result<Ps> {
        let trace = self.transfer(direction, addr, len_bytes)?;
        Ok(trace.totals.bus_time_ps)
    }

    /// `addr + len_bytes`, or an error when the span is empty, too long, or out of reach.
    fn checked_end(&self, addr: BusAddr, len_bytes: u64) -> Result<u64> {
        let end = transfer_end(addr, len_bytes)?;
        if self.params.addressing_bits < 64 && end > 1u64 << self.params.addressing_bits {
            let valid = format!(
                "an address with address + length at most 2^{}",
                self.params.addressing_bits
            );
            return Err(invalid_arg("address", addr, valid));
        }
        Ok(end)
    }

    fn write_entries(&self, addr: u64, end: u64) -> Vec<TraceEntry> {
        let p = &self.params;
        let mut now = Ps::ZERO;
        let mut entries = Vec::new();
        for (at, upto) in spans(addr, end, p.max_payload_bytes, p.tlp_split) {
            let start = now;
            now += self.tlp_time(request_header_bytes(at), payload_bytes(at, upto));
            let mut e = entry(Command::MemWriteRequest, (at, upto), start, now);
            e.partial_lines = partial_lines(BusAddr(at), upto - at, p.cache_line_bytes);
            entries.push(e);
        }
        entries
    }

    /// Requests go upstream as tags allow; each request's completions come downstream, in
    /// request order, from `read_latency_ns` after the request's last byte arrived.
    fn read_entries(&self, addr: u64, end: u64) -> Vec<TraceEntry> {
        let p = &self.params;
        let tags = usize::try_from(p.max_outstanding_read_requests).unwrap_or(usize::MAX);
        let latency = Ps::from_ns(p.read_latency_ns);
        let mut tag_free_at: Vec<Ps> = Vec::new();
        let mut upstream_free = Ps::ZERO;
        let mut downstream_free = Ps::ZERO;
        let mut entries = Vec::new();
        for (i, (at, upto)) in spans(addr, end, p.max_read_request_bytes, p.tlp_split).enumerate() {
            let tag_ready = i
                .checked_sub(tags)
                .and_then(|j| tag_free_at.get(j))
                .copied();
            let start = upstream_free.max(tag_ready.unwrap_or(Ps::ZERO));
            upstream_free = start + self.tlp_time(request_header_bytes(at), 0);
            entries.push(entry(
                Command::MemReadRequest,
                (at, upto),
                start,
                upstream_free,
            ));
            let data_ready = upstream_free + latency;
            let mut last = data_ready;
            for (c_at, c_upto) in self.completion_spans(at, upto) {
                let c_start = downstream_free.max(data_ready);
                downstream_free =
                    c_start + self.tlp_time(HEADER_3DW_BYTES, payload_bytes(c_at, c_upto));
                last = downstream_free;
                entries.push(entry(
                    Command::CompletionWithData,
                    (c_at, c_upto),
                    c_start,
                    last,
                ));
            }
            tag_free_at.push(last);
        }
        // Stable: entries that start together keep their issue order.
        entries.sort_by_key(|e| e.start_ps);
        entries
    }

    /// The requests (MWr for a write, MRd for a read) of `[addr, end)` from a DMA engine that
    /// first cuts the transfer at multiples of `granularity` bytes (a power of two dividing
    /// 4096), each piece then cut by the link's size rules where the platform's split says.
    pub(crate) fn request_spans(
        &self,
        direction: Direction,
        addr: u64,
        end: u64,
        granularity: u64,
    ) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        self.request_spans_into(direction, addr, end, granularity, &mut out);
        out
    }

    /// [`PcieLink::request_spans`] into `out` (cleared first), so that a model that splits
    /// every transfer reuses one buffer.
    pub(crate) fn request_spans_into(
        &self,
        direction: Direction,
        addr: u64,
        end: u64,
        granularity: u64,
        out: &mut Vec<(u64, u64)>,
    ) {
        let p = &self.params;
        let limit = match direction {
            Direction::Write => p.max_payload_bytes,
            Direction::Read => p.max_read_request_bytes,
        };
        out.clear();
        for (at, upto) in spans(addr, end, granularity, TlpSplit::Aligned) {
            out.extend(spans(at, upto, limit, p.tlp_split));
        }
    }

    /// The wire time of one transfer's TLPs, by kind.
    fn costs(&self, direction: Direction, addr: u64, end: u64) -> Costs {
        let p = &self.params;
        let mut c = Costs::default();
        match direction {
            Direction::Write => {
                for (at, upto) in spans(addr, end, p.max_payload_bytes, p.tlp_split) {
                    c.data_ps += u128::from(
                        self.tlp_time(request_header_bytes(at), payload_bytes(at, upto))
                            .0,
                    );
                }
            }
            Direction::Read => {
                let latency = u128::from(Ps::from_ns(p.read_latency_ns).0);
                for (at, upto) in spans(addr, end, p.max_read_request_bytes, p.tlp_split) {
                    let request = u128::from(self.tlp_time(request_header_bytes(at), 0).0);
                    let data: u128 = self
                        .completion_spans(at, upto)
                        .map(|(c_at, c_upto)| {
                            u128::from(
                                self.tlp_time(HEADER_3DW_BYTES, payload_bytes(c_at, c_upto))
                                    .0,
                            )
                        })
                        .sum();
                    c.request_ps += request;
                    c.data_ps += data;
                    c.tag_hold_ps += request + latency + data;
                }
            }
        }
        c
    }

    /// The completions of the request `[at, upto)` under the largest-allowed policy of
    /// §2.3.1.1: each ends on an RCB multiple within Max_Payload_Size, or at the request's end.
    pub(crate) fn completion_spans(&self, at: u64, upto: u64) -> impl Iterator<Item = (u64, u64)> {
        let mps = self.params.max_payload_bytes;
        let rcb = self.params.read_completion_boundary_bytes;
        let mut next = at;
        std::iter::from_fn(move || {
            if next >= upto {
                return None;
            }
            // No overflow: `next + mps < upto` on the second branch. MPS >= 128 >= RCB, so
            // the rounded-down end still lies beyond `next`.
            let end = if upto - next <= mps {
                upto
            } else {
                (next + mps) / rcb * rcb
            };
            let span = (next, end);
            next = end;
            Some(span)
        })
    }

    /// The serialisation time of one TLP with `header_bytes` of header and `payload_bytes` of
    /// data on one direction of the link, framing, ECRC and its share of DLLPs (or of flit
    /// overhead) included; rounded up to the picosecond.
    pub(crate) fn tlp_time(&self, header_bytes: u64, payload_bytes: u64) -> Ps {
        let p = &self.params;
        let ecrc = if p.ecrc { ECRC_BYTES } else { 0 };
        let tlp = u128::from(header_bytes) + u128::from(payload_bytes) + u128::from(ecrc);
        // Wire bytes as the fraction wire_num / wire_den.
        let (wire_num, wire_den) = match p.generation {
            1 | 2 => self.with_dllps(tlp + u128::from(FRAMING_8B10B_BYTES)),
            3..=5 => self.with_dllps(tlp + u128::from(FRAMING_128B130B_BYTES)),
            _ => (tlp * u128::from(FLIT_BYTES), u128::from(FLIT_TLP_BYTES)),
        };
        let (num, den) = (
            wire_num * self.ps_per_byte_num,
            wire_den * self.ps_per_byte_den,
        );
        // The same quotient in 64 bits where both fit (every link in practice): a 128-bit
        // division is several times slower, and this is on every TLP of every run.
        if let (Ok(n), Ok(d)) = (u64::try_from(num), u64::try_from(den)) {
            return Ps(n.div_ceil(d));
        }
        Ps(u64::try_from(num.div_ceil(den)).unwrap_or(u64::MAX))
    }

    /// `framed` TLP bytes plus one Ack per `tlps_per_ack` and one UpdateFC per
    /// `tlps_per_fc_update` TLPs, as a fraction.
    fn with_dllps(&self, framed: u128) -> (u128, u128) {
        let acks = u128::from(self.params.tlps_per_ack);
        let updates = u128::from(self.params.tlps_per_fc_update);
        let dllp = u128::from(DLLP_WIRE_BYTES);
        (
            framed * acks * updates + dllp * (acks + updates),
            acks * updates,
        )
    }
}

/// (transfer rate in MT/s, payload bits, line bits of the encoding) of a generation.
fn line_code(generation: u64) -> (u64, u64, u64) {
    match generation {
        1 => (2_500, 8, 10),
        2 => (5_000, 8, 10),
        3 => (8_000, 128, 130),
        4 => (16_000, 128, 130),
        5 => (32_000, 128, 130),
        // 64 GT/s PAM4, flit mode: no line code; the flit overhead is charged per TLP byte.
        _ => (64_000, 1, 1),
    }
}

/// The payload bytes a TLP carrying `[at, upto)` puts on the wire: whole DWs, from the DW
/// holding the first byte to the DW holding the last; the first and last DW byte enables mark
/// which of their bytes are valid (§2.2.5).
pub(crate) fn payload_bytes(at: u64, upto: u64) -> u64 {
    (upto.div_ceil(4) - at / 4) * 4
}

/// The header of a memory request at `addr`: 3 DW below 4 GiB, 4 DW above (§2.2.4.1).
pub(crate) fn request_header_bytes(addr: u64) -> u64 {
    if addr >> 32 == 0 {
        HEADER_3DW_BYTES
    } else {
        HEADER_4DW_BYTES
    }
}

/// The first multiple of `block` above `at`, saturating at the top of the address space.
pub(crate) fn boundary_after(at: u64, block: u64) -> u64 {
    (at / block).saturating_add(1).saturating_mul(block)
}

/// `[addr, end)` cut into spans of at most `limit` bytes (a power of two dividing 4096), none
/// crossing a 4 KiB boundary, where `split` says.
fn spans(addr: u64, end: u64, limit: u64, split: TlpSplit) -> impl Iterator<Item = (u64, u64)> {
    let mut next = addr;
    std::iter::from_fn(move || {
        if next >= end {
            return None;
        }
        let cut = match split {
            TlpSplit::Aligned => boundary_after(next, limit),
            TlpSplit::Largest => next.saturating_add(limit),
        };
        let upto = cut
            .min(boundary_after(next, REQUEST_BOUNDARY_BYTES))
            .min(end);
        let span = (next, upto);
        next = upto;
        Some(span)
    })
}

/// The entry of one TLP over `[at, upto)`, from `start` to `end`.
fn entry(command: Command, (at, upto): (u64, u64), start: Ps, end: Ps) -> TraceEntry {
    TraceEntry {
        addr: BusAddr(at),
        command,
        bytes: upto - at,
        start_ps: start,
        end_ps: end,
        retries: 0,
        partial_lines: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::SimError;
    use std::collections::BTreeMap;
    use Direction::{Read, Write};

    fn params(generation: u64, lanes: u64) -> PcieParams {
        PcieParams {
            generation,
            lanes,
            max_payload_bytes: 256,
            max_read_request_bytes: 512,
            read_completion_boundary_bytes: 64,
            addressing_bits: 64,
            ecrc: false,
            tlp_split: TlpSplit::Aligned,
            read_latency_ns: 500,
            max_outstanding_read_requests: 32,
            tlps_per_ack: 4,
            tlps_per_fc_update: 4,
            cache_line_bytes: 64,
            read_modify_write_ns: 100,
        }
    }

    fn link(p: PcieParams) -> PcieLink {
        PcieLink::new(p).expect("valid test parameters")
    }

    fn trace(p: PcieParams, d: Direction, addr: u64, len: u64) -> Trace {
        link(p)
            .transfer(d, BusAddr(addr), len)
            .expect("a valid transfer")
    }

    fn efficiency(p: PcieParams, d: Direction, addr: u64, len: u64) -> f64 {
        link(p)
            .efficiency(d, BusAddr(addr), len)
            .expect("a valid transfer")
    }

    fn bandwidth(p: PcieParams, d: Direction, addr: u64, len: u64) -> u64 {
        let l = link(p);
        l.effective_bandwidth_bytes_per_s(d, BusAddr(addr), len)
            .expect("a valid transfer")
    }

    fn pieces(t: &Trace, command: Command) -> Vec<(u64, u64)> {
        let of_command = t.entries.iter().filter(|e| e.command == command);
        of_command.map(|e| (e.addr.0, e.bytes)).collect()
    }

    #[test]
    fn raw_rates_follow_the_line_codes() {
        // 2.5 GT/s * 8/10 / 8 bits = 250 MB/s per lane.
        assert_eq!(link(params(1, 1)).raw_bytes_per_s(), 250_000_000);
        assert_eq!(link(params(2, 4)).raw_bytes_per_s(), 2_000_000_000);
        // 8 GT/s * 128/130 / 8 * 16 lanes = 15.75 GB/s.
        assert_eq!(link(params(3, 16)).raw_bytes_per_s(), 15_753_846_153);
        assert_eq!(link(params(5, 16)).raw_bytes_per_s(), 63_015_384_615);
        // 64 GT/s PAM4, no line code: 8 GB/s per lane.
        assert_eq!(link(params(6, 16)).raw_bytes_per_s(), 128_000_000_000);
    }

    #[test]
    fn gen3_x8_write_efficiency_matches_the_published_range() {
        let e = efficiency(params(3, 8), Write, 0x1000_0000, 64 * 1024);
        // 256 / (256 + 4 STP + 12 header + 4 LCRC + 2 Ack + 2 UpdateFC) = 0.914.
        assert!((0.90..=0.93).contains(&e), "{e}");
        // Without DLLPs: Intel AN 456's 256 / (256 + 20), "about 92%".
        let p = PcieParams {
            tlps_per_ack: 1024,
            tlps_per_fc_update: 1024,
            ..params(3, 8)
        };
        let e = efficiency(p, Write, 0x1000_0000, 64 * 1024);
        assert!((e - 256.0 / 276.0).abs() < 0.001, "{e}");
        // Above 4 GiB the 4-DW header costs 4 bytes more per TLP.
        let high = efficiency(params(3, 8), Write, 1 << 36, 64 * 1024);
        assert!((high - 256.0 / 284.0).abs() < 0.001, "{high}");
    }

    #[test]
    fn writes_split_at_max_payload_and_4k() {
        let t = trace(params(3, 8), Write, 0x0FF0, 4096);
        let w = pieces(&t, Command::MemWriteRequest);
        assert_eq!(
            (w.len(), w[0], w[1], w[16]),
            (17, (0x0FF0, 16), (0x1000, 256), (0x1F00, 240))
        );
        assert_eq!((t.totals.bytes, t.bus.as_str()), (4096, "PCIe Gen3 x8"));
        // Only the head and tail lines are partial.
        assert_eq!(t.totals.partial_lines, 2);
        let largest = PcieParams {
            tlp_split: TlpSplit::Largest,
            ..params(3, 8)
        };
        let w = pieces(
            &trace(largest, Write, 0x0FF0, 4096),
            Command::MemWriteRequest,
        );
        assert_eq!(w[..2], [(0x0FF0, 16), (0x1000, 256)]);
        let w = pieces(
            &trace(params(3, 8), Write, 0x10, 600),
            Command::MemWriteRequest,
        );
        assert_eq!(w, [(0x10, 240), (0x100, 256), (0x200, 104)]);
    }

    #[test]
    fn completions_split_at_the_read_completion_boundary() {
        let p = PcieParams {
            max_payload_bytes: 128,
            ..params(3, 8)
        };
        let t = trace(p.clone(), Read, 0x1010, 512);
        assert_eq!(
            pieces(&t, Command::MemReadRequest),
            [(0x1010, 496), (0x1200, 16)]
        );
        let c = pieces(&t, Command::CompletionWithData);
        let sizes = [
            (0x1010, 112),
            (0x1080, 128),
            (0x1100, 128),
            (0x1180, 128),
            (0x1200, 16),
        ];
        assert_eq!((c, t.totals.bytes), (sizes.to_vec(), 512));
        let p = PcieParams {
            read_completion_boundary_bytes: 128,
            ..p
        };
        let c = pieces(&trace(p, Read, 0x1010, 300), Command::CompletionWithData);
        assert_eq!(c, [(0x1010, 112), (0x1080, 128), (0x1100, 60)]);
    }

    #[test]
    fn a_short_read_costs_request_latency_and_completion() {
        let l = link(params(3, 8));
        let t = l.transfer(Read, BusAddr(0x2000), 64).unwrap();
        let request = l.tlp_time(HEADER_3DW_BYTES, 0);
        let completion = l.tlp_time(HEADER_3DW_BYTES, 64);
        assert_eq!(
            t.totals.bus_time_ps,
            request + Ps::from_ns(500) + completion
        );
        assert_eq!(
            l.latency(Read, BusAddr(0x2000), 64).unwrap(),
            t.totals.bus_time_ps
        );
    }

    #[test]
    fn a_long_read_streams_at_the_link_rate() {
        let l = link(params(3, 8));
        let len = 1 << 20;
        let busy = u128::from(l.latency(Read, BusAddr(0), len).unwrap().0);
        // Enough tags to cover the latency: one latency plus the completions' serialisation.
        let first = u128::from((l.tlp_time(HEADER_3DW_BYTES, 0) + Ps::from_ns(500)).0);
        assert_eq!(busy, first + l.costs(Read, 0, len).data_ps);
        let bw = bandwidth(params(3, 8), Read, 0, len);
        let expected = efficiency(params(3, 8), Read, 0, len) * l.raw_bytes_per_s() as f64;
        assert!(
            (bw as f64 / expected - 1.0).abs() < 1e-6,
            "{bw} vs {expected}"
        );
        // With one tag, every request waits out the latency.
        let one_tag = PcieParams {
            max_outstanding_read_requests: 1,
            ..params(3, 8)
        };
        let slow = bandwidth(one_tag, Read, 0, len);
        assert!(slow < bw / 4, "{slow} vs {bw}");
    }

    #[test]
    fn gen6_x16_is_sensible() {
        let bw = bandwidth(params(6, 16), Write, 0, 64 * 1024);
        // 236 of 256 flit bytes carry TLPs, and 256 of 268 TLP bytes are data: 112.7 GB/s.
        assert!((110_000_000_000..118_000_000_000).contains(&bw), "{bw}");
        let gen5 = bandwidth(params(5, 16), Write, 0, 64 * 1024);
        assert!(bw > gen5 * 3 / 2, "{bw} vs {gen5}");
    }

    #[test]
    fn bad_spans_are_refused() {
        let l = link(params(3, 8));
        assert!(l.transfer(Read, BusAddr(0), 0).is_err());
        assert!(l.transfer(Write, BusAddr(u64::MAX - 4), 8).is_err());
        assert!(l
            .transfer(Write, BusAddr(0), MAX_TRANSFER_BYTES + 1)
            .is_err());
        let l = link(PcieParams {
            addressing_bits: 32,
            ..params(3, 8)
        });
        assert!(l.transfer(Write, BusAddr(0xFFFF_FF00), 256).is_ok());
        let err = l.transfer(Write, BusAddr(0xFFFF_FF00), 257).unwrap_err();
        assert!(err.to_string().contains("2^32"), "{err}");
    }

    #[test]
    fn parameters_out_of_range_are_refused() {
        let err = PcieLink::new(PcieParams {
            lanes: 3,
            ..params(3, 8)
        })
        .unwrap_err();
        let expected = "lanes is 3; valid: one of 1, 2, 4, 8, 12, 16, 32";
        assert!(err.to_string().contains(expected), "{err}");
        assert!(PcieLink::new(PcieParams {
            max_payload_bytes: 100,
            ..params(3, 8)
        })
        .is_err());
        assert!(PcieLink::new(params(7, 8)).is_err());
    }

    const PLATFORM: &str = r#"
        [bus.pcie]
        generation = { value = 3, source = "spec" }
        lanes = { value = 8, source = "lspci" }
        max_payload_bytes = { value = 256, source = "lspci" }
        max_read_request_bytes = { value = 512, source = "lspci" }
        read_completion_boundary_bytes = { value = 64, source = "lspci" }
        addressing_bits = { value = 64, source = "datasheet" }
        ecrc = { value = "off", source = "lspci" }
        tlp_split = { value = "aligned", assumed = "typical DMA engine" }
        read_latency_ns = { value = 500, fitted = "to a trace", claims = ["P9-TRACE"] }
        max_outstanding_read_requests = { value = 32, source = "datasheet" }
        tlps_per_ack = { value = 4, assumed = "ack coalescing" }
        tlps_per_fc_update = { value = 4, assumed = "credit return" }
        cache_line_bytes = { value = 64, source = "x86" }
        read_modify_write_ns = { value = 100, assumed = "DRAM" }
    "#;

    #[test]
    fn reads_from_a_platform_file_and_names_bad_fields() {
        let table: toml::Table = PLATFORM.parse().unwrap();
        let mut r = ParamReader::new("p.toml", &table, &BTreeMap::new()).unwrap();
        assert_eq!(
            PcieParams::read(&mut r, "bus.pcie", None).unwrap(),
            params(3, 8)
        );
        let bad = PLATFORM.replace("lanes = { value = 8", "lanes = { value = 6");
        let table: toml::Table = bad.parse().unwrap();
        let mut r = ParamReader::new("p.toml", &table, &BTreeMap::new()).unwrap();
        let err = PcieParams::read(&mut r, "bus.pcie", None).unwrap_err();
        assert!(matches!(err, SimError::InvalidField { .. }), "{err}");
        let expected = "p.toml: field `bus.pcie.lanes` is 6";
        assert!(err.to_string().contains(expected), "{err}");
    }
}
