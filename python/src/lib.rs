//! `stallscope._native`: the facade's [`analyze`](stallscope::analyze::analyze) and
//! [`tables`](stallscope::tables::tables) for Python. The report crosses as its JSON
//! document (`stallscope.report/1`, turned into objects by the Python layer); tables cross
//! as Arrow record batches through the Arrow C data interface into `pyarrow` (no copy of
//! the columns, no JSON). The fleet's steps ([`stallscope::fleet`]) are here one by one, so
//! that `stallscope.fleet.analyze_many` can ship each trace to a Dask worker.

use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyList;

use arrow_pyarrow::ToPyArrow;
use std::path::PathBuf;

use stallscope::analyze::{analyze, parse_time_range, AnalyzeError, AnalyzeOptions};
use stallscope::fleet;
use stallscope::tables::{tables, RecordBatch, Table};

pyo3::create_exception!(
    _native,
    StallscopeError,
    PyException,
    "An input could not be read (file, offset or line, expected vs found) or an option is wrong."
);

fn err(e: AnalyzeError) -> PyErr {
    StallscopeError::new_err(e.to_string())
}

fn options(files: Vec<String>, time: Option<&str>) -> PyResult<AnalyzeOptions> {
    let mut o = AnalyzeOptions::new(files);
    o.time = time.map(parse_time_range).transpose().map_err(err)?;
    Ok(o)
}

/// The analysis report of `files` as its JSON document.
#[pyfunction]
#[pyo3(signature = (files, select=None, ignore=None, sets=Vec::new(), time=None, kallsyms=None))]
fn analyze_json(
    py: Python<'_>,
    files: Vec<String>,
    select: Option<String>,
    ignore: Option<String>,
    sets: Vec<String>,
    time: Option<String>,
    kallsyms: Option<String>,
) -> PyResult<String> {
    let mut o = options(files, time.as_deref())?;
    o.select_detectors(select.as_deref(), ignore.as_deref(), &sets)
        .map_err(err)?;
    o.kallsyms = kallsyms;
    let report = py.detach(|| analyze(&o)).map_err(err)?;
    let mut out = Vec::new();
    stallscope::report::json::write(&mut out, &report)
        .map_err(|e| StallscopeError::new_err(e.to_string()))?;
    String::from_utf8(out).map_err(|e| StallscopeError::new_err(e.to_string()))
}

/// Table `name` of `files` as a `pyarrow.Table`.
#[pyfunction]
#[pyo3(signature = (files, name, time=None))]
fn table<'py>(
    py: Python<'py>,
    files: Vec<String>,
    name: &str,
    time: Option<String>,
) -> PyResult<Bound<'py, PyAny>> {
    let t = Table::from_name(name).ok_or_else(|| {
        let names: Vec<&str> = Table::ALL.iter().map(|t| t.name()).collect();
        StallscopeError::new_err(format!(
            "unknown table {name:?}; expected one of {}",
            names.join(", ")
        ))
    })?;
    let o = options(files, time.as_deref())?;
    let mut batches: Vec<RecordBatch> = Vec::new();
    py.detach(|| {
        tables(&o, &[t], |_, b| {
            batches.push(b);
            Ok(())
        })
    })
    .map_err(err)?;
    let schema = t.schema().as_ref().to_pyarrow(py)?;
    let py_batches = PyList::empty(py);
    for b in &batches {
        py_batches.append(b.to_pyarrow(py)?)?;
    }
    let pa = py.import("pyarrow")?;
    pa.getattr("Table")?
        .call_method1("from_batches", (py_batches, schema))
}

fn table_list(names: Option<Vec<String>>) -> PyResult<Vec<Table>> {
    match names {
        None => Ok(fleet::default_tables()),
        Some(names) => names
            .iter()
            .map(|n| {
                Table::from_name(n)
                    .ok_or_else(|| StallscopeError::new_err(format!("unknown table {n:?}")))
            })
            .collect(),
    }
}

fn json_err(e: serde_json::Error) -> PyErr {
    StallscopeError::new_err(e.to_string())
}

/// The fleet's traces: `(trace_id, file)` for paths and glob patterns, sorted.
#[pyfunction]
fn fleet_plan(inputs: Vec<String>) -> PyResult<Vec<(u32, String)>> {
    Ok(fleet::plan(&inputs)
        .map_err(err)?
        .into_iter()
        .map(|t| (t.trace_id, t.file))
        .collect())
}

/// Makes the dataset's directories (an earlier fleet dataset there is removed).
#[pyfunction]
#[pyo3(signature = (out, tables=None))]
fn fleet_prepare(out: PathBuf, tables: Option<Vec<String>>) -> PyResult<()> {
    fleet::prepare(&out, &table_list(tables)?).map_err(err)
}

/// Analyzes one trace into its part files; the outcome as JSON (never raises for a bad
/// trace: the outcome's `error` says why).
#[pyfunction]
#[pyo3(signature = (trace_id, file, out, tables=None))]
fn fleet_trace(
    py: Python<'_>,
    trace_id: u32,
    file: String,
    out: PathBuf,
    tables: Option<Vec<String>>,
) -> PyResult<String> {
    let tables = table_list(tables)?;
    let trace = fleet::FleetTrace { trace_id, file };
    let outcome = py.detach(|| fleet::analyze_trace(&trace, &out, &tables));
    serde_json::to_string(&outcome).map_err(json_err)
}

/// Writes `traces`, `errors` and `summary.json` from the outcomes (JSON); the summary.
#[pyfunction]
#[pyo3(signature = (out, outcomes, tables=None))]
fn fleet_finish(
    py: Python<'_>,
    out: PathBuf,
    outcomes: Vec<String>,
    tables: Option<Vec<String>>,
) -> PyResult<String> {
    let tables = table_list(tables)?;
    let outcomes = outcomes
        .iter()
        .map(|o| serde_json::from_str(o))
        .collect::<Result<Vec<fleet::TraceOutcome>, _>>()
        .map_err(json_err)?;
    let summary = py
        .detach(|| fleet::finish(&out, &tables, outcomes))
        .map_err(err)?;
    serde_json::to_string(&summary).map_err(json_err)
}

/// The whole fleet on this machine's threads; the summary as JSON.
#[pyfunction]
#[pyo3(signature = (inputs, out, tables=None, jobs=None))]
fn fleet_run(
    py: Python<'_>,
    inputs: Vec<String>,
    out: PathBuf,
    tables: Option<Vec<String>>,
    jobs: Option<usize>,
) -> PyResult<String> {
    let mut options = fleet::FleetOptions::new(inputs, out);
    options.tables = table_list(tables)?;
    if let Some(j) = jobs {
        options.jobs = j.max(1);
    }
    let summary = py.detach(|| fleet::run(&options)).map_err(err)?;
    serde_json::to_string(&summary).map_err(json_err)
}

/// The JSON Schema of the report (`stallscope schema report`): the package's report
/// types are made from it.
#[pyfunction]
fn report_schema() -> PyResult<String> {
    serde_json::to_string(&stallscope::model::report::report_schema()).map_err(json_err)
}

/// The table names.
#[pyfunction]
fn table_names() -> Vec<&'static str> {
    Table::ALL.iter().map(|t| t.name()).collect()
}

/// The native module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("StallscopeError", m.py().get_type::<StallscopeError>())?;
    m.add_function(wrap_pyfunction!(analyze_json, m)?)?;
    m.add_function(wrap_pyfunction!(table, m)?)?;
    m.add_function(wrap_pyfunction!(table_names, m)?)?;
    m.add_function(wrap_pyfunction!(report_schema, m)?)?;
    m.add_function(wrap_pyfunction!(fleet_plan, m)?)?;
    m.add_function(wrap_pyfunction!(fleet_prepare, m)?)?;
    m.add_function(wrap_pyfunction!(fleet_trace, m)?)?;
    m.add_function(wrap_pyfunction!(fleet_finish, m)?)?;
    m.add_function(wrap_pyfunction!(fleet_run, m)?)?;
    Ok(())
}
