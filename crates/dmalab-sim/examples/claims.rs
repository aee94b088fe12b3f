//! Print claims with their breakdowns: `cargo run --release --example claims -- P0-LAT ...`.
fn main() -> Result<(), dmalab_sim::SimError> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let ids: Vec<&str> = args.iter().map(String::as_str).collect();
    let t = std::time::Instant::now();
    for r in dmalab_sim::claims::reproduce(&ids)? {
        println!(
            "{} {}: published {} modelled {} passed {}",
            r.id, r.case, r.published, r.modelled, r.passed
        );
        print!("{}", r.breakdown);
    }
    eprintln!("{:?}", t.elapsed());
    Ok(())
}
