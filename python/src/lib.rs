//! `stallscope._native`: the facade's [`analyze`](stallscope::analyze::analyze) and
//! [`tables`](stallscope::tables::tables) for Python. The report crosses as its JSON
//! document (`stallscope.report/1`, turned into objects by the Python layer); tables cross
//! as Arrow record batches through the Arrow C data interface into `pyarrow` (no copy of
//! the columns, no JSON).

use pyo3::exceptions::PyException;
use pyo3::prelude::*;
use pyo3::types::PyList;

use arrow_pyarrow::ToPyArrow;
use stallscope::analyze::{analyze, parse_time_range, AnalyzeError, AnalyzeOptions};
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
    Ok(())
}
