//! Print seed 003's claims with their breakdowns (a quick look while developing).
fn main() -> Result<(), dmalab_sim::SimError> {
    let t = std::time::Instant::now();
    for r in dmalab_sim::claims::reproduce(&["P3-IOPS", "P3-1GBE", "P3-DEFER"])? {
        println!(
            "{} {} published {} modelled {} passed {}",
            r.id, r.case, r.published, r.modelled, r.passed
        );
        print!("{}", r.breakdown);
    }
    eprintln!("{:?}", t.elapsed());
    Ok(())
}
