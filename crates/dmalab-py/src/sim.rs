//! Platforms, traces, scenarios, the copy models and `reproduce`: thin wrappers that return
//! Python objects (dicts and lists of plain values, described by `_native.pyi`).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

use dmalab_sim::bus::hints::{HintChange, Mapping};
use dmalab_sim::bus::trace::{Direction, Trace};
use dmalab_sim::claims;
use dmalab_sim::config::device;
use dmalab_sim::config::params::Span;
use dmalab_sim::config::platform::{Draws, Platform};
use dmalab_sim::config::scenario::{self, Scenario};
use dmalab_sim::error::from_json;
use dmalab_sim::progress::Progress;
use dmalab_sim::run::space;
use dmalab_sim::units::BusAddr;
use dmalab_sim::workload::alias;
use dmalab_sim::workload::copybreak as copy_break;
use dmalab_sim::workload::devdma;
use dmalab_sim::workload::mapbench;
use dmalab_sim::workload::nic_rx;
use dmalab_sim::workload::nic_tx;
use dmalab_sim::workload::ratecheck;
use dmalab_sim::workload::scsi_tx;
use dmalab_sim::workload::synccopy;
use dmalab_sim::SimError;
use pyo3::prelude::*;
use serde_json::json;

use crate::convert::{from_py, to_py};
use crate::errors::{sim_err, ScenarioError};
use crate::gil::{interruptible, without_gil};

fn trace_value(p: &Platform, t: &Trace) -> PyResult<serde_json::Value> {
    let mut value = serde_json::to_value(t).map_err(|e| ScenarioError::new_err(e.to_string()))?;
    value["platform"] = json!(p.name);
    value["text"] = json!(t.to_string());
    Ok(value)
}

fn load(platform: &str, choices: Option<BTreeMap<String, String>>) -> PyResult<Platform> {
    Platform::load(platform, &choices.unwrap_or_default()).map_err(sim_err)
}

/// `platform` with `draws` (a dict of dotted path to value, as `platform_draws` gives) read in
/// place of its files' values.
fn load_drawn(
    platform: &str,
    choices: Option<BTreeMap<String, String>>,
    draws: Option<&Bound<'_, PyAny>>,
) -> PyResult<Platform> {
    let d = draws_from_py(draws)?;
    Platform::load_drawn(platform, &choices.unwrap_or_default(), &d).map_err(sim_err)
}

/// Draws from Python: a dict of dotted parameter path to an integer or a string.
fn draws_from_py(draws: Option<&Bound<'_, PyAny>>) -> PyResult<Draws> {
    let Some(obj) = draws else {
        return Ok(Draws::new());
    };
    match toml::Value::try_from(from_py(obj, "draws")?) {
        Ok(toml::Value::Table(t)) => Ok(t.into_iter().collect()),
        _ => Err(ScenarioError::new_err(
            "draws: a dict of parameter paths to values, such as {\"device_dma.contexts\": 32}",
        )),
    }
}

/// For each row of `design` (one quantile in `[0, 1)` per name of `fields`), the value of
/// each field at that quantile of its span on `platform`: what `draws` takes. The span is
/// what is known of it (a fitted parameter's `fit_range`, otherwise its `range`), or with
/// `physical` its `range` alone, as if no fit had been made.
#[pyfunction]
#[pyo3(signature = (platform, fields, design, choices = None, physical = false))]
fn platform_draws(
    py: Python<'_>,
    platform: &str,
    fields: Vec<String>,
    design: Vec<Vec<f64>>,
    choices: Option<BTreeMap<String, String>>,
    physical: bool,
) -> PyResult<Py<PyAny>> {
    let p = load(platform, choices)?;
    let span = if physical {
        Span::Physical
    } else {
        Span::Known
    };
    let draws = p.draws(&fields, &design, span).map_err(sim_err)?;
    let out: Vec<serde_json::Value> = draws
        .iter()
        .map(|d| serde_json::to_value(d).map_err(|e| ScenarioError::new_err(e.to_string())))
        .collect::<PyResult<_>>()?;
    to_py(py, &out)
}

/// The names of the built-in platforms.
#[pyfunction]
fn platform_names() -> Vec<&'static str> {
    Platform::builtin_names()
}

/// The TOML text of a built-in platform.
#[pyfunction]
fn platform_text(name: &str) -> PyResult<&'static str> {
    Platform::builtin_text(name).map_err(sim_err)
}

/// The names of the built-in devices (for a host's PCIe slot).
#[pyfunction]
fn device_names() -> Vec<&'static str> {
    device::builtin_device_names()
}

/// A copy engine's own keys (a device file's `[copy_engine]`, read into the host's
/// `[dma_engine]`), as the reader knows them.
#[pyfunction]
fn engine_keys() -> Vec<&'static str> {
    device::ENGINE_KEYS.to_vec()
}

/// The TOML text of a built-in device (to derive a device file from it).
#[pyfunction]
fn device_text(name: &str) -> PyResult<&'static str> {
    device::builtin_device_text(name).map_err(sim_err)
}

/// A device's name, description, kind (`pcie` or `copy-engine`) and whether its file states a
/// rating (`rated`: `yes` or `no`): a built-in device or a device file.
#[pyfunction]
fn device_info(py: Python<'_>, device: &str) -> PyResult<Py<PyAny>> {
    let table = device::load_device(device).map_err(sim_err)?;
    let text = |key: &str| {
        table
            .get(key)
            .and_then(toml::Value::as_str)
            .unwrap_or_default()
    };
    to_py(
        py,
        &json!({
            "name": text("name"),
            "description": text("description"),
            "kind": device::device_kind(&table).name(),
            "rated": if table.contains_key("device_rating") { "yes" } else { "no" },
        }),
    )
}

/// A platform's description, bus, options in force and every parameter with its provenance.
#[pyfunction]
#[pyo3(signature = (platform, choices = None))]
fn platform_info(
    py: Python<'_>,
    platform: &str,
    choices: Option<BTreeMap<String, String>>,
) -> PyResult<Py<PyAny>> {
    let p = load(platform, choices)?;
    let bus = p.bus.name();
    to_py(
        py,
        &json!({
            "name": p.name,
            "description": p.description,
            "bus": bus,
            "choices": p.picks,
            "params": p.params,
        }),
    )
}

/// The analyzer's trace of one DMA transfer (with the printed text under `text`).
#[pyfunction]
#[pyo3(signature = (
    platform, direction, address, length, choices = None, mapping = "streaming", hints = None,
    pio_writes_ns = None
))]
#[allow(clippy::too_many_arguments)]
fn trace(
    py: Python<'_>,
    platform: &str,
    direction: &str,
    address: u64,
    length: u64,
    choices: Option<BTreeMap<String, String>>,
    mapping: &str,
    hints: Option<Bound<'_, PyAny>>,
    pio_writes_ns: Option<Vec<u64>>,
) -> PyResult<Py<PyAny>> {
    let p = load(platform, choices)?;
    let dir = Direction::parse(direction).ok_or_else(|| {
        sim_err(SimError::InvalidArgument {
            field: "direction".into(),
            value: direction.into(),
            valid: "read (tx) or write (rx)".into(),
        })
    })?;
    let mapping = match mapping {
        "streaming" => Mapping::Streaming,
        "consistent" => Mapping::Consistent,
        other => {
            return Err(sim_err(SimError::InvalidArgument {
                field: "mapping".into(),
                value: other.into(),
                valid: "streaming, consistent".into(),
            }))
        }
    };
    let change: HintChange = match hints {
        Some(obj) => from_json("hints", from_py(&obj, "hints")?).map_err(sim_err)?,
        None => HintChange::default(),
    };
    let pio = pio_writes_ns.unwrap_or_default();
    let t = p
        .trace_hinted(dir, BusAddr(address), length, mapping, &change, &pio)
        .map_err(sim_err)?;
    to_py(py, &trace_value(&p, &t)?)
}

/// The trace of a trace scenario (a built-in name or a TOML file), with `choices` picked on top
/// of the scenario's own; the scenario's name and description are added.
#[pyfunction]
#[pyo3(signature = (scenario, choices = None))]
fn trace_scenario(
    py: Python<'_>,
    scenario: &str,
    choices: Option<BTreeMap<String, String>>,
) -> PyResult<Py<PyAny>> {
    let mut sc = scenario::load(scenario).map_err(sim_err)?;
    sc.choices.extend(choices.unwrap_or_default());
    let (p, t) = sc.trace().map_err(sim_err)?;
    let mut value = trace_value(&p, &t)?;
    value["scenario"] = json!(sc.name);
    value["description"] = json!(sc.description);
    to_py(py, &value)
}

/// Run the claims named in `ids` (all when empty): `{"claims": [...], "platforms": [...]}`.
#[pyfunction]
#[pyo3(signature = (ids = None))]
fn reproduce(py: Python<'_>, ids: Option<Vec<String>>) -> PyResult<Py<PyAny>> {
    let ids = ids.unwrap_or_default();
    let progress = Progress::new();
    let out = interruptible(py, &progress, || {
        progress.within(|| {
            let refs: Vec<&str> = ids.iter().map(String::as_str).collect();
            let results = claims::reproduce(&refs)?;
            let platforms = claims::provenance(&results)?;
            Ok::<_, SimError>(json!({ "claims": results, "platforms": platforms }))
        })
    })?
    .map_err(sim_err)?;
    to_py(py, &out)
}

/// Claim `id`, case `case`, once per entry of `draws` (each a dict of parameter path to value
/// for the claim's platform, as `platform_draws` gives): per draw `{"modelled": ...,
/// "passed": ...}`, or `{"error": "..."}` where the model refuses it. Draws run on every core.
#[pyfunction]
fn reproduce_drawn(
    py: Python<'_>,
    id: &str,
    case: &str,
    draws: Vec<Bound<'_, PyAny>>,
) -> PyResult<Py<PyAny>> {
    let parsed = draws
        .iter()
        .map(|d| draws_from_py(Some(d)))
        .collect::<PyResult<Vec<_>>>()?;
    let progress = Progress::new();
    let out = interruptible(py, &progress, || {
        par_map(&parsed, |d| {
            match progress.within(|| claims::reproduce_drawn(id, case, d)) {
                Ok(r) => json!({ "modelled": r.modelled, "passed": r.passed }),
                Err(e) => json!({ "error": e.to_string() }),
            }
        })
    })?;
    to_py(py, &out)
}

/// `bench dma`: measure each point (a dict with `direction`, `size_bytes`, `offset_bytes`,
/// `window_bytes`, `access`, `memory` and `cache`) on `platform`; one record per point.
#[pyfunction]
#[pyo3(signature = (platform, points, choices = None, draws = None))]
fn bench_dma(
    py: Python<'_>,
    platform: &str,
    points: Vec<Bound<'_, PyAny>>,
    choices: Option<BTreeMap<String, String>>,
    draws: Option<&Bound<'_, PyAny>>,
) -> PyResult<Py<PyAny>> {
    let p = load_drawn(platform, choices, draws)?;
    let parsed = dma_points(&points)?;
    let progress = Progress::new();
    // Points are independent: they run on every core, each on its own idle path, so the
    // records are the same on any number of cores.
    let records = interruptible(py, &progress, || {
        let model = devdma::DeviceDma::new(&p)?;
        progress.start(parsed.len() as u64);
        let done = AtomicU64::new(0);
        // Every point runs (a bad one does not stop the others), so that the error returned
        // is always the first bad point's, whatever the cores' timing.
        par_map(&parsed, |point| {
            progress.check()?;
            let r = model.measure(point);
            progress.set(done.fetch_add(1, Ordering::Relaxed) + 1);
            r
        })
        .into_iter()
        .collect::<dmalab_sim::Result<Vec<_>>>()
    })?
    .map_err(sim_err)?;
    to_py(py, &records)
}

/// `bench dma`'s points from Python dicts; an error names the point and its field.
fn dma_points(points: &[Bound<'_, PyAny>]) -> PyResult<Vec<devdma::DmaPoint>> {
    points
        .iter()
        .enumerate()
        .map(|(i, obj)| {
            let value = from_py(obj, &format!("points[{i}]"))?;
            devdma::point_from_value(value).map_err(sim_err)
        })
        .collect()
}

/// `bench dma` over drawn platforms: for each row of `design` (one quantile in `[0, 1)` per
/// name of `fields`), `platform` with those parameters drawn from their spans (as
/// `platform_draws` takes them), and the
/// records of every point on it. One entry per row, in order: `{"records": [...]}`, or
/// `{"error": "..."}` where the model refuses that combination. Rows run on every core.
/// `figures`: keep only these keys of each record (an interval needs no breakdown, and
/// converting whole records is most of a large sweep's cost outside the model).
#[pyfunction]
#[pyo3(signature = (platform, points, fields, design, choices = None, figures = None))]
fn bench_dma_drawn(
    py: Python<'_>,
    platform: &str,
    points: Vec<Bound<'_, PyAny>>,
    fields: Vec<String>,
    design: Vec<Vec<f64>>,
    choices: Option<BTreeMap<String, String>>,
    figures: Option<Vec<String>>,
) -> PyResult<Py<PyAny>> {
    let picks = choices.unwrap_or_default();
    let nominal = Platform::load(platform, &picks).map_err(sim_err)?;
    let parsed = dma_points(&points)?;
    let draws = nominal
        .draws(&fields, &design, Span::Known)
        .map_err(sim_err)?;
    let progress = Progress::new();
    let out = interruptible(py, &progress, || {
        par_map(&draws, |d| {
            let records = Platform::load_drawn(platform, &picks, d)
                .and_then(|p| devdma::sweep(&p, &parsed, &progress.child()));
            match records {
                Ok(r) => match &figures {
                    Some(keys) => {
                        let kept: Vec<serde_json::Value> = r
                            .iter()
                            .map(|rec| {
                                let whole = json!(rec);
                                keys.iter()
                                    .map(|k| (k.clone(), whole.get(k).cloned().unwrap_or_default()))
                                    .collect::<serde_json::Map<_, _>>()
                                    .into()
                            })
                            .collect();
                        json!({ "records": kept })
                    }
                    None => json!({ "records": r }),
                },
                Err(e) => json!({ "error": e.to_string() }),
            }
        })
    })?;
    to_py(py, &out)
}

/// `f` of each item, on every core the machine offers, in the items' order (so the result is
/// the same on any number of cores).
fn par_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let workers = std::thread::available_parallelism()
        .map_or(1, usize::from)
        .clamp(1, items.len().max(1));
    let mut slots: Vec<Option<R>> = (0..items.len()).map(|_| None).collect();
    std::thread::scope(|s| {
        let f = &f;
        let handles: Vec<_> = (0..workers)
            .map(|w| {
                s.spawn(move || {
                    (w..items.len())
                        .step_by(workers)
                        .map(|i| (i, f(&items[i])))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        for h in handles {
            for (i, r) in h.join().expect("a worker of par_map panicked") {
                slots[i] = Some(r);
            }
        }
    });
    slots.into_iter().flatten().collect()
}

/// The datasheet check of `platform`'s device (`platforms --check`): one line per direction
/// of its rating, and a note where its link trains down.
#[pyfunction]
#[pyo3(signature = (platform, choices = None))]
fn device_check(
    py: Python<'_>,
    platform: &str,
    choices: Option<BTreeMap<String, String>>,
) -> PyResult<Py<PyAny>> {
    let p = load(platform, choices)?;
    let lines = without_gil(py, || ratecheck::check(&p)).map_err(sim_err)?;
    to_py(py, &lines)
}

/// Whether `name` is a device (a built-in device or a device file) rather than a platform.
#[pyfunction]
fn is_device(name: &str) -> bool {
    device::builtin_device_names().contains(&name)
        || (std::path::Path::new(name).is_file() && device::load_device(name).is_ok())
}

/// `bench map`: N CPUs mapping and unmapping on one IOMMU domain of `platform` (`bench` is a
/// dict with any of `threads`, `granule_pages`, `dma_bits`, `direction`, `flush`, `allocator`,
/// `maps_per_thread`), its progress written to `progress`; returns the record.
#[pyfunction]
#[pyo3(signature = (platform, bench, choices = None, progress = None, draws = None))]
fn bench_map(
    py: Python<'_>,
    platform: &str,
    bench: &Bound<'_, PyAny>,
    choices: Option<BTreeMap<String, String>>,
    progress: Option<&PyProgress>,
    draws: Option<&Bound<'_, PyAny>>,
) -> PyResult<Py<PyAny>> {
    let progress = progress.map(|p| p.inner.clone()).unwrap_or_default();
    let p = load_drawn(platform, choices, draws)?;
    let b: mapbench::MapBench = from_json("bench", from_py(bench, "bench")?).map_err(sim_err)?;
    let out =
        interruptible(py, &progress, || mapbench::run(&p, &b, &progress))?.map_err(sim_err)?;
    to_py(py, &out)
}

/// `bench copy`: one synchronous copy of each size at each named placement on `platform`, by
/// the CPU and by the copy engine; one record per (size, placement).
#[pyfunction]
#[pyo3(signature = (platform, sizes, placements, choices = None, draws = None))]
fn bench_copy(
    py: Python<'_>,
    platform: &str,
    sizes: Vec<u64>,
    placements: Vec<String>,
    choices: Option<BTreeMap<String, String>>,
    draws: Option<&Bound<'_, PyAny>>,
) -> PyResult<Py<PyAny>> {
    let p = load_drawn(platform, choices, draws)?;
    let records = without_gil(py, || synccopy::sweep(&p, &sizes, &placements)).map_err(sim_err)?;
    to_py(py, &records)
}

/// A NIC's send stream through a hinted PCI bridge under the firmware's hints and under each
/// single change of them (`dmalab hints`).
#[pyfunction]
#[pyo3(signature = (platform, stream, choices = None))]
fn nic_hints(
    py: Python<'_>,
    platform: &str,
    stream: Bound<'_, PyAny>,
    choices: Option<BTreeMap<String, String>>,
) -> PyResult<Py<PyAny>> {
    json_report(
        py,
        platform,
        ("stream", &stream),
        choices,
        |p, sc: &nic_tx::NicTxScenario| {
            let (bus, firmware, nic) = nic_tx::parts(p)?;
            nic_tx::hint_gains(bus, nic, &firmware, sc)
        },
    )
}

/// A SCSI controller's write stream through a hinted PCI bridge under the firmware's hints and
/// under each single change of them (`dmalab hints --workload scsi`).
#[pyfunction]
#[pyo3(signature = (platform, choices = None))]
fn scsi_hints(
    py: Python<'_>,
    platform: &str,
    choices: Option<BTreeMap<String, String>>,
) -> PyResult<Py<PyAny>> {
    let p = load(platform, choices)?;
    let out = without_gil(py, || {
        let (bus, firmware, params) = scsi_tx::parts(&p)?;
        scsi_tx::hint_gains(bus, params, &firmware)
    })
    .map_err(sim_err)?;
    to_py(py, &out)
}

/// `report` of the platform and the input `what` read from Python (errors name it), run
/// without the GIL.
fn json_report<S, R>(
    py: Python<'_>,
    platform: &str,
    (what, input): (&str, &Bound<'_, PyAny>),
    choices: Option<BTreeMap<String, String>>,
    report: impl FnOnce(&Platform, &S) -> dmalab_sim::error::Result<R> + Send,
) -> PyResult<Py<PyAny>>
where
    S: serde::de::DeserializeOwned + Sync,
    R: serde::Serialize + Send,
{
    let p = load(platform, choices)?;
    let sc: S = from_json(what, from_py(input, what)?).map_err(sim_err)?;
    let out = without_gil(py, || report(&p, &sc)).map_err(sim_err)?;
    to_py(py, &out)
}

/// A NIC's receive stream over a PCIe link with no TLP attributes and with each single one
/// set (Relaxed Ordering, No Snoop, ID-based Ordering; `dmalab hints` on a PCIe platform).
#[pyfunction]
#[pyo3(signature = (platform, stream, choices = None))]
fn pcie_hints(
    py: Python<'_>,
    platform: &str,
    stream: Bound<'_, PyAny>,
    choices: Option<BTreeMap<String, String>>,
) -> PyResult<Py<PyAny>> {
    json_report(
        py,
        platform,
        ("stream", &stream),
        choices,
        |p, sc: &nic_rx::NicRxScenario| {
            let (link, rc, engine) = nic_rx::parts(p)?;
            nic_rx::attribute_gains(link, &rc, engine, sc)
        },
    )
}

/// One cell of the IOTLB aliasing what-if (`dmalab iotlb-alias`): concurrent DMA streams
/// through the real allocator and a set-associative IOTLB of the cell's geometry.
#[pyfunction]
#[pyo3(signature = (platform, point, choices = None, progress = None))]
fn iotlb_alias(
    py: Python<'_>,
    platform: &str,
    point: Bound<'_, PyAny>,
    choices: Option<BTreeMap<String, String>>,
    progress: Option<&PyProgress>,
) -> PyResult<Py<PyAny>> {
    let progress = progress.map(|p| p.inner.clone()).unwrap_or_default();
    let p = load(platform, choices)?;
    let pt: alias::AliasPoint = from_json("point", from_py(&point, "point")?).map_err(sim_err)?;
    let out = interruptible(py, &progress, || alias::run(&p, &pt, &progress))?.map_err(sim_err)?;
    to_py(py, &out)
}

/// The ids `reproduce` knows.
#[pyfunction]
fn claim_ids() -> PyResult<Vec<String>> {
    claims::ids().map_err(sim_err)
}

/// Copy-break on a platform: both policies per frame, the winner, where the costs cross.
#[pyfunction]
#[pyo3(signature = (platform, frame_bytes = None, choices = None))]
fn copybreak(
    py: Python<'_>,
    platform: &str,
    frame_bytes: Option<u64>,
    choices: Option<BTreeMap<String, String>>,
) -> PyResult<Py<PyAny>> {
    let p = load(platform, choices)?;
    let out = without_gil(py, || match frame_bytes {
        Some(n) => copy_break::compare(&p, n).map(|c| json!({ "point": c })),
        None => copy_break::answer(&p).map(|a| json!({ "answer": a })),
    })
    .map_err(sim_err)?;
    to_py(py, &out)
}

/// Run a scenario (a built-in name or a TOML file, with `overrides` merged into it as a table of
/// its keys; or, with `spec`, a dict of the same keys named `scenario`), with `choices` picked on
/// top of the scenario's own and its progress
/// written to `progress`; returns the report,
/// with the wall time and simulated DMA transfers per wall second added, and with
/// `timeline_limit` the run's timeline (`timeline`: its slices as [track, name, start_ps,
/// duration_ps], the limit and how many were dropped past it).
#[pyfunction]
#[pyo3(signature = (
    scenario, spec = None, choices = None, progress = None, overrides = None, timeline_limit = None,
    draws = None
))]
#[allow(clippy::too_many_arguments)]
fn run_scenario(
    py: Python<'_>,
    scenario: &str,
    spec: Option<&Bound<'_, PyAny>>,
    choices: Option<BTreeMap<String, String>>,
    progress: Option<&PyProgress>,
    overrides: Option<&Bound<'_, PyAny>>,
    timeline_limit: Option<usize>,
    draws: Option<&Bound<'_, PyAny>>,
) -> PyResult<Py<PyAny>> {
    let progress = progress.map(|p| p.inner.clone()).unwrap_or_default();
    let mut sc = match spec {
        None => scenario::load_with(scenario, &overrides_table(overrides)?).map_err(sim_err)?,
        Some(obj) => {
            let value = from_py(obj, scenario)?;
            Scenario::from_value(scenario, value).map_err(sim_err)?
        }
    };
    sc.choices.extend(choices.unwrap_or_default());
    sc.draws = draws_from_py(draws)?;
    let limit = timeline_limit.unwrap_or(0);
    let (run, wall) = interruptible(py, &progress, || {
        let start = std::time::Instant::now();
        let r = sc.run_traced(&progress, limit);
        (r, start.elapsed().as_secs_f64())
    })?;
    let (report, timeline) = run.map_err(sim_err)?;
    let mut value =
        serde_json::to_value(&report).map_err(|e| ScenarioError::new_err(e.to_string()))?;
    value["wall_s"] = json!(wall);
    value["dma_transfers_per_wall_s"] = json!(report.dma_transfers as f64 / wall.max(1e-9));
    if timeline_limit.is_some() {
        let slices: Vec<_> = timeline
            .kept()
            .iter()
            .map(|s| json!([s.track.label(), s.name, s.start_ps.0, s.duration_ps.0]))
            .collect();
        value["timeline"] = json!({
            "slices": slices,
            "limit": timeline.limit(),
            "dropped": timeline.dropped(),
        });
    }
    to_py(py, &value)
}

/// `overrides` (a dict of scenario keys, or none) as a TOML table.
fn overrides_table(overrides: Option<&Bound<'_, PyAny>>) -> PyResult<toml::Table> {
    let Some(obj) = overrides else {
        return Ok(toml::Table::new());
    };
    let value = from_py(obj, "overrides")?;
    match toml::Value::try_from(value) {
        Ok(toml::Value::Table(t)) => Ok(t),
        _ => Err(ScenarioError::new_err(
            "overrides: a table of scenario keys, such as {\"workload\": {\"ios\": 1000}}",
        )),
    }
}

/// The smallest IOVA window at which a scenario (a built-in name or a file's path, with
/// `overrides` merged into it as a table of the scenario's keys) runs with no mapping refused,
/// and what its translation tables take; its probes counted on `progress`.
#[pyfunction]
#[pyo3(signature = (scenario, overrides = None, choices = None, progress = None))]
fn iova_space(
    py: Python<'_>,
    scenario: &str,
    overrides: Option<&Bound<'_, PyAny>>,
    choices: Option<BTreeMap<String, String>>,
    progress: Option<&PyProgress>,
) -> PyResult<Py<PyAny>> {
    let progress = progress.map(|p| p.inner.clone()).unwrap_or_default();
    let mut sc = scenario::load_with(scenario, &overrides_table(overrides)?).map_err(sim_err)?;
    sc.choices.extend(choices.unwrap_or_default());
    let out =
        interruptible(py, &progress, || space::smallest_space(&sc, &progress))?.map_err(sim_err)?;
    to_py(py, &out)
}

/// The names of the built-in scenarios that run workloads (`trace=False`) or trace one DMA
/// transfer (`trace=True`).
#[pyfunction]
#[pyo3(signature = (trace = false))]
fn scenario_names(trace: bool) -> Vec<&'static str> {
    scenario::builtin_names(trace)
}

/// The copy-time curve of a platform's CPU and copy engine (per-copy ns by length, local and
/// remote) and the two crossover lengths, as JSON.
#[pyfunction]
#[pyo3(signature = (platform, max_len = 65536, choices = None))]
fn copy_curve(
    py: Python<'_>,
    platform: &str,
    max_len: u64,
    choices: Option<BTreeMap<String, String>>,
) -> PyResult<Py<PyAny>> {
    use dmalab_sim::workload::copy::{crossover, curve, Placement};
    let p = load(platform, choices)?;
    let (cpu, engine) = p.copy_costs().map_err(sim_err)?;
    let local = crossover(cpu, engine, Placement::LOCAL, 64, max_len).map_err(sim_err)?;
    let remote = crossover(cpu, engine, Placement::ENGINE_REMOTE, 64, max_len).map_err(sim_err)?;
    to_py(
        py,
        &json!({
            "platform": p.name,
            "points": curve(cpu, engine, max_len),
            "crossover_local_bytes": local,
            "crossover_remote_bytes": remote,
        }),
    )
}

/// The vhost policy sweep (CPU only, engine only, the seed's thresholds, dmalab's planner) over
/// packet and mbuf sizes and placements, as JSON rows.
#[pyfunction]
#[pyo3(signature = (platform, packets = 20000, choices = None, progress = None))]
fn vhost_sweep(
    py: Python<'_>,
    platform: &str,
    packets: u64,
    choices: Option<BTreeMap<String, String>>,
    progress: Option<&PyProgress>,
) -> PyResult<Py<PyAny>> {
    let progress = progress.map(|p| p.inner.clone()).unwrap_or_default();
    let p = load(platform, choices)?;
    let (cpu, engine) = p.copy_costs().map_err(sim_err)?;
    let v = p.vhost().map_err(sim_err)?;
    let rows = interruptible(py, &progress, || {
        dmalab_sim::workload::vhost::sweep(cpu, engine, v, packets, &progress)
    })?
    .map_err(sim_err)?;
    to_py(py, &rows)
}

/// One run of the vhost backend on `platform` (with `draws` set over its parameters): a packet
/// of `packet_bytes` cut into mbufs of `mbuf_bytes`, each copy placed by `policy` (`cpu-only`,
/// `engine-only`, `threshold`: the seed's 2048 and 3072 B, or `planner`) at the named
/// `placement` (`local`, `engine-remote`, `min-remote`, `max-remote`). A host without a copy
/// engine runs `cpu-only` alone.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (platform, packet_bytes, mbuf_bytes, placement, policy, packets, choices = None, draws = None))]
fn vhost_run(
    py: Python<'_>,
    platform: &str,
    packet_bytes: u64,
    mbuf_bytes: u64,
    placement: &str,
    policy: &str,
    packets: u64,
    choices: Option<BTreeMap<String, String>>,
    draws: Option<&Bound<'_, PyAny>>,
) -> PyResult<Py<PyAny>> {
    use dmalab_sim::workload::vhost::{run_with, CopyPolicy, VhostScenario, SEED_THRESHOLD};
    let p = load_drawn(platform, choices, draws)?;
    let policy = match policy {
        "cpu-only" => CopyPolicy::CpuOnly,
        "engine-only" => CopyPolicy::EngineOnly,
        "threshold" => SEED_THRESHOLD,
        "planner" => CopyPolicy::Planner,
        other => {
            return Err(ScenarioError::new_err(format!(
                "policy: {other:?}; valid: cpu-only, engine-only, threshold, planner"
            )))
        }
    };
    let at = dmalab_sim::workload::copy::Placement::named(placement).map_err(sim_err)?;
    let cpu = p.cpu_copy().map_err(sim_err)?;
    let v = p.vhost().map_err(sim_err)?;
    let sc = VhostScenario {
        packet_bytes,
        mbuf_bytes,
        placement: at,
        second_engine: true,
        policy,
        packets,
    };
    let progress = Progress::new();
    let out = interruptible(py, &progress, || {
        run_with(cpu, p.dma_engine.as_ref(), v, sc, &progress)
    })?
    .map_err(sim_err)?;
    to_py(py, &out)
}

/// A run's progress, `(done, total)` operations: made by the caller, passed to
/// `run_scenario`, and polled from another thread while the run goes on.
#[pyclass(name = "Progress", module = "dmalab._native", frozen)]
#[derive(Default)]
struct PyProgress {
    inner: Progress,
}

#[pymethods]
impl PyProgress {
    #[new]
    fn new() -> Self {
        Self::default()
    }

    /// `(done, total)` operations (`total` is 0 until the run starts).
    fn get(&self) -> (u64, u64) {
        self.inner.get()
    }

    /// Ask the run to stop (a Ctrl-C seen by the caller): it raises `KeyboardInterrupt`
    /// within a few thousand operations.
    fn cancel(&self) {
        self.inner.cancel()
    }

    /// Whether :meth:`cancel` was called.
    fn cancelled(&self) -> bool {
        self.inner.cancelled()
    }
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyProgress>()?;
    m.add_function(wrap_pyfunction!(vhost_sweep, m)?)?;
    m.add_function(wrap_pyfunction!(vhost_run, m)?)?;
    m.add_function(wrap_pyfunction!(copy_curve, m)?)?;
    m.add_function(wrap_pyfunction!(run_scenario, m)?)?;
    m.add_function(wrap_pyfunction!(bench_dma_drawn, m)?)?;
    m.add_function(wrap_pyfunction!(platform_draws, m)?)?;
    m.add_function(wrap_pyfunction!(reproduce_drawn, m)?)?;
    m.add_function(wrap_pyfunction!(iova_space, m)?)?;
    m.add_function(wrap_pyfunction!(iotlb_alias, m)?)?;
    m.add_function(wrap_pyfunction!(scenario_names, m)?)?;
    m.add_function(wrap_pyfunction!(platform_names, m)?)?;
    m.add_function(wrap_pyfunction!(device_names, m)?)?;
    m.add_function(wrap_pyfunction!(engine_keys, m)?)?;
    m.add_function(wrap_pyfunction!(device_info, m)?)?;
    m.add_function(wrap_pyfunction!(device_check, m)?)?;
    m.add_function(wrap_pyfunction!(device_text, m)?)?;
    m.add_function(wrap_pyfunction!(is_device, m)?)?;
    m.add_function(wrap_pyfunction!(platform_info, m)?)?;
    m.add_function(wrap_pyfunction!(platform_text, m)?)?;
    m.add_function(wrap_pyfunction!(trace, m)?)?;
    m.add_function(wrap_pyfunction!(trace_scenario, m)?)?;
    m.add_function(wrap_pyfunction!(reproduce, m)?)?;
    m.add_function(wrap_pyfunction!(bench_dma, m)?)?;
    m.add_function(wrap_pyfunction!(bench_map, m)?)?;
    m.add_function(wrap_pyfunction!(bench_copy, m)?)?;
    m.add_function(wrap_pyfunction!(claim_ids, m)?)?;
    m.add_function(wrap_pyfunction!(copybreak, m)?)?;
    m.add_function(wrap_pyfunction!(nic_hints, m)?)?;
    m.add_function(wrap_pyfunction!(scsi_hints, m)?)?;
    m.add_function(wrap_pyfunction!(pcie_hints, m)?)?;
    Ok(())
}
