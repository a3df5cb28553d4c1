//! Format detection from an input's first bytes (after decompression).
//!
//! Binary formats by magic: perf.data `PERFILE2` (header size 104 = file mode, 16 = pipe
//! mode). Text formats by the shape of their first event lines (see
//! [`crate::text_common::sniff_text`]). An unknown input is a fatal error listing the formats
//! tried and the first bytes seen.

use stallscope_model::InputFormat;

use crate::error::{show_bytes, ReadError};
use crate::input::Input;

/// trace-cmd's `trace.dat` magic.
pub const TRACE_DAT_MAGIC: &[u8] = b"\x17\x08\x44tracing";

/// Detects the format of `input`.
pub fn sniff(input: &Input) -> Result<InputFormat, ReadError> {
    sniff_bytes(&input.path, &input.head)
}

/// Detects the format from the first bytes `head` of the input named `path`.
pub fn sniff_bytes(path: &str, head: &[u8]) -> Result<InputFormat, ReadError> {
    if head.is_empty() {
        return Err(ReadError::at_byte(path, 0, "a trace (formats tried: perf-data, perf-pipe, trace-dat, trace-cmd-text, ftrace-text, perf-script-text, blktrace, blkparse-text)", "an empty file"));
    }
    if head.starts_with(b"PERFILE2") || head.starts_with(b"2ELIFREP") {
        let size = head.get(8..16).map(|b| {
            let mut a = [0u8; 8];
            a.copy_from_slice(b);
            if head.starts_with(b"PERFILE2") {
                u64::from_le_bytes(a)
            } else {
                u64::from_be_bytes(a)
            }
        });
        return match size {
            Some(16) => Ok(InputFormat::PerfPipe),
            Some(_) => Ok(InputFormat::PerfData),
            None => Err(ReadError::at_byte(
                path,
                8,
                "a perf.data header size (8 bytes)",
                "end of file",
            )),
        };
    }
    if head.starts_with(b"PERFFILE") {
        return Err(ReadError::at_byte(
            path,
            0,
            "perf.data version 2 (PERFILE2)",
            "the obsolete version 1 magic PERFFILE",
        ));
    }
    if head.starts_with(TRACE_DAT_MAGIC) {
        return Ok(InputFormat::TraceDat);
    }
    if head.len() >= 4
        && crate::blktrace::record::Endian::detect([head[0], head[1], head[2], head[3]]).is_some()
    {
        return Ok(InputFormat::Blktrace);
    }
    if crate::blkparse_text::sniff(head) {
        return Ok(InputFormat::BlkparseText);
    }
    if let Some(f) = crate::text_common::sniff_text(head) {
        return Ok(f);
    }
    if let Some(p) = crate::profile::sniff_profile(head) {
        return Err(ReadError::at_byte(
            path,
            0,
            "a trace",
            format!(
                "a CPU profile ({}); read it with `stallscope profile`",
                p.name()
            ),
        ));
    }
    Err(ReadError::at_byte(
        path,
        0,
        "a trace (formats tried: perf-data, perf-pipe, trace-dat, trace-cmd-text, ftrace-text, perf-script-text, blktrace, blkparse-text)",
        format!("unrecognized content starting with {}", show_bytes(head, 16)),
    ))
}
