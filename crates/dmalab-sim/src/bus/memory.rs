//! The host memory path behind the root complex, served in cache lines: where a DMA's lines are
//! (the last-level cache or DRAM, in the device's socket or the other one) and what each line
//! costs. A platform's `[memory]` section.
//!
//! The model, in dmalab's words:
//! - **Lines, not bytes.** The root complex serves a request as the cache lines it touches: a
//!   read of part of a line fetches the whole line, and a request that crosses a line boundary
//!   touches both lines. Each line occupies the root complex for `line_ns` (a pipeline: the
//!   lines of one request follow each other `line_ns` apart, and lines of different requests
//!   share the same pipeline), so the root complex moves at most one line per `line_ns`.
//!   Each request also takes `request_ns` of that pipeline for its header (decode, address
//!   check, a tracker entry), so it serves a bounded rate of requests as well as of lines; and
//!   a line touched only in part (a request that starts or ends inside a line, as every
//!   line-crossing request of an unaligned buffer does) takes `partial_line_ns` more there (a
//!   read: the coherent read of a line the request does not cover and the byte lanes cut out of
//!   it; a write: besides the merge below, the read for ownership a whole-line write skips).
//! - **A line's read time** is `llc_ns` when it hits the last-level cache and `dram_ns` when it
//!   comes from DRAM, plus `socket_link_ns` when its home is the other socket. A request's
//!   first data is ready `root_complex_ns` plus its first line's read time after it arrives.
//! - **Bandwidth below the root complex.** A line from DRAM occupies the home socket's DRAM for
//!   `line_bytes / dram_bytes_per_us`; a line whose home is the other socket occupies the
//!   socket link for `line_bytes / socket_link_bytes_per_us`.
//! - **Where the lines are.** A cold buffer is in DRAM. A warm buffer's lines are in the LLC of
//!   their home socket when the buffer fits the cache: a sequential sweep over a window larger
//!   than the cache hits nothing (each line was evicted before its turn came again under LRU),
//!   while random accesses over such a window hit with probability capacity / window. Reads
//!   look in the whole LLC (`llc_bytes`). Writes to the device's own socket with write
//!   allocation on (Intel DDIO) go to the LLC and may allocate only in its I/O share
//!   (`llc_io_bytes`); lines evicted from that share go to DRAM. Without write allocation, and
//!   always for the other socket, written lines go to their home's DRAM. A buffer the device
//!   itself has just written (`device-warm`) is therefore in the I/O share as far as it fits,
//!   not in the whole LLC: DMA reads that follow hit over a window up to `llc_io_bytes`.
//!   (Intel, "Intel Data
//!   Direct I/O Technology (Intel DDIO): A Primer", 2012, describes write update, write
//!   allocate and the limited ways; LRU's behaviour under a cyclic sweep is textbook.)
//! - **Partial-line writes** make the line be read, merged and written back: `llc_ns` when the
//!   line is in the cache, otherwise the bus's `read_modify_write_ns`, and one more line of
//!   root-complex and DRAM work ([`crate::bus::memctl`] counts the partial lines).

use crate::config::params::{ParamReader, Valid};
use crate::error::Result;
use serde::{Deserialize, Serialize};

const NS: Valid = Valid::Range(0, 100_000);
const LINE_NS: Valid = Valid::Range(0, 10_000);
const BYTES_PER_US: Valid = Valid::Range(1, 10_000_000);
const CAPACITY: Valid = Valid::Range(0, 1 << 40);
const POSTED: Valid = Valid::Range(1, 4096);

/// Where a buffer's home memory is, seen from the device.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Home {
    /// Memory of the socket the device is attached to.
    Local,
    /// Memory of the other socket, across the socket link.
    Remote,
}

/// Whether the buffer's lines were in the cache before the DMA.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Cache {
    /// The buffer was recently touched: its lines are in its home socket's LLC as far as they fit.
    Warm,
    /// The buffer's lines are in DRAM only.
    Cold,
    /// The device itself wrote the buffer just before: with write allocation (Intel DDIO) its
    /// lines are in the LLC's I/O share as far as they fit (the share keeps the last of them),
    /// without it, or for the other socket, in DRAM only.
    DeviceWarm,
}

/// How the DMAs walk the buffer window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Access {
    /// One after the other through the window, wrapping around.
    Seq,
    /// At uniformly random places in the window.
    Random,
}

/// The memory path's parameters (a platform's `[memory]` section).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct MemoryPath {
    /// The cache-line size: the bus section's `cache_line_bytes`, which the platform sets after
    /// reading both sections.
    pub line_bytes: u64,
    /// A request's fixed time through the root complex, in and out, besides its line reads.
    pub root_complex_ns: u64,
    /// The root complex's time per line (pipelined); also its throughput, one line per this.
    pub line_ns: u64,
    /// The root complex's pipeline time per request, besides its lines (header decode, address
    /// check, a tracker entry).
    pub request_ns: u64,
    /// The root complex's extra pipeline time for a line a request touches only in part.
    pub partial_line_ns: u64,
    /// A line read that hits the last-level cache of the line's home socket.
    pub llc_ns: u64,
    /// A line read from the DRAM of the line's home socket.
    pub dram_ns: u64,
    /// One socket's DRAM bandwidth, bytes per microsecond.
    pub dram_bytes_per_us: u64,
    /// One socket's last-level cache, bytes.
    pub llc_bytes: u64,
    /// The part of the LLC that DMA writes may allocate lines in (0: none).
    pub llc_io_bytes: u64,
    /// Whether DMA writes to the device's socket allocate in its LLC (Intel DDIO) rather than
    /// going to DRAM.
    pub write_allocate: bool,
    /// Added latency of a line whose home is the other socket.
    pub socket_link_ns: u64,
    /// The socket link's bandwidth in one direction, bytes per microsecond.
    pub socket_link_bytes_per_us: u64,
    /// Posted writes the root port holds at once (its posted receive buffer, whose credits it
    /// advertises): each credit from the write going on the link until its lines are committed
    /// (in the LLC, or at the home's memory controller), so that a longer commit (remote
    /// memory, a translation's walk) lowers the write rate where they bind.
    pub posted_writes: u64,
}

impl MemoryPath {
    /// Whether the host has a second socket behind a link (`socket_link_ns` above 0): a
    /// buffer may be homed there, a CPU may run there. One test, for every model that asks.
    pub fn has_socket_link(&self) -> bool {
        self.socket_link_ns > 0 && self.socket_link_bytes_per_us > 0
    }

    /// Read the section under `prefix`; `line_bytes` is left 0 for the platform to set from the
    /// bus section.
    pub fn read(r: &mut ParamReader<'_>, prefix: &str) -> Result<MemoryPath> {
        let f = |name: &str| format!("{prefix}.{name}");
        let m = MemoryPath {
            line_bytes: 0,
            root_complex_ns: NS.read(r, &f("root_complex_ns"))?,
            line_ns: LINE_NS.read(r, &f("line_ns"))?,
            request_ns: LINE_NS.read(r, &f("request_ns"))?,
            partial_line_ns: LINE_NS.read(r, &f("partial_line_ns"))?,
            llc_ns: NS.read(r, &f("llc_ns"))?,
            dram_ns: NS.read(r, &f("dram_ns"))?,
            dram_bytes_per_us: BYTES_PER_US.read(r, &f("dram_bytes_per_us"))?,
            llc_bytes: CAPACITY.read(r, &f("llc_bytes"))?,
            llc_io_bytes: CAPACITY.read(r, &f("llc_io_bytes"))?,
            write_allocate: r.choice(&f("write_allocate"), &["on", "off"])? == "on",
            socket_link_ns: NS.read(r, &f("socket_link_ns"))?,
            socket_link_bytes_per_us: BYTES_PER_US.read(r, &f("socket_link_bytes_per_us"))?,
            posted_writes: POSTED.read(r, &f("posted_writes"))?,
        };
        if m.llc_ns > m.dram_ns {
            let valid = format!(
                "0..={} (at most {prefix}.dram_ns: a cache hit is not slower)",
                m.dram_ns
            );
            return Err(r.invalid(&f("llc_ns"), &int(m.llc_ns), &valid));
        }
        if m.llc_io_bytes > m.llc_bytes {
            let valid = format!("0..={} (at most {prefix}.llc_bytes)", m.llc_bytes);
            return Err(r.invalid(&f("llc_io_bytes"), &int(m.llc_io_bytes), &valid));
        }
        Ok(m)
    }

    /// The latency of a one-line read from cold local memory: what the root complex adds to a
    /// read request whose data fits one line, before any wire time.
    pub fn one_line_read_ns(&self) -> u64 {
        self.root_complex_ns + self.dram_ns
    }

    /// The share of lines found in the cache, as (hits, out of) lines, for DMA reads or
    /// (`write`) writes over a window of `window_bytes` with `home`, `cache` and `access`.
    pub fn hit_share(
        &self,
        write: bool,
        window_bytes: u64,
        home: Home,
        cache: Cache,
        access: Access,
    ) -> (u64, u64) {
        let capacity = if !write {
            match cache {
                Cache::Cold => return (0, 1),
                Cache::Warm => self.llc_bytes,
                // The device's own writes allocated only in the I/O share, and only where
                // they allocate at all.
                Cache::DeviceWarm => {
                    if home == Home::Remote || !self.write_allocate {
                        return (0, 1);
                    }
                    self.llc_io_bytes
                }
            }
        } else {
            if home == Home::Remote || !self.write_allocate {
                return (0, 1);
            }
            match cache {
                // A written line already in the LLC is updated in place (write update).
                Cache::Warm => self.llc_bytes,
                // A line not yet there is allocated in the I/O share; steady state: the share
                // keeps what fits of the window (where the device wrote it before, the same
                // share already holds it).
                Cache::Cold | Cache::DeviceWarm => self.llc_io_bytes,
            }
        };
        let window = window_bytes.max(1);
        if capacity >= window {
            return (1, 1);
        }
        match access {
            Access::Seq => (0, 1),
            Access::Random => (capacity, window),
        }
    }

    /// Picoseconds a line occupies a resource of `bytes_per_us`, rounded up.
    pub fn line_occupancy_ps(&self, bytes_per_us: u64) -> u64 {
        (self.line_bytes * 1_000_000).div_ceil(bytes_per_us.max(1))
    }
}

/// A TOML integer for an error message (the values checked here are at most 2^40).
fn int(n: u64) -> toml::Value {
    toml::Value::Integer(i64::try_from(n).unwrap_or(i64::MAX))
}

/// Whether line number `k` of a run hits, for a hit share of `hits` out of `of`: spreads the
/// hits evenly and deterministically (line `k` hits when `floor((k+1)·hits/of)` steps up).
pub fn line_hits(k: u64, (hits, of): (u64, u64)) -> bool {
    // In 64 bits where the products fit (every run's line count in practice): the same
    // answer, without two 128-bit divisions on every line served.
    if let Some(next) = k.checked_add(1).and_then(|n| n.checked_mul(hits)) {
        let of = of.max(1);
        return next / of > k * hits / of;
    }
    let of = u128::from(of.max(1));
    let hits = u128::from(hits);
    let k = u128::from(k);
    (k + 1) * hits / of > k * hits / of
}

/// The number of `line_bytes` lines `[addr, addr + bytes)` touches.
pub fn lines_touched(addr: u64, bytes: u64, line_bytes: u64) -> u64 {
    if bytes == 0 {
        return 0;
    }
    let end = addr.saturating_add(bytes);
    (end - 1) / line_bytes - addr / line_bytes + 1
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A two-socket server's memory path in the shape of `xeon-broadwell-2s`, for other
    /// modules' unit tests.
    pub(crate) fn two_socket() -> MemoryPath {
        MemoryPath {
            line_bytes: 64,
            root_complex_ns: 200,
            line_ns: 2,
            request_ns: 2,
            partial_line_ns: 2,
            llc_ns: 20,
            dram_ns: 80,
            dram_bytes_per_us: 76_800,
            llc_bytes: 32 << 20,
            llc_io_bytes: 4 << 20,
            write_allocate: true,
            socket_link_ns: 50,
            socket_link_bytes_per_us: 38_400,
            posted_writes: 64,
        }
    }

    fn path() -> MemoryPath {
        MemoryPath {
            line_bytes: 64,
            root_complex_ns: 100,
            line_ns: 2,
            request_ns: 2,
            partial_line_ns: 2,
            llc_ns: 40,
            dram_ns: 90,
            dram_bytes_per_us: 60_000,
            llc_bytes: 32 << 20,
            llc_io_bytes: 3 << 20,
            write_allocate: true,
            socket_link_ns: 120,
            socket_link_bytes_per_us: 19_200,
            posted_writes: 64,
        }
    }

    #[test]
    fn lines_touched_counts_partial_and_crossing_lines() {
        assert_eq!(lines_touched(0, 64, 64), 1);
        assert_eq!(lines_touched(0, 65, 64), 2);
        assert_eq!(lines_touched(0, 63, 64), 1);
        assert_eq!(lines_touched(1, 64, 64), 2);
        assert_eq!(lines_touched(63, 2, 64), 2);
        assert_eq!(lines_touched(5, 0, 64), 0);
    }

    #[test]
    fn hits_follow_capacity_and_access() {
        let p = path();
        let big = 1 << 30;
        assert_eq!(
            p.hit_share(false, 4096, Home::Local, Cache::Warm, Access::Seq),
            (1, 1)
        );
        assert_eq!(
            p.hit_share(false, 4096, Home::Local, Cache::Cold, Access::Seq),
            (0, 1)
        );
        assert_eq!(
            p.hit_share(false, big, Home::Local, Cache::Warm, Access::Seq),
            (0, 1)
        );
        assert_eq!(
            p.hit_share(false, big, Home::Local, Cache::Warm, Access::Random),
            (32 << 20, big)
        );
        // Writes to the other socket never allocate in this socket's LLC.
        assert_eq!(
            p.hit_share(true, 4096, Home::Remote, Cache::Warm, Access::Seq),
            (0, 1)
        );
        // Cold writes allocate in the I/O share only.
        assert_eq!(
            p.hit_share(true, 8 << 20, Home::Local, Cache::Cold, Access::Seq),
            (0, 1)
        );
        assert_eq!(
            p.hit_share(true, 8 << 20, Home::Local, Cache::Warm, Access::Seq),
            (1, 1)
        );
    }

    #[test]
    fn reads_after_the_devices_own_writes_hit_the_io_share_only() {
        let p = path();
        let io = p.llc_io_bytes;
        let read =
            |window, home, access| p.hit_share(false, window, home, Cache::DeviceWarm, access);
        // Within the I/O share: every line; beyond it, random reads hit share / window and a
        // sequential sweep nothing, though the whole LLC would have held the window.
        assert_eq!(read(io, Home::Local, Access::Seq), (1, 1));
        assert_eq!(read(2 * io, Home::Local, Access::Random), (io, 2 * io));
        assert_eq!(read(2 * io, Home::Local, Access::Seq), (0, 1));
        assert!(2 * io <= p.llc_bytes);
        assert_eq!(
            p.hit_share(false, 2 * io, Home::Local, Cache::Warm, Access::Seq),
            (1, 1)
        );
        // The other socket's memory, or no write allocation: the device's writes went to DRAM.
        assert_eq!(read(4096, Home::Remote, Access::Seq), (0, 1));
        let plain = MemoryPath {
            write_allocate: false,
            ..p.clone()
        };
        assert_eq!(
            plain.hit_share(false, 4096, Home::Local, Cache::DeviceWarm, Access::Seq),
            (0, 1)
        );
    }

    #[test]
    fn hits_are_spread_evenly() {
        let hits = (0..100).filter(|&k| line_hits(k, (1, 4))).count();
        assert_eq!(hits, 25);
        assert!((0..10).all(|k| line_hits(k, (1, 1))));
        assert!((0..10).all(|k| !line_hits(k, (0, 1))));
    }
}
