//! What a workload is asked to do: the inputs of the block and network models, and the
//! `[workload]` table of a scenario file that gives them, each key with its default and range.
//!
//! | key | kinds | default | valid |
//! | --- | --- | --- | --- |
//! | `kind` | all | `block` | block, udp-rr, tcp-rr, udp-stream, tcp-stream |
//! | `io_bytes` | block | 4096 | 1..=2^30 |
//! | `threads` | block | 1 | 1..=1024 |
//! | `queue_depth` | block | 1 | 1..=65536 |
//! | `devices` | block | 1 | 1..=256 |
//! | `queues_per_device` | block | one per thread | 1..=65535 |
//! | `sockets` | block | 1 | 1..=8 |
//! | `completion` | block | `submitter` | submitter, queue-interrupt |
//! | `ios` | block | 100000 | 1..=2^40 |
//! | `warm_up_ios` | block | 0 | 0..=2^40 |
//! | `buffers` | block | 1 | 1..=2^20 |
//! | `seed` | block | 1 | 0..=2^63-1 |
//! | `instances` | network | 1 | 1..=10000 |
//! | `message_bytes` | network | 64 (rr), 1472 (udp-stream), 65536 (tcp-stream) | 1..=2^24 |
//! | `transactions` | udp-rr, tcp-rr | 10000 | 1..=2^40 |
//! | `messages` | udp-stream, tcp-stream | 10000 | 1..=2^40 |
//! | `mtu_bytes` | network | the platform's `net.mtu_bytes` | 576..=9000 |

use crate::config::check::{in_range, Checker};
use crate::error::{invalid_arg, Result};
use serde::{Deserialize, Serialize};
use std::ops::RangeInclusive;

/// The valid values of each workload input, written once: the scenario reader checks a file's
/// keys against them and the models check inputs built in code against them.
pub mod valid {
    use std::ops::RangeInclusive;

    /// Bytes per block I/O.
    pub const IO_BYTES: RangeInclusive<u64> = 1..=1 << 30;
    /// Submitting threads.
    pub const THREADS: RangeInclusive<u64> = 1..=1024;
    /// I/Os in flight per thread.
    pub const QUEUE_DEPTH: RangeInclusive<u64> = 1..=65536;
    /// Devices a block workload spreads its I/Os over.
    pub const DEVICES: RangeInclusive<u64> = 1..=256;
    /// Submission queues per device (NVMe allows up to 65535 I/O queues).
    pub const QUEUES_PER_DEVICE: RangeInclusive<u64> = 1..=65535;
    /// Sockets the threads and devices are spread over.
    pub const SOCKETS: RangeInclusive<u64> = 1..=8;
    /// Operations to complete (I/Os, transactions or messages).
    pub const COUNT: RangeInclusive<u64> = 1..=1 << 40;
    /// I/Os run before the counted ones.
    pub const WARM_UP: RangeInclusive<u64> = 0..=1 << 40;
    /// Buffers each thread draws from.
    pub const BUFFERS: RangeInclusive<u64> = 1..=1 << 20;
    /// The block workload's random seed.
    pub const SEED: RangeInclusive<u64> = 0..=u64::MAX >> 1;
    /// Concurrent instances of a network workload.
    pub const INSTANCES: RangeInclusive<u64> = 1..=10_000;
    /// Bytes per message.
    pub const MESSAGE_BYTES: RangeInclusive<u64> = 1..=1 << 24;
    /// A scenario's MTU.
    pub const MTU_BYTES: RangeInclusive<u64> = 576..=9000;
    /// Packets a vhost run moves: its time grows with them (its memory does not), and the
    /// payload's bit count stays far inside 64 bits with the largest packets.
    pub const VHOST_PACKETS: RangeInclusive<u64> = 1..=1 << 24;
}

/// `value` if `range` holds it, else an [`crate::SimError::InvalidArgument`] naming `field`.
pub fn check(field: &str, value: u64, range: RangeInclusive<u64>) -> Result<u64> {
    if range.contains(&value) {
        Ok(value)
    } else {
        let valid = format!("{}..={}", range.start(), range.end());
        Err(invalid_arg(field, value, valid))
    }
}

/// One closed-loop run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct IoScenario {
    /// Bytes per I/O.
    pub io_bytes: u64,
    /// Submitting threads, one per CPU.
    pub threads: usize,
    /// I/Os in flight per thread.
    pub queue_depth: usize,
    /// Devices the I/Os are spread over (queue slot by slot), each with its own data path.
    pub devices: usize,
    /// Submission queues per device, CPUs mapped to them in contiguous groups as blk-mq does;
    /// `None`: one per submitting thread, so that no two threads share a queue.
    pub queues_per_device: Option<usize>,
    /// Sockets: threads pinned to them in contiguous blocks, devices attached in turn.
    pub sockets: usize,
    /// Which CPU completes an I/O (runs its completion path and unmap).
    pub completion: Completion,
    /// I/Os to complete.
    pub ios: u64,
    /// I/Os run to the last before the counted `ios`, on the same mapper (its allocator's caches
    /// and flush queues warm), then the counted run starts with every queue empty; 0: every
    /// I/O counts, the first wave's cold allocations included. The run's rate, latency,
    /// breakdown and utilisations are the counted I/Os'; the mapper's own counters (the IOTLB
    /// hit rate, the allocator's work) include the warm-up.
    pub warm_up_ios: u64,
    /// Distinct buffers each thread draws from at random (their physical pages).
    pub buffers: u64,
    /// Seed of the random buffer choice.
    pub seed: u64,
}

/// Which CPU runs an I/O's completion (its completion path and unmap).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Completion {
    /// The CPU that submitted it: the queue's interrupt is steered to the submitting CPU, as
    /// NVMe's per-queue vectors are with a queue per CPU, or the block layer completes on the
    /// submitter (`rq_affinity = 2`).
    #[default]
    Submitter,
    /// The CPU that takes the queue's interrupt: one CPU of the group mapped to the queue (each
    /// device's vector for the queue on the next CPU of the group). With a queue per thread
    /// that is the submitter; with shared queues one CPU completes for its whole group on a
    /// device.
    QueueInterrupt,
}

/// A network workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum NetWorkload {
    /// UDP request/response: each instance sends `message_bytes`, waits for as many back.
    UdpRr {
        /// Concurrent instances.
        instances: u64,
        /// Bytes of each request and of each response.
        message_bytes: u64,
        /// Transactions to complete, over all instances.
        transactions: u64,
    },
    /// TCP request/response: as UDP, with TCP's segmentation offload on each send.
    TcpRr {
        /// Concurrent connections.
        instances: u64,
        /// Bytes of each request and of each response.
        message_bytes: u64,
        /// Transactions to complete, over all connections.
        transactions: u64,
    },
    /// UDP stream: each instance sends datagrams back to back; each is its own frames.
    UdpStream {
        /// Concurrent senders.
        instances: u64,
        /// Bytes per datagram.
        message_bytes: u64,
        /// Datagrams to deliver, over all instances.
        messages: u64,
    },
    /// TCP stream: each instance sends messages back to back, within its window.
    TcpStream {
        /// Concurrent connections.
        instances: u64,
        /// Bytes per send call.
        message_bytes: u64,
        /// Messages to deliver, over all instances.
        messages: u64,
    },
}

/// The kinds of workload a scenario can run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum WorkloadKind {
    /// Closed-loop block I/O ([`IoScenario`]).
    #[default]
    Block,
    /// UDP request/response between two hosts.
    UdpRr,
    /// TCP request/response between two hosts.
    TcpRr,
    /// UDP stream between two hosts.
    UdpStream,
    /// TCP stream between two hosts.
    TcpStream,
}

impl WorkloadKind {
    /// The keys this kind reads besides `kind`.
    fn keys(self) -> &'static [&'static str] {
        match self {
            WorkloadKind::Block => &[
                "io_bytes",
                "threads",
                "queue_depth",
                "devices",
                "queues_per_device",
                "sockets",
                "completion",
                "ios",
                "warm_up_ios",
                "buffers",
                "seed",
            ],
            WorkloadKind::UdpRr | WorkloadKind::TcpRr => {
                &["instances", "message_bytes", "transactions", "mtu_bytes"]
            }
            WorkloadKind::UdpStream | WorkloadKind::TcpStream => {
                &["instances", "message_bytes", "messages", "mtu_bytes"]
            }
        }
    }

    fn name(self) -> &'static str {
        match self {
            WorkloadKind::Block => "block",
            WorkloadKind::UdpRr => "udp-rr",
            WorkloadKind::TcpRr => "tcp-rr",
            WorkloadKind::UdpStream => "udp-stream",
            WorkloadKind::TcpStream => "tcp-stream",
        }
    }
}

/// A scenario's `[workload]` table as written: every key of every kind, each optional; the
/// keys a kind does not read are refused by [`WorkloadFile::resolve`]. Defaults and ranges are
/// in the module's table.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
#[expect(missing_docs, reason = "the keys are documented in the module's table")]
pub struct WorkloadFile {
    #[serde(default)]
    pub kind: WorkloadKind,
    pub io_bytes: Option<u64>,
    pub threads: Option<u64>,
    pub queue_depth: Option<u64>,
    pub devices: Option<u64>,
    pub queues_per_device: Option<u64>,
    pub sockets: Option<u64>,
    pub completion: Option<Completion>,
    pub ios: Option<u64>,
    pub warm_up_ios: Option<u64>,
    pub buffers: Option<u64>,
    pub seed: Option<u64>,
    pub instances: Option<u64>,
    pub message_bytes: Option<u64>,
    pub transactions: Option<u64>,
    pub messages: Option<u64>,
    pub mtu_bytes: Option<u64>,
}

/// What a scenario runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Workload {
    /// Block I/O (or frames from a ring) at a size and queue depth.
    Block(IoScenario),
    /// A two-host network workload.
    Net(NetWorkload),
}

impl WorkloadFile {
    fn given(&self) -> [(&'static str, Option<u64>); 15] {
        [
            ("io_bytes", self.io_bytes),
            ("threads", self.threads),
            ("queue_depth", self.queue_depth),
            ("devices", self.devices),
            ("queues_per_device", self.queues_per_device),
            ("sockets", self.sockets),
            ("ios", self.ios),
            ("warm_up_ios", self.warm_up_ios),
            ("buffers", self.buffers),
            ("seed", self.seed),
            ("instances", self.instances),
            ("message_bytes", self.message_bytes),
            ("transactions", self.transactions),
            ("messages", self.messages),
            ("mtu_bytes", self.mtu_bytes),
        ]
    }

    /// The workload and its MTU (network kinds, when set), each key range-checked; a key the
    /// kind does not read is refused, naming the keys it does.
    pub fn resolve(&self, c: &Checker<'_>) -> Result<(Workload, Option<u64>)> {
        let kind = self.kind;
        let named = [("completion", self.completion.is_some())];
        for (key, set) in self
            .given()
            .into_iter()
            .map(|(k, v)| (k, v.is_some()))
            .chain(named)
        {
            if set && !kind.keys().contains(&key) {
                return Err(c.invalid(
                    &format!("workload.{key}"),
                    "set",
                    &format!(
                        "not read by kind `{}`; its keys: kind, {}",
                        kind.name(),
                        kind.keys().join(", ")
                    ),
                ));
            }
        }
        let get = |key: &str, v: Option<u64>, default: u64, range: RangeInclusive<u64>| {
            let (lo, hi) = (*range.start(), *range.end());
            in_range(c, &format!("workload.{key}"), v.unwrap_or(default), lo, hi)
        };
        if kind == WorkloadKind::Block {
            return Ok((
                Workload::Block(IoScenario {
                    io_bytes: get("io_bytes", self.io_bytes, 4096, valid::IO_BYTES)?,
                    threads: get("threads", self.threads, 1, valid::THREADS)? as usize,
                    queue_depth: get("queue_depth", self.queue_depth, 1, valid::QUEUE_DEPTH)?
                        as usize,
                    devices: get("devices", self.devices, 1, valid::DEVICES)? as usize,
                    queues_per_device: self
                        .queues_per_device
                        .map(|q| get("queues_per_device", Some(q), q, valid::QUEUES_PER_DEVICE))
                        .transpose()?
                        .map(|q| q as usize),
                    sockets: get("sockets", self.sockets, 1, valid::SOCKETS)? as usize,
                    completion: self.completion.unwrap_or_default(),
                    ios: get("ios", self.ios, 100_000, valid::COUNT)?,
                    warm_up_ios: get("warm_up_ios", self.warm_up_ios, 0, valid::WARM_UP)?,
                    buffers: get("buffers", self.buffers, 1, valid::BUFFERS)?,
                    seed: get("seed", self.seed, 1, valid::SEED)?,
                }),
                None,
            ));
        }
        let default_bytes = match kind {
            WorkloadKind::UdpStream => 1472,
            WorkloadKind::TcpStream => 65536,
            _ => 64,
        };
        let instances = get("instances", self.instances, 1, valid::INSTANCES)?;
        let message_bytes = get(
            "message_bytes",
            self.message_bytes,
            default_bytes,
            valid::MESSAGE_BYTES,
        )?;
        let mtu = match self.mtu_bytes {
            None => None,
            Some(v) => Some(get("mtu_bytes", Some(v), v, valid::MTU_BYTES)?),
        };
        let net = match kind {
            WorkloadKind::UdpRr | WorkloadKind::TcpRr => {
                let transactions = get("transactions", self.transactions, 10_000, valid::COUNT)?;
                if kind == WorkloadKind::UdpRr {
                    NetWorkload::UdpRr {
                        instances,
                        message_bytes,
                        transactions,
                    }
                } else {
                    NetWorkload::TcpRr {
                        instances,
                        message_bytes,
                        transactions,
                    }
                }
            }
            _ => {
                let messages = get("messages", self.messages, 10_000, valid::COUNT)?;
                if kind == WorkloadKind::UdpStream {
                    NetWorkload::UdpStream {
                        instances,
                        message_bytes,
                        messages,
                    }
                } else {
                    NetWorkload::TcpStream {
                        instances,
                        message_bytes,
                        messages,
                    }
                }
            }
        };
        Ok((Workload::Net(net), mtu))
    }
}
