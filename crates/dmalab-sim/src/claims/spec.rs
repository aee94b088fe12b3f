//! Claims as data. Each seed's claims are a file in the repository's `claims/` folder, built into
//! the crate: per claim its id and case, the published value with its unit, the tolerance as
//! `docs/CLAIMS.md` states it and as a check, the named scenarios it starts from, the platform
//! options it picks, and a `setup` table of what else the publication fixes (sweeps, placements,
//! the stream's policy). The Rust side of a claim only measures: it runs the set-up and says
//! what came out; the comparison with the published value is made here, the same way for all.
//!
//! ```toml
//! seed = "003"
//! source = "..."                      # where the published numbers come from
//! platform = "intel-vtd-2008-server"  # the machine's platform file
//! [[claim]]
//! id = "P3-IOPS"
//! case = "bitmap"                     # which case of the claim this row checks
//! unit = "IOPS / IOMMU disabled"
//! published = 0.887                   # a number, or a text for a qualitative claim
//! tolerance = "ratio within 0.02"     # as docs/CLAIMS.md states it
//! check = { within = 0.02 }           # or { relative = x }, { range = [lo, hi] }, "holds"
//! scenarios = ["p3-iommu-off", "p3-bitmap-strict"]
//! choices = { device = "gbe" }        # platform options on top of the scenarios' (optional)
//! [claim.setup]                       # what the claim's measurement reads (optional)
//! workload = { ios = 20000 }
//! ```

use super::fitted_to;
use crate::config::platform::{Picks, Platform};
use crate::config::scenario::{builtin_with, Scenario};
use crate::error::{Result, SimError};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The claim files built into dmalab, by seed.
const FILES: &[(&str, &str)] = &[
    (
        "claims/seed000.toml",
        include_str!("../../../../claims/seed000.toml"),
    ),
    (
        "claims/seed001.toml",
        include_str!("../../../../claims/seed001.toml"),
    ),
    (
        "claims/seed002.toml",
        include_str!("../../../../claims/seed002.toml"),
    ),
    (
        "claims/seed003.toml",
        include_str!("../../../../claims/seed003.toml"),
    ),
    (
        "claims/seed004.toml",
        include_str!("../../../../claims/seed004.toml"),
    ),
];

/// One seed's claim file as written.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ClaimFile {
    /// The seed's number.
    seed: String,
    /// Where the published numbers come from.
    source: String,
    /// The platform file of the machine they were measured on.
    platform: String,
    /// The claims, in `docs/CLAIMS.md` order.
    claim: Vec<ClaimSpec>,
}

/// One checked case of a published claim.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClaimSpec {
    /// The claim's id in `docs/CLAIMS.md`.
    pub id: String,
    /// Which case of the claim this row checks.
    pub case: String,
    /// The unit of the published and the modelled value.
    pub unit: String,
    /// What was published: a number, or a text for a qualitative claim.
    pub published: Value,
    /// The tolerance, as `docs/CLAIMS.md` states it.
    pub tolerance: String,
    /// The tolerance as a check of the modelled values.
    pub check: Check,
    /// The named scenarios the claim runs or takes its platform options from.
    #[serde(default)]
    pub scenarios: Vec<String>,
    /// Platform options picked on top of the scenarios' own.
    #[serde(default)]
    pub choices: Picks,
    /// What else the publication fixes, read by the claim's measurement.
    #[serde(default)]
    pub setup: toml::Table,
    /// The seed's number, from the file.
    #[serde(skip)]
    pub seed: String,
    /// The seed's source, from the file.
    #[serde(skip)]
    pub source: String,
    /// The platform's name, from the file.
    #[serde(skip)]
    pub platform: String,
    /// The file the claim was read from.
    #[serde(skip)]
    pub file: &'static str,
}

/// How modelled values are held against the published one.
#[derive(Clone, Copy, Debug, PartialEq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Check {
    /// A qualitative claim: the measurement says whether it holds.
    Holds,
    /// Each value within this much of the published number (same unit).
    Within(f64),
    /// Each value within this fraction of the published number.
    Relative(f64),
    /// Each value inside `[lo, hi]`.
    Range([f64; 2]),
}

impl Check {
    /// Whether `value` meets the check against `published`.
    fn accepts(self, value: f64, published: Option<f64>) -> bool {
        match (self, published) {
            (Check::Holds, _) => true,
            (Check::Within(w), Some(p)) => (value - p).abs() <= w,
            (Check::Relative(r), Some(p)) => p != 0.0 && ((value - p) / p).abs() <= r,
            (Check::Range([lo, hi]), _) => (lo..=hi).contains(&value),
            (Check::Within(_) | Check::Relative(_), None) => false,
        }
    }
}

/// What a claim's measurement found.
pub(super) struct Measured {
    /// The modelled value as the report shows it (a rounded number or a text).
    pub modelled: Value,
    /// The values the check is applied to, in the published unit (none for a pure `holds`).
    pub values: Vec<f64>,
    /// Whether the qualitative part of the claim holds (exact commands, costs that add up).
    pub holds: bool,
    /// Why the numbers come out as they do.
    pub breakdown: String,
    /// The platform whose fitted parameters count as fitted to this claim.
    pub fits: Platform,
}

impl ClaimSpec {
    /// The claim's `setup` table read as `T`; an error names the file, the claim and the key.
    pub(super) fn setup<T: DeserializeOwned>(&self) -> Result<T> {
        serde_path_to_error::deserialize(toml::Value::Table(self.setup.clone())).map_err(|e| {
            SimError::ScenarioSchema {
                file: self.file.to_string(),
                key: format!("{} setup.{}", self.id, e.path()),
                reason: e.inner().to_string(),
            }
        })
    }

    /// The claim's platform with its `choices` picked.
    pub(super) fn platform(&self) -> Result<Platform> {
        Platform::builtin(&self.platform, &self.choices)
    }

    /// The claim's `i`th scenario, with its `choices` and the setup's `workload` table (if any)
    /// merged in.
    pub(super) fn scenario(&self, i: usize) -> Result<Scenario> {
        let name = self
            .scenarios
            .get(i)
            .ok_or_else(|| SimError::ScenarioSchema {
                file: self.file.to_string(),
                key: format!("{} scenarios", self.id),
                reason: format!("needs at least {} scenario names", i + 1),
            })?;
        let mut overrides = toml::Table::new();
        if !self.choices.is_empty() {
            let picks = self
                .choices
                .iter()
                .map(|(k, v)| (k.clone(), v.clone().into()));
            overrides.insert("choices".into(), toml::Value::Table(picks.collect()));
        }
        if let Some(w) = self.setup.get("workload") {
            overrides.insert("workload".into(), w.clone());
        }
        builtin_with(name, &overrides)
    }

    /// Hold `m` against the published value: the row `dmalab reproduce` prints.
    pub(super) fn judge(&self, m: Measured) -> super::ClaimResult {
        let published = self.published.as_f64();
        let error = match (published, m.values.first()) {
            (Some(p), Some(v)) if p != 0.0 => Some((v - p) / p),
            _ => None,
        };
        let numeric = self.check != Check::Holds;
        let passed = m.holds
            && !(numeric && m.values.is_empty())
            && m.values.iter().all(|v| self.check.accepts(*v, published));
        super::ClaimResult {
            id: self.id.clone(),
            case: self.case.clone(),
            source: format!("seed {}: {}", self.seed, self.source),
            platform: self.platform.clone(),
            published: self.published.clone(),
            modelled: m.modelled,
            unit: self.unit.clone(),
            error,
            tolerance: self.tolerance.clone(),
            passed,
            fitted_here: fitted_to(&m.fits, &self.id, &self.case),
            breakdown: m.breakdown,
            choices: self.choices.clone(),
        }
    }
}

/// Every claim case built into dmalab, in `docs/CLAIMS.md` order.
pub fn all() -> Result<Vec<ClaimSpec>> {
    let mut out = Vec::new();
    for (file, text) in FILES {
        out.extend(parse(file, text)?);
    }
    Ok(out)
}

/// The claims of one claim file's text; `file` names it in errors.
fn parse(file: &'static str, text: &str) -> Result<Vec<ClaimSpec>> {
    let de = toml::Deserializer::parse(text).map_err(|e| SimError::Syntax {
        file: file.to_string(),
        reason: e.to_string(),
    })?;
    let f: ClaimFile =
        serde_path_to_error::deserialize(de).map_err(|e| SimError::ScenarioSchema {
            file: file.to_string(),
            key: e.path().to_string(),
            reason: e.inner().message().to_string(),
        })?;
    Ok(f.claim
        .into_iter()
        .map(|c| ClaimSpec {
            seed: f.seed.clone(),
            source: f.source.clone(),
            platform: f.platform.clone(),
            file,
            ..c
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONE: &str = r#"
seed = "003"
source = "a test"
platform = "intel-vtd-2008-server"
[[claim]]
id = "P3-IOPS"
case = "bitmap"
unit = "ratio"
published = 0.887
tolerance = "ratio within 0.02"
check = { within = 0.02 }
"#;

    #[test]
    fn a_claim_file_with_an_unknown_key_is_refused_naming_it() {
        let text = ONE.replace("check =", "tolerence = 1\ncheck =");
        let e = parse("claims/test.toml", &text).unwrap_err().to_string();
        assert!(e.contains("claim[0].tolerence"), "{e}");
    }

    fn measured(values: Vec<f64>, holds: bool) -> Measured {
        Measured {
            modelled: Value::Null,
            values,
            holds,
            breakdown: String::new(),
            fits: Platform::builtin("intel-vtd-2008-server", &Picks::new()).unwrap(),
        }
    }

    #[test]
    fn each_check_passes_inside_its_tolerance_and_fails_outside() {
        let c = &parse("claims/test.toml", ONE).unwrap()[0];
        assert!(c.judge(measured(vec![0.90], true)).passed);
        assert!(!c.judge(measured(vec![0.91], true)).passed);
        assert!(
            !c.judge(measured(vec![0.887], false)).passed,
            "holds is required"
        );
        assert!(
            !c.judge(measured(Vec::new(), true)).passed,
            "no value, no pass"
        );
        let e = c.judge(measured(vec![0.9], true)).error.unwrap();
        assert!((e - (0.9 - 0.887) / 0.887).abs() < 1e-15);
        assert!(Check::Relative(0.1).accepts(1.09, Some(1.0)));
        assert!(!Check::Relative(0.1).accepts(1.11, Some(1.0)));
        assert!(Check::Range([18.0, 24.0]).accepts(18.0, None));
        assert!(!Check::Range([18.0, 24.0]).accepts(24.5, Some(21.0)));
        assert!(
            !Check::Within(1.0).accepts(0.5, None),
            "within needs a number"
        );
    }

    #[test]
    fn a_published_zero_has_no_relative_error() {
        let text = ONE.replace("published = 0.887", "published = 0.0");
        let c = &parse("claims/test.toml", &text).unwrap()[0];
        let r = c.judge(measured(vec![0.01], true));
        assert!(r.passed);
        assert_eq!(r.error, None);
    }

    #[test]
    fn every_built_in_claim_file_reads() {
        let all = all().unwrap();
        assert_eq!(all.len(), 53);
        assert!(all
            .iter()
            .all(|c| !c.source.is_empty() && !c.platform.is_empty()));
    }
}
