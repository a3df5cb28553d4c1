//! fio `--output-format=json` results.
//!
//! ```text
//! { "fio version": "fio-3.33", …,
//!   "jobs": [ { "jobname": "w", …,
//!               "read":  { "io_bytes": 0, … },
//!               "write": { "io_bytes": 52428800, "iops": 12800.0, "bw": 51200,
//!                          "clat_ns": { "mean": 74000.1,
//!                                       "percentile": { "50.000000": 70144, "99.000000": 123392, … } },
//!                          "lat_ns": { "mean": 78000.3 }, … },
//!               "trim":  { … }, "usr_cpu": 3.1, "sys_cpu": 20.4, "ctx": 12000 } ] }
//! ```
//!
//! For every job and every direction (`read`, `write`, `trim`) that moved data
//! (`io_bytes > 0`), the metrics `JOB/DIR/iops` (IO/s), `JOB/DIR/bw` (KiB/s, fio's `bw`),
//! `JOB/DIR/clat_mean` / `clat_p50` / `clat_p99` (ns, completion latency) and
//! `JOB/DIR/lat_mean` (ns, total latency); per job `JOB/ctx` (context switches),
//! `JOB/usr_cpu` and `JOB/sys_cpu` (%). Jobs without `--group_reporting` repeat their name:
//! the second and later get `#2`, `#3`, … Text before the first `{` (fio prints warnings
//! there) is skipped; a missing field is counted in the file's data quality.

use serde_json::Value;
use stallscope_model::Problem;
use stallscope_read::ReadError;

use super::{MetricFile, MetricValue};

/// True when `head` looks like fio JSON.
pub fn is_fio_json(head: &str) -> bool {
    head.contains("\"fio version\"")
}

/// Parses fio JSON output.
pub fn parse(path: &str, text: &str) -> Result<MetricFile, ReadError> {
    let start = text.find('{').ok_or_else(|| {
        ReadError::new(path, None, "fio JSON output (a '{')", "no '{' in the file")
    })?;
    let doc: Value = serde_json::from_str(&text[start..]).map_err(|e| {
        ReadError::new(
            path,
            Some(stallscope_model::SpanPos::Line(
                e.line() as u64 + text[..start].lines().count() as u64,
            )),
            "fio JSON output",
            format!("invalid JSON: {e}"),
        )
    })?;
    let jobs = doc
        .get("jobs")
        .and_then(Value::as_array)
        .ok_or_else(|| ReadError::new(path, None, "a \"jobs\" array", "none"))?;
    let mut file = MetricFile::new(path, "fio-json");
    let mut names: Vec<String> = Vec::new();
    for job in jobs {
        let base = job
            .get("jobname")
            .and_then(Value::as_str)
            .unwrap_or("job")
            .to_string();
        let repeats = names.iter().filter(|n| **n == base).count();
        names.push(base.clone());
        let name = if repeats == 0 {
            base
        } else {
            format!("{base}#{}", repeats + 1)
        };
        let mut push = |metric: String, unit: &str, v: Option<f64>| match v {
            Some(value) => file.values.push(MetricValue {
                name: metric,
                unit: unit.to_string(),
                value,
                rel_se: None,
            }),
            None => file
                .quality
                .add(Problem::FioMissingField, 1, || format!("{path}: {metric}")),
        };
        for dir in ["read", "write", "trim"] {
            let Some(d) = job.get(dir) else {
                continue; // this fio has no such direction (old versions lack trim): nothing to read
            };
            if d.get("io_bytes").and_then(Value::as_u64).unwrap_or(0) == 0 {
                continue; // the direction did no I/O: no metrics for it (not a problem)
            }
            let num = |v: Option<&Value>| v.and_then(Value::as_f64);
            let clat = d.get("clat_ns");
            let pct = |p: &str| {
                num(clat
                    .and_then(|c| c.get("percentile"))
                    .and_then(|m| m.get(p)))
            };
            push(format!("{name}/{dir}/iops"), "IO/s", num(d.get("iops")));
            push(format!("{name}/{dir}/bw"), "KiB/s", num(d.get("bw")));
            push(
                format!("{name}/{dir}/clat_mean"),
                "ns",
                num(clat.and_then(|c| c.get("mean"))),
            );
            push(format!("{name}/{dir}/clat_p50"), "ns", pct("50.000000"));
            push(format!("{name}/{dir}/clat_p99"), "ns", pct("99.000000"));
            push(
                format!("{name}/{dir}/lat_mean"),
                "ns",
                num(d.get("lat_ns").and_then(|c| c.get("mean"))),
            );
        }
        push(
            format!("{name}/ctx"),
            "",
            job.get("ctx").and_then(Value::as_f64),
        );
        push(
            format!("{name}/usr_cpu"),
            "%",
            job.get("usr_cpu").and_then(Value::as_f64),
        );
        push(
            format!("{name}/sys_cpu"),
            "%",
            job.get("sys_cpu").and_then(Value::as_f64),
        );
    }
    if file.values.is_empty() {
        return Err(ReadError::new(path, None, "at least one fio job", "none"));
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jobs_and_directions() {
        let text = r#"fio: note: something
{ "fio version": "fio-3.33", "jobs": [
  { "jobname": "w", "ctx": 10, "usr_cpu": 1.5, "sys_cpu": 2.5,
    "read": { "io_bytes": 0 },
    "write": { "io_bytes": 4096, "iops": 100.5, "bw": 402,
               "clat_ns": { "mean": 7.5, "percentile": { "50.000000": 7, "99.000000": 20 } },
               "lat_ns": { "mean": 9.0 } } },
  { "jobname": "w", "ctx": 11, "usr_cpu": 1.0, "sys_cpu": 2.0,
    "read": { "io_bytes": 8192, "iops": 3.0, "bw": 12, "clat_ns": { "mean": 1.0 } } } ] }"#;
        assert!(is_fio_json(text));
        let f = parse("x", text).unwrap();
        let get = |n: &str| f.values.iter().find(|v| v.name == n).map(|v| v.value);
        assert_eq!(get("w/write/iops"), Some(100.5));
        assert_eq!(get("w/write/clat_p99"), Some(20.0));
        assert_eq!(get("w/read/iops"), None);
        assert_eq!(get("w#2/read/bw"), Some(12.0));
        assert_eq!(get("w#2/ctx"), Some(11.0));
        // job 2 has no percentiles and no lat_ns: 3 missing fields
        assert_eq!(f.quality.count(Problem::FioMissingField), 3);
    }

    #[test]
    fn errors_name_the_problem() {
        assert!(parse("x", "no json").is_err());
        let e = parse("x", "{ \"fio version\": 1, ").unwrap_err();
        assert!(e.found.contains("invalid JSON"), "{e}");
        assert!(parse("x", "{\"fio version\": \"3\"}").is_err());
    }
}
