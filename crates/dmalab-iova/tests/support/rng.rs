//! The tests' one pseudo-random source: xorshift64*, deterministic from its seed and enough
//! randomness for workloads and property checks. Shared by `model.rs`, `stress.rs` and
//! `no_refusal_with_room.rs` through `#[path]`; each uses the methods it needs.
#![allow(dead_code)]

/// xorshift64*.
pub struct Rng(pub u64);

impl Rng {
    /// A generator from `seed` (made odd, so that no seed is the all-zero state).
    pub fn new(seed: u64) -> Self {
        Self(seed | 1)
    }
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}
