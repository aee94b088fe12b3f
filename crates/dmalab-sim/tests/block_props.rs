//! The block workload's queues and sockets, on `grace-2s` with its NVMe drives. Each test fails
//! without its mechanism:
//! - one queue per thread, said or not, is the model without shared queues, bit for bit (fails
//!   if the queue lock or its carved-out section cost anything uncontended);
//! - threads sharing a queue wait on its lock, and without an IOMMU never complete more I/Os per
//!   second than threads with their own (fails without the lock);
//! - on two sockets remote I/Os cross the link, and strict invalidation, served by one IOMMU per
//!   socket, waits less than with every device behind one (fails without per-socket IOMMUs);
//! - a platform without a socket link refuses `sockets` above one, naming the field.

use dmalab_sim::config::scenario::Scenario;
use dmalab_sim::run::report::Report;

fn scenario(flush: &str, workload: &str) -> Scenario {
    let text = format!(
        "platform = \"grace-2s\"\n\
         [mapping]\ntranslation = \"page-table\"\nallocator = \"segtree\"\nflush = \"{flush}\"\n\
         [workload]\nkind = \"block\"\nio_bytes = 4096\nios = 20000\n{workload}\n"
    );
    Scenario::parse("block-props", &text).unwrap()
}

fn run(flush: &str, workload: &str) -> Report {
    scenario(flush, workload).run().unwrap()
}

fn json(r: &Report) -> String {
    serde_json::to_string(&(r.ops_per_s, r.latency_mean_us, &r.breakdown_us)).unwrap()
}

#[test]
fn a_queue_per_thread_is_the_model_without_shared_queues() {
    for flush in ["strict", "per-cpu"] {
        let base = "threads = 8\nqueue_depth = 4\ndevices = 2";
        let none = run(flush, base);
        for q in [8, 9, 64] {
            let own = run(flush, &format!("{base}\nqueues_per_device = {q}"));
            assert_eq!(json(&none), json(&own), "{flush}, {q} queues");
        }
        assert_eq!(none.breakdown_us["submission queue lock wait"], 0.0);
        assert_eq!(none.breakdown_us["socket link crossings"], 0.0);
    }
}

#[test]
fn threads_sharing_a_queue_wait_on_its_lock_and_never_go_faster() {
    for (threads, depth) in [(4, 8), (16, 4), (32, 2)] {
        let base = format!("threads = {threads}\nqueue_depth = {depth}\ndevices = 2");
        for q in [1, 2] {
            let shared = format!("{base}\nqueues_per_device = {q}");
            for flush in ["strict", "per-cpu"] {
                let r = run(flush, &shared);
                assert!(
                    r.breakdown_us["submission queue lock wait"] > 0.0,
                    "{flush}: {threads} threads on {q} queues never waited"
                );
            }
            // Without an IOMMU the queue lock is the only thing the CPUs share, so sharing it
            // can only slow them. (Behind a saturated IOMMU a lock delay can shift the closed
            // loop's phases either way; docs/results/2026-11-26-queues-and-sockets.md.)
            let (own, shared) = (passthrough(&base), passthrough(&shared));
            assert!(
                shared.ops_per_s <= own.ops_per_s,
                "{threads} threads on {q} queues: {} > {} I/Os per second",
                shared.ops_per_s,
                own.ops_per_s
            );
        }
    }
}

fn passthrough(workload: &str) -> Report {
    let text = format!(
        "platform = \"grace-2s\"\n[mapping]\ntranslation = \"passthrough\"\n\
         [workload]\nkind = \"block\"\nios = 20000\n{workload}\n"
    );
    Scenario::parse("passthrough", &text)
        .unwrap()
        .run()
        .unwrap()
}

#[test]
fn two_sockets_cross_the_link_and_split_strict_invalidation() {
    let base = "threads = 64\nqueue_depth = 8\ndevices = 8";
    let one = run("strict", base);
    let two = run("strict", &format!("{base}\nsockets = 2"));
    assert_eq!(one.breakdown_us["socket link crossings"], 0.0);
    assert!(two.breakdown_us["socket link crossings"] > 0.0);
    let wait = |r: &Report| r.breakdown_us["IOTLB invalidation queue wait"];
    assert!(wait(&one) > 0.0, "64 CPUs never queued on the one IOMMU");
    assert!(
        wait(&two) < wait(&one),
        "two IOMMUs waited {} us per I/O, one {}",
        wait(&two),
        wait(&one)
    );
    // Passthrough on two sockets: only the crossings differ from one socket, so it is slower.
    let (p1, p2) = (
        passthrough(base),
        passthrough(&format!("{base}\nsockets = 2")),
    );
    assert!(p2.latency_mean_us > p1.latency_mean_us);
}

#[test]
fn sockets_and_queues_out_of_range_name_the_field() {
    let text = "platform = \"intel-vtd-2008-server\"\n[mapping]\ntranslation = \"page-table\"\n\
                [workload]\nkind = \"block\"\nthreads = 2\nsockets = 2\n";
    let err = Scenario::parse("one-socket", text)
        .unwrap()
        .run()
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("sockets") && err.contains("socket link"),
        "{err}"
    );
    for (key, value) in [("queues_per_device", 0), ("sockets", 9)] {
        let text = format!(
            "platform = \"grace-2s\"\n[mapping]\ntranslation = \"passthrough\"\n\
             [workload]\nkind = \"block\"\n{key} = {value}\n"
        );
        let err = Scenario::parse("bad", &text).unwrap_err().to_string();
        assert!(err.contains(&format!("workload.{key}")), "{err}");
    }
}
