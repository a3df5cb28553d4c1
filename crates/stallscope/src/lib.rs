//! The stallscope facade: open inputs, merge them into one time-ordered event stream, and
//! hand events to analyses. The CLI and (later) bindings depend on this crate only.
//!
//! [`analyze::analyze`] is the whole analysis as one call (files and options in, the
//! report out); `stallscope analyze` is that call plus arguments and rendering. Reading
//! events yourself:
//!
//! ```no_run
//! let mut inputs = stallscope::Inputs::open(&["perf.data".to_string()], None).unwrap();
//! while let Some(ev) = inputs.next_event().unwrap() {
//!     println!("{}", ev.dump_line());
//! }
//! ```

pub mod analyze;
pub mod compare;
pub mod critical_path;
pub mod fleet;
mod input_options;
pub mod iolat;
pub mod latency;
pub mod merge;
pub mod overlap;
pub mod profile_analysis;
pub mod sleeps;
pub mod tables;
pub mod task_names;
pub mod time_outliers;
pub mod timehist;
pub mod windows;

pub use input_options::InputOptions;
pub use merge::{Inputs, Progress};
pub use stallscope_detect as detect;
pub use stallscope_export as export;
pub use stallscope_model as model;
pub use stallscope_read as read;
pub use stallscope_record as record;
pub use stallscope_report as report;
pub use stallscope_tables as table_schemas;
pub use stallscope_timeline as timeline;
