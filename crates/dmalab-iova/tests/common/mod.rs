//! The differential harness shared by the property tests (`model.rs`) and the fuzz target (`fuzz/fuzz_targets/ops.rs`): one allocator design and the reference model driven in lockstep.

use std::mem::discriminant;

use dmalab_iova::magazines::MAX_CACHED_PAGES as MAG_MAX_CACHED_PAGES;
use dmalab_iova::reference::ReferenceDomain;
use dmalab_iova::{
    counted_between_snapshots, new_allocator, AllocRequest, AllocatorKind, DomainConfig,
    IovaAllocator, IovaError, IovaRange, Pfn, WorkCounters,
};

pub const PAGE: u64 = 4096;

pub fn build(name: &str, cfg: DomainConfig) -> Box<dyn IovaAllocator> {
    let kind = AllocatorKind::parse(name).unwrap_or_else(|e| panic!("{name}: {e}"));
    new_allocator(kind, cfg).unwrap_or_else(|e| panic!("{name}: {e}"))
}

pub fn domain(lo: u64, pages: u64) -> DomainConfig {
    DomainConfig::new(Pfn(lo), Pfn(lo + pages - 1), PAGE).expect("valid test domain")
}

/// Whether a placement at `start` satisfies the request's alignment and boundary (not freeness).
pub fn legal_start(req: &AllocRequest, start: u64) -> bool {
    let end = start + req.pages - 1;
    start.is_multiple_of(req.align_pages) && req.boundary_pages.is_none_or(|b| start / b == end / b)
}

/// The highest legal free placement of `req` in `model`, by trying every start: an oracle
/// independent of the library's placement arithmetic.
pub fn brute_fit(model: &ReferenceDomain, req: &AllocRequest) -> Option<u64> {
    let cfg = model.config();
    let limit = req.validate(cfg).ok()?.0;
    let lo = cfg.pfn_lo.0;
    if limit + 1 < lo + req.pages {
        return None;
    }
    (lo..=limit + 1 - req.pages)
        .rev()
        .find(|&s| legal_start(req, s) && model.is_free(s, s + req.pages - 1))
}

/// Pages of the domain occupied in the model: `(allocated, reserved, free, largest free run, free runs)`.
pub fn occupancy(model: &ReferenceDomain) -> (u64, u64, u64, u64, u64) {
    let total = model.config().total_pages();
    let allocated: u64 = model.allocations().iter().map(|r| r.pages).sum();
    let runs = model.free_runs();
    let free: u64 = runs.iter().map(|&(l, h)| h - l + 1).sum();
    let largest = runs.iter().map(|&(l, h)| h - l + 1).max().unwrap_or(0);
    (
        allocated,
        total - free - allocated,
        free,
        largest,
        runs.len() as u64,
    )
}

/// A valid allocation request, in domain-independent form.
#[derive(Debug, Clone)]
pub struct ReqSpec {
    pub pages: u64,
    pub align_log: u32,
    /// Limit as a fraction of the domain (0 = its first page, `u16::MAX` = its last).
    pub limit_frac: Option<u16>,
    /// Boundary as `next_power_of_two(pages) << shift`.
    pub boundary_shift: Option<u32>,
}

impl ReqSpec {
    pub fn request(&self, cfg: &DomainConfig) -> AllocRequest {
        let mut req = AllocRequest::pages(self.pages).aligned(1 << self.align_log);
        if let Some(f) = self.limit_frac {
            let span = cfg.total_pages() - 1;
            req = req.below(Pfn(cfg.pfn_lo.0 + span * u64::from(f) / u64::from(u16::MAX)));
        }
        if let Some(s) = self.boundary_shift {
            req = req.within_boundary(self.pages.next_power_of_two() << s);
        }
        req
    }
}

/// One step of a test sequence. `pick` selects among live allocations (or freed or reserved
/// ranges) modulo their number; offsets are taken modulo the domain size.
#[derive(Debug, Clone)]
pub enum Op {
    Alloc(ReqSpec),
    /// A request the library must refuse before searching: `corrupt` says how it is made invalid.
    BadAlloc(ReqSpec, u8),
    Free(usize),
    DoubleFree(usize),
    WrongSize(usize, i64),
    FreeUnallocated(u64, u64),
    FreeReserved(usize, u64, u64),
    FreeZero(usize),
    FreeOutside(usize, u8),
    Reserve(u64, u64),
    ReserveOverAlloc(usize, u64, u64),
    ReserveOutside(u8),
    Flush,
}

/// A design and the reference model driven in lockstep.
pub struct Harness {
    pub name: String,
    pub cfg: DomainConfig,
    pub dom: Box<dyn IovaAllocator>,
    pub model: ReferenceDomain,
    /// Ranges freed successfully, for double frees.
    pub freed: Vec<IovaRange>,
    /// Ranges reserved successfully (their pages stay reserved for good).
    pub reserved: Vec<(u64, u64)>,
    pub magazines: bool,
    /// What the design claims by `exact_fit()`. The magazine layer claims no exact fit and
    /// documents why: the padding of a rounded request stays allocated in its backend. For it
    /// the oracle counts that padding as occupied ([`Harness::padding`]), and nothing else.
    pub exact: bool,
    /// The work the design's counted calls reported, plus the snapshots of the calls that
    /// report none (reservations, flushes): always equal to its `work()`.
    pub counted: WorkCounters,
}

impl Harness {
    pub fn new(name: &str, cfg: DomainConfig) -> Self {
        let dom = build(name, cfg);
        let exact = dom.exact_fit();
        let counted = dom.work();
        Self {
            name: name.to_string(),
            cfg,
            dom,
            model: ReferenceDomain::new(cfg).expect("valid domain"),
            freed: Vec::new(),
            reserved: Vec::new(),
            magazines: name.starts_with("magazines+"),
            exact,
            counted,
        }
    }

    /// Run `call` on the design, adding the work between snapshots to [`Self::counted`].
    fn uncounted<T>(&mut self, call: impl FnOnce(&dyn IovaAllocator) -> T) -> T {
        let dom = &*self.dom;
        counted_between_snapshots(dom, &mut self.counted, || call(dom))
    }

    /// The design's counted calls reported exactly the work its counters show.
    pub fn check_counted(&self) -> Result<(), String> {
        let shown = self.dom.work();
        if shown != self.counted {
            return Err(format!(
                "counted calls reported {:?}, work() shows {shown:?}",
                self.counted
            ));
        }
        Ok(())
    }

    pub fn live(&self, pick: usize) -> Option<IovaRange> {
        let all = self.model.allocations();
        (!all.is_empty()).then(|| all[pick % all.len()])
    }

    pub fn random_pfn(&self, offset: u64) -> u64 {
        self.cfg.pfn_lo.0 + offset % self.cfg.total_pages()
    }

    /// For the magazine layer: pages the backend may hold as rounding padding of live
    /// allocations, as inclusive ranges. Conservative: every live allocation small enough to be
    /// cached and aligned to its power-of-two class may have come from a rounded request.
    pub fn padding(&self) -> Vec<(u64, u64)> {
        if self.exact || !self.magazines {
            return Vec::new();
        }
        let mut out = Vec::new();
        for a in self.model.allocations() {
            let class = a.pages.next_power_of_two();
            if a.pages > MAG_MAX_CACHED_PAGES || class == a.pages || a.pfn_lo.0 % class != 0 {
                continue;
            }
            let (lo, hi) = (
                a.pfn_hi().0 + 1,
                (a.pfn_lo.0 + class - 1).min(self.cfg.pfn_hi.0),
            );
            // Padding is only what the model sees as free (an exact allocation may sit there).
            let mut p = lo;
            while p <= hi {
                if self.model.is_free(p, p) {
                    let start = p;
                    while p < hi && self.model.is_free(p + 1, p + 1) {
                        p += 1;
                    }
                    out.push((start, p));
                }
                p += 1;
            }
        }
        out
    }

    /// The model as the design's backend sees it: with the magazine padding (if any) occupied.
    pub fn model_for_fit(&self) -> ReferenceDomain {
        let mut m = self.model.clone();
        for (lo, hi) in self.padding() {
            m.reserve(Pfn(lo), Pfn(hi))
                .expect("padding pages are free in the model");
        }
        m
    }

    pub fn allocate(&mut self, req: &AllocRequest) -> Result<(), String> {
        let expected = req.validate(&self.cfg);
        let got = self.dom.allocate_counted(req, &mut self.counted);
        match (expected, got) {
            (Err(e), got) => {
                if got.as_ref() != Err(&e) {
                    return Err(format!(
                        "invalid request {req:?}: expected Err({e:?}), got {got:?}"
                    ));
                }
            }
            (Ok(_), Ok(range)) => {
                self.model
                    .check_placement(req, &range)
                    .map_err(|e| format!("allocate {req:?} returned illegal {range:?}: {e}"))?;
                self.model.insert_allocation(range);
            }
            (Ok(limit), Err(e)) => {
                let no_space = IovaError::NoSpace {
                    pages: req.pages,
                    align_pages: req.align_pages,
                    limit,
                    boundary_pages: req.boundary_pages,
                };
                if e != no_space {
                    return Err(format!(
                        "allocate {req:?}: expected Ok or {no_space:?}, got {e:?}"
                    ));
                }
                // The reference's own answer must agree with brute force.
                let brute = brute_fit(&self.model, req);
                let reference = self.model.highest_fit(req).map_err(|e| e.to_string())?;
                if brute.map(Pfn) != reference {
                    return Err(format!(
                        "reference highest_fit {reference:?} != brute force {brute:?} for {req:?}"
                    ));
                }
                let seen = self.model_for_fit();
                if let Some(start) = brute_fit(&seen, req) {
                    return Err(format!(
                        "allocate {req:?}: NoSpace, but [{start:#x}, {:#x}] is free and legal (exact fit violated)",
                        start + req.pages - 1
                    ));
                }
            }
        }
        Ok(())
    }

    /// Free through both; the design must accept exactly what the model accepts, and refuse
    /// the rest with the same error kind (the model does not check sizes of zero or the domain,
    /// which every design refuses first).
    pub fn free(&mut self, pfn: u64, pages: u64) -> Result<(), String> {
        let mut next = self.model.clone();
        let expected = next.free(Pfn(pfn), pages);
        let got = self.dom.free_counted(Pfn(pfn), pages, &mut self.counted);
        let outside = pfn < self.cfg.pfn_lo.0
            || pfn
                .checked_add(pages.max(1) - 1)
                .is_none_or(|last| last > self.cfg.pfn_hi.0);
        match (expected, got) {
            (Ok(()), Ok(())) => {
                self.model = next;
                self.freed.push(IovaRange {
                    pfn_lo: Pfn(pfn),
                    pages,
                });
                Ok(())
            }
            (Ok(()), Err(e)) => Err(format!(
                "free({pfn:#x}, {pages}) of a live allocation refused: {e:?}"
            )),
            (Err(e), Ok(())) => Err(format!(
                "free({pfn:#x}, {pages}) accepted; the model refuses it with {e:?}"
            )),
            (Err(e), Err(g)) => {
                let ok = if pages == 0 {
                    g == IovaError::ZeroSize
                } else if outside {
                    matches!(g, IovaError::RangeOutsideDomain { .. })
                } else {
                    discriminant(&e) == discriminant(&g)
                };
                if ok {
                    Ok(())
                } else if pages == 0 || outside {
                    Err(format!(
                        "free({pfn:#x}, {pages}): expected {}, design refuses with {g:?}",
                        if pages == 0 {
                            "ZeroSize"
                        } else {
                            "RangeOutsideDomain"
                        }
                    ))
                } else {
                    Err(format!(
                        "free({pfn:#x}, {pages}): model refuses with {e:?}, design with {g:?}"
                    ))
                }
            }
        }
    }

    pub fn reserve(&mut self, lo: u64, hi: u64) -> Result<(), String> {
        let mut next = self.model.clone();
        let expected = next.reserve(Pfn(lo), Pfn(hi));
        let got = self.uncounted(|d| d.reserve(Pfn(lo), Pfn(hi)));
        let what = format!("reserve({lo:#x}, {hi:#x})");
        match (expected, got) {
            (Ok(()), Ok(())) => {
                self.model = next;
                self.reserved.push((lo, hi));
                Ok(())
            }
            (Ok(()), Err(g @ IovaError::ReserveOverlapsAllocation { allocated_pfn, .. }))
                if self.padding().iter().any(|&(a, b)| a <= hi && lo <= b) =>
            {
                // Magazine padding (documented): the allocation named must be one whose padding
                // is in the range.
                let owner = self
                    .model
                    .allocations()
                    .into_iter()
                    .find(|r| r.pfn_lo == allocated_pfn);
                match owner {
                    Some(r) if r.pfn_lo.0 + r.pages.next_power_of_two() > lo => Ok(()),
                    _ => Err(format!(
                        "{what}: {g:?} names no allocation whose padding is in the range"
                    )),
                }
            }
            (Ok(()), Err(g)) => Err(format!("{what} refused with {g:?}; the model accepts it")),
            (Err(e), Ok(())) => Err(format!("{what} accepted; the model refuses it with {e:?}")),
            (Err(e), Err(g)) => {
                if discriminant(&e) != discriminant(&g) {
                    return Err(format!(
                        "{what}: model refuses with {e:?}, design with {g:?}"
                    ));
                }
                match g {
                    IovaError::RangeOutsideDomain { .. } if g != e => {
                        Err(format!("{what}: expected {e:?}, got {g:?}"))
                    }
                    IovaError::ReserveOverlapsAllocation {
                        pfn_lo,
                        pfn_hi,
                        allocated_pfn,
                    } => {
                        // Any allocation in the range may be named, but it must be one.
                        let named = self
                            .model
                            .allocations()
                            .into_iter()
                            .find(|r| r.pfn_lo == allocated_pfn);
                        let inside = named.is_some_and(|r| r.pfn_lo.0 <= hi && lo <= r.pfn_hi().0);
                        // A magazine allocation whose padding is in the range may be named too.
                        let padding_owner = named.is_some_and(|r| {
                            self.padding()
                                .iter()
                                .any(|&(a, b)| a == r.pfn_hi().0 + 1 && a <= hi && lo <= b)
                        });
                        if (pfn_lo, pfn_hi) != (Pfn(lo), Pfn(hi)) {
                            Err(format!("{what}: {g:?} names another range"))
                        } else if inside || padding_owner {
                            Ok(())
                        } else {
                            Err(format!("{what}: {g:?} does not name an allocation in the range (model: {e:?})"))
                        }
                    }
                    _ => Ok(()),
                }
            }
        }
    }

    pub fn check_stats(&self, after_flush: bool) -> Result<(), String> {
        let s = self.dom.stats();
        let total = self.cfg.total_pages();
        let (allocated, reserved, free, largest, runs) = occupancy(&self.model);
        let live = self.model.allocations();
        let fail = |what: &str| {
            Err(format!(
                "stats {what}: {s:?}; model allocated {allocated}, reserved {reserved}, free {free}, largest {largest}, runs {runs}, live {}",
                live.len()
            ))
        };
        if s.free_pages + s.allocated_pages + s.reserved_pages + s.cached_pages != total {
            return fail("do not add up to the domain");
        }
        if s.live_allocations != live.len() as u64 {
            return fail("live_allocations");
        }
        if s.reserved_pages != reserved {
            return fail("reserved_pages");
        }
        if s.largest_free_extent_pages > largest {
            return fail("largest_free_extent_pages above the model's");
        }
        if self.magazines {
            // The backend holds each live allocation exactly or rounded up to its class.
            let rounded: u64 = live
                .iter()
                .map(|r| {
                    if r.pages <= MAG_MAX_CACHED_PAGES {
                        r.pages.next_power_of_two()
                    } else {
                        r.pages
                    }
                })
                .sum();
            let padding = if self.exact { allocated } else { rounded };
            if s.allocated_pages < allocated || s.allocated_pages > padding {
                return fail("allocated_pages outside [exact, rounded]");
            }
        } else {
            if s.allocated_pages != allocated {
                return fail("allocated_pages");
            }
            if s.free_pages + s.cached_pages != free {
                return fail("free_pages + cached_pages");
            }
            if s.cached_pages == 0
                && (s.largest_free_extent_pages != largest || s.free_extents != runs)
            {
                return fail("free extents");
            }
        }
        if after_flush && s.cached_pages != 0 {
            return fail("cached_pages after flush_caches");
        }
        Ok(())
    }

    pub fn step(&mut self, op: &Op) -> Result<(), String> {
        let cfg = self.cfg;
        let (lo, hi) = (cfg.pfn_lo.0, cfg.pfn_hi.0);
        match op {
            Op::Alloc(spec) => self.allocate(&spec.request(&cfg))?,
            Op::BadAlloc(spec, corrupt) => {
                let mut req = spec.request(&cfg);
                match corrupt {
                    0 => req.pages = 0,
                    1 => req.align_pages = [3, 6, 12, 48, 0][spec.pages as usize % 5],
                    2 => req.boundary_pages = Some([0, 3, 24, 100][spec.pages as usize % 4]),
                    3 => {
                        req.boundary_pages =
                            Some(spec.pages.next_power_of_two() / 2).filter(|&b| b > 0)
                    }
                    4 if lo > 0 => req.limit = Some(Pfn(lo - 1)),
                    _ => req.limit = Some(Pfn(hi + 1 + spec.pages)),
                }
                self.allocate(&req)?;
            }
            Op::Free(pick) => {
                if let Some(r) = self.live(*pick) {
                    self.free(r.pfn_lo.0, r.pages)?;
                }
            }
            Op::DoubleFree(pick) => {
                if !self.freed.is_empty() {
                    // Mostly the most recent free, sometimes an older one.
                    let n = self.freed.len();
                    let r = self.freed[if pick % 2 == 0 { n - 1 } else { pick % n }];
                    self.free(r.pfn_lo.0, r.pages)?;
                }
            }
            Op::WrongSize(pick, delta) => {
                if let Some(r) = self.live(*pick) {
                    let pages = r
                        .pages
                        .checked_add_signed(*delta)
                        .filter(|&p| p > 0)
                        .unwrap_or(r.pages + delta.unsigned_abs());
                    self.free(r.pfn_lo.0, pages)?;
                }
            }
            Op::FreeUnallocated(offset, pages) => self.free(self.random_pfn(*offset), *pages)?,
            Op::FreeReserved(pick, offset, pages) => {
                if !self.reserved.is_empty() {
                    let (a, b) = self.reserved[pick % self.reserved.len()];
                    self.free(a + offset % (b - a + 1), *pages)?;
                }
            }
            Op::FreeZero(pick) => {
                let pfn = self.live(*pick).map_or(lo, |r| r.pfn_lo.0);
                self.free(pfn, 0)?;
            }
            Op::FreeOutside(pick, kind) => {
                let r = self.live(*pick);
                let (pfn, pages) = match (kind, r) {
                    (0, _) => (hi + 1 + (*pick as u64 % 8), 1),
                    (1, _) if lo > 0 => (lo - 1, 1),
                    (2, Some(r)) => (r.pfn_lo.0, hi - r.pfn_lo.0 + 2),
                    (3, _) => (u64::MAX - 2, 8),
                    _ => (u64::MAX, u64::MAX),
                };
                self.free(pfn, pages)?;
            }
            Op::Reserve(offset, len) => {
                let a = self.random_pfn(*offset);
                self.reserve(a, (a + len - 1).min(hi))?;
            }
            Op::ReserveOverAlloc(pick, before, after) => {
                if let Some(r) = self.live(*pick) {
                    let a = r.pfn_lo.0.saturating_sub(*before).max(lo);
                    let b = (r.pfn_hi().0 + after).min(hi);
                    self.reserve(a, b)?;
                }
            }
            Op::ReserveOutside(kind) => {
                let (a, b) = match kind {
                    0 => (hi, hi + 1),
                    1 if lo > 0 => (lo - 1, lo),
                    2 if hi > lo => (hi, lo),
                    3 => (u64::MAX - 1, u64::MAX),
                    _ => (hi + 5, hi + 9),
                };
                self.reserve(a, b)?;
            }
            Op::Flush => self.uncounted(|d| d.flush_caches()),
        }
        self.check_counted()?;
        self.check_stats(matches!(op, Op::Flush))
    }

    /// Run a sequence, then free everything and check the domain is whole again.
    pub fn run(&mut self, ops: &[Op]) -> Result<(), String> {
        if self.dom.name() != self.name {
            return Err(format!("{}: name {:?}", self.name, self.dom.name()));
        }
        if !self.exact && !self.magazines {
            return Err(format!(
                "{}: exact_fit() is false and the harness has no model of how it falls short",
                self.name
            ));
        }
        for (i, op) in ops.iter().enumerate() {
            self.step(op).map_err(|e| {
                format!("{} (domain {:?}) step {i} {op:?}: {e}", self.name, self.cfg)
            })?;
        }
        for r in self.model.allocations() {
            self.free(r.pfn_lo.0, r.pages)
                .map_err(|e| format!("{} final free: {e}", self.name))?;
        }
        self.dom.flush_caches();
        self.check_stats(true)
            .map_err(|e| format!("{} at the end: {e}", self.name))?;
        let s = self.dom.stats();
        let (_, reserved, free, largest, _) = occupancy(&self.model);
        if s.free_pages != free
            || s.free_pages != self.cfg.total_pages() - reserved
            || s.largest_free_extent_pages != largest
        {
            return Err(format!("{} at the end: pages lost: {s:?}", self.name));
        }
        Ok(())
    }
}
