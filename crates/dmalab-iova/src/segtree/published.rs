//! The backend's work counters, published for reads that take no lock (a sequence lock).
//!
//! A simulator reads a domain's counters after every call to charge its work, and a report may
//! read them at any time. Taking the backend mutex for that costs two atomic read-modify-writes
//! a read, and on a busy domain it queues behind the refills. So whoever holds the backend
//! publishes its counters as it lets go ([`BackendGuard`]'s drop), and a reader copies them
//! between two reads of a sequence number, retrying while a publish is under way. The holder of
//! the mutex is the only writer. The orderings are those of Boehm, "Can Seqlocks Get Along with
//! Programming Language Memory Models?" (MSPC 2012): the writer's release fence after its odd
//! sequence store, the reader's acquire fence before its second sequence load.

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{fence, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use super::depot::Backend;
use crate::types::WorkCounters;

/// Fields of [`WorkCounters`].
const FIELDS: usize = 9;

fn to_words(w: &WorkCounters) -> [u64; FIELDS] {
    [
        w.allocs,
        w.frees,
        w.failures,
        w.nodes_visited,
        w.words_scanned,
        w.lock_acquisitions,
        w.cache_hits,
        w.cache_misses,
        w.cache_flushes,
    ]
}

fn from_words(v: [u64; FIELDS]) -> WorkCounters {
    let [allocs, frees, failures, nodes_visited, words_scanned, lock_acquisitions, cache_hits, cache_misses, cache_flushes] =
        v;
    WorkCounters {
        allocs,
        frees,
        failures,
        nodes_visited,
        words_scanned,
        lock_acquisitions,
        cache_hits,
        cache_misses,
        cache_flushes,
    }
}

/// The last published copy of the backend's counters.
#[derive(Debug, Default)]
pub(super) struct PublishedWork {
    /// Odd while a publish is under way.
    seq: AtomicU64,
    words: [AtomicU64; FIELDS],
}

impl PublishedWork {
    /// Publish `w`. Only the holder of the backend mutex calls this.
    fn publish(&self, w: &WorkCounters) {
        let s = self.seq.load(Ordering::Relaxed);
        self.seq.store(s.wrapping_add(1), Ordering::Relaxed);
        fence(Ordering::Release);
        for (word, v) in self.words.iter().zip(to_words(w)) {
            word.store(v, Ordering::Relaxed);
        }
        self.seq.store(s.wrapping_add(2), Ordering::Release);
    }

    /// The counters as last published; `None` if publishes kept overlapping the read.
    pub fn read(&self) -> Option<WorkCounters> {
        for _ in 0..64 {
            let s = self.seq.load(Ordering::Acquire);
            if s.is_multiple_of(2) {
                let v: [u64; FIELDS] =
                    std::array::from_fn(|i| self.words[i].load(Ordering::Relaxed));
                fence(Ordering::Acquire);
                if self.seq.load(Ordering::Relaxed) == s {
                    return Some(from_words(v));
                }
            }
            std::hint::spin_loop();
        }
        None
    }
}

/// The backend, locked; publishes its counters when dropped, before the lock goes.
pub(super) struct BackendGuard<'a> {
    guard: MutexGuard<'a, Backend>,
    published: &'a PublishedWork,
}

impl<'a> BackendGuard<'a> {
    /// Lock `backend`, whose counters `published` carries.
    pub fn lock(backend: &'a Mutex<Backend>, published: &'a PublishedWork) -> Self {
        Self {
            guard: crate::lock(backend),
            published,
        }
    }
}

impl Deref for BackendGuard<'_> {
    type Target = Backend;
    fn deref(&self) -> &Backend {
        &self.guard
    }
}

impl DerefMut for BackendGuard<'_> {
    fn deref_mut(&mut self) -> &mut Backend {
        &mut self.guard
    }
}

impl Drop for BackendGuard<'_> {
    fn drop(&mut self) {
        // The fields drop after this body: the mutex is still held.
        self.published.publish(&self.guard.tree.work);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_round_trip_every_field() {
        let w = WorkCounters {
            allocs: 1,
            frees: 2,
            failures: 3,
            nodes_visited: 4,
            words_scanned: 5,
            lock_acquisitions: 6,
            cache_hits: 7,
            cache_misses: 8,
            cache_flushes: 9,
        };
        assert_eq!(from_words(to_words(&w)), w);
        let p = PublishedWork::default();
        p.publish(&w);
        assert_eq!(p.read(), Some(w));
    }

    #[test]
    fn a_reader_never_sees_a_torn_copy() {
        let p = PublishedWork::default();
        let stop = std::sync::atomic::AtomicBool::new(false);
        let reads = AtomicU64::new(0);
        std::thread::scope(|s| {
            s.spawn(|| {
                // At least 200,000 publishes, and on until the reader has read during them (on a
                // busy machine it may start late).
                let mut n = 0u64;
                while n < 200_000 || reads.load(Ordering::Relaxed) < 1_000 {
                    n += 1;
                    p.publish(&from_words([n; FIELDS]));
                }
                stop.store(true, Ordering::Relaxed);
            });
            let mut seen = 0;
            while !stop.load(Ordering::Relaxed) {
                if let Some(w) = p.read() {
                    let v = to_words(&w);
                    assert!(v.iter().all(|&x| x == v[0]), "torn read {v:?}");
                    seen += 1;
                    reads.fetch_add(1, Ordering::Relaxed);
                }
            }
            assert!(seen > 0);
        });
    }
}
