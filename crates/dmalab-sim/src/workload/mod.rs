//! Workloads: what runs on a platform and its DMA-mapping layer, each a model on the event
//! engine or a closed-form stage model, returning its measurements with a breakdown.

pub mod alias;
pub mod block;
pub mod copy;
pub mod copybreak;
pub mod devdma;
pub mod latency;
pub mod mapbench;
pub mod net;
pub mod nic_rx;
pub mod nic_tx;
pub mod ratecheck;
pub mod scsi_tx;
pub mod stream;
pub mod synccopy;
pub mod timeline;
pub mod vhost;
