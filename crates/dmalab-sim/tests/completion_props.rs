//! Which CPU completes a block I/O (`[workload] completion`), on `grace-2s` with its NVMe drives.
//! Each test fails without the mechanism:
//! - with a queue per thread the queue's interrupt CPU is the submitter, so `queue-interrupt` is
//!   `submitter` bit for bit (fails if the interrupt CPU were chosen any other way);
//! - with every thread on one queue per device, one CPU per device runs every completion path
//!   of that device: the rate never exceeds one completion path per CPU time of those CPUs, and
//!   never beats completing on the submitters (fails if completions stayed on the submitters);
//! - an unknown value is refused, naming the valid ones.

use dmalab_sim::config::scenario::Scenario;
use dmalab_sim::run::report::Report;

fn run(translation: &str, workload: &str) -> Report {
    let mapping = if translation == "passthrough" {
        "translation = \"passthrough\"".to_string()
    } else {
        format!("translation = \"page-table\"\nallocator = \"segtree\"\nflush = \"{translation}\"")
    };
    let text = format!(
        "platform = \"grace-2s\"\n[mapping]\n{mapping}\n\
         [workload]\nkind = \"block\"\nio_bytes = 4096\nios = 20000\ndevices = 2\n{workload}\n"
    );
    Scenario::parse("completion-props", &text)
        .unwrap()
        .run()
        .unwrap()
}

fn json(r: &Report) -> String {
    serde_json::to_string(&(r.ops_per_s, r.latency_mean_us, &r.breakdown_us)).unwrap()
}

#[test]
fn with_a_queue_per_thread_the_interrupt_cpu_is_the_submitter() {
    for translation in ["passthrough", "strict", "per-cpu"] {
        for sockets in [1, 2] {
            let base = format!("threads = 8\nqueue_depth = 4\nsockets = {sockets}");
            let own = run(translation, &base);
            let irq = run(
                translation,
                &format!("{base}\ncompletion = \"queue-interrupt\""),
            );
            assert_eq!(json(&own), json(&irq), "{translation}, {sockets} sockets");
        }
    }
}

#[test]
fn one_queue_per_device_puts_every_completion_on_one_cpu() {
    for translation in ["passthrough", "strict", "per-cpu"] {
        let base = "threads = 8\nqueue_depth = 4\nqueues_per_device = 1";
        let submitters = run(translation, base);
        let irq = run(
            translation,
            &format!("{base}\ncompletion = \"queue-interrupt\""),
        );
        let complete_s = irq.breakdown_us["complete"] * 1e-6;
        // Two devices: their vectors for the one queue go to two CPUs.
        assert!(
            irq.ops_per_s * complete_s <= 2.0 + 1e-9,
            "{translation}: {} I/Os per second, each {complete_s} s on one CPU",
            irq.ops_per_s
        );
        assert!(
            irq.ops_per_s < submitters.ops_per_s,
            "{translation}: {} >= {}",
            irq.ops_per_s,
            submitters.ops_per_s
        );
    }
}

#[test]
fn an_unknown_completion_is_refused_with_the_valid_values() {
    let text = "platform = \"grace-2s\"\n[workload]\nkind = \"block\"\ncompletion = \"anywhere\"\n";
    let err = Scenario::parse("bad", text).unwrap_err().to_string();
    assert!(
        err.contains("completion") && err.contains("queue-interrupt") && err.contains("submitter"),
        "{err}"
    );
}
