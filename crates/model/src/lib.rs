//! stallscope's vocabulary: the types every other crate speaks.
//!
//! Nothing here does I/O. Readers (`stallscope-read`) turn trace files into [`Event`]s,
//! the timeline (`stallscope-timeline`) turns events into task states, and renderers print
//! them. Time is always integer nanoseconds ([`Ts`], [`Dur`]) in the trace's own clock
//! domain; never floating point.

pub mod block;
pub mod comm;
pub mod context;
pub mod cpus;
pub mod event;
pub mod finding;
pub mod kallsyms;
pub mod meta;
pub mod profile;
pub mod quality;
pub mod report;
pub mod sched_record;
pub mod state;
pub mod time;
pub mod window;

pub use block::{BlockAction, BlockDev, BlockEvent, BlockOp, Rwbs};
pub use comm::Comm;
pub use context::{BlockDeviceContext, CgroupContext, SystemContext, TaskContext};
pub use cpus::{parse_cpu_list, CpuCoverage, TaskCoverage};
pub use event::{
    Event, EventKind, FieldRef, FieldValue, GenericEvent, Mapping, Migrate, Span, SpanPos,
    StatRuntime, Switch, TaskRef, Wakeup,
};
pub use finding::{Evidence, Finding, FindingCause, FindingSeverity, FindingTask, Window};
pub use meta::{InputFormat, SymbolAliases, TraceMeta};
pub use profile::{Profile, SymbolId, WeightUnit, WeightedStack};
pub use quality::{DataQuality, Problem, Severity, StatEntry};
pub use report::{Capabilities, QualityEntry, Report, ReportInput, SkippedDetector, REPORT_SCHEMA};
pub use sched_record::{SchedBatch, SchedRecord, SchedRecordKind};
pub use state::{KernelStateEncoding, PrevState};
pub use time::{fmt_secs_nsecs, fmt_secs_usecs, Dur, Ts};
pub use window::{
    BlockRequest, CpuDensity, FindingWindow, FindingWindows, MigrationMark, Omitted, RunSlice,
    RunnableWait, TaskStateSpan, TextMark, WaitHistogram, WakeupMark, WindowTask,
};

/// CPU number as the kernel numbers it.
pub type Cpu = u32;
/// A kernel task id (what user space calls a thread id; `pid` in tracepoints). 0 is the idle task.
pub type Tid = i32;
