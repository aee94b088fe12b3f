//! A naive reference model of an IOVA domain: obviously correct, slow, used to check the designs.
//!
//! It keeps every occupied range in a sorted map and answers "does any placement exist?" by
//! walking every gap. Tests drive a design and this model with the same operations and compare.

use std::collections::BTreeMap;

use crate::error::IovaError;
use crate::placement::Fit;
use crate::types::{AllocRequest, DomainConfig, IovaRange, Pfn};

/// What occupies a range in the reference model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Occupant {
    /// A live allocation.
    Allocation,
    /// A reserved range.
    Reserved,
}

/// The reference domain: occupied ranges keyed by first frame, each `(last frame, occupant)`.
#[derive(Debug, Clone)]
pub struct ReferenceDomain {
    cfg: DomainConfig,
    occupied: BTreeMap<u64, (u64, Occupant)>,
}

impl ReferenceDomain {
    /// An empty domain.
    pub fn new(cfg: DomainConfig) -> Result<Self, IovaError> {
        cfg.validate()?;
        Ok(Self {
            cfg,
            occupied: BTreeMap::new(),
        })
    }

    /// The domain's bounds.
    pub fn config(&self) -> &DomainConfig {
        &self.cfg
    }

    /// The occupied range containing `pfn`, if any: `(first, last, occupant)`.
    pub fn occupant_of(&self, pfn: u64) -> Option<(u64, u64, Occupant)> {
        let (&lo, &(hi, occ)) = self.occupied.range(..=pfn).next_back()?;
        (hi >= pfn).then_some((lo, hi, occ))
    }

    /// Whether every page of `[lo, hi]` is free.
    pub fn is_free(&self, lo: u64, hi: u64) -> bool {
        if self.occupant_of(lo).is_some() {
            return false;
        }
        self.occupied.range(lo..=hi).next().is_none()
    }

    /// Whether `range` is a legal answer to `req`: free, inside the domain and the limit, aligned,
    /// not crossing the boundary.
    pub fn check_placement(&self, req: &AllocRequest, range: &IovaRange) -> Result<(), String> {
        let limit = req.validate(&self.cfg).map_err(|e| e.to_string())?;
        let (lo, hi) = (range.pfn_lo.0, range.pfn_hi().0);
        if range.pages != req.pages {
            return Err(format!("size {} != requested {}", range.pages, req.pages));
        }
        if lo < self.cfg.pfn_lo.0 || hi > limit.0 {
            return Err(format!(
                "[{lo:#x},{hi:#x}] outside [{:#x},{:#x}]",
                self.cfg.pfn_lo.0, limit.0
            ));
        }
        if lo % req.align_pages != 0 {
            return Err(format!("{lo:#x} not aligned to {}", req.align_pages));
        }
        if let Some(b) = req.boundary_pages {
            if lo / b != hi / b {
                return Err(format!("[{lo:#x},{hi:#x}] crosses a {b}-page boundary"));
            }
        }
        if !self.is_free(lo, hi) {
            return Err(format!(
                "[{lo:#x},{hi:#x}] overlaps {:?}",
                self.occupant_of(lo)
            ));
        }
        Ok(())
    }

    /// The free runs of the domain, lowest first, as `(first, last)`.
    pub fn free_runs(&self) -> Vec<(u64, u64)> {
        let mut runs = Vec::new();
        let mut next = self.cfg.pfn_lo.0;
        for (&lo, &(hi, _)) in &self.occupied {
            if lo > next {
                runs.push((next, lo - 1));
            }
            next = next.max(hi + 1);
        }
        if next <= self.cfg.pfn_hi.0 {
            runs.push((next, self.cfg.pfn_hi.0));
        }
        runs
    }

    /// The highest legal placement for `req`, if one exists anywhere.
    pub fn highest_fit(&self, req: &AllocRequest) -> Result<Option<Pfn>, IovaError> {
        let limit = req.validate(&self.cfg)?.0;
        let fit = Fit::of(req);
        Ok(self
            .free_runs()
            .into_iter()
            .rev()
            .filter(|&(lo, _)| lo <= limit)
            .find_map(|(lo, hi)| fit.highest(lo, hi.min(limit)))
            .map(Pfn))
    }

    /// Record an allocation the design under test returned (after `check_placement`).
    pub fn insert_allocation(&mut self, range: IovaRange) {
        self.occupied
            .insert(range.pfn_lo.0, (range.pfn_hi().0, Occupant::Allocation));
    }

    /// Apply a free with the library's rules; `Ok` exactly when a design must accept it.
    pub fn free(&mut self, pfn: Pfn, pages: u64) -> Result<(), IovaError> {
        match self.occupied.get(&pfn.0) {
            Some(&(hi, Occupant::Allocation)) => {
                let allocated_pages = hi - pfn.0 + 1;
                if allocated_pages != pages {
                    return Err(IovaError::SizeMismatch {
                        pfn,
                        pages,
                        allocated_pages,
                    });
                }
                self.occupied.remove(&pfn.0);
                Ok(())
            }
            Some(&(_, Occupant::Reserved)) => Err(IovaError::FreeOfReserved { pfn }),
            None => match self.occupant_of(pfn.0) {
                Some((_, _, Occupant::Reserved)) => Err(IovaError::FreeOfReserved { pfn }),
                _ => Err(IovaError::NotAllocated { pfn, pages }),
            },
        }
    }

    /// Apply a reservation with the library's rules: it may overlap other reservations (they
    /// merge) but not an allocation.
    pub fn reserve(&mut self, lo: Pfn, hi: Pfn) -> Result<(), IovaError> {
        if lo > hi || lo < self.cfg.pfn_lo || hi > self.cfg.pfn_hi {
            return Err(IovaError::RangeOutsideDomain {
                pfn_lo: lo,
                pfn_hi: hi,
                domain_lo: self.cfg.pfn_lo,
                domain_hi: self.cfg.pfn_hi,
            });
        }
        let start = self.occupant_of(lo.0).map_or(lo.0, |(s, _, _)| s);
        let inside: Vec<(u64, u64, Occupant)> = self
            .occupied
            .range(start..=hi.0)
            .map(|(&l, &(h, o))| (l, h, o))
            .collect();
        if let Some(&(l, _, _)) = inside.iter().find(|r| r.2 == Occupant::Allocation) {
            return Err(IovaError::ReserveOverlapsAllocation {
                pfn_lo: lo,
                pfn_hi: hi,
                allocated_pfn: Pfn(l),
            });
        }
        let (mut new_lo, mut new_hi) = (lo.0, hi.0);
        for (l, h, _) in inside {
            self.occupied.remove(&l);
            new_lo = new_lo.min(l);
            new_hi = new_hi.max(h);
        }
        self.occupied.insert(new_lo, (new_hi, Occupant::Reserved));
        Ok(())
    }

    /// Live allocations, lowest first.
    pub fn allocations(&self) -> Vec<IovaRange> {
        self.occupied
            .iter()
            .filter(|(_, (_, o))| *o == Occupant::Allocation)
            .map(|(&lo, &(hi, _))| IovaRange {
                pfn_lo: Pfn(lo),
                pages: hi - lo + 1,
            })
            .collect()
    }
}
