//! Every `assumed` or `fitted` parameter of every shipped file states the range it could
//! physically take (`range = [lo, hi]`, or the options of a string parameter), and every
//! `source` one its precision (`exact = true`, or a `range`): intervals sample over these
//! ranges, so a parameter without one would make an answer look surer than it is.
//! Every built-in host is read with each of its options, and every modern host with each
//! built-in device in its slot, so that every parameter any file holds is read.

use dmalab_sim::config::device::builtin_device_names;
use dmalab_sim::config::params::{Provenance, Span};
use dmalab_sim::config::platform::Platform;
use std::collections::BTreeSet;

#[test]
fn every_assumed_or_fitted_parameter_states_its_range() {
    let mut missing = BTreeSet::new();
    let mut seen = 0;
    let mut note = |file: &str, p: &Platform| {
        for rec in &p.params {
            let guessed = matches!(
                rec.provenance,
                Provenance::Assumed(_) | Provenance::Fitted(_)
            );
            seen += usize::from(guessed);
            if guessed && rec.range.is_none() {
                missing.insert(format!("{file}: {}", rec.field));
            }
            // A cited one says how precisely its source gives it: `exact = true`, or its
            // precision as a `range`.
            let cited = matches!(rec.provenance, Provenance::Source(_));
            if cited && !rec.exact && rec.range.is_none() {
                missing.insert(format!("{file}: {} (exact or a range)", rec.field));
            }
            // A fitted one also states how far the fit leaves it free (`fit_range`, which
            // scripts/fit_spans.py computes from the claims it was fitted to).
            if matches!(rec.provenance, Provenance::Fitted(_)) && rec.fit_range.is_none() {
                missing.insert(format!("{file}: {} (fit_range)", rec.field));
            }
        }
    };
    for name in Platform::builtin_names() {
        for picks in Platform::all_option_picks(name).unwrap() {
            let p = Platform::builtin(name, &picks).unwrap();
            let slot = p.device_link.is_some();
            note(name, &p);
            if slot && picks.is_empty() {
                for dev in builtin_device_names() {
                    let p = Platform::load(&format!("{name}+{dev}"), &picks).unwrap();
                    note(&format!("{name}+{dev}"), &p);
                }
            }
        }
    }
    assert!(seen > 200, "only {seen} assumed or fitted parameters read");
    assert!(
        missing.is_empty(),
        "{} parameters state no range (or, fitted, no fit_range; cited, neither exact nor a range):\n{}",
        missing.len(),
        missing.into_iter().collect::<Vec<_>>().join("\n")
    );
}

#[test]
fn drawn_values_are_read_in_place_of_the_files_and_unknown_paths_refused() {
    use dmalab_sim::config::platform::{Draws, Picks};
    let name = "xeon-broadwell-2s+intel-xl710";
    let nominal = Platform::load(name, &Picks::new()).unwrap();
    let field = "device_dma.contexts".to_string();
    let draws = nominal
        .draws(
            std::slice::from_ref(&field),
            &[vec![0.0], vec![0.999]],
            Span::Known,
        )
        .unwrap();
    let (lo, hi) = (&draws[0][&field], &draws[1][&field]);
    assert!(lo.as_integer() < hi.as_integer(), "{lo} {hi}");
    let low = Platform::load_drawn(name, &Picks::new(), &draws[0]).unwrap();
    let engine = |p: &Platform| p.device_dma.as_ref().unwrap().contexts;
    assert_eq!(Some(engine(&low) as i64), lo.as_integer());
    assert_ne!(engine(&low), engine(&nominal));
    let stray = Draws::from([("device_dma.no_such".to_string(), toml::Value::Integer(1))]);
    let err = Platform::load_drawn(name, &Picks::new(), &stray).unwrap_err();
    assert!(err.to_string().contains("device_dma.no_such"), "{err}");
    let err = nominal
        .draws(&["name".to_string()], &[vec![0.5]], Span::Known)
        .unwrap_err();
    assert!(err.to_string().contains("states a range"), "{err}");
}

#[test]
fn a_trained_link_value_ranges_over_the_lower_of_the_two_ends() {
    use dmalab_sim::config::params::ParamRange;
    use dmalab_sim::config::platform::Picks;
    // The ConnectX-6 Dx states a payload size of up to 4096 bytes; on a host whose root port
    // states 512 at most the trained value can never draw above 512.
    for host in ["xeon-broadwell-2s", "epyc-rome-2s", "grace-2s"] {
        let p = Platform::load(&format!("{host}+connectx-6dx"), &Picks::new()).unwrap();
        let host_p = Platform::builtin(host, &Picks::new()).unwrap();
        let field = "bus.pcie.max_payload_bytes";
        let rec = |p: &Platform| p.params.iter().find(|r| r.field == field).cloned().unwrap();
        let host_hi = match rec(&host_p).range {
            Some(ParamRange::Int { hi, .. }) => hi,
            _ => rec(&host_p).value.parse().unwrap(),
        };
        if let Some(ParamRange::Int { hi, .. }) = rec(&p).range {
            assert!(hi <= host_hi, "{host}: {hi} > {host_hi}");
        }
    }
}

/// Every platform loads with its uncertain parameters drawn anywhere in their ranges: at the
/// low corner, the high corner, and at scattered points between (a fixed pseudo-random walk),
/// so that an interval never loses draws to a combination the model refuses.
#[test]
fn every_draw_over_the_stated_ranges_loads() {
    use dmalab_sim::config::platform::Picks;
    let mut names: Vec<String> = Platform::builtin_names()
        .into_iter()
        .map(String::from)
        .collect();
    for host in Platform::builtin_names() {
        if Platform::builtin(host, &Picks::new())
            .unwrap()
            .device_link
            .is_some()
        {
            names.extend(
                builtin_device_names()
                    .into_iter()
                    .map(|d| format!("{host}+{d}")),
            );
        }
    }
    let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    for name in &names {
        let nominal = Platform::load(name, &Picks::new()).unwrap();
        let fields: Vec<String> = nominal
            .uncertain_params()
            .iter()
            .map(|r| r.field.clone())
            .collect();
        let k = fields.len();
        let mut rows = vec![vec![0.0; k], vec![0.999_999; k]];
        rows.extend((0..24).map(|_| (0..k).map(|_| next()).collect::<Vec<f64>>()));
        for span in [Span::Known, Span::Physical] {
            for (i, d) in nominal
                .draws(&fields, &rows, span)
                .unwrap()
                .iter()
                .enumerate()
            {
                if let Err(e) = Platform::load_drawn(name, &Picks::new(), d) {
                    panic!("{name}, draw {i} ({span:?}): {e}");
                }
            }
        }
    }
}

#[test]
fn a_claim_reruns_with_its_fitted_parameter_drawn() {
    use dmalab_sim::claims::{reproduce, reproduce_drawn};
    use dmalab_sim::config::platform::Draws;
    let nominal = reproduce(&["P3-IOPS"]).unwrap();
    let row = nominal.iter().find(|r| r.case == "bitmap").unwrap();
    assert_eq!(row.fitted_here, ["iommu.invalidate_ns"]);
    let at = |ns: i64| {
        let d = Draws::from([(row.fitted_here[0].clone(), toml::Value::Integer(ns))]);
        reproduce_drawn("P3-IOPS", "bitmap", &d).unwrap().modelled
    };
    // The same value as the file's gives the same row; a dearer invalidation fewer IOPS.
    let file: i64 = Platform::builtin(&row.platform, &Default::default())
        .unwrap()
        .params
        .iter()
        .find(|p| p.field == "iommu.invalidate_ns")
        .unwrap()
        .value
        .parse()
        .unwrap();
    assert_eq!(at(file), row.modelled);
    let (cheap, dear) = (at(file / 2).as_f64(), at(file * 2).as_f64());
    assert!(cheap > dear, "{cheap:?} {dear:?}");
    // The draws end with the call: the next plain run is the file's again.
    assert_eq!(reproduce(&["P3-IOPS"]).unwrap(), nominal);
}
