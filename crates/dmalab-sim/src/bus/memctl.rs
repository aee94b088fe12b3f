//! The memory controller's side of DMA writes: a write that covers only part of a cache line
//! makes the controller read the line, merge the new bytes and write it back (a
//! read-modify-write); a write of whole lines does not. Seed 001 names this cost for unaligned
//! receive buffers ("the memory controller will have to do read-modify-write operations").

use crate::units::{BusAddr, Ps};

/// The parameters of the memory controller that DMA writes see.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MemoryController {
    /// The cache-line size the controller keeps coherent, in bytes (a power of two).
    pub cache_line_bytes: u64,
    /// The extra memory time of one partial-line write (read the line, merge, write it back).
    pub read_modify_write_ps: Ps,
}

impl MemoryController {
    /// How many cache lines the write of `bytes` at `addr` touches without covering them
    /// whole: 0, 1 or 2 (the first and the last line of the span).
    pub fn partial_lines(&self, addr: BusAddr, bytes: u64) -> u32 {
        partial_lines(addr, bytes, self.cache_line_bytes)
    }
}

/// The number of lines of `line_bytes` that `[addr, addr + bytes)` touches but does not cover.
pub fn partial_lines(addr: BusAddr, bytes: u64, line_bytes: u64) -> u32 {
    if bytes == 0 {
        return 0;
    }
    let start = addr.0;
    let end = start.saturating_add(bytes);
    let first_line = start / line_bytes;
    let last_line = (end - 1) / line_bytes;
    let head_partial = !start.is_multiple_of(line_bytes);
    let tail_partial = !end.is_multiple_of(line_bytes);
    if first_line == last_line {
        u32::from(head_partial || tail_partial)
    } else {
        u32::from(head_partial) + u32::from(tail_partial)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_the_partial_ends_of_a_span() {
        // Seed 001, the unaligned receive: 1514 bytes at 0x2012 leave the first and last lines
        // partial.
        assert_eq!(partial_lines(BusAddr(0x2012), 1514, 128), 2);
        // The aligned receive: only the tail line is partial.
        assert_eq!(partial_lines(BusAddr(0xE800), 1514, 128), 1);
        assert_eq!(partial_lines(BusAddr(0xE800), 1024, 128), 0);
        assert_eq!(partial_lines(BusAddr(0x10), 16, 128), 1);
        assert_eq!(partial_lines(BusAddr(0x0), 128, 128), 0);
        assert_eq!(partial_lines(BusAddr(0x0), 0, 128), 0);
    }
}
