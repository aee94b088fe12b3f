//! dmalab's hardware models: how a DMA transfer becomes bus commands (conventional PCI, PCI-X,
//! PCIe), what each costs in time, what the memory controller does with partial lines, and the
//! platforms (one TOML file per machine) whose parameters drive all of it.
//!
//! ```
//! use dmalab_sim::{platform::Platform, trace::Direction, units::BusAddr};
//! let p660 = Platform::builtin("ibm-p660-m2plus", &Default::default())?;
//! let trace = p660.trace(Direction::Read, BusAddr(0x4800), 1514)?;
//! assert_eq!(trace.totals.commands, 3);
//! # Ok::<(), dmalab_sim::SimError>(())
//! ```

pub mod claims;
pub mod copy;
pub mod copybreak;
pub mod dma;
pub mod engine;
pub mod error;
pub mod io;
pub mod iommu;
pub mod memctl;
pub mod net;
pub mod params;
pub mod pci;
pub mod pcie;
pub mod pcix;
pub mod platform;
pub mod progress;
pub mod resource;
pub mod scenario;
pub mod stream;
pub mod trace;
pub mod units;
pub mod vhost;

pub use error::{Result, SimError};
