//! The published claims of `docs/CLAIMS.md` that dmalab can model, each run on its machine's platform
//! file and checked against its tolerance. The published numbers live here only as the values
//! to check against; no model reads them.

use crate::config::params::ParamRecord;
use crate::config::platform::{with_draws, Draws, Platform};
use crate::error::{Result, SimError};
use serde::Serialize;
use serde_json::Value;

pub use seed001::costs_add_up;

/// One checked row of `dmalab reproduce`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ClaimResult {
    /// The claim's id in `docs/CLAIMS.md`.
    pub id: String,
    /// Which case of the claim this row checks, when it has several.
    pub case: String,
    /// Where the published number comes from.
    pub source: String,
    /// The platform file it ran on.
    pub platform: String,
    /// What was published (a number, or the command list of a trace).
    pub published: Value,
    /// What dmalab modelled, in the same form.
    pub modelled: Value,
    /// The unit of both.
    pub unit: String,
    /// Relative error of a number, `(modelled - published) / published` (none for a text or a
    /// published zero).
    pub error: Option<f64>,
    /// The tolerance, as `docs/CLAIMS.md` states it.
    pub tolerance: String,
    /// Whether the claim holds within its tolerance.
    pub passed: bool,
    /// The platform parameters fitted to this claim's own number: a pass there is a fit, not a
    /// prediction.
    pub fitted_here: Vec<String>,
    /// Why the number comes out as it does: the trace or the stage breakdown.
    pub breakdown: String,
    /// The platform's options this claim picks (its `choices`): draws of the platform's
    /// parameters for this claim are taken with them.
    pub choices: crate::config::platform::Picks,
}

/// The platforms the claims use, with the parameters that are not cited.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct PlatformProvenance {
    /// The platform's name.
    pub platform: String,
    /// Parameters marked `fitted` or `assumed`.
    pub uncited: Vec<ParamRecord>,
}

mod seed000;
pub use seed000::mapper as seed000_mapper;
mod seed001;
mod seed002;
mod seed003;
mod seed004;
pub mod spec;

/// Every claim's id dmalab can reproduce, in `docs/CLAIMS.md` order.
pub fn ids() -> Result<Vec<String>> {
    let mut ids: Vec<String> = spec::all()?.into_iter().map(|c| c.id).collect();
    ids.dedup();
    Ok(ids)
}

/// Run the claims named in `ids` (all when empty).
pub fn reproduce(ids: &[&str]) -> Result<Vec<ClaimResult>> {
    let specs = spec::all()?;
    for id in ids {
        if !specs.iter().any(|c| c.id == *id) {
            return Err(SimError::UnknownClaim {
                id: id.to_string(),
                known: self::ids()?.join(", "),
            });
        }
    }
    let mut out = Vec::new();
    for c in specs
        .iter()
        .filter(|c| ids.is_empty() || ids.contains(&c.id.as_str()))
    {
        let measured = match c.seed.as_str() {
            "000" => seed000::measure(c)?,
            "001" => seed001::measure(c)?,
            "002" => seed002::measure(c)?,
            "003" => seed003::measure(c)?,
            "004" => seed004::measure(c)?,
            _ => return Err(unknown(c)),
        };
        out.push(c.judge(measured));
    }
    Ok(out)
}

/// The row of claim `id`, case `case`, modelled with the parameters in `draws` (dotted path to
/// value) of the claim's platform in place of its file's: how a claim that passes by a fit
/// fares with the fitted parameter anywhere in its physical range.
pub fn reproduce_drawn(id: &str, case: &str, draws: &Draws) -> Result<ClaimResult> {
    let specs = spec::all()?;
    let c = specs
        .iter()
        .find(|c| c.id == id && c.case == case)
        .ok_or_else(|| SimError::UnknownClaim {
            id: format!("{id} ({case})"),
            known: self::ids().map(|i| i.join(", ")).unwrap_or_default(),
        })?;
    with_draws(&c.platform, draws.clone(), || {
        reproduce(&[id])?
            .into_iter()
            .find(|r| r.case == case)
            .ok_or_else(|| unknown(c))
    })
}

/// The error for a claim in the data that no measurement knows.
pub(crate) fn unknown(c: &spec::ClaimSpec) -> SimError {
    SimError::UnknownClaim {
        id: format!("{} (in {})", c.id, c.file),
        known: "a claim with a measurement in dmalab_sim::claims".into(),
    }
}

/// The platforms of the claims in `results`, with their uncited parameters under every option
/// of every choice the platform offers.
pub fn provenance(results: &[ClaimResult]) -> Result<Vec<PlatformProvenance>> {
    let mut names: Vec<&str> = results.iter().map(|r| r.platform.as_str()).collect();
    names.dedup();
    let mut out = Vec::new();
    for name in names {
        let mut uncited: Vec<ParamRecord> = Vec::new();
        for picks in Platform::all_option_picks(name)? {
            for p in Platform::builtin(name, &picks)?.uncited_params() {
                if !uncited.contains(p) {
                    uncited.push(p.clone());
                }
            }
        }
        out.push(PlatformProvenance {
            platform: name.to_string(),
            uncited,
        });
    }
    Ok(out)
}

/// The parameters fitted to claim `id` in case `case`: those whose `claims` list names the id
/// alone (every case) or `<id> <case>`.
pub(crate) fn fitted_to(platform: &Platform, id: &str, case: &str) -> Vec<String> {
    let this_case = format!("{id} {case}");
    platform
        .params
        .iter()
        .filter(|p| p.claims.iter().any(|c| *c == id || *c == this_case))
        .map(|p| p.field.clone())
        .collect()
}

/// `x` rounded to `digits` decimals, as a report shows a modelled number.
pub(crate) fn rounded(x: f64, digits: i32) -> Value {
    let scale = 10f64.powi(digits);
    serde_json::json!((x * scale).round() / scale)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fitted parameter names the claims it was fitted to, or the rows of the published
    /// numbers `dmalab validate --published` checks (their ids, the file's first column).
    #[test]
    fn every_fitted_parameter_names_a_claim_dmalab_reproduces_or_a_published_row() {
        let mut known = ids().unwrap();
        let published = include_str!("../../../../validation/iommu-software/published.csv");
        known.extend(
            published
                .lines()
                .skip(1)
                .filter_map(|l| l.split(',').next())
                .map(str::to_string),
        );
        for name in Platform::builtin_names() {
            for picks in Platform::all_option_picks(name).unwrap() {
                for p in Platform::builtin(name, &picks).unwrap().params {
                    for c in &p.claims {
                        let id = c.split_whitespace().next().unwrap_or("");
                        assert!(
                            known.iter().any(|k| k == id),
                            "{name}: {} names {c}",
                            p.field
                        );
                    }
                }
            }
        }
    }
}
