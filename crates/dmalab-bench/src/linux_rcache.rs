//! `linux-rcache`: Linux 6.12's IOVA allocator (`drivers/iommu/iova.c`) with its per-CPU range
//! cache, rebuilt in user space as an outside baseline.
//!
//! Written from the design of the 6.12 allocator, not from its text (the kernel is GPL): the
//! structure, the order of the steps and the constants follow it; the code is this crate's own.
//!
//! # The tree (`alloc_iova`, `free_iova`, `reserve_iova`)
//!
//! Allocated and reserved ranges are boxed nodes of a red-black tree (`intrusive-collections`'
//! `RBTree`, so walks chase node pointers as the kernel's `rb_prev` does) behind one spin lock,
//! the kernel's `iova_rbtree_lock`. An anchor node at frame `u64::MAX` is always in the tree, so
//! the cached start nodes are never null. Placement is top-down below the request's limit and
//! size-aligned (the start is a multiple of the power of two at or above the size, as for every
//! dma-iommu mapping): the walk starts at a cached node (one for requests whose limit is at or
//! below the 4 GiB frame, one for the rest), and steps to `rb_prev` while the candidate overlaps
//! the node below. If it reaches the bottom without a fit, it retries once from the node at the
//! limit (`iova_find_limit`: the anchor for limits above 4 GiB), down to just above the node it
//! first started from. A failure records its size in `max32_alloc_size`; a later request limited
//! to the 32-bit zone at least that large fails at once, until a range starting below 4 GiB is
//! freed. As in the kernel, any failed walk records the size, whatever its limit (a request
//! limited below 4 GiB but above another 32-bit request's lower limit can therefore be refused
//! while space exists, as in the kernel). A new node becomes the 32-bit cached node if it ends
//! below 4 GiB, else the other; a freed node moves a cached node to its successor when it is the
//! cached node or lies at or above it (for the 32-bit node, only if it ends below 4 GiB).
//!
//! # The range cache (`alloc_iova_fast`, `free_iova_fast`)
//!
//! [`IOVA_RANGE_CACHE_MAX_SIZE`] size classes, 1 to 32 pages. An allocation below 32 pages is
//! rounded up to a power of two; one of at most 32 pages first tries the calling CPU's cache of
//! its class: the `loaded` magazine ([`IOVA_MAG_SIZE`] frames, 1 KiB), else `prev` if it holds
//! any (swapped in), else a full magazine from the class's depot (behind the class's lock); the
//! pop scans down from the most recent frame for one whose range ends at or below the limit and
//! swaps the last frame into its slot. Nothing suitable in `loaded` is a miss (the kernel falls
//! back to the tree only when it has no suitable frame at all, not to `prev`). On a miss the tree
//! allocates (size-aligned); if it fails, every CPU's magazines and then every depot go back to
//! the tree (`flush_rcache`) and the tree is tried once more. A free of at most 32 pages goes to
//! the CPU's cache of class `ceil(log2(pages))`: into `loaded` if not full, else swapped with
//! `prev` if that is not full, else the full `loaded` is pushed on the depot and a new empty
//! magazine allocated (the kernel's `kmem_cache` allocation is glibc's thread cache here: a 1 KiB
//! block is within its size limit; no free list is kept). Larger frees go to the tree. Each
//! (CPU, class) pair has its own spin lock, as the kernel's `iova_cpu_rcache` does.
//!
//! The depot is a stack of full magazines with its size. The kernel trims it from delayed work
//! scheduled on each push (a no-op if pending): every 100 ms ([`IOVA_DEPOT_DELAY`]), while the
//! depot holds more magazines than there are online CPUs, one magazine goes back to the tree and
//! the work re-arms itself. User space has no delayed work: the same state machine runs inline on
//! depot pushes and pops (which are rare: at most one per 127 frees or allocations of a CPU). A
//! push arms the work if not armed (one clock read); a push or pop that finds armed work overdue
//! runs it. The clock is read only while work is armed. Unlike the kernel, an idle domain is
//! therefore not trimmed until its next depot operation.
//!
//! # What user space changes
//!
//! - *Per-CPU.* The cache is indexed by a per-thread index, taken in turn on a thread's first
//!   call, modulo the slot count (`available_parallelism()` at construction): the kernel's
//!   per-CPU load costs about what a thread-local read does, where `sched_getcpu()` costs twice
//!   that. The kernel disables preemption around a per-CPU cache; user space
//!   cannot, so a thread may be preempted while it holds its slot's lock, and another thread
//!   of that slot then waits for it. The lock keeps this correct. The spin lock is a
//!   test-and-test-and-set flag (one compare-exchange uncontended, like the kernel's queued
//!   spinlock); after a long spin it yields the CPU, the user-space stand-in for a kernel lock
//!   holder that cannot be preempted.
//! - *Errors the kernel does not return.* Nodes carry a reserved flag (the kernel's do not), so
//!   a free through the tree (more than 32 pages) of a range that is not a live allocation
//!   starting there, or of the wrong size, returns [`IovaError`] where the kernel ignores it. A
//!   reservation overlapping an allocation is refused (the kernel merges it into the allocation
//!   node); cached ranges are flushed first. A reservation merges with reserved nodes as the
//!   kernel's does (extending a node down, inserting the remainder), but finds the first
//!   overlapping node by a tree search instead of walking from `rb_first`.
//! - *No exactly-once check on cached frees*, as in Linux: a double free, or a free of a range
//!   never allocated, of at most 32 pages goes silently into a magazine and will be handed out
//!   again. Only the size (non-zero) and the domain bounds are checked (two compares). A frame
//!   returned to the tree that no allocation node contains is skipped (the kernel warns).
//! - *Request fields the kernel lacks.* A segment boundary needs nothing: a size-aligned range
//!   never crosses a power-of-two boundary at least as large as the request. A smaller alignment
//!   than the size's is exceeded (the range is size-aligned anyway). An alignment above the
//!   size's skips the cache on allocation and aligns the tree walk to it; such a failure does
//!   not set `max32_alloc_size` (a less-aligned request of the same size may still fit).
//! - *Speed.* Against Linux 6.12's own `iova.c` built in user space (the peer harness, see
//!   docs/results/2026-11-28-peer-linux-iova.md) this baseline ran at about 0.8 to 0.9 of the
//!   real code's speed on the hot path (map-unmap-1page, nic-ring; 2 vCPUs). The cause, found
//!   by counting instructions (`examples/pair_count.rs` under callgrind): every cached call made
//!   an out-of-line call to return the depot's trimmed magazine, which was almost always none
//!   (17 instructions a call), and the depot's paths were inlined into the hot one. Both are now
//!   out of line, behind a test, as the kernel runs its trim as delayed work: a one-page
//!   allocate and free now take 124 and 79 instructions, against the real code's 122 and 72
//!   through its FFI shim (docs/results/2026-11-28-linux-rcache-pinned.md).
//! - *Counters.* `nodes_visited` counts each node the placement walk steps through exactly, and
//!   charges a tree search (lookup for free, `iova_find_limit`, insertion) the depth of a
//!   balanced tree of the current size: `intrusive-collections` does not report its descents.
//!   Cache counters live in each (CPU, class) cache under its lock and are summed by `work()`.
//! - Out of scope: CPU hotplug (`free_cpu_cached_iovas` on a dead CPU), and dma-iommu's policy
//!   of trying a 32-bit address first for PCI devices (the benchmark gives each request its
//!   limit).

use std::cell::{Cell, UnsafeCell};
use std::ops::{Deref, DerefMut};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crossbeam_utils::CachePadded;
use dmalab_iova::{
    AllocRequest, DomainConfig, DomainStats, IovaAllocator, IovaError, IovaRange, Pfn, WorkCounters,
};
use intrusive_collections::{intrusive_adapter, Bound, KeyAdapter, RBTree, RBTreeLink};

/// The name used in benchmark records.
pub const NAME: &str = "linux-rcache";

/// Size classes of the range cache: 1, 2, 4, 8, 16 and 32 pages.
pub const IOVA_RANGE_CACHE_MAX_SIZE: usize = 6;
/// Largest allocation served by the cache, in pages.
pub const MAX_CACHED_PAGES: u64 = 1 << (IOVA_RANGE_CACHE_MAX_SIZE - 1);
/// Frames a magazine holds: with its size word, 1 KiB.
pub const IOVA_MAG_SIZE: usize = 127;
/// How often the depot's delayed work trims it.
pub const IOVA_DEPOT_DELAY: Duration = Duration::from_millis(100);

/// The anchor node's frame: above every real frame.
const IOVA_ANCHOR: u64 = u64::MAX;
/// Spins on a held lock before yielding the CPU to whoever holds it.
const SPINS_BEFORE_YIELD: u32 = 1 << 12;

// ---------------------------------------------------------------------------------------------
// Spin lock
// ---------------------------------------------------------------------------------------------

/// A test-and-test-and-set spin lock.
struct SpinLock<T> {
    locked: AtomicBool,
    data: UnsafeCell<T>,
}

// SAFETY: the data is reached only through a guard, and at most one guard exists at a time (the
// flag's acquire/release pairs order every access); so sharing the lock only ever hands the data
// from one thread to another, which `T: Send` allows.
unsafe impl<T: Send> Sync for SpinLock<T> {}

impl<T> SpinLock<T> {
    const fn new(data: T) -> Self {
        Self {
            locked: AtomicBool::new(false),
            data: UnsafeCell::new(data),
        }
    }

    #[inline]
    fn lock(&self) -> SpinGuard<'_, T> {
        while self
            .locked
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            let mut spins = 0u32;
            while self.locked.load(Ordering::Relaxed) {
                std::hint::spin_loop();
                spins += 1;
                if spins == SPINS_BEFORE_YIELD {
                    std::thread::yield_now();
                    spins = 0;
                }
            }
        }
        SpinGuard {
            lock: self,
            _data: std::marker::PhantomData,
        }
    }
}

/// Holds a [`SpinLock`]; releases it when dropped.
struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
    /// Send and Sync exactly when a `&mut T` would be.
    _data: std::marker::PhantomData<&'a mut T>,
}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: this guard holds the lock, so no other reference to the data exists.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T> DerefMut for SpinGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: this guard holds the lock, so no other reference to the data exists.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        self.lock.locked.store(false, Ordering::Release);
    }
}

// ---------------------------------------------------------------------------------------------
// The tree
// ---------------------------------------------------------------------------------------------

/// One allocated or reserved range (the kernel's `struct iova`), or the anchor.
struct IovaNode {
    link: RBTreeLink,
    /// First frame; a reservation may lower it in place (ordering is kept).
    pfn_lo: Cell<u64>,
    /// Last frame, inclusive.
    pfn_hi: u64,
    /// Reserved rather than allocated (the anchor counts as reserved).
    reserved: bool,
}

impl IovaNode {
    fn boxed(pfn_lo: u64, pfn_hi: u64, reserved: bool) -> Box<Self> {
        Box::new(Self {
            link: RBTreeLink::new(),
            pfn_lo: Cell::new(pfn_lo),
            pfn_hi,
            reserved,
        })
    }

    fn pages(&self) -> u64 {
        self.pfn_hi - self.pfn_lo.get() + 1
    }
}

intrusive_adapter!(IovaAdapter = Box<IovaNode>: IovaNode { link => RBTreeLink });

impl<'a> KeyAdapter<'a> for IovaAdapter {
    type Key = u64;
    fn get_key(&self, node: &'a IovaNode) -> u64 {
        node.pfn_lo.get()
    }
}

/// The kernel's `iova_domain` less its caches: everything behind `iova_rbtree_lock`.
struct Tree {
    rb: RBTree<IovaAdapter>,
    /// Where walks for requests above the 32-bit zone start.
    cached: NonNull<IovaNode>,
    /// Where walks for requests limited to the 32-bit zone start.
    cached32: NonNull<IovaNode>,
    anchor: NonNull<IovaNode>,
    start_pfn: u64,
    /// The first frame at or above 4 GiB.
    dma_32bit_pfn: u64,
    /// 32-bit requests at least this large fail at once.
    max32_alloc_size: u64,
    /// Nodes in the tree, anchor included.
    nodes: u64,
    alloc_nodes: u64,
    alloc_pages: u64,
    work: WorkCounters,
}

// SAFETY: the tree owns its nodes (boxes); the three pointers point at nodes it owns and are
// only dereferenced through `&Tree`/`&mut Tree`. Nothing in it is tied to a thread, so moving
// the whole structure to another thread (under the tree's lock) is sound.
unsafe impl Send for Tree {}

impl Tree {
    fn new(cfg: &DomainConfig) -> Self {
        let mut rb = RBTree::new(IovaAdapter::new());
        let anchor = rb
            .insert(IovaNode::boxed(IOVA_ANCHOR, IOVA_ANCHOR, true))
            .get_ptr()
            .expect("the anchor was just inserted");
        let dma_32bit_pfn = (1u64 << 32) / cfg.page_size_bytes;
        Self {
            rb,
            cached: anchor,
            cached32: anchor,
            anchor,
            start_pfn: cfg.pfn_lo.0,
            dma_32bit_pfn,
            max32_alloc_size: dma_32bit_pfn,
            nodes: 1,
            alloc_nodes: 0,
            alloc_pages: 0,
            work: WorkCounters::default(),
        }
    }

    #[inline]
    fn node(&self, p: NonNull<IovaNode>) -> &IovaNode {
        // SAFETY: every `NonNull<IovaNode>` this type handles points at a node in `self.rb`
        // (the cached pointers are moved off a node before it is removed), and the returned
        // reference borrows `self`, so the node cannot be removed while it lives.
        unsafe { p.as_ref() }
    }

    /// The depth charged for one search of the tree.
    #[inline]
    fn search_cost(&self) -> u64 {
        u64::from(u64::BITS - self.nodes.leading_zeros())
    }

    /// `iova_find_limit`: where the retry walk starts. For limits above the 32-bit zone, the
    /// anchor (the kernel's crude guess that such a limit is near the top); else the node that
    /// contains `limit_excl` or else the lowest one above it.
    fn find_limit(&self, limit_excl: u64) -> NonNull<IovaNode> {
        if limit_excl > self.dma_32bit_pfn {
            return self.anchor;
        }
        let mut c = self.rb.upper_bound(Bound::Excluded(&limit_excl));
        if let Some(n) = c.get() {
            if n.pfn_hi >= limit_excl {
                return c.get_ptr().expect("cursor on a node");
            }
        }
        c.move_next();
        c.get_ptr().expect("the anchor lies above every limit")
    }

    /// `__alloc_and_insert_iova_range`, size-aligned: place `size` frames below `limit_excl`
    /// with the start a multiple of `1 << align_shift`, insert `node` there and return its
    /// start; or hand `node` back. `remember`: a failure sets `max32_alloc_size`.
    fn alloc_and_insert(
        &mut self,
        mut node: Box<IovaNode>,
        size: u64,
        limit_excl: u64,
        align_shift: u32,
        remember: bool,
    ) -> Result<u64, Box<IovaNode>> {
        let align_mask = u64::MAX << align_shift;
        if limit_excl <= self.dma_32bit_pfn && size >= self.max32_alloc_size {
            return Err(node);
        }
        let mut curr = if limit_excl <= self.dma_32bit_pfn {
            self.cached32
        } else {
            self.cached
        };
        let retry_pfn = self.node(curr).pfn_hi;
        let (mut high, mut low) = (limit_excl, self.start_pfn);
        let mut visited = 0u64;
        let (new_pfn, prev) = loop {
            // SAFETY: `curr` is the cached node or `find_limit`'s answer, a node of this tree.
            let mut cur = unsafe { self.rb.cursor_from_ptr(curr.as_ptr()) };
            let (mut new_pfn, mut prev);
            loop {
                let c = cur.get().expect("the walk stands on a node");
                high = high.min(c.pfn_lo.get());
                new_pfn = high.wrapping_sub(size) & align_mask;
                prev = cur.get_ptr().expect("the walk stands on a node");
                cur.move_prev();
                visited += 1;
                match cur.get() {
                    Some(below) if new_pfn <= below.pfn_hi && new_pfn >= low => {}
                    _ => break,
                }
            }
            if high < size || new_pfn < low {
                if low == self.start_pfn && retry_pfn < limit_excl {
                    high = limit_excl;
                    low = retry_pfn + 1;
                    curr = self.find_limit(limit_excl);
                    visited += self.search_cost();
                    continue;
                }
                self.work.nodes_visited += visited;
                if remember {
                    self.max32_alloc_size = size;
                }
                return Err(node);
            }
            break (new_pfn, prev);
        };
        node.pfn_lo.set(new_pfn);
        node.pfn_hi = new_pfn + size - 1;
        let new_hi = node.pfn_hi;
        // SAFETY: `prev` is the node the walk stepped off last, a node of this tree.
        let mut c = unsafe { self.rb.cursor_mut_from_ptr(prev.as_ptr()) };
        // The new range lies between `prev` and the node below it: the kernel's insertion from
        // `prev` (`iova_insert_rbtree(.., prev)`).
        c.insert_before(node);
        c.move_prev();
        let new = c.get_ptr().expect("the node was just inserted");
        if new_hi < self.dma_32bit_pfn {
            self.cached32 = new;
        } else {
            self.cached = new;
        }
        self.nodes += 1;
        self.alloc_nodes += 1;
        self.alloc_pages += size;
        self.work.nodes_visited += visited + 1;
        Ok(new_pfn)
    }

    /// `private_find_iova`: the node containing `pfn`.
    fn find_containing(&mut self, pfn: u64) -> Option<NonNull<IovaNode>> {
        self.work.nodes_visited += self.search_cost();
        let c = self.rb.upper_bound(Bound::Included(&pfn));
        match c.get() {
            Some(n) if n.pfn_hi >= pfn => c.get_ptr(),
            _ => None,
        }
    }

    /// `remove_iova`: move the cached nodes off `p` as the kernel does, then unlink it.
    fn remove(&mut self, p: NonNull<IovaNode>) -> Box<IovaNode> {
        // SAFETY: `p` came from `find_containing`, a node of this tree.
        let next = unsafe { self.rb.cursor_from_ptr(p.as_ptr()) }
            .peek_next()
            .get_ptr()
            .expect("the anchor lies above every removable node");
        let f = self.node(p);
        let (f_lo, f_hi) = (f.pfn_lo.get(), f.pfn_hi);
        let dma32 = self.dma_32bit_pfn;
        if p == self.cached32 || (f_hi < dma32 && f_lo >= self.node(self.cached32).pfn_lo.get()) {
            self.cached32 = next;
        }
        if f_lo < dma32 {
            self.max32_alloc_size = dma32;
        }
        if f_lo >= self.node(self.cached).pfn_lo.get() {
            self.cached = next;
        }
        // SAFETY: as above; no cached pointer refers to `p` any more.
        let b = unsafe { self.rb.cursor_mut_from_ptr(p.as_ptr()) }
            .remove()
            .expect("cursor on a node");
        self.nodes -= 1;
        if !b.reserved {
            self.alloc_nodes -= 1;
            self.alloc_pages -= b.pages();
        }
        b
    }

    /// `iova_magazine_free_pfns`: return a magazine's ranges to the tree and empty it.
    fn free_magazine(&mut self, mag: &mut Magazine) {
        self.work.lock_acquisitions += 1;
        for i in 0..mag.size {
            if let Some(p) = self.find_containing(mag.pfns[i]) {
                if !self.node(p).reserved {
                    drop(self.remove(p));
                }
            }
        }
        mag.size = 0;
    }

    /// `reserve_iova`, refusing to cover an allocation.
    fn reserve(&mut self, lo: u64, hi: u64) -> Result<(), IovaError> {
        self.work.nodes_visited += self.search_cost();
        let first = {
            let mut c = self.rb.upper_bound(Bound::Included(&lo));
            if c.get().is_none_or(|n| n.pfn_hi < lo) {
                c.move_next();
            }
            c.get_ptr()
                .expect("the anchor lies above every reservation")
        };
        // SAFETY: `first` is a node of this tree.
        let mut c = unsafe { self.rb.cursor_from_ptr(first.as_ptr()) };
        while let Some(n) = c.get().filter(|n| n.pfn_lo.get() <= hi) {
            if !n.reserved {
                return Err(IovaError::ReserveOverlapsAllocation {
                    pfn_lo: Pfn(lo),
                    pfn_hi: Pfn(hi),
                    allocated_pfn: Pfn(n.pfn_lo.get()),
                });
            }
            c.move_next();
        }
        // SAFETY: as above.
        let mut c = unsafe { self.rb.cursor_from_ptr(first.as_ptr()) };
        let mut lo = lo;
        let mut visited = 0;
        while let Some(n) = c.get().filter(|n| n.pfn_lo.get() <= hi) {
            visited += 1;
            if n.pfn_hi >= lo {
                // Every node before `n` ends below `lo`: lowering `n`'s start keeps the order.
                if lo < n.pfn_lo.get() {
                    n.pfn_lo.set(lo);
                }
                if hi <= n.pfn_hi {
                    self.work.nodes_visited += visited;
                    return Ok(());
                }
                lo = n.pfn_hi + 1;
            }
            c.move_next();
        }
        self.work.nodes_visited += visited + self.search_cost();
        self.rb.insert(IovaNode::boxed(lo, hi, true));
        self.nodes += 1;
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------
// The range cache
// ---------------------------------------------------------------------------------------------

/// The kernel's `iova_magazine`: a count and up to [`IOVA_MAG_SIZE`] frames, 1 KiB.
#[repr(C)]
struct Magazine {
    size: usize,
    pfns: [u64; IOVA_MAG_SIZE],
}

const _: () = assert!(std::mem::size_of::<Magazine>() == 1024);

impl Magazine {
    fn empty() -> Box<Self> {
        Box::new(Self {
            size: 0,
            pfns: [0; IOVA_MAG_SIZE],
        })
    }

    #[inline]
    fn is_full(&self) -> bool {
        self.size == IOVA_MAG_SIZE
    }

    #[inline]
    fn is_empty(&self) -> bool {
        self.size == 0
    }

    #[inline]
    fn push(&mut self, pfn: u64) {
        self.pfns[self.size] = pfn;
        self.size += 1;
    }

    /// `iova_magazine_pop`: the most recent frame at or below `max_lo`, its slot filled by the
    /// last frame.
    #[inline]
    fn pop(&mut self, max_lo: u64) -> Option<u64> {
        let mut i = self.size.checked_sub(1)?;
        while self.pfns[i] > max_lo {
            i = i.checked_sub(1)?;
        }
        let pfn = self.pfns[i];
        self.size -= 1;
        self.pfns[i] = self.pfns[self.size];
        Some(pfn)
    }
}

/// `iova_cpu_rcache`: one CPU's cache of one class.
struct CpuRcache {
    loaded: Box<Magazine>,
    prev: Box<Magazine>,
    /// This cache's share of the counters (lock acquisitions, hits, misses, cached frees).
    work: WorkCounters,
}

/// One CPU's caches, one per class, on their own cache lines.
struct CpuSlot([SpinLock<CpuRcache>; IOVA_RANGE_CACHE_MAX_SIZE]);

/// A class's depot (the kernel's `iova_rcache` less its per-CPU part).
struct Depot {
    /// Full magazines, most recent last. Boxed: a magazine moves between a CPU's cache and the
    /// depot as a pointer, as the kernel's do, never as 1 KiB of copying.
    #[allow(clippy::vec_box)]
    mags: Vec<Box<Magazine>>,
    /// When the trim work is armed, its due time.
    work_due: Option<Instant>,
    lock_acquisitions: u64,
}

impl Depot {
    /// Run the trim work if it is armed and due: one magazine out while the depot holds more
    /// than `cpus`, re-arming; else disarm.
    fn poll(&mut self, now: Instant, cpus: usize) -> Option<Box<Magazine>> {
        match self.work_due {
            Some(due) if now >= due => {
                if self.mags.len() > cpus {
                    self.work_due = Some(now + IOVA_DEPOT_DELAY);
                    self.mags.pop()
                } else {
                    self.work_due = None;
                    None
                }
            }
            _ => None,
        }
    }
}

static NEXT_THREAD_INDEX: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    static THREAD_INDEX: usize = NEXT_THREAD_INDEX.fetch_add(1, Ordering::Relaxed);
}

/// This thread's cache slot: the next index, taken on the thread's first call and kept. The
/// kernel finds its CPU's cache with one per-CPU load; a thread-local read is the nearest
/// user-space cost (about 1.7 ns a call here, against 3.5 ns for glibc's `sched_getcpu`, which
/// made this baseline 0.75x to 0.83x of the real code on the hot path). A thread keeps its slot
/// wherever it runs, so two threads that share a slot (more threads than slots) contend for its
/// lock as two tasks preempted on one CPU would.
#[inline]
fn current_cpu() -> usize {
    THREAD_INDEX.with(|i| *i)
}

/// `ceil(log2(n))` for `n >= 1` (the kernel's `order_base_2`).
#[inline]
fn order_base_2(n: u64) -> u32 {
    u64::BITS - (n - 1).leading_zeros()
}

// ---------------------------------------------------------------------------------------------
// The allocator
// ---------------------------------------------------------------------------------------------

/// Linux 6.12's IOVA allocator and range cache; see the module documentation.
pub struct LinuxRcache {
    cfg: DomainConfig,
    tree: CachePadded<SpinLock<Tree>>,
    cpus: Box<[CachePadded<CpuSlot>]>,
    depots: [CachePadded<SpinLock<Depot>>; IOVA_RANGE_CACHE_MAX_SIZE],
    /// Invalid requests and refusals after the flush (rare paths only).
    failures: AtomicU64,
    /// Flushes of every cache to retry a request.
    flushes: AtomicU64,
}

impl std::fmt::Debug for LinuxRcache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LinuxRcache")
            .field("cfg", &self.cfg)
            .field("cpu_slots", &self.cpus.len())
            .finish_non_exhaustive()
    }
}

impl LinuxRcache {
    /// An empty domain with one cache slot per hardware thread.
    pub fn new(cfg: DomainConfig) -> Result<Self, IovaError> {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        Self::with_cpu_slots(cfg, cpus)
    }

    /// An empty domain with `slots` per-CPU cache slots (at least 1): the CPU number is taken
    /// modulo `slots`. One slot makes every thread share one cache, for repeatable tests.
    pub fn with_cpu_slots(cfg: DomainConfig, slots: usize) -> Result<Self, IovaError> {
        cfg.validate()?;
        let slots = slots.max(1);
        let cpu_rcache = || {
            SpinLock::new(CpuRcache {
                loaded: Magazine::empty(),
                prev: Magazine::empty(),
                work: WorkCounters::default(),
            })
        };
        let cpus = (0..slots)
            .map(|_| CachePadded::new(CpuSlot(std::array::from_fn(|_| cpu_rcache()))))
            .collect();
        Ok(Self {
            tree: CachePadded::new(SpinLock::new(Tree::new(&cfg))),
            cfg,
            cpus,
            depots: std::array::from_fn(|_| {
                CachePadded::new(SpinLock::new(Depot {
                    mags: Vec::new(),
                    work_due: None,
                    lock_acquisitions: 0,
                }))
            }),
            failures: AtomicU64::new(0),
            flushes: AtomicU64::new(0),
        })
    }

    #[inline]
    fn my_cpu(&self) -> &CpuSlot {
        let cpu = current_cpu();
        let n = self.cpus.len();
        &self.cpus[if cpu < n { cpu } else { cpu % n }]
    }

    /// Return a magazine taken off a depot by its trim work to the tree. Out of line: the
    /// kernel's trim runs as delayed work, never on the hot path.
    #[cold]
    #[inline(never)]
    fn release(&self, mut trimmed: Box<Magazine>) {
        self.tree.lock().free_magazine(&mut trimmed);
    }

    /// `__iova_rcache_get`: a cached range of `class` ending at or below `limit`.
    #[inline]
    fn rcache_get(&self, class: usize, limit: u64) -> Option<u64> {
        let max_lo = (limit + 1).checked_sub(1 << class)?;
        let mut g = self.my_cpu().0[class].lock();
        g.work.lock_acquisitions += 1;
        let mut trimmed = None;
        let has_pfn = if !g.loaded.is_empty() {
            true
        } else if !g.prev.is_empty() {
            let c = &mut *g;
            std::mem::swap(&mut c.loaded, &mut c.prev);
            true
        } else {
            let (got, t) = self.load_from_depot(class, &mut g);
            trimmed = t;
            got
        };
        let pfn = if has_pfn { g.loaded.pop(max_lo) } else { None };
        if pfn.is_some() {
            g.work.cache_hits += 1;
            g.work.allocs += 1;
        } else {
            g.work.cache_misses += 1;
        }
        // The kernel's trim work frees outside the depot's lock; here it runs under this CPU's
        // lock (the kernel's lock order: CPU cache, then tree), so `stats` never misses it.
        if let Some(m) = trimmed {
            self.release(m);
        }
        drop(g);
        pfn
    }

    /// The depot's part of `__iova_rcache_get`, when both of a CPU's magazines are empty: a
    /// full magazine in place of the empty `loaded` (freed, as the kernel frees it), and the
    /// magazine the trim work took out if it was due. Out of line, as the kernel's hot path
    /// never reaches it.
    #[cold]
    #[inline(never)]
    fn load_from_depot(&self, class: usize, c: &mut CpuRcache) -> (bool, Option<Box<Magazine>>) {
        let mut d = self.depots[class].lock();
        d.lock_acquisitions += 1;
        let trimmed = if d.work_due.is_some() {
            d.poll(Instant::now(), self.cpus.len())
        } else {
            None
        };
        match d.mags.pop() {
            Some(full) => {
                c.loaded = full;
                (true, trimmed)
            }
            None => (false, trimmed),
        }
    }

    /// `__iova_rcache_insert`: cache a freed range of `class`.
    #[inline]
    fn rcache_insert(&self, class: usize, pfn: u64) {
        let mut g = self.my_cpu().0[class].lock();
        g.work.lock_acquisitions += 1;
        let mut trimmed = None;
        if g.loaded.is_full() {
            if !g.prev.is_full() {
                let c = &mut *g;
                std::mem::swap(&mut c.loaded, &mut c.prev);
            } else {
                trimmed = self.store_in_depot(class, &mut g);
            }
        }
        g.loaded.push(pfn);
        g.work.frees += 1;
        if let Some(m) = trimmed {
            self.release(m);
        }
        drop(g);
    }

    /// The depot's part of `__iova_rcache_insert`, when both of a CPU's magazines are full: the
    /// full `loaded` into the depot and an empty one in its place, the trim work armed (and
    /// run if overdue, its magazine returned). Out of line, as in `load_from_depot`.
    #[cold]
    #[inline(never)]
    fn store_in_depot(&self, class: usize, c: &mut CpuRcache) -> Option<Box<Magazine>> {
        let full = std::mem::replace(&mut c.loaded, Magazine::empty());
        let mut d = self.depots[class].lock();
        d.lock_acquisitions += 1;
        d.mags.push(full);
        let now = Instant::now();
        // `schedule_delayed_work`: arm unless armed; then run it if it is overdue.
        if d.work_due.is_none() {
            d.work_due = Some(now + IOVA_DEPOT_DELAY);
        }
        d.poll(now, self.cpus.len())
    }

    /// `alloc_iova`, size-aligned, on the tree.
    fn tree_alloc(&self, size: u64, limit: u64, align_shift: u32, remember: bool) -> Option<u64> {
        // The node is allocated before the lock is taken, as the kernel does.
        let node = IovaNode::boxed(0, 0, false);
        let mut t = self.tree.lock();
        t.work.lock_acquisitions += 1;
        match t.alloc_and_insert(node, size, limit + 1, align_shift, remember) {
            Ok(pfn) => {
                t.work.allocs += 1;
                Some(pfn)
            }
            Err(node) => {
                drop(t);
                drop(node);
                None
            }
        }
    }

    /// `free_cpu_cached_iovas` for every CPU, then `free_global_cached_iovas`.
    fn flush_rcache(&self) {
        for cpu in self.cpus.iter() {
            for rc in cpu.0.iter() {
                let mut g = rc.lock();
                g.work.lock_acquisitions += 1;
                let c = &mut *g;
                self.tree.lock().free_magazine(&mut c.loaded);
                self.tree.lock().free_magazine(&mut c.prev);
            }
        }
        for depot in self.depots.iter() {
            let mut d = depot.lock();
            d.lock_acquisitions += 1;
            while let Some(mut m) = d.mags.pop() {
                self.tree.lock().free_magazine(&mut m);
            }
        }
    }

    fn no_space(req: &AllocRequest, limit: u64) -> IovaError {
        IovaError::NoSpace {
            pages: req.pages,
            align_pages: req.align_pages,
            limit: Pfn(limit),
            boundary_pages: req.boundary_pages,
        }
    }
}

impl IovaAllocator for LinuxRcache {
    fn name(&self) -> String {
        NAME.into()
    }

    fn config(&self) -> &DomainConfig {
        &self.cfg
    }

    #[inline]
    fn allocate(&self, req: &AllocRequest) -> Result<IovaRange, IovaError> {
        let limit = match req.validate(&self.cfg) {
            Ok(l) => l.0,
            Err(e) => {
                self.failures.fetch_add(1, Ordering::Relaxed);
                return Err(e);
            }
        };
        // `alloc_iova_fast`: round what the cache can hold up to a power of two.
        let mut size = req.pages;
        if size < MAX_CACHED_PAGES {
            size = size.next_power_of_two();
        }
        let size_shift = order_base_2(size);
        let range = |pfn| IovaRange {
            pfn_lo: Pfn(pfn),
            pages: req.pages,
        };
        if size <= MAX_CACHED_PAGES && req.align_pages <= size {
            if let Some(pfn) = self.rcache_get(size_shift as usize, limit) {
                return Ok(range(pfn));
            }
        }
        let align_shift = size_shift.max(req.align_pages.trailing_zeros());
        let remember = align_shift == size_shift;
        if let Some(pfn) = self.tree_alloc(size, limit, align_shift, remember) {
            return Ok(range(pfn));
        }
        self.flushes.fetch_add(1, Ordering::Relaxed);
        self.flush_rcache();
        match self.tree_alloc(size, limit, align_shift, remember) {
            Some(pfn) => Ok(range(pfn)),
            None => {
                self.failures.fetch_add(1, Ordering::Relaxed);
                Err(Self::no_space(req, limit))
            }
        }
    }

    #[inline]
    fn free(&self, pfn: Pfn, pages: u64) -> Result<(), IovaError> {
        if pages == 0 {
            return Err(IovaError::ZeroSize);
        }
        let hi = pfn.0.saturating_add(pages - 1);
        if pfn < self.cfg.pfn_lo || hi > self.cfg.pfn_hi.0 {
            return Err(IovaError::RangeOutsideDomain {
                pfn_lo: pfn,
                pfn_hi: Pfn(hi),
                domain_lo: self.cfg.pfn_lo,
                domain_hi: self.cfg.pfn_hi,
            });
        }
        // `free_iova_fast`: a cacheable size goes to this CPU's cache, unchecked.
        let class = order_base_2(pages) as usize;
        if class < IOVA_RANGE_CACHE_MAX_SIZE {
            self.rcache_insert(class, pfn.0);
            return Ok(());
        }
        // `free_iova`.
        let mut t = self.tree.lock();
        t.work.lock_acquisitions += 1;
        let found = t.find_containing(pfn.0);
        let err = match found.map(|p| t.node(p)) {
            None => Some(IovaError::NotAllocated { pfn, pages }),
            Some(n) if n.reserved => Some(IovaError::FreeOfReserved { pfn }),
            Some(n) if n.pfn_lo.get() != pfn.0 => Some(IovaError::NotAllocated { pfn, pages }),
            Some(n) if n.pages() != pages => Some(IovaError::SizeMismatch {
                pfn,
                pages,
                allocated_pages: n.pages(),
            }),
            Some(_) => None,
        };
        if let Some(e) = err {
            t.work.failures += 1;
            return Err(e);
        }
        let node = t.remove(found.expect("checked above"));
        t.work.frees += 1;
        drop(t);
        drop(node);
        Ok(())
    }

    fn reserve(&self, pfn_lo: Pfn, pfn_hi: Pfn) -> Result<(), IovaError> {
        if pfn_lo > pfn_hi || pfn_lo < self.cfg.pfn_lo || pfn_hi > self.cfg.pfn_hi {
            return Err(IovaError::RangeOutsideDomain {
                pfn_lo,
                pfn_hi,
                domain_lo: self.cfg.pfn_lo,
                domain_hi: self.cfg.pfn_hi,
            });
        }
        let attempt = || {
            let mut t = self.tree.lock();
            t.work.lock_acquisitions += 1;
            t.reserve(pfn_lo.0, pfn_hi.0)
        };
        match attempt() {
            // Cached ranges are free to the caller: give them back and look again.
            Err(IovaError::ReserveOverlapsAllocation { .. }) => {
                self.flush_caches();
                attempt()
            }
            r => r,
        }
    }

    fn stats(&self) -> DomainStats {
        // Every cache, then every depot, then the tree: the kernel's lock order, all at once, so
        // no range is counted both cached and free, or neither.
        let cpus: Vec<_> = self
            .cpus
            .iter()
            .flat_map(|c| c.0.iter().map(|rc| rc.lock()))
            .collect();
        let depots: Vec<_> = self.depots.iter().map(|d| d.lock()).collect();
        let t = self.tree.lock();
        let (mut cached, mut cached_pages) = (0u64, 0u64);
        for (i, g) in cpus.iter().enumerate() {
            let n = (g.loaded.size + g.prev.size) as u64;
            cached += n;
            cached_pages += n << (i % IOVA_RANGE_CACHE_MAX_SIZE);
        }
        for (class, d) in depots.iter().enumerate() {
            let n: u64 = d.mags.iter().map(|m| m.size as u64).sum();
            cached += n;
            cached_pages += n << class;
        }
        let (mut largest, mut extents, mut free, mut reserved) = (0, 0, 0, 0);
        let mut next = self.cfg.pfn_lo.0;
        let mut gap = |lo: u64, hi: u64| {
            largest = u64::max(largest, hi - lo + 1);
            extents += 1;
            free += hi - lo + 1;
        };
        for n in t.rb.iter() {
            let lo = n.pfn_lo.get();
            if lo == IOVA_ANCHOR {
                break;
            }
            if lo > next {
                gap(next, lo - 1);
            }
            next = next.max(n.pfn_hi + 1);
            if n.reserved {
                reserved += n.pages();
            }
        }
        if next <= self.cfg.pfn_hi.0 {
            gap(next, self.cfg.pfn_hi.0);
        }
        DomainStats {
            live_allocations: t.alloc_nodes.saturating_sub(cached),
            allocated_pages: t.alloc_pages.saturating_sub(cached_pages),
            reserved_pages: reserved,
            cached_pages,
            free_pages: free,
            largest_free_extent_pages: largest,
            free_extents: extents,
        }
    }

    fn work(&self) -> WorkCounters {
        let mut w = WorkCounters::default();
        for cpu in self.cpus.iter() {
            for rc in cpu.0.iter() {
                w.add(&rc.lock().work);
            }
        }
        w.cache_flushes += self.flushes.load(Ordering::Relaxed);
        for d in self.depots.iter() {
            w.lock_acquisitions += d.lock().lock_acquisitions;
        }
        w.add(&self.tree.lock().work);
        w.failures += self.failures.load(Ordering::Relaxed);
        w
    }

    fn memory_bytes(&self) -> usize {
        let mags = self.cpus.len() * IOVA_RANGE_CACHE_MAX_SIZE * 2
            + self
                .depots
                .iter()
                .map(|d| d.lock().mags.len())
                .sum::<usize>();
        let nodes = self.tree.lock().nodes as usize;
        nodes * std::mem::size_of::<IovaNode>()
            + mags * std::mem::size_of::<Magazine>()
            + self.cpus.len() * std::mem::size_of::<CachePadded<CpuSlot>>()
            + std::mem::size_of::<Self>()
    }

    fn flush_caches(&self) {
        self.flush_rcache();
    }

    fn exact_fit(&self) -> bool {
        // Rounding padding stays allocated and one CPU's cached ranges are invisible to
        // another: a request can be refused while space exists.
        false
    }
}
