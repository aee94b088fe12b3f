//! How fast the simulator runs (`cargo run --release --example simrate [NAME...]`; with names,
//! only those scenarios):
//! - seed 003's scenarios (one thread, one I/O in flight): simulated DMA transfers per second of
//!   wall time, median of five runs each, and the ratio to the 10M per second target;
//! - the storage server (`grace-nvme8-*`: 64 threads, eight drives) run for 10M I/Os: wall
//!   seconds, median of three runs, and the ratio to the 10 s target.
use dmalab_sim::config::scenario::{builtin_with, load, BUILTIN};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Result<(), dmalab_sim::SimError> {
    let only: Vec<String> = std::env::args().skip(1).collect();
    let wanted = |n: &str| only.is_empty() || only.iter().any(|o| o == n);
    for (name, _) in BUILTIN
        .iter()
        .filter(|(n, _)| n.starts_with("p3-") && wanted(n))
    {
        let sc = load(name)?;
        let rates = (0..5)
            .map(|_| {
                let t = std::time::Instant::now();
                let r = sc.run()?;
                Ok(r.dma_transfers as f64 / t.elapsed().as_secs_f64())
            })
            .collect::<Result<Vec<f64>, dmalab_sim::SimError>>()?;
        let m = median(rates);
        println!(
            "{name:<24} {:>6.2} M transfers per wall second (median of 5), {:.2}x the 10M target",
            m / 1e6,
            m / 10e6
        );
    }
    let ios: toml::Table = toml::from_str("[workload]\nios = 10000000").expect("literal");
    for (name, _) in BUILTIN
        .iter()
        .filter(|(n, _)| n.starts_with("grace-nvme8-") && wanted(n))
    {
        let sc = builtin_with(name, &ios)?;
        let secs = (0..3)
            .map(|_| {
                let t = std::time::Instant::now();
                sc.run()?;
                Ok(t.elapsed().as_secs_f64())
            })
            .collect::<Result<Vec<f64>, dmalab_sim::SimError>>()?;
        let m = median(secs);
        println!(
            "{name:<24} {m:>6.2} wall seconds for 10M I/Os (median of 3), {:.2}x the 10 s target",
            10.0 / m
        );
    }
    Ok(())
}
