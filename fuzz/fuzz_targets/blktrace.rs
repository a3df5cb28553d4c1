//! Fuzz target: arbitrary bytes through `Input::from_bytes` + `BlktraceReader` (one per-CPU
//! file), and the same bytes as blkparse text, until the end or the first error. Any panic,
//! hang or huge allocation is a bug.
//!
//! `cargo +nightly fuzz run blktrace` (seed corpus: `fixtures/block/loop0/loop0.blktrace.*`
//! and `fixtures/block/loop0/blkparse_default.txt`).

#![no_main]

use libfuzzer_sys::fuzz_target;
use stallscope_read::blktrace::BlktraceReader;
use stallscope_read::{blkparse_text, EventReader, Input};

/// The whole target, as a plain function.
fn drain(data: &[u8]) {
    if let Ok(input) = Input::from_bytes("fuzz.blktrace.0", data.to_vec()) {
        if let Ok(mut reader) = BlktraceReader::open(input, 0) {
            while let Ok(Some(event)) = reader.next_event() {
                let _ = event.dump_line();
            }
            let _ = reader.quality();
        }
    }
    if let Ok(input) = Input::from_bytes("fuzz.txt", data.to_vec()) {
        if let Ok(mut reader) = blkparse_text::open(input, 0) {
            while let Ok(Some(event)) = reader.next_event() {
                let _ = event.dump_line();
            }
        }
    }
}

fuzz_target!(|data: &[u8]| drain(data));
