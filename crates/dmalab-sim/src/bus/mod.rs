//! The I/O buses a device's DMA crosses: conventional PCI behind bridges, PCI-X with split
//! transactions and PCIe links, each turning a transfer into the commands or TLPs an analyzer
//! would see ([`trace`]), and the memory controller's view of partial lines ([`memctl`]).

pub mod device;
pub mod hints;
pub mod lba;
pub mod memctl;
pub mod memory;
pub mod nic_send;
pub mod ordering;
pub mod pci;
pub mod pcie;
pub mod pcix;
pub mod scsi_ctl;
pub mod trace;

use crate::error::Result;

use crate::units::BusAddr;
use pci::PciBus;
use pcie::PcieLink;
use pcix::PciXBus;
use trace::{Direction, Trace};

/// The bus models time a transfer by its address only through the address's offset in this
/// many bytes: every boundary they split at (cache lines, PCI prefetch and disconnect
/// boundaries, PCIe's rule that no request crosses 4 KiB (PCIe base spec 2.2.7), MPS and RCB)
/// divides it. Workloads cache bus times by that offset.
pub const ADDRESS_PERIOD_BYTES: u64 = 4096;

/// The I/O bus a platform's device sits on.
#[derive(Clone, Debug)]
pub enum Bus {
    /// Conventional PCI behind bridges.
    Pci(PciBus),
    /// PCI-X with split transactions.
    PciX(PciXBus),
    /// A PCIe link.
    Pcie(PcieLink),
}

impl Bus {
    /// The commands of one DMA transfer on this bus.
    pub fn transfer(&self, direction: Direction, addr: BusAddr, len_bytes: u64) -> Result<Trace> {
        match self {
            Bus::Pci(b) => b.transfer(direction, addr, len_bytes),
            Bus::PciX(b) => b.transfer(direction, addr, len_bytes),
            Bus::Pcie(l) => l.transfer(direction, addr, len_bytes),
        }
    }

    /// The bus's name, such as `PCI 64-bit 33 MHz` or `PCIe Gen3 x8`.
    pub fn name(&self) -> String {
        match self {
            Bus::Pci(b) => b.name(),
            Bus::PciX(b) => b.name(),
            Bus::Pcie(l) => l.name(),
        }
    }

    /// The cache-line size the bus and the memory controller use.
    pub fn cache_line_bytes(&self) -> u64 {
        match self {
            Bus::Pci(b) => b.params().cache_line_bytes,
            Bus::PciX(b) => b.params().cache_line_bytes,
            Bus::Pcie(l) => l.params().cache_line_bytes,
        }
    }
}
