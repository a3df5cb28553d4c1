//! tracefs metadata shared by perf.data (`HEADER_TRACING_DATA`), trace-cmd `trace.dat` and a
//! live tracefs recorder: event `format` files, `header_page`, the tracing-data blob, and the
//! fast field accessors and scheduler decoders built on them.
//!
//! ```text
//! format file          name: sched_switch / ID: 372 / format: / <common fields> / <blank> /
//!                      <event fields> / <blank> / print fmt: "…", REC->prev_comm, …
//! field line           \tfield:char prev_comm[16];\toffset:8;\tsize:16;\tsigned:0;
//! __data_loc (size 4)  u32 in the record: low 16 bits = offset from the record start,
//!                      high 16 bits = length (strings include their NUL): 0x0005001c → 28, 5
//! __rel_loc (size 4)   same packing, offset counted from the end of the field
//! header_page          commit field size = kernel `long`; data offset + size = sub-buffer size
//! tracing-data blob    17 08 44 "tracing" VERSION\0 endian long_size page_size
//!                      "header_page\0" u64+data "header_event\0" u64+data
//!                      u32 n × (u64 size, ftrace format) u32 systems × ("sys\0" u32 n × (u64, format))
//!                      u32+kallsyms u32+printk_formats [u64+saved_cmdlines when version ≥ 0.6]
//! ```
//!
//! Use: parse the blob once ([`TracingData::parse`]), then build one [`TracepointDecoder`] per
//! event id ([`TracepointDecoder::new`]); it resolves every field offset once, so decoding a
//! record is a handful of bounds-checked slice reads with no allocation for the scheduler
//! events. `prev_state` letters come from the trace's own `print fmt`
//! ([`PrevStateTable::from_print_fmt`]) or, when it has none, from the kernel release
//! ([`PrevStateTable::for_kernel_release`]).

mod access;
mod block;
mod comm_cache;
mod const_expr;
mod endian;
mod format_batch;
mod format_file;
#[cfg(test)]
mod format_file_reference;
mod ftrace;
mod header_page;
mod prev_state;
mod sched;
mod tracing_data;

pub(crate) use access::c_string;
pub use access::{decode_field, IntAccessor, StrAccessor};
pub use block::BlockDecoder;
pub use comm_cache::CommCache;
pub use const_expr::eval_const_expr;
pub use endian::Endian;
pub(crate) use format_batch::{default_threads as threads_for_formats, map_in_parts};
pub use format_file::{EventFormat, Field, FieldKind, LocKind};
pub use ftrace::{format_bprint, FtraceDecoder, PrintkFormats};
pub use header_page::HeaderPage;
pub use prev_state::PrevStateTable;
pub(crate) use sched::{reset as reset_kind, BLANK_STAT_RUNTIME, BLANK_SWITCH, BLANK_WAKEUPS};
pub use sched::{DecodeFailure, TracepointDecoder};
pub use tracing_data::{parse_saved_cmdlines, BlobCursor, TracingData};
