//! Protocol and architecture constants the models use, each written once with its source.
//!
//! They sit in `config/`, below the workloads, because the cost parameters ([`super::costs`])
//! and the scenario schema ([`super::scenario`]) read them as well as the workload models.

/// The Ethernet header a NIC's send descriptor holds with the IP packet: destination and source
/// addresses and the EtherType (IEEE 802.3, clause 3.1.1).
pub const ETHERNET_HEADER_BYTES: u64 = 14;

/// An IPv4 header without options (RFC 791, section 3.1).
pub const IPV4_HEADER_BYTES: u64 = 20;

/// A UDP header (RFC 768).
pub const UDP_HEADER_BYTES: u64 = 8;

/// A TCP header without options (RFC 9293, section 3.1).
pub const TCP_HEADER_BYTES: u64 = 20;

/// The TCP timestamp option as Linux sends it on every segment by default: 10 bytes padded to
/// 12 (RFC 7323, section 3).
pub const TCP_TIMESTAMP_OPTION_BYTES: u64 = 12;

/// IPv4 and UDP headers of one datagram.
pub const IPV4_UDP_HEADER_BYTES: u64 = IPV4_HEADER_BYTES + UDP_HEADER_BYTES;

/// IPv4 and TCP headers of one segment, without options.
pub const IPV4_TCP_HEADER_BYTES: u64 = IPV4_HEADER_BYTES + TCP_HEADER_BYTES;

/// IPv4 and TCP headers of one segment with the timestamp option.
pub const IPV4_TCP_TIMESTAMP_HEADER_BYTES: u64 = IPV4_TCP_HEADER_BYTES + TCP_TIMESTAMP_OPTION_BYTES;

/// The x86 interrupt address window, 0xFEE0_0000 to 0xFEEF_FFFF inclusive: a DMA write there is
/// an MSI, not memory, so an IOMMU domain keeps it out of its IOVA space (Intel SDM vol. 3A,
/// section 11.11.1, "Message Address Register Format").
pub const X86_INTERRUPT_WINDOW: (u64, u64) = (0xFEE0_0000, 0xFEEF_FFFF);
