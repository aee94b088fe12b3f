//! Reading platform parameters: every value carries its unit (in its name) and its provenance
//! (a cited source, or a note that it is `fitted` or `assumed`), and every read checks the range.
//!
//! A parameter is written as an inline table:
//!
//! ```toml
//! clock_hz = { value = 33_333_333, source = "seed 001: conventional PCI slot" }
//! read_fetch_latency_ns = { value = 1560, fitted = "to the TX traces of seed 001" }
//! ```
//!
//! A platform may offer *choices* (such as its firmware level), each a set of named options that
//! override parameters by dotted path; a scenario picks an option, or the choice's default holds.

use crate::error::{invalid_arg, Result, SimError};
use serde::Serialize;
use std::collections::BTreeMap;
use std::ops::RangeInclusive;

/// Where a parameter's value comes from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "note", rename_all = "lowercase")]
pub enum Provenance {
    /// A cited source: a seed's text, a datasheet, a specification section, a measurement here.
    Source(String),
    /// Chosen so that the model matches published or measured numbers; the note says which.
    Fitted(String),
    /// An estimate with a physical reason but neither a source nor a fit; the note says why.
    Assumed(String),
    /// Read off a real host by `dmalab inspect`; the note names the file it came from.
    Inspected(String),
}

impl Provenance {
    /// `source`, `fitted`, `assumed` or `inspected`.
    pub fn kind(&self) -> &'static str {
        match self {
            Provenance::Source(_) => "source",
            Provenance::Fitted(_) => "fitted",
            Provenance::Assumed(_) => "assumed",
            Provenance::Inspected(_) => "inspected",
        }
    }

    /// Whether the value is cited (a source, or read off a host) rather than fitted or assumed.
    pub fn is_cited(&self) -> bool {
        matches!(self, Provenance::Source(_) | Provenance::Inspected(_))
    }

    /// The citation or note.
    pub fn note(&self) -> &str {
        match self {
            Provenance::Source(s)
            | Provenance::Fitted(s)
            | Provenance::Assumed(s)
            | Provenance::Inspected(s) => s,
        }
    }
}

/// One parameter as read: its dotted path, its value as written and its provenance.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ParamRecord {
    /// Dotted path, such as `bus.pci.clock_hz`.
    pub field: String,
    /// The value, as written in the file.
    pub value: String,
    /// Where it comes from.
    pub provenance: Provenance,
    /// The option of a platform choice that supplied it, such as `firmware=2001`.
    pub option: Option<String>,
    /// For a fitted parameter, the claims it was fitted to: a claim's id (every case of it) or
    /// `<id> <case>` (one case), as the file's `claims` key lists them.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub claims: Vec<String>,
    /// The values it could physically take, where the file says (`range = [lo, hi]`, or the
    /// list of options a string parameter could take): what intervals sample over.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub range: Option<ParamRange>,
    /// For a fitted parameter, the values inside `range` with which every claim it was fitted
    /// to still passes, each other value as the file has it (`fit_range`): the fit's
    /// uncertainty as the claims' tolerances leave it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fit_range: Option<ParamRange>,
    /// For a cited parameter, that its source gives the value exactly (`exact = true`: a
    /// specification's value, a configuration the source states); a cited value known only to
    /// a precision states that precision as its `range` instead.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub exact: bool,
    /// Which integers the model accepts for it, so that a value drawn from its range is one
    /// the model can run with.
    #[serde(skip)]
    pub admits: Admits,
}

/// Which integers a parameter's reader accepts inside its range.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Admits {
    /// Every integer (or, for a string parameter, every option of its range).
    #[default]
    Any,
    /// Powers of two only.
    Pow2,
    /// Only these values.
    OneOf(Vec<u64>),
}

impl Admits {
    /// The accepted integer nearest `x` (ties to the lower) inside `lo..=hi`, or `None` when
    /// none is there.
    pub fn nearest(&self, x: f64, lo: i64, hi: i64) -> Option<i64> {
        let inside = |n: i64| (lo..=hi).contains(&n);
        let pick = |cands: Vec<i64>| {
            cands.into_iter().filter(|n| inside(*n)).min_by(|a, b| {
                let (da, db) = ((*a as f64 - x).abs(), (*b as f64 - x).abs());
                da.total_cmp(&db).then(a.cmp(b))
            })
        };
        match self {
            Admits::Any => Some((x.round() as i64).clamp(lo, hi)),
            Admits::Pow2 => pick((0..63).map(|k| 1i64 << k).collect()),
            Admits::OneOf(v) => pick(v.iter().filter_map(|n| i64::try_from(*n).ok()).collect()),
        }
    }
}

/// Which span of a parameter a draw takes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Span {
    /// What is known of it: a fitted parameter's `fit_range` where it has one, otherwise its
    /// `range` (an assumed value's physical range, a cited value's stated precision). What
    /// prediction intervals draw.
    #[default]
    Known,
    /// Its `range` alone, as if no fit had been made: what checks a fit against its claims.
    Physical,
}

impl ParamRecord {
    /// The span [`ParamRecord::draw`] takes under `span`.
    pub fn span(&self, span: Span) -> Option<&ParamRange> {
        match span {
            Span::Known => self.fit_range.as_ref().or(self.range.as_ref()),
            Span::Physical => self.range.as_ref(),
        }
    }

    /// Whether intervals draw it: it states a range and is not read off a host (an assumed
    /// or fitted value, or a cited one with a stated precision).
    pub fn is_uncertain(&self) -> bool {
        self.range.is_some() && !matches!(self.provenance, Provenance::Inspected(_))
    }

    /// The value at quantile `u` (in `[0, 1)`) of its span (see [`Span`]), one the model accepts:
    /// an integer range is taken log-uniform where it spans a factor of more than 2 above zero
    /// (a guess of a latency or a size is a guess of its order), uniform otherwise, then
    /// snapped to the nearest integer the reader admits; a string parameter takes one of its
    /// options, each equally likely. The file's value is the best guess and the span's ends
    /// what the parameter could at most be, so the file's value is the draws' median: the
    /// lower half of the quantiles spans the range up to it, the upper half the range above
    /// it, each on the same scale (a value away from the range's middle would otherwise sit
    /// at the edge of its own draws, and the figures it gives outside their own intervals).
    /// `None` where no range is stated or none of it is admitted.
    pub fn draw(&self, u: f64, span: Span) -> Option<toml::Value> {
        let u = if u.is_finite() {
            u.clamp(0.0, 1.0)
        } else {
            0.5
        };
        match self.span(span)? {
            ParamRange::Int { lo, hi } => {
                let (l, h) = (*lo as f64, *hi as f64);
                let log = *lo > 0 && h > 2.0 * l;
                let to = |x: f64| if log { x.ln() } else { x };
                let from = |x: f64| if log { x.exp() } else { x };
                let (tl, th) = (to(l), to(h));
                let tm = match self.value.trim().parse::<i64>() {
                    Ok(v) if (*lo..=*hi).contains(&v) => to(v as f64),
                    _ => (tl + th) / 2.0,
                };
                let t = if u < 0.5 {
                    tl + 2.0 * u * (tm - tl)
                } else {
                    tm + (2.0 * u - 1.0) * (th - tm)
                };
                self.admits
                    .nearest(from(t), *lo, *hi)
                    .map(toml::Value::Integer)
            }
            ParamRange::Options(o) => {
                let i = ((u * o.len() as f64) as usize).min(o.len().checked_sub(1)?);
                Some(toml::Value::String(o[i].clone()))
            }
        }
    }
}

/// The values a parameter could physically take, as its file states them.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum ParamRange {
    /// An integer parameter: every value from `lo` to `hi`, both included, in its unit.
    Int {
        /// The least value it could take.
        lo: i64,
        /// The greatest value it could take.
        hi: i64,
    },
    /// A string parameter: the options it could take, its own value among them.
    Options(Vec<String>),
}

impl ParamRange {
    /// The range as written in a file: `[lo, hi]` or `["a", "b"]`.
    pub fn to_toml(&self) -> toml::Value {
        match self {
            ParamRange::Int { lo, hi } => {
                toml::Value::Array(vec![toml::Value::Integer(*lo), toml::Value::Integer(*hi)])
            }
            ParamRange::Options(o) => {
                toml::Value::Array(o.iter().map(|s| toml::Value::String(s.clone())).collect())
            }
        }
    }
}

/// Reads typed, range-checked parameters from one platform file, recording each one read.
pub struct ParamReader<'a> {
    file: &'a str,
    root: &'a toml::Table,
    overrides: BTreeMap<String, (&'a toml::Value, String)>,
    records: Vec<ParamRecord>,
    /// Plain (provenance-free) fields read, such as `name`.
    plain: Vec<String>,
    /// Values drawn from parameters' ranges, by dotted path, read in place of the file's.
    draws: Option<&'a BTreeMap<String, toml::Value>>,
}

impl<'a> ParamReader<'a> {
    /// A reader over `root` (the parsed file named `file`), with the options picked in `picks`
    /// (choice name to option name) applied; unpicked choices take their `default`.
    pub fn new(
        file: &'a str,
        root: &'a toml::Table,
        picks: &BTreeMap<String, String>,
    ) -> Result<Self> {
        let mut reader = ParamReader {
            file,
            root,
            overrides: BTreeMap::new(),
            records: Vec::new(),
            plain: Vec::new(),
            draws: None,
        };
        let choices: &'a toml::Table = match root.get("choices") {
            None if picks.is_empty() => return Ok(reader),
            None => {
                let name = picks.keys().next().cloned().unwrap_or_default();
                return Err(SimError::UnknownChoice {
                    file: file.to_string(),
                    what: "choice".into(),
                    name,
                    valid: "(this platform offers no choices)".into(),
                });
            }
            Some(toml::Value::Table(t)) => t,
            Some(other) => return Err(reader.invalid("choices", other, "a table of choices")),
        };
        for name in picks.keys() {
            if !choices.contains_key(name) {
                return Err(SimError::UnknownChoice {
                    file: file.to_string(),
                    what: "choice".into(),
                    name: name.clone(),
                    valid: join_keys(choices),
                });
            }
        }
        for (name, choice) in choices {
            reader.apply_choice(name, choice, picks.get(name))?;
        }
        Ok(reader)
    }

    fn apply_choice(
        &mut self,
        name: &str,
        choice: &'a toml::Value,
        pick: Option<&String>,
    ) -> Result<()> {
        let field = format!("choices.{name}");
        let options = choice
            .get("options")
            .and_then(toml::Value::as_table)
            .ok_or_else(|| self.missing(&format!("{field}.options"), "a table of options"))?;
        let default = choice
            .get("default")
            .and_then(toml::Value::as_str)
            .ok_or_else(|| {
                self.missing(&format!("{field}.default"), "the default option's name")
            })?;
        let picked = pick.map(String::as_str).unwrap_or(default);
        let Some(toml::Value::Table(overrides)) = options.get(picked) else {
            return Err(SimError::UnknownChoice {
                file: self.file.to_string(),
                what: format!("option of {name}"),
                name: picked.to_string(),
                valid: join_keys(options),
            });
        };
        for (path, value) in overrides {
            if path == "description" {
                continue;
            }
            self.overrides
                .insert(path.clone(), (value, format!("{name}={picked}")));
        }
        Ok(())
    }

    /// Read the values in `draws` (dotted path to value) in place of the file's: a parameter
    /// drawn from its range, as intervals sample them. A drawn path that no read asks for is
    /// refused by [`ParamReader::refuse_unread`].
    pub fn with_draws(mut self, draws: &'a BTreeMap<String, toml::Value>) -> Self {
        self.draws = Some(draws);
        self
    }

    /// The file's name, for error messages.
    pub fn file(&self) -> &str {
        self.file
    }

    /// The parameters read so far, in reading order.
    pub fn into_records(self) -> Vec<ParamRecord> {
        self.records
    }

    /// Whether a key (a value or a table) exists at `path`, or a picked option sets it.
    pub fn has(&self, path: &str) -> bool {
        self.overrides.contains_key(path) || self.lookup_plain(path).is_some()
    }

    /// Whether a table exists at `path`.
    pub fn has_table(&self, path: &str) -> bool {
        matches!(self.lookup_plain(path), Some(toml::Value::Table(_)))
    }

    /// A plain (provenance-free) string at `path`, such as a name or a description. A picked
    /// option may set it, as `{ value = "...", source = "..." }`: then it is read as a
    /// parameter, with its provenance.
    pub fn text(&mut self, path: &str) -> Result<String> {
        if self.overrides.contains_key(path) {
            let value = self.param_value(path, "a string")?;
            return match value.as_str() {
                Some(s) => Ok(s.to_string()),
                None => Err(self.invalid(path, value, "a string")),
            };
        }
        self.plain.push(path.to_string());
        match self.lookup_plain(path) {
            Some(toml::Value::String(s)) => Ok(s.clone()),
            Some(other) => Err(self.invalid(path, other, "a string")),
            None => Err(self.missing(path, "a string")),
        }
    }

    /// An integer parameter in `range`; the unit is part of the field's name.
    pub fn u64(&mut self, path: &str, range: RangeInclusive<u64>) -> Result<u64> {
        let value = self.param_value(path, "an integer")?;
        let n = value
            .as_integer()
            .and_then(|n| u64::try_from(n).ok())
            .filter(|n| range.contains(n))
            .ok_or_else(|| {
                self.invalid(
                    path,
                    value,
                    &format!("an integer in {}..={}", range.start(), range.end()),
                )
            })?;
        let what = format!("[lo, hi] inside {}..={}", range.start(), range.end());
        self.check_range(path, range, &what)?;
        Ok(n)
    }

    /// A power-of-two integer parameter in `range`.
    pub fn pow2(&mut self, path: &str, range: RangeInclusive<u64>) -> Result<u64> {
        let n = self.u64(path, range.clone())?;
        self.admit(path, Admits::Pow2);
        if n.is_power_of_two() {
            Ok(n)
        } else {
            let valid = format!("a power of two in {}..={}", range.start(), range.end());
            Err(self.invalid(path, &toml::Value::Integer(n as i64), &valid))
        }
    }

    /// A string parameter that must be one of `choices`.
    pub fn choice(&mut self, path: &str, choices: &[&str]) -> Result<String> {
        let value = self.param_value(path, "a string")?;
        let s = match value.as_str() {
            Some(s) if choices.contains(&s) => s.to_string(),
            _ => return Err(self.invalid(path, value, &choices.join(", "))),
        };
        let stated = self.records.iter().rev().find(|r| r.field == path);
        if let Some(ParamRange::Options(o)) = stated.and_then(|r| r.range.as_ref()) {
            if let Some(bad) = o.iter().find(|o| !choices.contains(&o.as_str())) {
                let value = toml::Value::String(bad.clone());
                let valid = format!("options among {}", choices.join(", "));
                return Err(self.invalid(&format!("{path}.range"), &value, &valid));
            }
        }
        Ok(s)
    }

    fn param_value(&mut self, path: &str, expected: &str) -> Result<&'a toml::Value> {
        let (entry, option) = match self.overrides.get(path) {
            Some((v, opt)) => (*v, Some(opt.clone())),
            None => (
                self.lookup_plain(path)
                    .ok_or_else(|| self.missing(path, expected))?,
                None,
            ),
        };
        let table = entry.as_table().ok_or_else(|| {
            self.invalid(
                path,
                entry,
                &format!("{{ value = <{expected}>, source = \"...\" }}"),
            )
        })?;
        let value = table
            .get("value")
            .ok_or_else(|| self.missing(&format!("{path}.value"), expected))?;
        let provenance = self.provenance(path, table)?;
        let claims = self.claims(path, table, &provenance)?;
        let range = self.range(path, table, value, "range")?;
        let fit_range = self.fit_range(path, table, value, &provenance, range.as_ref())?;
        let exact = self.exact(path, table, &provenance, range.is_some())?;
        let value = self.draws.and_then(|d| d.get(path)).unwrap_or(value);
        self.records.push(ParamRecord {
            field: path.to_string(),
            value: value.to_string(),
            provenance,
            option,
            claims,
            range,
            fit_range,
            exact,
            admits: Admits::Any,
        });
        Ok(value)
    }

    fn provenance(&self, path: &str, table: &toml::Table) -> Result<Provenance> {
        let note = |key: &str| {
            table
                .get(key)
                .and_then(toml::Value::as_str)
                .map(str::to_string)
        };
        if let Some(s) = note("source") {
            Ok(Provenance::Source(s))
        } else if let Some(s) = note("fitted") {
            Ok(Provenance::Fitted(s))
        } else if let Some(s) = note("assumed") {
            Ok(Provenance::Assumed(s))
        } else if let Some(s) = note("inspected") {
            Ok(Provenance::Inspected(s))
        } else {
            Err(SimError::MissingProvenance {
                file: self.file.to_string(),
                field: path.to_string(),
            })
        }
    }

    /// The `claims` a fitted parameter names (required there, refused elsewhere), after
    /// refusing any key a parameter table does not have.
    fn claims(&self, path: &str, table: &toml::Table, p: &Provenance) -> Result<Vec<String>> {
        const KEYS: [&str; 9] = [
            "value",
            "source",
            "fitted",
            "assumed",
            "inspected",
            "claims",
            "range",
            "fit_range",
            "exact",
        ];
        if let Some(k) = table.keys().find(|k| !KEYS.contains(&k.as_str())) {
            return Err(SimError::UnknownKey {
                file: self.file.to_string(),
                key: format!("{path}.{k}"),
                valid: KEYS.join(", "),
            });
        }
        let field = format!("{path}.claims");
        let expected = "a list of the claim ids (or `<id> <case>`) it was fitted to";
        match (table.get("claims"), p) {
            (None, Provenance::Fitted(_)) => Err(self.missing(&field, expected)),
            (None, _) => Ok(Vec::new()),
            (Some(v), Provenance::Fitted(_)) => v
                .as_array()
                .filter(|a| !a.is_empty())
                .and_then(|a| a.iter().map(|c| c.as_str().map(str::to_string)).collect())
                .ok_or_else(|| self.invalid(&field, v, expected)),
            (Some(v), _) => Err(self.invalid(&field, v, "only on a `fitted` parameter")),
        }
    }

    /// The `range` a parameter states, checked against its own value: `[lo, hi]` with
    /// `lo <= value <= hi` for an integer, the list of options (its value among them) for a
    /// string.
    fn range(
        &self,
        path: &str,
        table: &toml::Table,
        value: &toml::Value,
        key: &str,
    ) -> Result<Option<ParamRange>> {
        let Some(r) = table.get(key) else {
            return Ok(None);
        };
        let field = format!("{path}.{key}");
        let items = r.as_array();
        match value {
            toml::Value::Integer(v) => {
                let pair = items.and_then(|a| match a.as_slice() {
                    [lo, hi] => Some((lo.as_integer()?, hi.as_integer()?)),
                    _ => None,
                });
                match pair {
                    Some((lo, hi)) if lo <= *v && *v <= hi => Ok(Some(ParamRange::Int { lo, hi })),
                    _ => Err(self.invalid(
                        &field,
                        r,
                        &format!("[lo, hi], two integers with lo <= {v} <= hi"),
                    )),
                }
            }
            toml::Value::String(v) => {
                let options: Option<Vec<String>> =
                    items.and_then(|a| a.iter().map(|o| o.as_str().map(str::to_string)).collect());
                match options {
                    Some(o) if o.contains(v) => Ok(Some(ParamRange::Options(o))),
                    _ => Err(self.invalid(
                        &field,
                        r,
                        &format!("a list of the options it could take, \"{v}\" among them"),
                    )),
                }
            }
            _ => Err(self.invalid(&field, r, "a range only on an integer or string parameter")),
        }
    }

    /// `exact = true`: only on a `source` parameter, and not with a `range` (a precision).
    fn exact(&self, path: &str, table: &toml::Table, p: &Provenance, ranged: bool) -> Result<bool> {
        let Some(v) = table.get("exact") else {
            return Ok(false);
        };
        let field = format!("{path}.exact");
        if v.as_bool() != Some(true) {
            return Err(self.invalid(&field, v, "true (leave it out otherwise)"));
        }
        if !matches!(p, Provenance::Source(_)) {
            return Err(self.invalid(&field, v, "only on a `source` parameter"));
        }
        if ranged {
            return Err(self.invalid(
                &field,
                v,
                "either `exact = true` or a `range` (the source's precision), not both",
            ));
        }
        Ok(true)
    }

    /// A fitted parameter's `fit_range` (as `range` is written), inside its `range`; refused on
    /// any other parameter.
    fn fit_range(
        &self,
        path: &str,
        table: &toml::Table,
        value: &toml::Value,
        p: &Provenance,
        range: Option<&ParamRange>,
    ) -> Result<Option<ParamRange>> {
        let Some(fit) = self.range(path, table, value, "fit_range")? else {
            return Ok(None);
        };
        let field = format!("{path}.fit_range");
        let stated = table.get("fit_range").unwrap_or(value);
        if !matches!(p, Provenance::Fitted(_)) {
            return Err(self.invalid(&field, stated, "only on a `fitted` parameter"));
        }
        let inside = match (&fit, range) {
            (_, None) => true,
            (ParamRange::Int { lo, hi }, Some(ParamRange::Int { lo: l, hi: h })) => {
                l <= lo && hi <= h
            }
            (ParamRange::Options(f), Some(ParamRange::Options(o))) => {
                f.iter().all(|x| o.contains(x))
            }
            _ => false,
        };
        if !inside {
            return Err(self.invalid(&field, stated, "values inside the parameter's range"));
        }
        Ok(Some(fit))
    }

    /// Refuse a stated range that leaves the values `valid` admits: every value in it must be
    /// one the model can run with.
    fn check_range(&self, path: &str, valid: RangeInclusive<u64>, what: &str) -> Result<()> {
        let Some(rec) = self.records.iter().rev().find(|r| r.field == path) else {
            return Ok(());
        };
        if let Some(ParamRange::Int { lo, hi }) = rec.range {
            let inside = |n: i64| u64::try_from(n).is_ok_and(|n| valid.contains(&n));
            if !inside(lo) || !inside(hi) {
                let value = toml::Value::Array(vec![lo.into(), hi.into()]);
                return Err(self.invalid(&format!("{path}.range"), &value, what));
            }
        }
        Ok(())
    }

    /// Note which integers the parameter just read at `path` admits: a reader whose check
    /// ties two parameters together (a cache's ways dividing its entries) narrows what a draw
    /// may take to values that always pass it.
    pub(crate) fn admit(&mut self, path: &str, admits: Admits) {
        if let Some(rec) = self.records.iter_mut().rev().find(|r| r.field == path) {
            rec.admits = admits;
        }
    }

    fn lookup_plain(&self, path: &str) -> Option<&'a toml::Value> {
        let mut parts = path.split('.');
        let mut node = self.root.get(parts.next()?)?;
        for part in parts {
            node = node.as_table()?.get(part)?;
        }
        Some(node)
    }

    /// Refuse every key of the file, and every path the picked options override, that no read
    /// asked for: a misspelt parameter must not silently leave its default in force.
    pub fn refuse_unread(&self) -> Result<()> {
        let read: Vec<&str> = self
            .records
            .iter()
            .map(|r| r.field.as_str())
            .chain(self.plain.iter().map(String::as_str))
            .collect();
        let mut unread = Vec::new();
        for (key, value) in self.root {
            if key != "choices" {
                collect_unread(key, value, &read, &mut unread);
            }
        }
        unread.extend(
            self.overrides
                .keys()
                .chain(self.draws.into_iter().flat_map(BTreeMap::keys))
                .filter(|k| !read.contains(&k.as_str()))
                .cloned(),
        );
        let Some(key) = unread.first() else {
            return Ok(());
        };
        let parent = key.rsplit_once('.').map_or("", |(p, _)| p);
        let siblings: Vec<&str> = read
            .iter()
            .filter(|f| f.rsplit_once('.').map_or("", |(p, _)| p) == parent)
            .map(|f| f.rsplit_once('.').map_or(*f, |(_, k)| k))
            .collect();
        Err(SimError::UnknownKey {
            file: self.file.to_string(),
            key: key.clone(),
            valid: if siblings.is_empty() {
                "(no key is read there)".into()
            } else {
                siblings.join(", ")
            },
        })
    }

    /// A [`SimError::MissingField`] for `path` in this file; where the file has an unread key
    /// beside it spelt nearly the same (`lanez` for `lanes`), the message names that key.
    pub fn missing(&self, path: &str, expected: &str) -> SimError {
        let typo = self
            .near_miss(path)
            .map(|k| format!("; the file has `{k}`: a typo?"))
            .unwrap_or_default();
        SimError::MissingField {
            file: self.file.to_string(),
            field: path.to_string(),
            expected: format!("{expected}{typo}"),
        }
    }

    /// A key beside `path` (in the same table) that no read has asked for and that is within
    /// two edits of `path`'s last part (one for names of four letters or fewer): the likely
    /// misspelling of a missing key.
    fn near_miss(&self, path: &str) -> Option<String> {
        let (parent, key) = path.rsplit_once('.').unwrap_or(("", path));
        let table = if parent.is_empty() {
            self.root
        } else {
            self.lookup_plain(parent)?.as_table()?
        };
        let limit = if key.chars().count() <= 4 { 1 } else { 2 };
        let read = |k: &str| {
            let full = if parent.is_empty() {
                k.to_string()
            } else {
                format!("{parent}.{k}")
            };
            self.records.iter().any(|r| r.field == full) || self.plain.contains(&full)
        };
        table
            .keys()
            .filter(|k| k.as_str() != key && !read(k))
            .map(|k| (edit_distance(k, key), k))
            .filter(|(d, _)| *d <= limit)
            .min()
            .map(|(_, k)| k.clone())
    }

    /// A [`SimError::InvalidField`] for `path` in this file.
    pub fn invalid(&self, path: &str, value: &toml::Value, valid: &str) -> SimError {
        SimError::InvalidField {
            file: self.file.to_string(),
            field: path.to_string(),
            value: value.to_string(),
            valid: valid.to_string(),
        }
    }
}

/// The Levenshtein distance between `a` and `b` (insertions, deletions and substitutions).
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// The dotted paths under `path` that are neither read nor inside a read parameter.
fn collect_unread(path: &str, value: &toml::Value, read: &[&str], out: &mut Vec<String>) {
    if read.contains(&path) {
        return;
    }
    match value {
        toml::Value::Table(t) if !t.contains_key("value") => {
            for (k, v) in t {
                collect_unread(&format!("{path}.{k}"), v, read, out);
            }
        }
        _ => out.push(path.to_string()),
    }
}

fn join_keys(table: &toml::Table) -> String {
    table
        .keys()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The values a numeric bus parameter may take, used both to read it from a platform file and
/// to validate parameters built in code (so both give the same range in their errors).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Valid {
    /// Any integer in `lo..=hi`.
    Range(u64, u64),
    /// A power of two in `lo..=hi`.
    Pow2(u64, u64),
    /// One of the listed values.
    OneOf(&'static [u64]),
}

impl Valid {
    fn admits(self, n: u64) -> bool {
        match self {
            Valid::Range(lo, hi) => (lo..=hi).contains(&n),
            Valid::Pow2(lo, hi) => (lo..=hi).contains(&n) && n.is_power_of_two(),
            Valid::OneOf(values) => values.contains(&n),
        }
    }

    fn describe(self) -> String {
        match self {
            Valid::Range(lo, hi) => format!("an integer in {lo}..={hi}"),
            Valid::Pow2(lo, hi) => format!("a power of two in {lo}..={hi}"),
            Valid::OneOf(values) => {
                let names: Vec<String> = values.iter().map(u64::to_string).collect();
                format!("one of {}", names.join(", "))
            }
        }
    }

    /// Read the parameter at `path`, with an error naming the file, the field and this range.
    pub(crate) fn read(self, r: &mut ParamReader<'_>, path: &str) -> Result<u64> {
        match self {
            Valid::Range(lo, hi) => r.u64(path, lo..=hi),
            Valid::Pow2(lo, hi) => r.pow2(path, lo..=hi),
            Valid::OneOf(values) => {
                let lo = values.iter().copied().min().unwrap_or(0);
                let hi = values.iter().copied().max().unwrap_or(0);
                let n = r.u64(path, lo..=hi)?;
                r.admit(path, Admits::OneOf(values.to_vec()));
                if self.admits(n) {
                    Ok(n)
                } else {
                    let value = toml::Value::Integer(i64::try_from(n).unwrap_or(i64::MAX));
                    Err(r.invalid(path, &value, &self.describe()))
                }
            }
        }
    }

    /// Read the parameter at `path` as [`Valid::read`] does where the file has it, or
    /// `default` where it names none (an optional part of a model).
    pub(crate) fn read_or(self, r: &mut ParamReader<'_>, path: &str, default: u64) -> Result<u64> {
        if r.has_table(path) {
            self.read(r, path)
        } else {
            Ok(default)
        }
    }

    /// Check a value built in code, with an error naming `field` and this range.
    pub(crate) fn check(self, field: &str, n: u64) -> Result<()> {
        if self.admits(n) {
            Ok(())
        } else {
            Err(invalid_arg(field, n, self.describe()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> toml::Table {
        text.parse().unwrap()
    }

    const FILE: &str = r#"
        [bus]
        clock_hz = { value = 33_000_000, source = "spec" }
        fit_ns = { value = 7, fitted = "to a claim", claims = ["P9-X case"] }
        width_bits = { value = 48, assumed = "why" }
        bare = 5
        [choices.firmware]
        default = "new"
        [choices.firmware.options.new]
        "bus.boundary_bytes" = { value = 512, source = "seed" }
        [choices.firmware.options.old]
        "bus.boundary_bytes" = { value = 256, source = "seed" }
    "#;

    #[test]
    fn a_fit_range_sits_inside_the_range_and_only_on_a_fitted_parameter() {
        let read = |line: &str| {
            let t = table(&format!("[bus]\n{line}\n"));
            let mut r = ParamReader::new("p.toml", &t, &BTreeMap::new()).unwrap();
            r.u64("bus.x", 0..=1000)
                .map(|_| r.records[0].fit_range.clone())
        };
        let fitted = r#"x = { value = 7, fitted = "f", claims = ["C"], range = [1, 20]"#;
        let ok = read(&format!("{fitted}, fit_range = [5, 9] }}")).unwrap();
        assert_eq!(ok, Some(ParamRange::Int { lo: 5, hi: 9 }));
        for (bad, says) in [
            (format!("{fitted}, fit_range = [8, 9] }}"), "lo <= 7 <= hi"),
            (
                format!("{fitted}, fit_range = [0, 9] }}"),
                "inside the parameter's range",
            ),
            (
                r#"x = { value = 7, assumed = "a", range = [1, 20], fit_range = [5, 9] }"#.into(),
                "only on a `fitted` parameter",
            ),
        ] {
            let err = read(&bad).unwrap_err().to_string();
            assert!(
                err.contains("bus.x.fit_range") && err.contains(says),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn a_draw_takes_the_fit_range_unless_the_physical_range_is_asked() {
        let t = table(
            r#"[bus]
x = { value = 7, fitted = "f", claims = ["C"], range = [1, 100], fit_range = [5, 9] }
y = { value = 110, source = "about 110", range = [100, 120] }
z = { value = 64, source = "spec", exact = true }
w = { value = 8, inspected = "sys", range = [1, 16] }
"#,
        );
        let mut r = ParamReader::new("p.toml", &t, &BTreeMap::new()).unwrap();
        for f in ["bus.x", "bus.y", "bus.z", "bus.w"] {
            r.u64(f, 0..=1000).unwrap();
        }
        let recs = r.into_records();
        let at = |i: usize, u: f64, span: Span| recs[i].draw(u, span).unwrap().as_integer();
        assert_eq!(
            (at(0, 0.0, Span::Known), at(0, 0.999, Span::Known)),
            (Some(5), Some(9))
        );
        assert_eq!(at(0, 0.0, Span::Physical), Some(1));
        assert_eq!(at(1, 0.0, Span::Known), Some(100));
        assert!(recs[2].exact && recs[2].draw(0.5, Span::Known).is_none());
        let uncertain: Vec<bool> = recs.iter().map(ParamRecord::is_uncertain).collect();
        assert_eq!(uncertain, [true, true, false, false]);
    }

    #[test]
    fn exact_is_only_true_only_cited_and_never_with_a_precision() {
        let read = |line: &str| {
            let t = table(&format!("[bus]\n{line}\n"));
            let mut r = ParamReader::new("p.toml", &t, &BTreeMap::new()).unwrap();
            r.u64("bus.x", 0..=1000).map(|_| r.records[0].exact)
        };
        assert!(read(r#"x = { value = 7, source = "s", exact = true }"#).unwrap());
        assert!(!read(r#"x = { value = 7, source = "s" }"#).unwrap());
        for (bad, says) in [
            (r#"x = { value = 7, source = "s", exact = false }"#, "true"),
            (
                r#"x = { value = 7, assumed = "a", exact = true }"#,
                "only on a `source`",
            ),
            (
                r#"x = { value = 7, source = "s", exact = true, range = [6, 8] }"#,
                "not both",
            ),
        ] {
            let err = read(bad).unwrap_err().to_string();
            assert!(
                err.contains("bus.x.exact") && err.contains(says),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn reads_values_with_provenance_and_ranges() {
        let t = table(FILE);
        let mut r = ParamReader::new("p.toml", &t, &BTreeMap::new()).unwrap();
        assert_eq!(r.u64("bus.clock_hz", 1..=100_000_000).unwrap(), 33_000_000);
        let err = r.pow2("bus.width_bits", 8..=64).unwrap_err();
        assert!(err.to_string().contains("bus.width_bits"), "{err}");
        assert!(err.to_string().contains("power of two in 8..=64"), "{err}");
        let err = r.u64("bus.bare", 0..=9).unwrap_err();
        assert!(matches!(err, SimError::InvalidField { .. }), "{err}");
        let err = r.u64("bus.nothing", 0..=9).unwrap_err();
        assert!(matches!(err, SimError::MissingField { .. }), "{err}");
        assert!(!err.to_string().contains("typo"), "{err}");
        assert_eq!(r.u64("bus.boundary_bytes", 0..=4096).unwrap(), 512);
        let records = r.into_records();
        assert_eq!(records[0].provenance, Provenance::Source("spec".into()));
        assert_eq!(
            records.last().unwrap().option.as_deref(),
            Some("firmware=new")
        );
    }

    #[test]
    fn choices_pick_options_and_reject_unknown_names() {
        let t = table(FILE);
        let picks = BTreeMap::from([("firmware".to_string(), "old".to_string())]);
        let mut r = ParamReader::new("p.toml", &t, &picks).unwrap();
        assert_eq!(r.u64("bus.boundary_bytes", 0..=4096).unwrap(), 256);
        let bad = BTreeMap::from([("firmware".to_string(), "ancient".to_string())]);
        let err = ParamReader::new("p.toml", &t, &bad).err().unwrap();
        assert!(err.to_string().contains("valid: new, old"), "{err}");
        let bad = BTreeMap::from([("bios".to_string(), "x".to_string())]);
        let err = ParamReader::new("p.toml", &t, &bad).err().unwrap();
        assert!(err.to_string().contains("unknown choice `bios`"), "{err}");
    }

    #[test]
    fn keys_never_read_are_refused_naming_the_valid_ones() {
        let t = table(FILE);
        let mut r = ParamReader::new("p.toml", &t, &BTreeMap::new()).unwrap();
        r.u64("bus.clock_hz", 1..=100_000_000).unwrap();
        r.u64("bus.boundary_bytes", 0..=4096).unwrap();
        let err = r.refuse_unread().unwrap_err().to_string();
        assert!(
            err.contains("`bus.bare`") && err.contains("clock_hz"),
            "{err}"
        );
        r.u64("bus.width_bits", 0..=64).unwrap();
        r.u64("bus.bare", 0..=9).unwrap_err();
        assert!(r.refuse_unread().is_err(), "a failed read is not a read");
    }

    #[test]
    fn a_fitted_parameter_names_its_claims() {
        let t = table(FILE);
        let mut r = ParamReader::new("p.toml", &t, &BTreeMap::new()).unwrap();
        r.u64("bus.fit_ns", 0..=9).unwrap();
        assert_eq!(r.into_records()[0].claims, ["P9-X case"]);
        for (text, what) in [
            ("x = { value = 1, fitted = \"why\" }", "x.claims"),
            (
                "x = { value = 1, fitted = \"why\", claims = [] }",
                "x.claims",
            ),
            (
                "x = { value = 1, source = \"s\", claims = [\"P1\"] }",
                "only on a `fitted`",
            ),
            (
                "x = { value = 1, source = \"s\", sorce = \"t\" }",
                "`x.sorce`",
            ),
        ] {
            let t = table(text);
            let mut r = ParamReader::new("p.toml", &t, &BTreeMap::new()).unwrap();
            let err = r.u64("x", 0..=9).unwrap_err().to_string();
            assert!(err.contains(what), "{text}: {err}");
        }
    }

    #[test]
    fn a_parameter_without_provenance_is_refused() {
        let t = table("[bus]\nclock_hz = { value = 1 }\n");
        let mut r = ParamReader::new("p.toml", &t, &BTreeMap::new()).unwrap();
        let err = r.u64("bus.clock_hz", 0..=9).unwrap_err();
        assert!(matches!(err, SimError::MissingProvenance { .. }), "{err}");
    }

    #[test]
    fn an_inspected_value_is_cited_and_names_its_file() {
        let t = table("[bus]\nlanes = { value = 8, inspected = \"sys/.../current_link_width\" }\n");
        let mut r = ParamReader::new("p.toml", &t, &BTreeMap::new()).unwrap();
        assert_eq!(r.u64("bus.lanes", 1..=32).unwrap(), 8);
        let records = r.into_records();
        let p = &records[0].provenance;
        assert_eq!(
            (p.kind(), p.note()),
            ("inspected", "sys/.../current_link_width")
        );
        assert!(p.is_cited());
        assert!(!Provenance::Assumed("x".into()).is_cited());
    }

    #[test]
    fn a_stated_range_holds_the_value_and_stays_where_the_model_runs() {
        let r_of = |entry: &str| {
            let text = format!("[bus]\nx = {{ value = 64, assumed = \"why\", {entry} }}\n");
            let t = table(&text);
            let mut r = ParamReader::new("p.toml", &t, &BTreeMap::new()).unwrap();
            let n = r.pow2("bus.x", 8..=256).map_err(|e| e.to_string());
            (n, r.into_records())
        };
        let (n, recs) = r_of("range = [32, 128]");
        assert_eq!(n, Ok(64));
        assert_eq!(recs[0].range, Some(ParamRange::Int { lo: 32, hi: 128 }));
        assert_eq!(recs[0].admits, Admits::Pow2);
        for (entry, says) in [
            ("range = [65, 128]", "lo <= 64 <= hi"),
            ("range = [8]", "two integers"),
            ("range = [\"a\", \"b\"]", "two integers"),
            ("range = [8, 512]", "inside 8..=256"),
            ("range = 7", "two integers"),
        ] {
            let err = r_of(entry).0.unwrap_err();
            assert!(
                err.contains("bus.x.range") && err.contains(says),
                "{entry}: {err}"
            );
        }
        let t = table("[bus]\nk = { value = \"a\", assumed = \"w\", range = [\"a\", \"z\"] }\n");
        let mut r = ParamReader::new("p.toml", &t, &BTreeMap::new()).unwrap();
        let err = r.choice("bus.k", &["a", "b"]).unwrap_err().to_string();
        assert!(
            err.contains("bus.k.range") && err.contains("\"z\""),
            "{err}"
        );
    }

    #[test]
    fn admitted_values_snap_to_the_nearest_one_in_range() {
        assert_eq!(Admits::Any.nearest(7.6, 0, 9), Some(8));
        assert_eq!(Admits::Any.nearest(12.0, 0, 9), Some(9));
        assert_eq!(Admits::Pow2.nearest(90.0, 32, 128), Some(64));
        assert_eq!(Admits::Pow2.nearest(100.0, 32, 128), Some(128));
        assert_eq!(
            Admits::OneOf(vec![1, 2, 4, 8, 12]).nearest(11.0, 1, 12),
            Some(12)
        );
        assert_eq!(Admits::OneOf(vec![32, 64]).nearest(40.0, 33, 63), None);
    }

    #[test]
    fn the_files_value_is_the_median_of_its_draws() {
        // 80 in [70, 120] (uniform: the range is within a factor of 2) and 4 in [1, 64]
        // (log-uniform): the lower half of the quantiles spans up to the value, the upper
        // half above it, so neither value sits at the edge of its own draws.
        let t = table(
            "[bus]\na = { value = 80, assumed = \"w\", range = [70, 120] }\nb = { value = 4, assumed = \"w\", range = [1, 64] }\n",
        );
        let mut r = ParamReader::new("p.toml", &t, &BTreeMap::new()).unwrap();
        r.u64("bus.a", 0..=1000).unwrap();
        r.u64("bus.b", 0..=1000).unwrap();
        let recs = r.into_records();
        let at = |i: usize, u: f64| recs[i].draw(u, Span::Known).unwrap().as_integer().unwrap();
        let a: Vec<i64> = [0.0, 0.25, 0.5, 0.75, 1.0]
            .iter()
            .map(|u| at(0, *u))
            .collect();
        assert_eq!(a, [70, 75, 80, 100, 120]);
        let b: Vec<i64> = [0.0, 0.25, 0.5, 0.75, 1.0]
            .iter()
            .map(|u| at(1, *u))
            .collect();
        assert_eq!(b, [1, 2, 4, 16, 64]);
    }

    #[test]
    fn draws_cover_the_range_and_are_read_in_place_of_the_file() {
        let t = table("[bus]\nx = { value = 64, assumed = \"w\", range = [16, 256] }\nk = { value = \"a\", assumed = \"w\", range = [\"a\", \"b\"] }\n");
        let mut r = ParamReader::new("p.toml", &t, &BTreeMap::new()).unwrap();
        r.pow2("bus.x", 1..=1024).unwrap();
        r.choice("bus.k", &["a", "b"]).unwrap();
        let recs = r.into_records();
        let xs: Vec<i64> = [0.0, 0.3, 0.5, 0.99, 1.0]
            .iter()
            .map(|u| recs[0].draw(*u, Span::Known).unwrap().as_integer().unwrap())
            .collect();
        assert_eq!(xs, [16, 32, 64, 256, 256]);
        assert_eq!(recs[1].draw(0.49, Span::Known).unwrap().as_str(), Some("a"));
        assert_eq!(recs[1].draw(0.5, Span::Known).unwrap().as_str(), Some("b"));
        let draws = BTreeMap::from([("bus.x".to_string(), toml::Value::Integer(128))]);
        let mut r = ParamReader::new("p.toml", &t, &BTreeMap::new())
            .unwrap()
            .with_draws(&draws);
        assert_eq!(r.pow2("bus.x", 1..=1024).unwrap(), 128);
        assert_eq!(r.into_records()[0].value, "128");
        let draws = BTreeMap::from([("bus.y".to_string(), toml::Value::Integer(1))]);
        let mut r = ParamReader::new("p.toml", &t, &BTreeMap::new())
            .unwrap()
            .with_draws(&draws);
        r.pow2("bus.x", 1..=1024).unwrap();
        r.choice("bus.k", &["a", "b"]).unwrap();
        let err = r.refuse_unread().unwrap_err().to_string();
        assert!(err.contains("bus.y"), "{err}");
    }

    #[test]
    fn a_missing_key_names_an_unread_key_spelt_nearly_the_same() {
        let t = table("[link]\nlanez = { value = 8, source = \"spec\" }\nwidth = 4\n");
        let mut r = ParamReader::new("p.toml", &t, &BTreeMap::new()).unwrap();
        let err = r.u64("link.lanes", 1..=32).unwrap_err().to_string();
        assert!(
            err.contains("missing field `link.lanes`")
                && err.contains("the file has `lanez`: a typo?"),
            "{err}"
        );
        // Far from every key beside it: no guess.
        let err = r.u64("link.speed", 1..=32).unwrap_err().to_string();
        assert!(!err.contains("typo"), "{err}");
        assert_eq!(edit_distance("lanes", "lanez"), 1);
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
