//! A run's timeline: what each CPU, device, data path and invalidation unit did and when, as
//! slices (a named span of simulated time on a track), for a trace viewer such as Perfetto.
//!
//! Recording is bounded: past `limit` slices the rest are counted, not kept, so a long run
//! cannot run out of memory for its picture. A slice of zero length is not recorded.

use crate::units::Ps;
use serde::Serialize;

/// Where a slice happens.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case", tag = "kind", content = "index")]
pub enum Track {
    /// A submitting thread's CPU: submit, map, complete, unmap, waits.
    Cpu(usize),
    /// A device's I/O slots: translation of the buffer's pages and its fixed latency.
    Device(usize),
    /// A device's data path: the bytes moving.
    DataPath(usize),
    /// A socket's IOMMU invalidation hardware, serving the CPUs' invalidations in turn.
    Invalidation(usize),
    /// A network host's core (host 0 the client, 1 the server): its stack, driver and
    /// mapping work.
    HostCore {
        /// 0 the client, 1 the server.
        host: usize,
        /// The core.
        core: usize,
    },
    /// A network host's wire to the other host: the frames it sends.
    Wire(usize),
    /// A network host's link to its NIC, one direction: the NIC's DMA reads or writes.
    Link {
        /// 0 the client, 1 the server.
        host: usize,
        /// The NIC's writes (received frames, completions), else its reads.
        write: bool,
    },
}

impl Track {
    /// The track's name as a viewer shows it, such as `cpu 3`.
    pub fn label(self) -> String {
        match self {
            Track::Cpu(i) => format!("cpu {i}"),
            Track::Device(i) => format!("device {i}"),
            Track::DataPath(i) => format!("device {i} data path"),
            Track::Invalidation(i) => format!("iommu {i} invalidation"),
            Track::HostCore { host, core } => format!("{} core {core}", host_name(host)),
            Track::Wire(host) => format!("{} wire", host_name(host)),
            Track::Link { host, write } => format!(
                "{} link, NIC {}",
                host_name(host),
                if write { "writes" } else { "reads" }
            ),
        }
    }
}

/// A network host's name by its index.
fn host_name(host: usize) -> &'static str {
    if host == 0 {
        "client"
    } else {
        "server"
    }
}

/// One span of simulated time on a track.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Slice {
    /// Where.
    pub track: Track,
    /// What: a breakdown component's name, such as `map: IOVA allocation`.
    pub name: &'static str,
    /// When it starts.
    pub start_ps: Ps,
    /// How long it lasts (never zero).
    pub duration_ps: Ps,
}

/// The slices of a run, in the order they were booked, up to a limit.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Timeline {
    limit: usize,
    slices: Vec<Slice>,
    dropped: u64,
}

impl Timeline {
    /// A timeline that keeps at most `limit` slices (0: records nothing, costs nothing).
    pub fn new(limit: usize) -> Timeline {
        Timeline {
            limit,
            slices: Vec::with_capacity(limit.min(1 << 16)),
            dropped: 0,
        }
    }

    /// Whether anything is recorded at all (a model checks it before building its slices, so
    /// that a run without a timeline pays one comparison per booking).
    #[inline]
    pub fn is_on(&self) -> bool {
        self.limit > 0
    }

    /// Record `name` on `track` from `start` for `duration` (nothing if `duration` is zero;
    /// counted as dropped past the limit).
    pub fn slice(&mut self, track: Track, name: &'static str, start: Ps, duration: Ps) {
        if self.limit == 0 || duration == Ps::ZERO {
            return;
        }
        if self.slices.len() >= self.limit {
            self.dropped += 1;
            return;
        }
        self.slices.push(Slice {
            track,
            name,
            start_ps: start,
            duration_ps: duration,
        });
    }

    /// Record `parts` back to back on `track` from `start`, each a slice of its own (zero parts
    /// left out); returns when the last ends.
    pub fn slices(&mut self, track: Track, start: Ps, parts: &[(&'static str, Ps)]) -> Ps {
        let mut at = start;
        for &(name, duration) in parts {
            self.slice(track, name, at, duration);
            at += duration;
        }
        at
    }

    /// Append `other`'s slices (within this timeline's limit; the rest counted as dropped) and
    /// its dropped count.
    pub fn absorb(&mut self, other: Timeline) {
        let room = self.limit.saturating_sub(self.slices.len());
        let taken = other.slices.len().min(room);
        self.dropped += other.dropped + (other.slices.len() - taken) as u64;
        self.slices.extend(other.slices.into_iter().take(taken));
    }

    /// The slices kept, in booking order.
    pub fn kept(&self) -> &[Slice] {
        &self.slices
    }

    /// Slices not kept because the limit was reached.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// The most slices kept.
    pub fn limit(&self) -> usize {
        self.limit
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_up_to_its_limit_and_counts_the_rest() {
        let mut t = Timeline::new(2);
        for i in 0..5 {
            t.slice(Track::Cpu(0), "submit", Ps(i * 10), Ps(5));
        }
        assert_eq!((t.kept().len(), t.dropped()), (2, 3));
        assert_eq!(t.kept()[1].start_ps, Ps(10));
    }

    #[test]
    fn zero_lengths_and_a_zero_limit_record_nothing() {
        let mut off = Timeline::new(0);
        off.slice(Track::Device(0), "device", Ps(0), Ps(5));
        assert!(!off.is_on());
        assert_eq!((off.kept().len(), off.dropped()), (0, 0));
        let mut t = Timeline::new(10);
        let end = t.slices(
            Track::Cpu(1),
            Ps(100),
            &[("a", Ps(5)), ("b", Ps::ZERO), ("c", Ps(7))],
        );
        assert_eq!(end, Ps(112));
        let names: Vec<_> = t.kept().iter().map(|s| (s.name, s.start_ps)).collect();
        assert_eq!(names, vec![("a", Ps(100)), ("c", Ps(105))]);
    }

    #[test]
    fn absorbing_keeps_the_limit_and_adds_the_drops() {
        let mut all = Timeline::new(3);
        let mut client = Timeline::new(3);
        let mut server = Timeline::new(3);
        for i in 0..4 {
            client.slice(Track::Wire(0), "frames", Ps(i), Ps(1));
            server.slice(Track::Wire(1), "frames", Ps(i), Ps(1));
        }
        all.absorb(client);
        all.absorb(server);
        assert_eq!(all.kept().len(), 3);
        assert!(all.kept().iter().all(|s| s.track == Track::Wire(0)));
        // One dropped by each host, then the server's three kept ones past the limit.
        assert_eq!(all.dropped(), 5);
    }

    #[test]
    fn tracks_have_readable_labels() {
        assert_eq!(Track::Invalidation(1).label(), "iommu 1 invalidation");
        assert_eq!(Track::DataPath(0).label(), "device 0 data path");
        assert_eq!(
            Track::HostCore { host: 1, core: 2 }.label(),
            "server core 2"
        );
        let link = Track::Link {
            host: 0,
            write: true,
        };
        assert_eq!(link.label(), "client link, NIC writes");
    }
}
