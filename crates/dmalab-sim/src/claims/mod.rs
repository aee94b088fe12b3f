//! The published claims of `docs/CLAIMS.md` that dmalab can model, each run on its machine's platform
//! file and checked against its tolerance. The published numbers live here only as the values
//! to check against; no model reads them.

use crate::config::params::ParamRecord;
use crate::config::platform::Platform;
use crate::error::{Result, SimError};
use serde::Serialize;
use serde_json::Value;

pub use seed001::costs_add_up;

/// One checked row of `dmalab reproduce`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ClaimResult {
    /// The claim's id in `docs/CLAIMS.md`.
    pub id: &'static str,
    /// Which case of the claim this row checks, when it has several.
    pub case: &'static str,
    /// The platform file it ran on.
    pub platform: &'static str,
    /// What was published (a number, or the command list of a trace).
    pub published: Value,
    /// What dmalab modelled, in the same form.
    pub modelled: Value,
    /// The unit of both.
    pub unit: &'static str,
    /// Relative error of a number, `(modelled - published) / published`.
    pub error: Option<f64>,
    /// The tolerance, as `docs/CLAIMS.md` states it.
    pub tolerance: &'static str,
    /// Whether the claim holds within its tolerance.
    pub passed: bool,
    /// The platform parameters fitted to this claim's own number: a pass there is a fit, not a
    /// prediction.
    pub fitted_here: Vec<String>,
    /// Why the number comes out as it does: the trace or the stage breakdown.
    pub breakdown: String,
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

/// Every claim's id dmalab can reproduce, in `docs/CLAIMS.md` order.
pub fn ids() -> Vec<&'static str> {
    seed000::IDS
        .iter()
        .chain(seed001::IDS)
        .chain(seed002::IDS)
        .chain(seed003::IDS)
        .copied()
        .collect()
}

/// Run the claims named in `ids` (all when empty).
pub fn reproduce(ids: &[&str]) -> Result<Vec<ClaimResult>> {
    let known = self::ids();
    for id in ids {
        if !known.contains(id) {
            return Err(SimError::UnknownClaim {
                id: id.to_string(),
                known: known.join(", "),
            });
        }
    }
    let mut out = Vec::new();
    for id in known
        .into_iter()
        .filter(|id| ids.is_empty() || ids.contains(id))
    {
        if seed000::IDS.contains(&id) {
            out.extend(seed000::run_claim(id)?);
        } else if seed001::IDS.contains(&id) {
            out.extend(seed001::run_claim(id)?);
        } else if seed002::IDS.contains(&id) {
            out.extend(seed002::run_claim(id)?);
        } else {
            out.extend(seed003::run_claim(id)?);
        }
    }
    Ok(out)
}

/// The platforms of the claims in `results`, with their uncited parameters under every option
/// of every choice the platform offers.
pub fn provenance(results: &[ClaimResult]) -> Result<Vec<PlatformProvenance>> {
    let mut names: Vec<&str> = results.iter().map(|r| r.platform).collect();
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

pub(crate) fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

pub(crate) fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_fitted_parameter_names_a_claim_dmalab_reproduces() {
        let known = ids();
        for name in Platform::builtin_names() {
            for picks in Platform::all_option_picks(name).unwrap() {
                for p in Platform::builtin(name, &picks).unwrap().params {
                    for c in &p.claims {
                        let id = c.split_whitespace().next().unwrap_or("");
                        assert!(known.contains(&id), "{name}: {} names {c}", p.field);
                    }
                }
            }
        }
    }
}
