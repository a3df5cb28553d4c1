//! Native recorder: `stallscope record` captures scheduler / block / workqueue tracepoints
//! through a **private tracefs instance** and writes a trace-cmd `trace.dat` (version 6,
//! flyrecord) that `trace-cmd report` and stallscope's own reader both read.
//!
//! ```text
//! start    check root / CAP_SYS_ADMIN, find (or mount) tracefs, remove stale
//!          instances/stallscope-<dead pid>, mkdir instances/stallscope-<our pid>
//! setup    buffer_size_kb, tracing_cpumask (--cpus), events/<sys>/<ev>/enable   (instance only)
//! capture  one thread per CPU: read whole sub-buffers from per_cpu/cpuN/trace_pipe_raw
//!          (O_NONBLOCK, poll) into an unlinked per-CPU spool file; tracing_on=1
//! stop     --duration elapsed | COMMAND exited | SIGINT/SIGTERM/SIGHUP → tracing_on=0,
//!          final drain, per_cpu/cpuN/stats
//! write    trace.dat v6 (tracedat_writer) with the SystemContext as option
//!          OPTION_SYSTEM_CONTEXT (JSON), CPUSTAT per CPU, lost events printed per CPU
//! cleanup  the instance is removed (and tracefs/debugfs unmounted if we mounted them) by
//!          guards on every path: success, error, signal, panic; a reader's write error
//!          (a full disk) stops the recording at once; SIGKILL: the guardian, a process
//!          forked before tracing starts, stops tracing, removes the instance and writes
//!          what the spools hold, marked as cut (`guardian`)
//! ```
//!
//! No global tracefs file is ever written: everything is set inside the instance.

pub mod context;
pub mod cpu_reader;
pub mod error;
pub mod events;
pub mod guardian;
pub mod instance;
pub mod metadata;
pub mod privilege;
pub mod session;
pub mod signals;
pub mod stats;
pub mod stop;
pub mod summary;
pub mod tracedat_writer;
pub mod tracefs;

pub use error::RecordError;
pub use session::{record, CpuLost, RecordOptions, RecordSummary};
pub use stop::{parse_seconds, StopWhen};
pub use summary::summarize;
