//! Print seed 001's traces and stream results (a quick look while developing).
use dmalab_sim::platform::{Picks, Platform};
use dmalab_sim::stream::{run, StreamScenario};
use dmalab_sim::trace::Direction;
use dmalab_sim::units::BusAddr;

fn main() -> Result<(), dmalab_sim::SimError> {
    let p = Platform::builtin("ibm-p660-m2plus", &Picks::new())?;
    for (d, a) in [
        (Direction::Read, 0x420A8),
        (Direction::Read, 0x4800),
        (Direction::Write, 0x2012),
        (Direction::Write, 0xE800),
    ] {
        println!("{}", p.trace(d, BusAddr(a), 1514)?);
    }
    let old = Platform::builtin(
        "ibm-p660-m2plus",
        &dmalab_sim::platform::parse_picks(["firmware=2001"])?,
    )?;
    for (name, plat, sc) in [
        ("linux", &p, StreamScenario::LINUX),
        ("aix", &p, StreamScenario::AIX),
        (
            "aix tso",
            &p,
            StreamScenario {
                tso: true,
                ..StreamScenario::AIX
            },
        ),
        ("aix oldfw", &old, StreamScenario::AIX),
    ] {
        let r = run(&plat.bus, plat.stream()?, sc)?;
        println!(
            "{name}: {:.1} Mbit/s bottleneck {}",
            r.mbit_per_s(),
            r.bottleneck
        );
        for s in &r.stages {
            println!("  {} {:.3}", s.name, s.per_send_ps.as_us_f64());
            for c in &s.costs {
                println!("     {:<60} {:.3}", c.what, c.per_send_ps.as_us_f64());
            }
        }
    }
    Ok(())
}
