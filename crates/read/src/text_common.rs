//! Shared machinery of the three text readers ([`crate::ftrace_text`],
//! [`crate::tracecmd_text`], [`crate::perf_script_text`]) and text-format sniffing.
//!
//! All three print one event per line as *context columns* (task name, pid, CPU, time) then
//! `NAME: PAYLOAD`; they differ in column layout, special lines and payload renderings:
//!
//! ```text
//! ftrace     "            bash-8399    [001] d..2.   307.122622: sched_switch: prev_comm=bash …"
//! trace-cmd  "            bash-12615 [001]   392.162131: sched_switch:         bash:12615 [120] S ==> bash:12622 [120]"
//! perf       "            perf 13978 [000]   481.124203:       sched:sched_switch: prev_comm=perf …"
//! ```
//!
//! * [`line_reader`]: the pull loop of the ftrace and trace-cmd readers.
//! * [`lines`]: buffered line source (one reused buffer, push-back, lossy UTF-8, cut last line).
//! * [`context`]: the context columns, anchored on the tokens right of the comm.
//! * [`payload`]: payload text → native scheduler events or generic `key=value` events.
//! * [`prev_state`]: `prev_state` letters, raw numbers and trace-cmd plugin letters.
//! * [`kernel_line`]: pieces shared by ftrace and trace-cmd (markers, stacks, headers).
//! * [`state`]: per-reader bookkeeping and the data-quality keys.
//! * [`sniff`](mod@sniff): which dialect a text input is.
//!
//! Parsing works on bytes (memchr), never with regexes, and allocates nothing per line for
//! scheduler events; generic events own their name and fields.

pub(crate) mod block;
pub(crate) mod context;
pub(crate) mod kernel_line;
pub(crate) mod line_reader;
pub(crate) mod lines;
pub(crate) mod payload;
pub(crate) mod prev_state;
pub mod sniff;
pub(crate) mod state;

pub use sniff::sniff_text;
