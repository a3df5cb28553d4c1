//! The fleet summary (`OUT/summary.json`, and what `stallscope fleet` prints): findings by
//! detector and cause across traces, the worst wait's distribution per kernel release and
//! per host, and the culprit commands that recur across hosts.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};
use stallscope_tables::Table;

use super::TraceOutcome;

/// Findings of one detector and cause across the fleet.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DetectorRow {
    /// Detector id.
    pub detector: String,
    /// Cause kind; `None` when the findings name none.
    pub cause: Option<String>,
    /// Findings.
    pub findings: u64,
    /// Of which high.
    pub high: u64,
    /// Of which medium.
    pub medium: u64,
    /// Traces with at least one.
    pub traces: u64,
    /// Hosts with at least one (traces without a host name count as their own host).
    pub hosts: u64,
}

/// The distribution of the traces' worst waits (perf sched latency's maximum delay, one
/// value per trace) in one group (a kernel release or a host).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorstWaitRow {
    /// The kernel release or host name (`unknown` when the traces do not say).
    pub group: String,
    /// Traces in the group with a wait.
    pub traces: u64,
    /// Median (nearest rank) of the traces' worst waits.
    pub p50_ns: u64,
    /// 90th percentile (nearest rank).
    pub p90_ns: u64,
    /// The largest.
    pub max_ns: u64,
    /// The trace of the largest and its task.
    pub max_trace_id: u32,
    /// The task of the largest.
    pub max_comm: String,
}

/// A culprit command and how widely it recurs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CulpritRow {
    /// Command (kernel threads' CPU numbers as `*`: see [`super::culprit_name`]).
    pub comm: String,
    /// Hosts where it was a culprit.
    pub hosts: u64,
    /// Traces where it was.
    pub traces: u64,
    /// Findings that name it.
    pub findings: u64,
}

/// Rows written per table across the fleet.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableRows {
    /// Table name.
    pub table: String,
    /// Rows.
    pub rows: u64,
    /// Its dataset directory, relative to the output directory (the same summary
    /// wherever the dataset is written).
    pub dir: String,
}

/// The fleet summary.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FleetSummary {
    /// Traces given.
    pub traces: u64,
    /// Traces analyzed.
    pub analyzed: u64,
    /// Traces that could not be read (`errors.parquet`).
    pub failed: u64,
    /// Traces analyzed with data quality of severity error (lost events, a cut file): their
    /// results are incomplete near the gaps (`traces.parquet` status `degraded`).
    #[serde(default)]
    pub degraded: u64,
    /// Traces read with no event, or none a detector uses (status `empty`).
    #[serde(default)]
    pub empty: u64,
    /// Events analyzed over all traces.
    pub events: u64,
    /// Findings over all traces.
    pub findings: u64,
    /// Findings by detector and cause, most first.
    pub by_detector: Vec<DetectorRow>,
    /// Worst wait per kernel release.
    pub worst_wait_by_kernel: Vec<WorstWaitRow>,
    /// Worst wait per host.
    pub worst_wait_by_host: Vec<WorstWaitRow>,
    /// Culprit commands found on more than one host (or, with one host, in more than one
    /// trace), most hosts first.
    pub recurring_culprits: Vec<CulpritRow>,
    /// Rows per table.
    pub tables: Vec<TableRows>,
    /// The traces that failed: `(trace_id, file, error)`.
    pub errors: Vec<(u32, String, String)>,
}

fn host_of(o: &TraceOutcome) -> String {
    o.host
        .clone()
        .unwrap_or_else(|| format!("unknown ({})", o.file))
}

/// Nearest-rank percentile of sorted values.
fn nearest_rank(sorted: &[u64], pct: u64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (pct * sorted.len() as u64).div_ceil(100).max(1) as usize;
    sorted[rank.min(sorted.len()) - 1]
}

fn worst_waits(
    outcomes: &[TraceOutcome],
    key: impl Fn(&TraceOutcome) -> String,
) -> Vec<WorstWaitRow> {
    let mut groups: BTreeMap<String, Vec<(u64, u32, String)>> = BTreeMap::new();
    for o in outcomes {
        if let (Some(ns), Some(comm)) = (o.worst_wait_ns, &o.worst_wait_comm) {
            groups
                .entry(key(o))
                .or_default()
                .push((ns, o.trace_id, comm.clone()));
        }
    }
    groups
        .into_iter()
        .map(|(group, mut v)| {
            v.sort_by(|a, b| a.0.cmp(&b.0).then(b.1.cmp(&a.1)));
            let values: Vec<u64> = v.iter().map(|x| x.0).collect();
            let (max_ns, max_trace_id, max_comm) = v.last().cloned().unwrap_or_default();
            WorstWaitRow {
                group,
                traces: values.len() as u64,
                p50_ns: nearest_rank(&values, 50),
                p90_ns: nearest_rank(&values, 90),
                max_ns,
                max_trace_id,
                max_comm,
            }
        })
        .collect()
}

impl FleetSummary {
    /// The summary of `outcomes` (sorted by trace), whose tables are `tables`.
    pub fn of(outcomes: &[TraceOutcome], tables: &[Table]) -> FleetSummary {
        let ok: Vec<&TraceOutcome> = outcomes.iter().filter(|o| o.error.is_none()).collect();
        /// Findings, high, medium, traces and hosts of one detector and cause.
        #[derive(Default)]
        struct Tally {
            findings: u64,
            high: u64,
            medium: u64,
            traces: BTreeSet<u32>,
            hosts: BTreeSet<String>,
        }
        let mut by: BTreeMap<(String, Option<String>), Tally> = BTreeMap::new();
        for o in &ok {
            for (detector, severity, cause) in &o.findings {
                let e = by.entry((detector.clone(), cause.clone())).or_default();
                e.findings += 1;
                e.high += u64::from(severity == "high");
                e.medium += u64::from(severity == "medium");
                e.traces.insert(o.trace_id);
                e.hosts.insert(host_of(o));
            }
        }
        let mut by_detector: Vec<DetectorRow> = by
            .into_iter()
            .map(|((detector, cause), t)| DetectorRow {
                detector,
                cause,
                findings: t.findings,
                high: t.high,
                medium: t.medium,
                traces: t.traces.len() as u64,
                hosts: t.hosts.len() as u64,
            })
            .collect();
        by_detector.sort_by(|a, b| {
            (b.high, b.findings)
                .cmp(&(a.high, a.findings))
                .then_with(|| (&a.detector, &a.cause).cmp(&(&b.detector, &b.cause)))
        });
        let owned: Vec<TraceOutcome> = ok.iter().map(|o| (*o).clone()).collect();
        let mut culprits: BTreeMap<String, (BTreeSet<String>, BTreeSet<u32>, u64)> =
            BTreeMap::new();
        for o in &ok {
            for (comm, n) in &o.culprits {
                let e = culprits.entry(comm.clone()).or_default();
                e.0.insert(host_of(o));
                e.1.insert(o.trace_id);
                e.2 += u64::from(*n);
            }
        }
        let mut recurring_culprits: Vec<CulpritRow> = culprits
            .into_iter()
            .map(|(comm, (hosts, traces, findings))| CulpritRow {
                comm,
                hosts: hosts.len() as u64,
                traces: traces.len() as u64,
                findings,
            })
            .filter(|c| c.hosts > 1 || c.traces > 1)
            .collect();
        recurring_culprits.sort_by(|a, b| {
            (b.hosts, b.traces, b.findings)
                .cmp(&(a.hosts, a.traces, a.findings))
                .then_with(|| a.comm.cmp(&b.comm))
        });
        let tables = tables
            .iter()
            .map(|t| TableRows {
                table: t.name().to_string(),
                rows: ok
                    .iter()
                    .map(|o| o.rows.get(t.name()).copied().unwrap_or(0))
                    .sum(),
                dir: t.name().to_string(),
            })
            .collect();
        FleetSummary {
            traces: outcomes.len() as u64,
            analyzed: ok.len() as u64,
            failed: (outcomes.len() - ok.len()) as u64,
            degraded: ok.iter().filter(|o| o.status() == "degraded").count() as u64,
            empty: ok.iter().filter(|o| o.status() == "empty").count() as u64,
            events: ok.iter().map(|o| o.events).sum(),
            findings: ok.iter().map(|o| o.findings.len() as u64).sum(),
            by_detector,
            worst_wait_by_kernel: worst_waits(&owned, |o| {
                o.kernel.clone().unwrap_or_else(|| "unknown".to_string())
            }),
            worst_wait_by_host: worst_waits(&owned, host_of),
            recurring_culprits,
            tables,
            errors: outcomes
                .iter()
                .filter_map(|o| o.error.clone().map(|e| (o.trace_id, o.file.clone(), e)))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v = [10, 20, 30, 40, 50, 60, 70, 80, 90, 100];
        assert_eq!(nearest_rank(&v, 50), 50);
        assert_eq!(nearest_rank(&v, 90), 90);
        assert_eq!(nearest_rank(&[7], 90), 7);
        assert_eq!(nearest_rank(&[1, 2, 3], 50), 2);
        assert_eq!(nearest_rank(&[], 50), 0);
    }

    fn outcome(id: u32, host: &str, kernel: &str, wait: u64, culprit: &str) -> TraceOutcome {
        TraceOutcome {
            trace_id: id,
            file: format!("t{id}"),
            host: Some(host.to_string()),
            kernel: Some(kernel.to_string()),
            findings: vec![(
                "runqueue-starvation".into(),
                "high".into(),
                Some("weight".into()),
            )],
            culprits: vec![(culprit.to_string(), 1)],
            worst_wait_ns: Some(wait),
            worst_wait_comm: Some("fio".into()),
            ..TraceOutcome::default()
        }
    }

    #[test]
    fn groups_by_kernel_host_and_culprit() {
        let outcomes = vec![
            outcome(0, "a", "6.1", 100, "stress"),
            outcome(1, "b", "6.1", 300, "stress"),
            outcome(2, "b", "6.6", 200, "kworker/*:*"),
            TraceOutcome {
                trace_id: 3,
                file: "bad".into(),
                error: Some("bad.perf.data: offset 0: expected PERFILE2, found junk".into()),
                ..TraceOutcome::default()
            },
        ];
        let s = FleetSummary::of(&outcomes, &[Table::Findings]);
        assert_eq!((s.traces, s.analyzed, s.failed, s.findings), (4, 3, 1, 3));
        assert_eq!(s.by_detector.len(), 1);
        assert_eq!((s.by_detector[0].traces, s.by_detector[0].hosts), (3, 2));
        let k61 = &s.worst_wait_by_kernel[0];
        assert_eq!(
            (k61.group.as_str(), k61.traces, k61.p50_ns, k61.max_ns),
            ("6.1", 2, 100, 300)
        );
        assert_eq!(k61.max_trace_id, 1);
        assert_eq!(s.worst_wait_by_host[1].max_ns, 300);
        // stress recurs on two hosts; the kworker only once
        assert_eq!(s.recurring_culprits.len(), 1);
        assert_eq!(
            (
                s.recurring_culprits[0].comm.as_str(),
                s.recurring_culprits[0].hosts
            ),
            ("stress", 2)
        );
        assert_eq!(s.errors.len(), 1);
    }
}
