//! Feed any text to the scenario, platform and device readers, and run what they accept on a small
//! operation budget: shared by the `readers` fuzz target and the `readers` test. Every refusal
//! must be a typed `SimError`; nothing may panic.

use dmalab_sim::config::platform::{Picks, Platform};
use dmalab_sim::config::scenario::{Scenario, Task};
use dmalab_sim::config::workload::{NetWorkload, Workload};
use dmalab_sim::units::BusAddr;

/// The most operations a run of accepted input may take here.
const BUDGET_OPS: u64 = 64;
/// The longest transfer traced here.
const BUDGET_TRACE_BYTES: u64 = 1 << 16;

/// Read `text` as a scenario (TOML or JSON, by `as_json`) and as a platform file; run or trace
/// what is accepted, within the budget. Returns how many of the readers accepted it.
pub fn read_and_run(text: &str, as_json: bool) -> usize {
    let mut accepted = 0;
    let parsed = if as_json {
        Scenario::from_json("fuzz", text)
    } else {
        Scenario::parse("fuzz", text)
    };
    if let Ok(sc) = parsed {
        accepted += 1;
        run_small(sc);
    }
    if let Ok(dev) = dmalab_sim::config::device::parse_device("fuzz-device.toml", text) {
        accepted += 1;
        let host =
            Platform::load_with_device_table("xeon-broadwell-2s", "fuzz", &dev, &Picks::new());
        if let Ok(p) = host {
            measure_small(&p);
        }
    }
    if let Ok(p) = Platform::parse("fuzz.toml", text, &Picks::new()) {
        accepted += 1;
        let _ = p.trace(
            dmalab_sim::bus::trace::Direction::Read,
            BusAddr(0x1000),
            1514,
        );
    }
    accepted
}

/// One small DMA each way on `p`'s device, where its values read.
fn measure_small(p: &Platform) {
    use dmalab_sim::bus::memory::{Access, Cache, Home};
    use dmalab_sim::bus::trace::Direction;
    use dmalab_sim::workload::devdma::{DeviceDma, DmaPoint, IommuMode};
    let Ok(model) = DeviceDma::new(p) else {
        return;
    };
    for direction in [Direction::Read, Direction::Write] {
        let _ = model.measure(&DmaPoint {
            direction,
            size_bytes: 65,
            offset_bytes: 1,
            window_bytes: 1 << 16,
            access: Access::Seq,
            memory: Home::Local,
            cache: Cache::Warm,
            iommu: IommuMode::Off,
            page_bytes: 4096,
            device_offset_bytes: 0,
            then_read: false,
            mixed: false,
        });
    }
}

/// Run `sc` with its operation counts cut to the budget; only built-in platforms, so that the
/// fuzzer never reads files.
fn run_small(mut sc: Scenario) {
    if !Platform::builtin_names().contains(&sc.platform.as_str()) {
        return;
    }
    match &mut sc.task {
        Task::Trace(t) => t.length_bytes = t.length_bytes.min(BUDGET_TRACE_BYTES),
        Task::Run(r) => {
            r.window_bytes = r.window_bytes.min(1 << 40);
            match &mut r.workload {
                Workload::Block(b) => {
                    b.ios = b.ios.min(BUDGET_OPS);
                    b.threads = b.threads.min(4);
                    b.queue_depth = b.queue_depth.min(8);
                }
                Workload::Net(w) => cut(w),
            }
        }
    }
    let _ = match &sc.task {
        Task::Trace(_) => sc.trace().map(|_| ()),
        Task::Run(_) => sc.run().map(|_| ()),
    };
}

fn cut(w: &mut NetWorkload) {
    let (instances, bytes, count) = match w {
        NetWorkload::UdpRr {
            instances,
            message_bytes,
            transactions,
        }
        | NetWorkload::TcpRr {
            instances,
            message_bytes,
            transactions,
        } => (instances, message_bytes, transactions),
        NetWorkload::UdpStream {
            instances,
            message_bytes,
            messages,
        }
        | NetWorkload::TcpStream {
            instances,
            message_bytes,
            messages,
        } => (instances, message_bytes, messages),
    };
    *instances = (*instances).min(4);
    *bytes = (*bytes).min(1 << 16);
    *count = (*count).min(BUDGET_OPS);
}
