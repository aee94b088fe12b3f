//! dmalab's hardware models: how a DMA transfer becomes bus commands (conventional PCI, PCI-X,
//! PCIe), what each costs in time, what the memory controller does with partial lines, and the
//! platforms (one TOML file per machine) whose parameters drive all of it.
//!
//! ```
//! use dmalab_sim::{bus::trace::Direction, config::platform::Platform, units::BusAddr};
//! let p660 = Platform::builtin("ibm-p660-m2plus", &Default::default())?;
//! let trace = p660.trace(Direction::Read, BusAddr(0x4800), 1514)?;
//! assert_eq!(trace.totals.commands, 3);
//! # Ok::<(), dmalab_sim::SimError>(())
//! ```

pub mod bus;
pub mod claims;
pub mod config;
pub mod dma;
pub mod engine;
pub mod error;
pub mod iommu;
pub mod limits;
pub mod progress;
pub mod resource;
pub mod run;
pub mod slots;
pub mod units;
pub mod workload;

pub use error::{Result, SimError};
