//! `stallscope compare`: A/B comparison of two sets of runs with significance tests.
//!
//! Inputs of one kind on each side; several files on a side are repeated runs:
//!
//! * traces ([`trace`]): per-comm wakeup latency distributions tested with Mann-Whitney U,
//!   context-switch and migration rates, per-detector finding counts;
//! * profiles ([`profile`]): per-function self and children shares, largest rises and falls;
//! * metric files ([`metrics`]): `perf stat` (text, `-r N`, `-x,` CSV) and fio JSON, means
//!   ± stddev% and Welch's t-test.
//!
//! Statistics live in [`stats`]; [`kind`] decides what the inputs are.

pub mod kind;
pub mod metrics;
pub mod stats;
pub mod profile;
