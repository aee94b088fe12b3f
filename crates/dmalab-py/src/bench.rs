//! `bench_iova_group`: the cells of the allocator benchmark for one workload and thread count,
//! run with the GIL released.

use dmalab_bench::BenchOptions;
use pyo3::prelude::*;

use crate::errors::bench_err;
use crate::gil::without_gil;

/// The quick or full options with a workload seed and a domain width.
fn options(quick: bool, seed: u64, address_bits: u32) -> BenchOptions {
    BenchOptions {
        seed,
        address_bits,
        ..if quick {
            BenchOptions::quick()
        } else {
            BenchOptions::full()
        }
    }
}

/// Run every allocator in `allocators` on `workload` with `threads` threads, their passes
/// interleaved (see `dmalab_bench::run_group`); returns one record per allocator, as JSON text.
#[pyfunction]
#[pyo3(signature = (allocators, workload, threads, *, quick = true, seed = 1, address_bits = 36))]
fn bench_iova_group(
    py: Python<'_>,
    allocators: Vec<String>,
    workload: String,
    threads: usize,
    quick: bool,
    seed: u64,
    address_bits: u32,
) -> PyResult<Vec<String>> {
    let opts = options(quick, seed, address_bits);
    let names: Vec<&str> = allocators.iter().map(String::as_str).collect();
    let records = without_gil(py, || {
        dmalab_bench::run_group(&names, &workload, threads, &opts)
    })
    .map_err(bench_err)?;
    records
        .iter()
        .map(|r| {
            serde_json::to_string(r).map_err(|e| crate::errors::BenchError::new_err(e.to_string()))
        })
        .collect()
}

/// The address widths `workload` runs in with `threads` threads and workload seed `seed`, as
/// (narrowest, widest); `bench_iova_group` refuses any other.
#[pyfunction]
#[pyo3(signature = (workload, threads, *, seed = 1))]
fn bench_address_bits(workload: &str, threads: usize, seed: u64) -> PyResult<(u32, u32)> {
    let opts = BenchOptions {
        seed,
        ..BenchOptions::quick()
    };
    let valid = dmalab_bench::address_bits_range(workload, threads, &opts).map_err(bench_err)?;
    Ok((*valid.start(), *valid.end()))
}

/// Names of the allocators and workloads the benchmark knows.
#[pyfunction]
fn bench_names() -> (Vec<String>, Vec<&'static str>) {
    (
        dmalab_bench::allocator_names(),
        dmalab_bench::WORKLOADS.to_vec(),
    )
}

/// The cost of one latency timestamp pair, in ns (reported, never subtracted).
#[pyfunction]
fn timer_overhead_ns() -> f64 {
    dmalab_bench::timer_overhead_ns()
}

/// Measure this machine's memcpy and fit the copy-cost model; returns JSON.
#[pyfunction]
#[pyo3(signature = (*, quick = false))]
fn calibrate_copy(py: Python<'_>, quick: bool) -> PyResult<String> {
    let cal = without_gil(py, || dmalab_bench::copy::calibrate(quick));
    serde_json::to_string(&cal).map_err(|e| crate::errors::BenchError::new_err(e.to_string()))
}

pub(crate) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(calibrate_copy, m)?)?;
    m.add_function(wrap_pyfunction!(bench_iova_group, m)?)?;
    m.add_function(wrap_pyfunction!(bench_names, m)?)?;
    m.add_function(wrap_pyfunction!(bench_address_bits, m)?)?;
    m.add_function(wrap_pyfunction!(timer_overhead_ns, m)?)?;
    Ok(())
}
