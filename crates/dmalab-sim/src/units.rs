//! Newtypes for time and bus addresses, so that no bare integer crosses an API.

use serde::Serialize;
use std::fmt;
use std::ops::{Add, AddAssign, Sub};

/// A time or a duration in integer picoseconds (never a float: runs must be bit-identical).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct Ps(pub u64);

impl Ps {
    /// Zero time.
    pub const ZERO: Ps = Ps(0);

    /// A duration of `ns` nanoseconds.
    pub const fn from_ns(ns: u64) -> Ps {
        Ps(ns * 1_000)
    }

    /// The time in nanoseconds, as a float for display and for rates.
    pub fn as_ns_f64(self) -> f64 {
        self.0 as f64 / 1e3
    }

    /// The time in microseconds, as a float for display and for rates.
    pub fn as_us_f64(self) -> f64 {
        self.0 as f64 / 1e6
    }

    /// `self * n`, saturating (a model never needs more than 584 years).
    pub fn times(self, n: u64) -> Ps {
        Ps(self.0.saturating_mul(n))
    }

    /// The duration of one cycle of a clock of `hz` hertz, rounded to the nearest picosecond.
    pub fn clock_period(hz: u64) -> Ps {
        let hz = hz.max(1);
        Ps((1_000_000_000_000 + hz / 2) / hz)
    }

    /// The time to move `bytes` at `bytes_per_s`, rounded up to the next picosecond.
    pub fn for_bytes(bytes: u64, bytes_per_s: u64) -> Ps {
        let rate = u128::from(bytes_per_s.max(1));
        let ps = (u128::from(bytes) * 1_000_000_000_000).div_ceil(rate);
        Ps(u64::try_from(ps).unwrap_or(u64::MAX))
    }
}

impl Add for Ps {
    type Output = Ps;
    fn add(self, rhs: Ps) -> Ps {
        Ps(self.0.saturating_add(rhs.0))
    }
}

impl AddAssign for Ps {
    fn add_assign(&mut self, rhs: Ps) {
        *self = *self + rhs;
    }
}

impl Sub for Ps {
    type Output = Ps;
    fn sub(self, rhs: Ps) -> Ps {
        Ps(self.0.saturating_sub(rhs.0))
    }
}

/// A running total of durations, kept in 128 bits: adding is a plain add with carry where a
/// saturating [`Ps`] sum needs a compare and a select on every term, and no run adds the 2^64
/// terms it would take to overflow. Read as [`Ps`] saturated to 64 bits, which for terms that
/// are never negative is exactly the saturating running sum of the same terms.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PsSum(u128);

impl PsSum {
    /// The total, saturated to [`Ps`].
    pub fn ps(self) -> Ps {
        Ps(u64::try_from(self.0).unwrap_or(u64::MAX))
    }

    /// What was added since the sum was `earlier` (zero if `earlier` is the larger).
    pub fn minus(self, earlier: PsSum) -> PsSum {
        PsSum(self.0.saturating_sub(earlier.0))
    }
}

impl AddAssign<Ps> for PsSum {
    #[inline]
    fn add_assign(&mut self, rhs: Ps) {
        self.0 += u128::from(rhs.0);
    }
}

impl std::iter::Sum for Ps {
    fn sum<I: Iterator<Item = Ps>>(iter: I) -> Ps {
        iter.fold(Ps::ZERO, Add::add)
    }
}

impl fmt::Display for Ps {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.3} us", self.as_us_f64())
    }
}

/// An address on an I/O bus (after any IOMMU translation seen from the device's side).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(transparent)]
pub struct BusAddr(pub u64);

impl BusAddr {
    /// The address `bytes` further on, saturating at the top of the 64-bit space.
    pub fn offset(self, bytes: u64) -> BusAddr {
        BusAddr(self.0.saturating_add(bytes))
    }

    /// The first address at or above `self` that is a multiple of `align` (a power of two).
    pub fn align_up(self, align: u64) -> BusAddr {
        BusAddr(self.0.div_ceil(align).saturating_mul(align))
    }

    /// The address rounded down to a multiple of `align` (a power of two).
    pub fn align_down(self, align: u64) -> BusAddr {
        BusAddr(self.0 - self.0 % align)
    }
}

impl fmt::Display for BusAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "0x{:X}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_read_as_the_saturating_running_sum() {
        let terms = [
            Ps(u64::MAX / 2),
            Ps(7),
            Ps(u64::MAX / 2),
            Ps(1),
            Ps(u64::MAX),
        ];
        let (mut sum, mut saturating) = (PsSum::default(), Ps::ZERO);
        for (i, &t) in terms.iter().enumerate() {
            sum += t;
            saturating += t;
            assert_eq!(sum.ps(), saturating, "after {} terms", i + 1);
        }
        assert_eq!(sum.ps(), Ps(u64::MAX));
    }

    #[test]
    fn clock_period_rounds_to_nearest() {
        assert_eq!(Ps::clock_period(33_333_333), Ps(30_000));
        assert_eq!(Ps::clock_period(66_666_667), Ps(15_000));
        assert_eq!(Ps::clock_period(133_000_000), Ps(7_519));
    }

    #[test]
    fn bytes_at_a_rate_round_up() {
        assert_eq!(Ps::for_bytes(1, 1_000_000_000_000), Ps(1));
        assert_eq!(Ps::for_bytes(3, 2_000_000_000_000), Ps(2));
        assert_eq!(Ps::for_bytes(1500, 125_000_000), Ps(12_000_000));
    }

    #[test]
    fn addresses_align() {
        assert_eq!(BusAddr(0x420A8).align_up(512), BusAddr(0x42200));
        assert_eq!(BusAddr(0x420A8).align_down(128), BusAddr(0x42080));
        assert_eq!(BusAddr(0x4200).align_up(512), BusAddr(0x4200));
    }
}
