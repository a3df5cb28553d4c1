//! The tables of a trace as Arrow record batches, with stable column names and integer
//! nanosecond times, for pandas, polars, DuckDB and Parquet (`stallscope tables`).
//!
//! | table | one row per | from |
//! |---|---|---|
//! | `switches` | context switch of a task (perf sched timehist's rows) | [`Timehist`] |
//! | `waits` | runnable interval: a task waiting for a CPU, how it started and ended | the scheduler [`Timeline`] |
//! | `latency` | task (or task name) of `perf sched latency` | [`Latency`] |
//! | `requests` | block request with its Q/G/I/D/C times and tasks | [`BlockTracker`] |
//! | `work_items` | workqueue execution: function, worker, queue/start/end, CPU time | [`WorkerPools`] |
//! | `samples` | profile stack with its weight (leaf first) | a [`Profile`] |
//! | `findings` | finding of `analyze` | a [`Finding`] list |
//! | `events` | normalized event (`stallscope dump`'s line, split) | the events |
//!
//! Columns (`_ns` columns are nanoseconds of the trace clock; nullable ones marked `?`):
//!
//! ```text
//! switches  ts_ns cpu tid pid? comm wait_ns sch_delay_ns run_ns prev_state
//! waits     tid comm cpu? start_ns end_ns wait_ns started_by ended_by
//!           started_by: wakeup | preempted;  ended_by: ran (switched in on cpu) | slept |
//!           exited | unknown (a contradicting event reset the task's state)
//! latency   comm pid? pids runtime_ns switches avg_delay_ns max_delay_ns
//!           max_delay_start_ns max_delay_end_ns
//! requests  dev_major dev_minor kind sector nr_sector rwbs queue_ns? getrq_ns? insert_ns?
//!           first_issue_ns? issue_ns? complete_ns queuer_pid? queuer_comm? inserter_pid?
//!           dispatcher_pid? bios merges requeues error
//! work_items work function function_addr? workqueue? worker_tid worker_comm cpu queue_ns?
//!           start_ns end_ns ended wait_ns? duration_ns cpu_ns switches sleeps
//!           ended: end | restarted (the worker started another item first) | open_at_end
//! samples   ts_ns? cpu? tid? comm? event? weight unit leaf? stack (list, leaf first;
//!           empty, and leaf null, for a sample without frames)
//!           unit: samples | period:<event> | basis_points
//! findings  detector severity cause? title start_ns end_ns cpus tasks_json measures_json hint
//! events    ts_ns cpu pid event detail
//! ```
//!
//! A fleet dataset (`stallscope fleet`) puts the [`TraceColumns`] (`trace_id host? kernel?
//! file`) before every table's columns ([`fleet_schema`], [`TraceColumnArrays`]) and adds
//! two tables of its own: `traces` (one row per trace: [`traces_schema`]) and `errors` (one
//! row per trace that could not be read: [`errors_schema`]).
//!
//! Builders take events in time order and hand out a batch every
//! [`TableOptions::batch_rows`] rows, so memory stays bounded on multi-gigabyte traces
//! (`latency` is one batch at the end: one row per task).

mod background;
pub use background::{BackgroundWriters, WriteError, QUEUED_BATCHES};

use std::fs::File;
use std::path::Path;
use std::sync::Arc;

pub use arrow_array as arrow;
use arrow_array::builder::{Int32Builder, ListBuilder};
pub use arrow_array::RecordBatch;
use arrow_array::{ArrayRef, Int32Array, StringArray, UInt32Array, UInt64Array};
pub use arrow_schema::ArrowError;
use arrow_schema::{DataType, Field, Schema, SchemaRef};
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
pub use parquet::errors::ParquetError;
use parquet::file::properties::{EnabledStatistics, WriterProperties};
use parquet::schema::types::ColumnPath;
use stallscope_model::{Comm, EventKind, Profile, WeightUnit};
use stallscope_model::{Event, Finding, Tid, Ts};
use stallscope_timeline::block::{BlockTracker, CompletedRequest, RequestKind};
use stallscope_timeline::workers::{symbol_names, WorkFn, WorkerPools};
use stallscope_timeline::{
    Latency, LatencyOptions, RunnableCause, TaskState, Timehist, TimehistOptions, TimehistRow,
    Timeline, Transition,
};

/// The tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Table {
    /// Context switches (timehist rows).
    Switches,
    /// Runnable intervals.
    Waits,
    /// perf sched latency rows.
    Latency,
    /// Block requests.
    Requests,
    /// Workqueue executions.
    WorkItems,
    /// Profile stacks and their weights.
    Samples,
    /// Findings of `analyze`.
    Findings,
    /// Normalized events.
    Events,
}

impl Table {
    /// Every table, in documentation order.
    pub const ALL: [Table; 8] = [
        Table::Switches,
        Table::Waits,
        Table::Latency,
        Table::Requests,
        Table::WorkItems,
        Table::Samples,
        Table::Findings,
        Table::Events,
    ];

    /// Its name (`waits`).
    pub fn name(self) -> &'static str {
        match self {
            Table::Switches => "switches",
            Table::Waits => "waits",
            Table::Latency => "latency",
            Table::Requests => "requests",
            Table::WorkItems => "work_items",
            Table::Samples => "samples",
            Table::Findings => "findings",
            Table::Events => "events",
        }
    }

    /// The table called `name`.
    pub fn from_name(name: &str) -> Option<Table> {
        Table::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Its schema.
    pub fn schema(self) -> SchemaRef {
        use DataType::{Int32, UInt32, UInt64, Utf8};
        let f = |name: &str, t: DataType, nullable: bool| Field::new(name, t, nullable);
        let fields = match self {
            Table::Switches => vec![
                f("ts_ns", UInt64, false),
                f("cpu", UInt32, false),
                f("tid", Int32, false),
                f("pid", Int32, true),
                f("comm", Utf8, false),
                f("wait_ns", UInt64, false),
                f("sch_delay_ns", UInt64, false),
                f("run_ns", UInt64, false),
                f("prev_state", Utf8, false),
            ],
            Table::Waits => vec![
                f("tid", Int32, false),
                f("comm", Utf8, false),
                f("cpu", UInt32, true),
                f("start_ns", UInt64, false),
                f("end_ns", UInt64, false),
                f("wait_ns", UInt64, false),
                f("started_by", Utf8, false),
                f("ended_by", Utf8, false),
            ],
            Table::Latency => vec![
                f("comm", Utf8, false),
                f("pid", Int32, true),
                f(
                    "pids",
                    DataType::List(Arc::new(Field::new("item", Int32, true))),
                    false,
                ),
                f("runtime_ns", UInt64, false),
                f("switches", UInt64, false),
                f("avg_delay_ns", UInt64, false),
                f("max_delay_ns", UInt64, false),
                f("max_delay_start_ns", UInt64, false),
                f("max_delay_end_ns", UInt64, false),
            ],
            Table::Requests => vec![
                f("dev_major", UInt32, false),
                f("dev_minor", UInt32, false),
                f("kind", Utf8, false),
                f("sector", UInt64, false),
                f("nr_sector", UInt32, false),
                f("rwbs", Utf8, false),
                f("queue_ns", UInt64, true),
                f("getrq_ns", UInt64, true),
                f("insert_ns", UInt64, true),
                f("first_issue_ns", UInt64, true),
                f("issue_ns", UInt64, true),
                f("complete_ns", UInt64, false),
                f("queuer_pid", Int32, true),
                f("queuer_comm", Utf8, true),
                f("inserter_pid", Int32, true),
                f("dispatcher_pid", Int32, true),
                f("bios", UInt32, false),
                f("merges", UInt32, false),
                f("requeues", UInt32, false),
                f("error", Int32, false),
            ],
            Table::WorkItems => vec![
                f("work", UInt64, false),
                f("function", Utf8, false),
                f("function_addr", UInt64, true),
                f("workqueue", Utf8, true),
                f("worker_tid", Int32, false),
                f("worker_comm", Utf8, false),
                f("cpu", UInt32, false),
                f("queue_ns", UInt64, true),
                f("start_ns", UInt64, false),
                f("end_ns", UInt64, false),
                f("ended", Utf8, false),
                f("wait_ns", UInt64, true),
                f("duration_ns", UInt64, false),
                f("cpu_ns", UInt64, false),
                f("switches", UInt32, false),
                f("sleeps", UInt32, false),
            ],
            Table::Samples => vec![
                f("ts_ns", UInt64, true),
                f("cpu", UInt32, true),
                f("tid", Int32, true),
                f("comm", Utf8, true),
                f("event", Utf8, true),
                f("weight", UInt64, false),
                f("unit", Utf8, false),
                f("leaf", Utf8, true),
                f(
                    "stack",
                    DataType::List(Arc::new(Field::new("item", Utf8, true))),
                    false,
                ),
            ],
            Table::Findings => vec![
                f("detector", Utf8, false),
                f("severity", Utf8, false),
                f("cause", Utf8, true),
                f("title", Utf8, false),
                f("start_ns", UInt64, false),
                f("end_ns", UInt64, false),
                f("cpus", Utf8, false),
                f("tasks_json", Utf8, false),
                f("measures_json", Utf8, false),
                f("hint", Utf8, false),
            ],
            Table::Events => vec![
                f("ts_ns", UInt64, false),
                f("cpu", UInt32, false),
                f("pid", Int32, false),
                f("event", Utf8, false),
                f("detail", Utf8, false),
            ],
        };
        Arc::new(Schema::new(fields))
    }
}

/// How tables are built.
#[derive(Clone, Debug)]
pub struct TableOptions {
    /// Whether the inputs declare `sched_waking` (wakeups are then counted from it, as
    /// perf does; see `stallscope_timeline::WakeupSelector`).
    pub waking_declared: bool,
    /// Rows per record batch.
    pub batch_rows: usize,
    /// `/proc/kallsyms` text of the recording host (the input's own, e.g. trace.dat's),
    /// naming `work_items`' function addresses.
    pub kallsyms: Option<Arc<str>>,
}

impl Default for TableOptions {
    fn default() -> TableOptions {
        TableOptions {
            waking_declared: false,
            batch_rows: 65_536,
            kallsyms: None,
        }
    }
}

/// One wait of the `waits` table.
#[derive(Clone, Debug)]
struct WaitRow {
    tid: Tid,
    start: Ts,
    end: Ts,
    cpu: Option<u32>,
    started_by: &'static str,
    ended_by: &'static str,
}

enum Inner {
    Switches(Box<Timehist>, Vec<TimehistRow>),
    /// Fed by the analysis' model ([`TableBuilder::push_transitions`]).
    Waits(Vec<WaitRow>),
    Latency(Box<Latency>),
    Requests(Box<BlockTracker>, Vec<CompletedRequest>),
    WorkItems(Box<WorkItems>),
    Events(Vec<(Ts, u32, Tid, String, String)>),
}

/// Builds one table from events in time order.
pub struct TableBuilder {
    table: Table,
    batch_rows: usize,
    inner: Inner,
}

impl TableBuilder {
    /// A builder of `table`; `None` for `findings` and `samples`, which are not built
    /// from the event stream (see [`findings_batch`], [`samples_batches`]).
    pub fn new(table: Table, opts: &TableOptions) -> Option<TableBuilder> {
        let inner = match table {
            Table::Switches => Inner::Switches(
                Box::new(Timehist::new(TimehistOptions {
                    pid: None,
                    cpu: None,
                    flavor: Default::default(),
                    waking_declared: opts.waking_declared,
                    nr_cpus: None,
                })),
                Vec::new(),
            ),
            Table::Waits => Inner::Waits(Vec::new()),
            Table::Latency => Inner::Latency(Box::new(Latency::new(LatencyOptions {
                waking_declared: opts.waking_declared,
                ..LatencyOptions::default()
            }))),
            Table::Requests => Inner::Requests(Box::new(BlockTracker::new()), Vec::new()),
            Table::WorkItems => Inner::WorkItems(Box::new(WorkItems::new(opts.kallsyms.clone()))),
            Table::Events => Inner::Events(Vec::new()),
            Table::Findings | Table::Samples => return None,
        };
        Some(TableBuilder {
            table,
            batch_rows: opts.batch_rows.max(1),
            inner,
        })
    }

    /// Takes one event; a full batch when one is ready.
    pub fn push(&mut self, ev: &Event) -> Result<Option<RecordBatch>, ArrowError> {
        let rows = match &mut self.inner {
            Inner::Switches(th, rows) => {
                th.process(ev, &mut |r| rows.push(*r));
                rows.len()
            }
            Inner::Waits(_) => 0, // from the model: push_transitions
            Inner::Latency(lat) => {
                lat.process(ev);
                0
            }
            Inner::WorkItems(w) => w.push(ev),
            Inner::Requests(bt, rows) => {
                bt.process(ev, &mut |r: &CompletedRequest| rows.push(*r));
                rows.len()
            }
            Inner::Events(rows) => {
                let line = ev.dump_line();
                // "TS CPU PID EVENT rest…"
                let mut parts = line.splitn(5, ' ');
                let _ = (parts.next(), parts.next(), parts.next());
                let name = parts.next().unwrap_or_default().to_string();
                let detail = parts.next().unwrap_or_default().to_string();
                rows.push((ev.ts, ev.cpu, ev.pid, name, detail));
                rows.len()
            }
        };
        if rows >= self.batch_rows {
            return self.take(None).map(Some);
        }
        Ok(None)
    }

    /// Whether the table is made from the analysis' model ([`TableBuilder::push_transitions`])
    /// rather than from events ([`TableBuilder::push`]).
    pub fn reads_model(&self) -> bool {
        matches!(self.inner, Inner::Waits(_))
    }

    /// Takes the transitions the analysis' model made of a run of events (`model`: the
    /// model after them, naming the tasks); a full batch when one is ready. (`waits`: each
    /// runnable wait as the model ends it.)
    pub fn push_transitions(
        &mut self,
        transitions: &[(u32, Transition)],
        model: &Timeline,
    ) -> Result<Option<RecordBatch>, ArrowError> {
        let Inner::Waits(rows) = &mut self.inner else {
            return Ok(None);
        };
        for (_, t) in transitions {
            if let Transition::State {
                ts,
                tid,
                from: TaskState::Runnable { since, cause, .. },
                to,
            } = *t
            {
                let (cpu, ended_by) = match to {
                    TaskState::Running { cpu, .. } => (Some(cpu), "ran"),
                    TaskState::Sleeping { .. } | TaskState::Blocked { .. } => (None, "slept"),
                    TaskState::Dead { .. } => (None, "exited"),
                    _ => (None, "unknown"),
                };
                rows.push(WaitRow {
                    tid,
                    start: since,
                    end: ts,
                    cpu,
                    started_by: match cause {
                        RunnableCause::Wakeup => "wakeup",
                        RunnableCause::Preempted => "preempted",
                    },
                    ended_by,
                });
            }
        }
        if rows.len() >= self.batch_rows {
            return self.take(Some(model)).map(Some);
        }
        Ok(None)
    }

    /// The rows gathered so far as a batch (none left behind); `model` names the tasks of
    /// the tables made from it.
    fn take(&mut self, model: Option<&Timeline>) -> Result<RecordBatch, ArrowError> {
        let schema = self.table.schema();
        let columns: Vec<ArrayRef> = match &mut self.inner {
            Inner::Switches(th, rows) => {
                let r: &[_] = rows;
                let comms = StringArray::from_iter_values(r.iter().map(|x| x.comm.as_str()));
                let _ = th;
                vec![
                    u64s(r.iter().map(|x| x.ts_ns)),
                    Arc::new(UInt32Array::from_iter_values(r.iter().map(|x| x.cpu))),
                    Arc::new(Int32Array::from_iter_values(r.iter().map(|x| x.tid))),
                    Arc::new(Int32Array::from(
                        r.iter().map(|x| x.pid).collect::<Vec<_>>(),
                    )),
                    Arc::new(comms),
                    u64s(r.iter().map(|x| x.wait_ns)),
                    u64s(r.iter().map(|x| x.sch_delay_ns)),
                    u64s(r.iter().map(|x| x.run_ns)),
                    Arc::new(StringArray::from(
                        r.iter()
                            .map(|x| x.prev_state.to_string())
                            .collect::<Vec<_>>(),
                    )),
                ]
            }
            Inner::Waits(rows) => {
                let r: &[_] = rows;
                // names written straight into the array's buffer (no String per row)
                let mut comms =
                    arrow_array::builder::StringBuilder::with_capacity(r.len(), r.len() * 8);
                for x in r {
                    let tasks = model.map(Timeline::tasks);
                    let name = tasks.and_then(|t| t.find(x.tid).map(|i| t.get(i).comm.as_str()));
                    comms.append_value(name.unwrap_or(""));
                }
                vec![
                    Arc::new(Int32Array::from_iter_values(r.iter().map(|x| x.tid))),
                    Arc::new(comms.finish()),
                    Arc::new(UInt32Array::from(
                        r.iter().map(|x| x.cpu).collect::<Vec<_>>(),
                    )),
                    u64s(r.iter().map(|x| x.start)),
                    u64s(r.iter().map(|x| x.end)),
                    u64s(r.iter().map(|x| x.end.saturating_sub(x.start))),
                    Arc::new(StringArray::from(
                        r.iter().map(|x| x.started_by).collect::<Vec<_>>(),
                    )),
                    Arc::new(StringArray::from(
                        r.iter().map(|x| x.ended_by).collect::<Vec<_>>(),
                    )),
                ]
            }
            Inner::Latency(_) => return Ok(RecordBatch::new_empty(schema)),
            Inner::WorkItems(w) => w.columns(),
            Inner::Requests(_, rows) => {
                let r: &[_] = rows;
                let opt = |f: fn(&CompletedRequest) -> Option<Ts>| -> ArrayRef {
                    Arc::new(UInt64Array::from(r.iter().map(f).collect::<Vec<_>>()))
                };
                vec![
                    Arc::new(UInt32Array::from_iter_values(
                        r.iter().map(|x| x.dev.major()),
                    )),
                    Arc::new(UInt32Array::from_iter_values(
                        r.iter().map(|x| x.dev.minor()),
                    )),
                    Arc::new(StringArray::from(
                        r.iter()
                            .map(|x| match x.kind {
                                RequestKind::Data => "data",
                                RequestKind::Flush => "flush",
                            })
                            .collect::<Vec<_>>(),
                    )),
                    u64s(r.iter().map(|x| x.sector)),
                    Arc::new(UInt32Array::from_iter_values(r.iter().map(|x| x.nr_sector))),
                    Arc::new(StringArray::from(
                        r.iter().map(|x| x.rwbs.to_letters()).collect::<Vec<_>>(),
                    )),
                    opt(|x| x.queue_ts),
                    opt(|x| x.getrq_ts),
                    opt(|x| x.insert_ts),
                    opt(|x| x.first_issue_ts),
                    opt(|x| x.issue_ts),
                    u64s(r.iter().map(|x| x.complete_ts)),
                    Arc::new(Int32Array::from(
                        r.iter()
                            .map(|x| x.queuer.map(|t| t.pid))
                            .collect::<Vec<_>>(),
                    )),
                    Arc::new(StringArray::from(
                        r.iter()
                            .map(|x| x.queuer.map(|t| t.comm.as_str().to_string()))
                            .collect::<Vec<_>>(),
                    )),
                    Arc::new(Int32Array::from(
                        r.iter()
                            .map(|x| x.inserter.map(|t| t.pid))
                            .collect::<Vec<_>>(),
                    )),
                    Arc::new(Int32Array::from(
                        r.iter()
                            .map(|x| x.dispatcher.map(|t| t.pid))
                            .collect::<Vec<_>>(),
                    )),
                    Arc::new(UInt32Array::from_iter_values(r.iter().map(|x| x.bios))),
                    Arc::new(UInt32Array::from_iter_values(r.iter().map(|x| x.merges))),
                    Arc::new(UInt32Array::from_iter_values(r.iter().map(|x| x.requeues))),
                    Arc::new(Int32Array::from_iter_values(r.iter().map(|x| x.error))),
                ]
            }
            Inner::Events(rows) => {
                let r: &[_] = rows;
                vec![
                    u64s(r.iter().map(|x| x.0)),
                    Arc::new(UInt32Array::from_iter_values(r.iter().map(|x| x.1))),
                    Arc::new(Int32Array::from_iter_values(r.iter().map(|x| x.2))),
                    Arc::new(StringArray::from_iter_values(r.iter().map(|x| &x.3))),
                    Arc::new(StringArray::from_iter_values(r.iter().map(|x| &x.4))),
                ]
            }
        };
        // the rows' buffer is kept for the next batch (a new one each batch made glibc map
        // and fault in megabytes anew: 80 000 more page faults on one fleet trace)
        match &mut self.inner {
            Inner::Switches(_, rows) => rows.clear(),
            Inner::Waits(rows) => rows.clear(),
            Inner::Requests(_, rows) => rows.clear(),
            Inner::Events(rows) => rows.clear(),
            Inner::Latency(_) | Inner::WorkItems(_) => {}
        }
        RecordBatch::try_new(schema, columns)
    }

    /// The last batches (the rows not handed out yet; `latency`'s single batch); `model`:
    /// the analysis' model at the end, naming the tasks of the tables made from it.
    pub fn finish(mut self, model: Option<&Timeline>) -> Result<Vec<RecordBatch>, ArrowError> {
        if let Inner::Latency(lat) = self.inner {
            let report = lat.finish();
            let rows = &report.tasks;
            let mut pids = ListBuilder::new(Int32Builder::new());
            for r in rows {
                pids.values().append_slice(&r.pids);
                pids.append(true);
            }
            let columns: Vec<ArrayRef> = vec![
                Arc::new(StringArray::from_iter_values(
                    rows.iter().map(|r| r.comm.as_str()),
                )),
                Arc::new(Int32Array::from(
                    rows.iter().map(|r| r.pid).collect::<Vec<_>>(),
                )),
                Arc::new(pids.finish()),
                u64s(rows.iter().map(|r| r.runtime_ns)),
                u64s(rows.iter().map(|r| r.switches)),
                u64s(rows.iter().map(|r| r.avg_delay_ns)),
                u64s(rows.iter().map(|r| r.max_delay_ns)),
                u64s(rows.iter().map(|r| r.max_delay_start_ns)),
                u64s(rows.iter().map(|r| r.max_delay_end_ns)),
            ];
            return Ok(vec![RecordBatch::try_new(
                Table::Latency.schema(),
                columns,
            )?]);
        }
        if let Inner::WorkItems(w) = &mut self.inner {
            w.pools.finish();
        }
        let last = self.take(model)?;
        Ok(if last.num_rows() > 0 {
            vec![last]
        } else {
            Vec::new()
        })
    }
}

fn u64s(it: impl Iterator<Item = u64>) -> ArrayRef {
    Arc::new(UInt64Array::from_iter_values(it))
}

/// The `findings` table of a finding list (one batch).
pub fn findings_batch(findings: &[Finding]) -> Result<RecordBatch, ArrowError> {
    let columns: Vec<ArrayRef> = vec![
        Arc::new(StringArray::from_iter_values(
            findings.iter().map(|f| f.detector.as_str()),
        )),
        Arc::new(StringArray::from_iter_values(
            findings.iter().map(|f| f.severity.name()),
        )),
        Arc::new(StringArray::from(
            findings
                .iter()
                .map(|f| f.cause.as_ref().map(|c| c.kind.clone()))
                .collect::<Vec<_>>(),
        )),
        Arc::new(StringArray::from_iter_values(
            findings.iter().map(|f| f.title.as_str()),
        )),
        u64s(findings.iter().map(|f| f.window.start_ns)),
        u64s(findings.iter().map(|f| f.window.end_ns)),
        Arc::new(StringArray::from_iter_values(findings.iter().map(|f| {
            f.cpus
                .iter()
                .map(|c| c.to_string())
                .collect::<Vec<_>>()
                .join(",")
        }))),
        Arc::new(StringArray::from_iter_values(
            findings
                .iter()
                .map(|f| serde_json::to_string(&f.tasks).unwrap_or_default()),
        )),
        Arc::new(StringArray::from_iter_values(
            findings
                .iter()
                .map(|f| serde_json::to_string(&f.measures).unwrap_or_default()),
        )),
        Arc::new(StringArray::from_iter_values(
            findings.iter().map(|f| f.hint.as_str()),
        )),
    ];
    RecordBatch::try_new(Table::Findings.schema(), columns)
}

/// A Parquet file being written, batch by batch (`write`, then `close`).
pub type ParquetWriter = ArrowWriter<File>;

/// A Parquet writer (zstd) of `table` at `path`.
pub fn parquet_writer(path: &Path, table: Table) -> Result<ParquetWriter, ParquetError> {
    parquet_writer_of(path, table.schema())
}

/// The columns a fleet dataset (`stallscope fleet`) puts before every table's own: which
/// trace a row comes from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TraceColumns {
    /// The trace's number in the fleet (its rank in the sorted list of inputs).
    pub trace_id: u32,
    /// Host name the trace recorded, when it did.
    pub host: Option<String>,
    /// Kernel release the trace recorded, when it did.
    pub kernel: Option<String>,
    /// The input path.
    pub file: String,
}

fn trace_fields() -> Vec<Field> {
    vec![
        Field::new("trace_id", DataType::UInt32, false),
        Field::new("host", DataType::Utf8, true),
        Field::new("kernel", DataType::Utf8, true),
        Field::new("file", DataType::Utf8, false),
    ]
}

/// The schema of `table` in a fleet dataset: [`TraceColumns`] then the table's columns.
pub fn fleet_schema(table: Table) -> SchemaRef {
    let mut fields = trace_fields();
    fields.extend(table.schema().fields().iter().map(|f| f.as_ref().clone()));
    Arc::new(Schema::new(fields))
}

/// The trace columns of one trace put before each of its batches' own
/// ([`TraceColumnArrays::prepend`]): the four constant columns are built once, as long as
/// the longest batch so far, and shared (a shorter batch gets a zero-copy slice), not
/// rebuilt row by row for each batch (batches of a table made from the model's runs vary
/// in length by a few rows: rebuilding per length rebuilt them for nearly every batch).
#[derive(Debug)]
pub struct TraceColumnArrays {
    trace: TraceColumns,
    /// The columns last built, and their length.
    built: Option<(usize, [ArrayRef; 4])>,
}

impl TraceColumnArrays {
    /// The columns of `trace`.
    pub fn new(trace: TraceColumns) -> TraceColumnArrays {
        TraceColumnArrays { trace, built: None }
    }

    /// `batch` of `table` with the trace's columns first ([`fleet_schema`]).
    pub fn prepend(
        &mut self,
        table: Table,
        batch: &RecordBatch,
    ) -> Result<RecordBatch, ArrowError> {
        let n = batch.num_rows();
        let trace = &self.trace;
        let built = match &self.built {
            Some((len, cols)) if *len >= n => cols,
            _ => {
                let cols: [ArrayRef; 4] = [
                    Arc::new(UInt32Array::from(vec![trace.trace_id; n])),
                    Arc::new(StringArray::from(vec![trace.host.as_deref(); n])),
                    Arc::new(StringArray::from(vec![trace.kernel.as_deref(); n])),
                    Arc::new(StringArray::from(vec![trace.file.as_str(); n])),
                ];
                &self.built.insert((n, cols)).1
            }
        };
        // a shorter batch takes a slice of the longest columns built (no copy)
        let mut columns: Vec<ArrayRef> = built
            .iter()
            .map(|c| match c.len() == n {
                true => Arc::clone(c),
                false => c.slice(0, n),
            })
            .collect();
        columns.extend(batch.columns().iter().cloned());
        RecordBatch::try_new(fleet_schema(table), columns)
    }
}

/// One row of a fleet's `traces` table: a trace and what its analysis found.
#[derive(Clone, Debug, Default)]
pub struct TraceRow {
    /// Which trace.
    pub trace: TraceColumns,
    /// Input format (`perf-data`, `trace-dat`, …) when it was read.
    pub format: Option<String>,
    /// `ok`, `degraded` (data quality of severity error, e.g. lost events), `empty` (no
    /// event, or none a detector uses) or `error` (the reason is in the `errors` table).
    pub status: &'static str,
    /// Events lost in the recording.
    pub lost_events: u64,
    /// Data-quality problems of severity error, as a JSON object key → count.
    pub quality_errors: String,
    /// Data-quality problems of severity warning, as a JSON object key → count.
    pub quality_warnings: String,
    /// Events analyzed.
    pub events: u64,
    /// First and last event time (trace clock), when any.
    pub first_ns: Option<Ts>,
    /// Last event time.
    pub last_ns: Option<Ts>,
    /// Findings of `analyze`, and how many are high / medium.
    pub findings: u32,
    /// High-severity findings.
    pub high: u32,
    /// Medium-severity findings.
    pub medium: u32,
    /// The longest wait for a CPU (perf sched latency's maximum delay) and whose.
    pub worst_wait_ns: Option<u64>,
    /// The task of the longest wait.
    pub worst_wait_comm: Option<String>,
}

/// The schema of a fleet's `traces` table.
pub fn traces_schema() -> SchemaRef {
    use DataType::{UInt32, UInt64, Utf8};
    let mut fields = trace_fields();
    fields.extend([
        Field::new("format", Utf8, true),
        Field::new("status", Utf8, false),
        Field::new("events", UInt64, false),
        Field::new("lost_events", UInt64, false),
        Field::new("quality_errors", Utf8, false),
        Field::new("quality_warnings", Utf8, false),
        Field::new("first_ns", UInt64, true),
        Field::new("last_ns", UInt64, true),
        Field::new("findings", UInt32, false),
        Field::new("high", UInt32, false),
        Field::new("medium", UInt32, false),
        Field::new("worst_wait_ns", UInt64, true),
        Field::new("worst_wait_comm", Utf8, true),
    ]);
    Arc::new(Schema::new(fields))
}

/// The schema of a fleet's `errors` table: trace columns, then `error` (the message of
/// `stallscope analyze` on that file: file, offset or line, expected vs found).
pub fn errors_schema() -> SchemaRef {
    let mut fields = trace_fields();
    fields.push(Field::new("error", DataType::Utf8, false));
    Arc::new(Schema::new(fields))
}

fn trace_columns(rows: &[&TraceColumns]) -> Vec<ArrayRef> {
    vec![
        Arc::new(UInt32Array::from_iter_values(
            rows.iter().map(|t| t.trace_id),
        )),
        Arc::new(StringArray::from(
            rows.iter().map(|t| t.host.as_deref()).collect::<Vec<_>>(),
        )),
        Arc::new(StringArray::from(
            rows.iter().map(|t| t.kernel.as_deref()).collect::<Vec<_>>(),
        )),
        Arc::new(StringArray::from_iter_values(
            rows.iter().map(|t| t.file.as_str()),
        )),
    ]
}

/// The `traces` table of `rows`.
pub fn traces_batch(rows: &[TraceRow]) -> Result<RecordBatch, ArrowError> {
    let mut columns = trace_columns(&rows.iter().map(|r| &r.trace).collect::<Vec<_>>());
    let u32s = |f: fn(&TraceRow) -> u32| -> ArrayRef {
        Arc::new(UInt32Array::from_iter_values(rows.iter().map(f)))
    };
    let opt = |f: fn(&TraceRow) -> Option<u64>| -> ArrayRef {
        Arc::new(UInt64Array::from(rows.iter().map(f).collect::<Vec<_>>()))
    };
    columns.extend([
        Arc::new(StringArray::from(
            rows.iter().map(|r| r.format.as_deref()).collect::<Vec<_>>(),
        )) as ArrayRef,
        Arc::new(StringArray::from_iter_values(rows.iter().map(|r| r.status))),
        u64s(rows.iter().map(|r| r.events)),
        u64s(rows.iter().map(|r| r.lost_events)),
        Arc::new(StringArray::from_iter_values(
            rows.iter().map(|r| r.quality_errors.as_str()),
        )),
        Arc::new(StringArray::from_iter_values(
            rows.iter().map(|r| r.quality_warnings.as_str()),
        )),
        opt(|r| r.first_ns),
        opt(|r| r.last_ns),
        u32s(|r| r.findings),
        u32s(|r| r.high),
        u32s(|r| r.medium),
        opt(|r| r.worst_wait_ns),
        Arc::new(StringArray::from(
            rows.iter()
                .map(|r| r.worst_wait_comm.as_deref())
                .collect::<Vec<_>>(),
        )),
    ]);
    RecordBatch::try_new(traces_schema(), columns)
}

/// The `errors` table of `(trace, message)` rows.
pub fn errors_batch(rows: &[(TraceColumns, String)]) -> Result<RecordBatch, ArrowError> {
    let mut columns = trace_columns(&rows.iter().map(|r| &r.0).collect::<Vec<_>>());
    columns.push(Arc::new(StringArray::from_iter_values(
        rows.iter().map(|r| r.1.as_str()),
    )));
    RecordBatch::try_new(errors_schema(), columns)
}

/// A Parquet writer (zstd) of batches of `schema` at `path`.
pub fn parquet_writer_of(path: &Path, schema: SchemaRef) -> Result<ParquetWriter, ParquetError> {
    let file = File::create(path)
        .map_err(|e| ParquetError::General(format!("{}: {e}", path.display())))?;
    let mut props =
        WriterProperties::builder().set_compression(Compression::ZSTD(ZstdLevel::default()));
    // a fleet part file's trace columns hold one value (its trace's): the text ones get no
    // statistics (two string comparisons a row for nothing; `trace_id` keeps its own, which
    // datasets are pruned by) and delta encoding instead of a dictionary (a hash and a
    // comparison a row; the same one value costs 180 bytes a column chunk either way)
    for field in trace_fields() {
        if *field.data_type() == DataType::Utf8 && schema.field_with_name(field.name()).is_ok() {
            let col = ColumnPath::from(field.name().as_str());
            props = props
                .set_column_statistics_enabled(col.clone(), EnabledStatistics::None)
                .set_column_dictionary_enabled(col.clone(), false)
                .set_column_encoding(col, parquet::basic::Encoding::DELTA_BYTE_ARRAY);
        }
    }
    ArrowWriter::try_new(file, schema, Some(props.build()))
}

/// The `work_items` builder: [`WorkerPools`]' executions, with the workers' names and the
/// functions named from the recording's kallsyms when the input carries one.
struct WorkItems {
    pools: WorkerPools,
    comms: std::collections::HashMap<Tid, Comm>,
    kallsyms: Option<Arc<str>>,
    names: std::collections::HashMap<u64, Option<String>>,
}

impl WorkItems {
    fn new(kallsyms: Option<Arc<str>>) -> WorkItems {
        let mut pools = WorkerPools::new();
        pools.keep_executions();
        WorkItems {
            pools,
            comms: std::collections::HashMap::new(),
            kallsyms,
            names: std::collections::HashMap::new(),
        }
    }

    fn push(&mut self, ev: &Event) -> usize {
        if let EventKind::Switch(s) = &ev.kind {
            for t in [&s.prev, &s.next] {
                if t.pid != 0 && !t.comm.is_empty() {
                    self.comms.insert(t.pid, t.comm);
                }
            }
        }
        self.pools.process(ev);
        self.pools.executions_kept()
    }

    fn columns(&mut self) -> Vec<ArrayRef> {
        let r = self.pools.take_executions();
        if let Some(k) = &self.kallsyms {
            let unknown: Vec<u64> = r
                .iter()
                .filter_map(|x| match x.function {
                    WorkFn::Addr(a) if !self.names.contains_key(&a) => Some(a),
                    _ => None,
                })
                .collect();
            if !unknown.is_empty() {
                let found = symbol_names(k, unknown.iter().copied());
                for a in unknown {
                    self.names.insert(a, found.get(&a).cloned());
                }
            }
        }
        let name = |f: &WorkFn| match f {
            WorkFn::Name(n) => n.clone(),
            WorkFn::Addr(a) => self
                .names
                .get(a)
                .cloned()
                .flatten()
                .unwrap_or_else(|| format!("{a:#x}")),
        };
        let comm = |t: Tid| {
            self.comms
                .get(&t)
                .map_or(String::new(), |c| c.as_str().to_string())
        };
        vec![
            u64s(r.iter().map(|x| x.work)),
            Arc::new(StringArray::from_iter_values(
                r.iter().map(|x| name(&x.function)),
            )),
            Arc::new(UInt64Array::from(
                r.iter()
                    .map(|x| match x.function {
                        WorkFn::Addr(a) => Some(a),
                        WorkFn::Name(_) => None,
                    })
                    .collect::<Vec<_>>(),
            )),
            Arc::new(StringArray::from(
                r.iter().map(|x| x.workqueue.clone()).collect::<Vec<_>>(),
            )),
            Arc::new(Int32Array::from_iter_values(r.iter().map(|x| x.worker))),
            Arc::new(StringArray::from_iter_values(
                r.iter().map(|x| comm(x.worker)),
            )),
            Arc::new(UInt32Array::from_iter_values(r.iter().map(|x| x.cpu))),
            Arc::new(UInt64Array::from(
                r.iter().map(|x| x.queued).collect::<Vec<_>>(),
            )),
            u64s(r.iter().map(|x| x.start)),
            u64s(r.iter().map(|x| x.end)),
            Arc::new(StringArray::from_iter_values(r.iter().map(|x| x.ended))),
            Arc::new(UInt64Array::from(
                r.iter()
                    .map(|x| x.queued.map(|q| x.start.saturating_sub(q)))
                    .collect::<Vec<_>>(),
            )),
            u64s(r.iter().map(|x| x.end.saturating_sub(x.start))),
            u64s(r.iter().map(|x| x.cpu_ns)),
            Arc::new(UInt32Array::from_iter_values(r.iter().map(|x| x.switches))),
            Arc::new(UInt32Array::from_iter_values(r.iter().map(|x| x.sleeps))),
        ]
    }
}

/// The `samples` table of a profile (one row per stack, frames leaf first), in batches
/// of at most `batch_rows` rows; `event` is the sampled event when known.
pub fn samples_batches(
    profile: &Profile,
    event: Option<&str>,
    batch_rows: usize,
) -> Result<Vec<RecordBatch>, ArrowError> {
    let unit = match &profile.unit {
        WeightUnit::Samples => "samples".to_string(),
        WeightUnit::Period(e) => format!("period:{e}"),
        WeightUnit::BasisPoints => "basis_points".to_string(),
    };
    let mut out = Vec::new();
    for chunk in profile.stacks.chunks(batch_rows.max(1)) {
        let mut stacks = ListBuilder::new(arrow_array::builder::StringBuilder::new());
        for st in chunk {
            for &f in &st.frames {
                stacks.values().append_value(profile.symbol(f));
            }
            stacks.append(true);
        }
        let columns: Vec<ArrayRef> = vec![
            Arc::new(UInt64Array::from(
                chunk.iter().map(|s| s.ts).collect::<Vec<_>>(),
            )),
            Arc::new(UInt32Array::from(
                chunk.iter().map(|s| s.cpu).collect::<Vec<_>>(),
            )),
            Arc::new(Int32Array::from(
                chunk.iter().map(|s| s.pid).collect::<Vec<_>>(),
            )),
            Arc::new(StringArray::from(
                chunk
                    .iter()
                    .map(|s| s.comm.map(|c| c.as_str().to_string()))
                    .collect::<Vec<_>>(),
            )),
            Arc::new(StringArray::from(vec![event; chunk.len()])),
            u64s(chunk.iter().map(|s| s.weight)),
            Arc::new(StringArray::from(vec![unit.as_str(); chunk.len()])),
            Arc::new(StringArray::from(
                chunk
                    .iter()
                    .map(|s| s.frames.first().map(|&f| profile.symbol(f)))
                    .collect::<Vec<_>>(),
            )),
            Arc::new(stacks.finish()),
        ];
        out.push(RecordBatch::try_new(Table::Samples.schema(), columns)?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn findings(n: usize) -> RecordBatch {
        let f = Finding {
            detector: "cpu-saturation".into(),
            severity: stallscope_model::FindingSeverity::Low,
            title: "t".into(),
            window: stallscope_model::Window {
                start_ns: 1,
                end_ns: 2,
            },
            cpus: vec![0],
            tasks: Vec::new(),
            measures: Default::default(),
            evidence: Vec::new(),
            hint: String::new(),
            cause: None,
        };
        findings_batch(&vec![f; n]).expect("batch")
    }

    /// The trace columns are shared by batches of one length, sliced (their buffers shared)
    /// for a shorter one and rebuilt for a longer one, and every row carries the trace's
    /// values.
    #[test]
    fn trace_columns_are_built_once_for_the_longest_batch() {
        let mut arrays = TraceColumnArrays::new(TraceColumns {
            trace_id: 7,
            host: Some("h".into()),
            kernel: None,
            file: "a.perf.data".into(),
        });
        let a = arrays
            .prepend(Table::Findings, &findings(3))
            .expect("3 rows");
        let b = arrays
            .prepend(Table::Findings, &findings(3))
            .expect("3 rows again");
        let c = arrays
            .prepend(Table::Findings, &findings(2))
            .expect("2 rows");
        let d = arrays
            .prepend(Table::Findings, &findings(4))
            .expect("4 rows");
        let e = arrays
            .prepend(Table::Findings, &findings(3))
            .expect("3 rows after 4");
        assert!(Arc::ptr_eq(a.column(1), b.column(1)), "one length: shared");
        let values = |b: &RecordBatch| b.column(3).to_data().buffers()[1].as_ptr();
        assert_eq!(
            values(&c),
            values(&a),
            "shorter: a slice of the same buffers"
        );
        assert_eq!(
            values(&e),
            values(&d),
            "shorter: a slice of the same buffers"
        );
        assert_ne!(values(&d), values(&a), "longer: built anew");
        assert_eq!((a.num_rows(), c.num_rows(), d.num_rows()), (3, 2, 4));
        for batch in [&a, &c, &d, &e] {
            assert_eq!(batch.schema(), fleet_schema(Table::Findings));
            let host = batch
                .column(1)
                .as_any()
                .downcast_ref::<StringArray>()
                .expect("host");
            let kernel = batch
                .column(2)
                .as_any()
                .downcast_ref::<StringArray>()
                .expect("kernel");
            let id = batch
                .column(0)
                .as_any()
                .downcast_ref::<UInt32Array>()
                .expect("id");
            for r in 0..batch.num_rows() {
                assert_eq!((id.value(r), host.value(r)), (7, "h"));
                assert!(arrow_array::Array::is_null(kernel, r));
            }
        }
    }
}
