//! Fuzz target: arbitrary bytes through `Input::from_bytes` + `PerfDataReader` until the end
//! or the first error. Any panic, hang or huge allocation is a bug.
//!
//! `cargo +nightly fuzz run perf_data` (seed corpus: the samples in
//! `fixtures/samples/perf/` and `crates/read/tests/data/`, decompressed).

#![no_main]

use libfuzzer_sys::fuzz_target;
use stallscope_read::perf_data::PerfDataReader;
use stallscope_read::{EventReader, Input};

/// The whole target, as a plain function (also usable from a stable-toolchain test).
fn drain(data: &[u8]) {
    let Ok(input) = Input::from_bytes("fuzz.data", data.to_vec()) else {
        return;
    };
    // Inline decoding: a worker thread only slows the fuzzer down.
    let Ok(mut reader) = PerfDataReader::open_with_worker(input, 0, false) else {
        return;
    };
    while let Ok(Some(event)) = reader.next_event() {
        // Exercise the rendering path too.
        let _ = event.dump_line();
    }
    let _ = reader.quality();
}

fuzz_target!(|data: &[u8]| drain(data));
