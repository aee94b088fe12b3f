//! Bounded memory for every accepted input: each workload run with the largest value of each
//! size-like key (one at a time, few operations) stays under a 2 GiB address-space limit, and
//! so does a million I/Os with the most threads and the deepest queues.
//!
//! Each case runs in a child process: this test binary again, told by an environment variable
//! which case to run, with `RLIMIT_AS` set in a `pre_exec` hook. A run that asks for more
//! aborts there ("memory allocation of N bytes failed"), which the parent reports with the
//! case. The limit is the kernel's, so it counts every allocation of the child, whatever makes
//! it, with no allocator of the test's own to trust; and a child that aborts cannot take the
//! other cases down with it. Linux only (other systems do not enforce `RLIMIT_AS` alike).
#![cfg(target_os = "linux")]

use dmalab_sim::config::scenario::{Scenario, BUILTIN};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The address-space limit each case runs under.
const LIMIT_BYTES: u64 = 2 << 30;
/// The environment variable naming the case a child runs.
const CASE_VAR: &str = "DMALAB_BOUNDED_MEMORY_CASE";
/// What starts the line a child writes its outcome on.
const MARK: &str = "bounded memory case: ";
/// How long a case may take before it counts as hung, debug builds included.
const CASE_TIMEOUT: Duration = Duration::from_secs(300);

/// A case: a built-in scenario and the TOML merged into it.
struct Case {
    scenario: &'static str,
    overrides: String,
}

fn case(scenario: &'static str, overrides: impl Into<String>) -> Case {
    Case {
        scenario,
        overrides: overrides.into(),
    }
}

/// Every case, by index (the child finds its own by the index in [`CASE_VAR`]).
fn cases() -> Vec<Case> {
    let mut v = Vec::new();
    // Block: each size-like `[workload]` key at its largest, with a thousand I/Os (the issue's
    // case is threads and queue depth together: 2^26 slots for 1000 I/Os).
    let block = "grace-nvme8-lazy";
    for keys in [
        "threads = 1024",
        "queue_depth = 65536",
        "threads = 1024\nqueue_depth = 65536",
        "threads = 1024\nqueue_depth = 65536\ncompletion = \"queue-interrupt\"",
        "devices = 256",
        "devices = 256\nthreads = 1024\nqueue_depth = 65536",
        "queues_per_device = 65535",
        // The most shared submission queues (a lock each): queues just below the threads.
        "devices = 256\nthreads = 1024\nqueues_per_device = 1023",
        "sockets = 8\nthreads = 1024\nqueue_depth = 65536",
        // 1 GiB I/Os: eight in flight need a window above 4 GiB.
        "io_bytes = 1073741824\nios = 8",
        "buffers = 1048576\nthreads = 1024",
    ] {
        let (ios, window) = if keys.contains("ios") {
            ("", "window_bytes = 1099511627776")
        } else {
            ("\nios = 1000", "")
        };
        v.push(case(
            block,
            format!("[mapping]\n{window}\n[workload]\n{keys}{ios}"),
        ));
    }
    // The bus path (a PCI-X platform: bus time by address) with the most I/Os in flight.
    v.push(case(
        "p3-rbtree-deferred",
        "[workload]\nthreads = 1024\nqueue_depth = 65536\nios = 1000",
    ));
    // The mapping's size-like keys: the largest window with each allocator (one that cannot
    // manage it refuses it) and the largest each bitmap and the segtree take (2^32 and 2^40
    // pages of 4 KiB), the largest flush batch with each lazy policy.
    for allocator in dmalab_iova::AllocatorKind::NAMES {
        let largest = match allocator {
            "segtree" => &[60, 52][..],
            a if a.ends_with("bitmap") => &[60, 44],
            _ => &[60],
        };
        for bits in largest {
            v.push(case(
                block,
                format!(
                    "[mapping]\nallocator = \"{allocator}\"\nwindow_bytes = {}\n\
                     [workload]\nios = 1000",
                    1u64 << bits
                ),
            ));
        }
    }
    for flush in ["deferred", "per-cpu"] {
        v.push(case(
            block,
            format!(
                "[mapping]\nflush = \"{flush}\"\nhigh_water = 1000000\n\
                 [workload]\nthreads = 1024\nqueue_depth = 65536\nios = 1000"
            ),
        ));
    }
    // The network kinds: the most instances, the largest messages, and the largest messages
    // in the smallest frames.
    for kind in ["udp-rr", "tcp-rr", "udp-stream", "tcp-stream"] {
        let count = if kind.ends_with("-rr") {
            "transactions"
        } else {
            "messages"
        };
        // A 16 MiB message takes seconds of wall time (its frames' costs are worked out one
        // by one): one will do.
        for (keys, n) in [
            ("instances = 10000", 100),
            ("message_bytes = 16777216", 1),
            ("mtu_bytes = 9000", 100),
        ] {
            v.push(case(
                "p0-udp-rr-default-window",
                format!("[workload]\nkind = \"{kind}\"\n{count} = {n}\n{keys}"),
            ));
        }
    }
    // A million I/Os with the most threads and the deepest queues, in a window that holds
    // them all in flight at once.
    v.push(case(
        block,
        format!(
            "[mapping]\nwindow_bytes = {}\n\
             [workload]\nthreads = 1024\nqueue_depth = 65536\nios = 1000000",
            1u64 << 40
        ),
    ));
    v
}

/// The case's scenario: the built-in one with the case's tables merged in key by key, but a
/// `[workload]` that names its `kind` in place of the scenario's (another kind's keys would be
/// refused).
fn scenario(c: &Case) -> Scenario {
    let (name, text) = BUILTIN
        .iter()
        .find(|(n, _)| *n == c.scenario)
        .expect("a built-in scenario");
    let mut table: toml::Table = toml::from_str(text).expect("a built-in scenario's TOML");
    let overrides: toml::Table = toml::from_str(&c.overrides).expect("a case's TOML");
    for (key, value) in overrides {
        match (table.get_mut(&key), value) {
            (Some(toml::Value::Table(base)), toml::Value::Table(o)) if !o.contains_key("kind") => {
                base.extend(o)
            }
            (_, value) => {
                table.insert(key, value);
            }
        }
    }
    let text = toml::to_string(&table).expect("TOML again");
    Scenario::parse(name, &text).expect("a case's scenario reads")
}

/// Run case `index` here (in the child): its scenario, to the end.
fn run_case(index: usize) {
    let scenario = scenario(&cases()[index]);
    match scenario.run() {
        Ok(r) => println!(
            "\n{MARK}ran: {} events, {:.0} per second",
            r.events, r.ops_per_s
        ),
        // Refused with a typed error (a window the allocator cannot manage): bounded too.
        Err(e) => println!("\n{MARK}refused: {e}"),
    }
}

/// The child's entry: does nothing unless [`CASE_VAR`] names a case.
#[test]
fn bounded_memory_child() {
    if let Ok(index) = std::env::var(CASE_VAR) {
        run_case(index.parse().expect("a case index"));
    }
}

#[test]
fn every_workload_runs_in_bounded_memory() {
    let exe = std::env::current_exe().expect("the test binary");
    let mut failures = Vec::new();
    for (index, c) in cases().iter().enumerate() {
        let start = Instant::now();
        let mut cmd = Command::new(&exe);
        cmd.args(["--exact", "bounded_memory_child", "--nocapture"])
            .args(["--test-threads", "1"])
            .env(CASE_VAR, index.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        // SAFETY: setrlimit is async-signal-safe; the hook allocates nothing.
        unsafe {
            cmd.pre_exec(|| {
                let limit = libc::rlimit {
                    rlim_cur: LIMIT_BYTES as libc::rlim_t,
                    rlim_max: LIMIT_BYTES as libc::rlim_t,
                };
                if libc::setrlimit(libc::RLIMIT_AS, &limit) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let mut child = cmd.spawn().expect("the child starts");
        let status = loop {
            if let Some(status) = child.try_wait().expect("the child's status") {
                break Some(status);
            }
            if start.elapsed() > CASE_TIMEOUT {
                // The child is ours: end it by its id.
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let out = child.wait_with_output().expect("the child's output");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        let said = stdout
            .lines()
            .find_map(|l| l.strip_prefix(MARK))
            .unwrap_or("");
        let what = format!("{} with {:?}", c.scenario, c.overrides);
        eprintln!("{:>6.1} s  {what}: {said}", start.elapsed().as_secs_f64());
        match status {
            Some(s) if s.success() && !said.is_empty() => {}
            Some(s) => {
                let tail: String = stderr.lines().take(3).collect::<Vec<_>>().join(" | ");
                failures.push(format!("{what}: {s}: {tail}"));
            }
            None => failures.push(format!("{what}: still running after {CASE_TIMEOUT:?}")),
        }
    }
    assert!(
        failures.is_empty(),
        "runs that went past {LIMIT_BYTES} bytes of address space (or failed):\n{}",
        failures.join("\n")
    );
}
