//! How fast the simulator runs seed 003's scenarios: simulated DMA transfers per second of wall
//! time, median of five runs each (`cargo run --release --example simrate`).
use dmalab_sim::config::scenario::{load, BUILTIN};

fn main() -> Result<(), dmalab_sim::SimError> {
    for (name, _) in BUILTIN.iter().filter(|(n, _)| n.starts_with("p3-")) {
        let sc = load(name)?;
        let mut rates = Vec::new();
        for _ in 0..5 {
            let t = std::time::Instant::now();
            let r = sc.run()?;
            rates.push(r.dma_transfers as f64 / t.elapsed().as_secs_f64());
        }
        rates.sort_by(f64::total_cmp);
        println!(
            "{name:<22} {:.2} M transfers per wall second (median of 5)",
            rates[2] / 1e6
        );
    }
    Ok(())
}
