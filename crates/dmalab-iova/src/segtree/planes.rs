//! Lazily allocated storage: atomic bit planes and tree-node arrays whose memory follows the part
//! of the domain in use, not its size (a 48-bit domain with a few thousand mappings stays small).
//!
//! Both use a two-level directory of fixed-size chunks; an absent chunk reads as all zeros, so
//! the encodings are chosen to make zero mean "free".

use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};

// A set-once pointer: reading it is one acquire load and a null test, where `OnceLock` also
// reads its state word (a visible share of a one-page map-and-unmap, which looks up the live
// plane on both calls).
use once_cell::race::OnceBox;

/// Chunks under one directory block.
const FANOUT: usize = 256;
/// Words in a bit-plane chunk: 256 words, 16384 pages, 2 KiB.
const PLANE_CHUNK_WORDS: usize = 256;
/// Pages in a live-plane chunk: 2048 bytes.
pub(super) const LIVE_CHUNK: usize = 2048;

type Chunk<T, const C: usize> = [T; C];
type Block<T, const C: usize> = [OnceBox<Chunk<T, C>>; FANOUT];

/// Cells `T` indexed by `u64`, created a chunk of `C` at a time on first write, under a
/// two-level directory; any thread may read or create them without a lock.
#[derive(Debug)]
struct LazyChunks<T, const C: usize> {
    dir: Box<[OnceBox<Block<T, C>>]>,
    chunks: AtomicUsize,
    blocks: AtomicUsize,
}

impl<T: Default, const C: usize> LazyChunks<T, C> {
    /// Room for at least `len` cells, none created.
    fn new(len: u64) -> Self {
        let n = len.div_ceil((C * FANOUT) as u64).max(1) as usize;
        Self {
            dir: (0..n).map(|_| OnceBox::new()).collect(),
            chunks: AtomicUsize::new(0),
            blocks: AtomicUsize::new(0),
        }
    }

    #[inline]
    fn split(i: u64) -> (usize, usize, usize) {
        let i = i as usize;
        (i / (C * FANOUT), (i / C) % FANOUT, i % C)
    }

    /// Cell `i`, if its chunk exists.
    #[inline]
    fn get(&self, i: u64) -> Option<&T> {
        self.chunk(i / C as u64)
            .map(|chunk| &chunk[(i % C as u64) as usize])
    }

    /// Chunk `n` (cells `n * C` on), if it exists.
    #[inline]
    fn chunk(&self, n: u64) -> Option<&Chunk<T, C>> {
        let (d, c, _) = Self::split(n * C as u64);
        self.dir.get(d)?.get()?[c].get()
    }

    /// Cell `i`, creating its chunk if needed.
    #[inline]
    fn get_or_create(&self, i: u64) -> &T {
        match self.get(i) {
            Some(cell) => cell,
            None => self.create(i),
        }
    }

    #[cold]
    #[inline(never)]
    fn create(&self, i: u64) -> &T {
        let (d, c, o) = Self::split(i);
        let block = install(
            &self.dir[d],
            || Box::new(std::array::from_fn(|_| OnceBox::new())),
            &self.blocks,
        );
        let chunk = install(
            &block[c],
            || Box::new(std::array::from_fn(|_| T::default())),
            &self.chunks,
        );
        &chunk[o]
    }

    /// If the chunk holding cell `i` does not exist, the first index past it.
    fn absent_chunk_end(&self, i: u64) -> Option<u64> {
        let (d, c, _) = Self::split(i);
        let present = self
            .dir
            .get(d)
            .and_then(OnceBox::get)
            .and_then(|b| b[c].get())
            .is_some();
        (!present).then(|| (i / C as u64 + 1) * C as u64)
    }

    /// Every cell of every existing chunk.
    fn present(&self) -> impl Iterator<Item = &T> {
        self.dir
            .iter()
            .filter_map(OnceBox::get)
            .flat_map(|block| block.iter().filter_map(OnceBox::get))
            .flat_map(|chunk| chunk.iter())
    }

    /// Heap bytes held.
    fn bytes(&self) -> usize {
        self.dir.len() * std::mem::size_of::<OnceBox<Block<T, C>>>()
            + self.blocks.load(Ordering::Relaxed) * std::mem::size_of::<Block<T, C>>()
            + self.chunks.load(Ordering::Relaxed) * std::mem::size_of::<Chunk<T, C>>()
    }
}

/// The value in `slot`, made by `make` if absent; `count` counts the values installed (of racing
/// makers one installs, the others' values are dropped).
fn install<'a, X>(
    slot: &'a OnceBox<X>,
    make: impl FnOnce() -> Box<X>,
    count: &AtomicUsize,
) -> &'a X {
    if slot.get().is_none() && slot.set(make()).is_ok() {
        count.fetch_add(1, Ordering::Relaxed);
    }
    slot.get_or_init(make_unreachable)
}

/// Never called: `install` reads the slot only after it was set, by this thread or another.
#[cold]
fn make_unreachable<X>() -> Box<X> {
    unreachable!("a set-once slot read as empty after it was set")
}

/// A bit plane with one bit per page, readable and writable from any thread without a lock.
#[derive(Debug)]
pub(crate) struct BitPlane {
    words: LazyChunks<AtomicU64, PLANE_CHUNK_WORDS>,
}

impl BitPlane {
    /// A plane of at least `words` words, all zero.
    pub fn new(words: u64) -> Self {
        Self {
            words: LazyChunks::new(words),
        }
    }

    #[inline]
    fn word_if_present(&self, w: u64) -> Option<&AtomicU64> {
        self.words.get(w)
    }

    #[inline]
    fn word_or_create(&self, w: u64) -> &AtomicU64 {
        self.words.get_or_create(w)
    }

    /// If the chunk holding word `w` was never written, the first word past it.
    pub fn absent_chunk_end(&self, w: u64) -> Option<u64> {
        self.words.absent_chunk_end(w)
    }

    /// Word `w` (zero if never written).
    #[inline]
    pub fn load(&self, w: u64) -> u64 {
        self.word_if_present(w)
            .map_or(0, |a| a.load(Ordering::Acquire))
    }

    /// Set `mask` in word `w`; returns the word before.
    #[inline]
    pub fn fetch_or(&self, w: u64, mask: u64) -> u64 {
        self.word_or_create(w).fetch_or(mask, Ordering::AcqRel)
    }

    /// Clear `mask` in word `w`; returns the word before.
    #[inline]
    pub fn fetch_clear(&self, w: u64, mask: u64) -> u64 {
        self.word_if_present(w)
            .map_or(0, |a| a.fetch_and(!mask, Ordering::AcqRel))
    }

    /// Whether bit `i` is set.
    #[inline]
    pub fn test(&self, i: u64) -> bool {
        self.load(i / 64) >> (i % 64) & 1 == 1
    }

    /// The first set bit in `[lo, hi]`, and the words read. Absent chunks are skipped whole.
    pub fn next_set(&self, lo: u64, hi: u64) -> (Option<u64>, u64) {
        let mut read = 0;
        let mut w = lo / 64;
        while w <= hi / 64 {
            if let Some(next) = self.words.absent_chunk_end(w) {
                w = next;
                continue;
            }
            read += 1;
            let mut word = self.load(w);
            if w == lo / 64 {
                word &= u64::MAX << (lo % 64);
            }
            if word != 0 {
                let i = w * 64 + u64::from(word.trailing_zeros());
                return ((i <= hi).then_some(i), read);
            }
            w += 1;
        }
        (None, read)
    }

    /// Heap bytes held.
    pub fn bytes(&self) -> usize {
        self.words.bytes()
    }
}

/// The live byte of a range of this many pages or more: its size is read from the ends plane.
pub(crate) const LIVE_LONG: u8 = 0xfe;
/// A live byte taken by a free: still live until that free decides.
pub(crate) const FREEING: u8 = 0xff;

/// The live byte of a range of `pages` pages (at least 1): the size itself below
/// [`LIVE_LONG`], so that a free of a shorter range is checked by the byte alone.
#[inline]
pub(crate) fn live_code(pages: u64) -> u8 {
    pages.min(u64::from(LIVE_LONG)) as u8
}

/// One byte per page: non-zero while a caller holds the allocation starting there (its
/// [`live_code`], or [`FREEING`]), zero otherwise.
///
/// A byte rather than a bit so that the owner of a range can mark it live with a plain store:
/// a store to a byte never disturbs its neighbours, whereas setting a bit shared with other
/// ranges takes an atomic read-modify-write. A free takes the byte with a compare-exchange, so
/// of two racing frees exactly one wins. The byte holds the size of ranges under [`LIVE_LONG`]
/// pages, so such a free needs no second plane: the compare-exchange against the size the
/// caller gave checks the size too.
#[derive(Debug)]
pub(crate) struct LivePlane {
    bytes: LazyChunks<AtomicU8, LIVE_CHUNK>,
}

impl LivePlane {
    /// A plane of at least `pages` bytes, all clear.
    pub fn new(pages: u64) -> Self {
        Self {
            bytes: LazyChunks::new(pages),
        }
    }

    /// Whether page `i` starts a live allocation.
    #[inline]
    pub fn is_live(&self, i: u64) -> bool {
        self.cell(i).is_some_and(|b| b.load(Ordering::Acquire) != 0)
    }

    /// The byte of page `i`, if its chunk exists (a page whose chunk does not exist is not live).
    #[inline]
    pub fn cell(&self, i: u64) -> Option<&AtomicU8> {
        self.bytes.get(i)
    }

    /// The byte of page `i` if `memo` holds its chunk: without the directory's dependent loads
    /// (see [`LiveMemo`]). `None` says only that the memo holds another chunk (or none);
    /// [`Self::refill_memo`] moves it, out of the caller's hot path.
    ///
    /// # Safety
    /// `memo` has never been used with another plane: the address it keeps is one of this
    /// plane's chunks, which live as long as the plane.
    #[inline(always)]
    pub unsafe fn memo_cell(&self, memo: &LiveMemo, i: u64) -> Option<&AtomicU8> {
        let (n, o) = (i / LIVE_CHUNK as u64, (i % LIVE_CHUNK as u64) as usize);
        if memo.chunk != n {
            return None;
        }
        // SAFETY: `memo.bytes` is chunk `n` of this plane (the caller's contract), which is
        // never freed while the plane lives, and `o` is within it.
        Some(unsafe { &*memo.bytes.add(o) })
    }

    /// Keep in `memo` the chunk that holds page `i`, if it exists (else leave `memo` as it is).
    #[cold]
    #[inline(never)]
    pub fn refill_memo(&self, memo: &mut LiveMemo, i: u64) {
        let n = i / LIVE_CHUNK as u64;
        if let Some(chunk) = self.bytes.chunk(n) {
            *memo = LiveMemo {
                chunk: n,
                bytes: chunk.as_ptr(),
            };
        }
    }

    /// Mark page `i` live as the start of a range of `pages` pages. Only the holder of the
    /// range may call this (no other writer exists while the byte is clear).
    #[inline]
    pub fn set_live(&self, i: u64, pages: u64) {
        self.bytes
            .get_or_create(i)
            .store(live_code(pages), Ordering::Release);
    }

    /// Number of live pages, visiting only chunks that exist.
    pub fn count(&self) -> u64 {
        self.bytes
            .present()
            .filter(|b| b.load(Ordering::Acquire) != 0)
            .count() as u64
    }

    /// Heap bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes.bytes()
    }
}

/// The live-plane chunk a thread's cache used last: its number and address.
///
/// Both cached calls look up a range's live byte, and through the directory that is three
/// dependent loads before the byte (the directory, its block, the chunk). On a one-page
/// map-and-unmap the compare-exchange of the free waits on them, and they cost more than any
/// other part of the pair (`docs/results/2026-12-06-live-memo.md`). A cache's ranges come back
/// to it, so the chunk of the last one is almost always the next one's: the memo answers with
/// one load from the cache, already in hand. Chunks are set once and never freed while their
/// plane lives, so the address stays good as long as the memo serves that one plane.
#[derive(Debug)]
pub(crate) struct LiveMemo {
    /// The chunk's number; `u64::MAX` (no chunk has it) when empty.
    chunk: u64,
    bytes: *const AtomicU8,
}

impl Default for LiveMemo {
    fn default() -> Self {
        Self {
            chunk: u64::MAX,
            bytes: std::ptr::null(),
        }
    }
}

// SAFETY: the memo holds the address of atomics (`Sync`) that its plane owns; a thread that
// takes a cache whole (a thief) reads them no differently from the cache's owner.
unsafe impl Send for LiveMemo {}

/// Nodes in a node-array chunk.
pub(crate) const NODE_CHUNK: usize = 32;

type NodeChunk<T> = [T; NODE_CHUNK];
type NodeBlock<T> = Box<[Option<Box<NodeChunk<T>>>]>;

/// A growable-on-write array of `T` indexed by `u64`, reading `T::default()` where never
/// written. Not shared: the owner holds it under its lock.
#[derive(Debug)]
pub(crate) struct PagedArray<T: Copy + Default + PartialEq> {
    dir: Vec<Option<NodeBlock<T>>>,
    chunks: usize,
    blocks: usize,
}

impl<T: Copy + Default + PartialEq> PagedArray<T> {
    /// An array of at least `len` entries.
    pub fn new(len: u64) -> Self {
        let per_block = (NODE_CHUNK * FANOUT) as u64;
        let n = len.div_ceil(per_block).max(1) as usize;
        Self {
            dir: (0..n).map(|_| None).collect(),
            chunks: 0,
            blocks: 0,
        }
    }

    #[inline]
    fn split(i: u64) -> (usize, usize, usize) {
        let i = i as usize;
        (
            i / (NODE_CHUNK * FANOUT),
            (i / NODE_CHUNK) % FANOUT,
            i % NODE_CHUNK,
        )
    }

    /// Entry `i`.
    #[inline]
    pub fn get(&self, i: u64) -> T {
        let (d, c, o) = Self::split(i);
        match &self.dir[d] {
            Some(block) => block[c].as_ref().map_or_else(T::default, |chunk| chunk[o]),
            None => T::default(),
        }
    }

    /// Write entry `i`; writing the default where nothing is stored allocates nothing.
    #[inline]
    pub fn set(&mut self, i: u64, v: T) {
        let (d, c, o) = Self::split(i);
        if v == T::default() && self.dir[d].as_ref().is_none_or(|b| b[c].is_none()) {
            return;
        }
        let block = self.dir[d].get_or_insert_with(|| {
            self.blocks += 1;
            (0..FANOUT).map(|_| None).collect()
        });
        let chunk = block[c].get_or_insert_with(|| {
            self.chunks += 1;
            Box::new([T::default(); NODE_CHUNK])
        });
        chunk[o] = v;
    }

    /// Heap bytes held.
    pub fn bytes(&self) -> usize {
        self.dir.len() * std::mem::size_of::<Option<NodeBlock<T>>>()
            + self.blocks * FANOUT * std::mem::size_of::<Option<Box<NodeChunk<T>>>>()
            + self.chunks * std::mem::size_of::<NodeChunk<T>>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn absent_reads_zero_and_writes_stick() {
        let p = BitPlane::new(1 << 20);
        assert_eq!(p.load(12345), 0);
        assert_eq!(
            p.bytes(),
            std::mem::size_of::<OnceBox<Block<AtomicU64, PLANE_CHUNK_WORDS>>>() * 16
        );
        assert_eq!(p.fetch_or(70_000, 0b101), 0);
        assert_eq!(p.fetch_clear(70_000, 0b1), 0b101);
        assert_eq!(p.load(70_000), 0b100);
        assert_eq!(
            p.fetch_clear(3, 1),
            0,
            "clearing an absent word allocates nothing"
        );
        assert!(p.test(70_000 * 64 + 2));
        assert_eq!(p.next_set(0, 70_001 * 64).0, Some(70_000 * 64 + 2));

        let l = LivePlane::new(1 << 30);
        assert!(!l.is_live(99) && l.cell(99).is_none());
        l.set_live(99, 3);
        assert!(l.is_live(99) && l.count() == 1);
        assert_eq!(l.cell(99).map(|b| b.load(Ordering::Relaxed)), Some(3));
        assert_eq!(
            (live_code(253), live_code(254), live_code(1 << 40)),
            (253, LIVE_LONG, LIVE_LONG)
        );
        assert!(!l.is_live(98), "a neighbour's byte is untouched");
        if let Some(b) = l.cell(99) {
            b.store(0, Ordering::Relaxed);
        }
        assert!(!l.is_live(99) && l.count() == 0);

        let mut a: PagedArray<u64> = PagedArray::new(1 << 30);
        a.set(5, 0);
        assert_eq!(a.chunks, 0);
        a.set(1 << 29, 7);
        assert_eq!((a.get(1 << 29), a.get((1 << 29) + 1), a.chunks), (7, 0, 1));
    }
}
