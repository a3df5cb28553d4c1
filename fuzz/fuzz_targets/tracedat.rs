//! Fuzz target: arbitrary bytes through `Input::from_bytes` + `TraceDatReader` until the end
//! or the first error. Any panic, hang or huge allocation is a bug.
//!
//! `cargo +nightly fuzz run tracedat` (seed corpus: `fixtures/tracedat/*.dat` and the
//! decompressed `*.dat.xz`, `fixtures/samples/tracecmd/`). Inputs this small are
//! decoded in the calling thread (no worker threads).

#![no_main]

use libfuzzer_sys::fuzz_target;
use stallscope_read::tracedat::TraceDatReader;
use stallscope_read::{EventReader, Input};

fn drain(data: &[u8]) {
    let Ok(input) = Input::from_bytes("fuzz.dat", data.to_vec()) else {
        return;
    };
    let Ok(mut reader) = TraceDatReader::open(input, 0) else {
        return;
    };
    while let Ok(Some(event)) = reader.next_event() {
        let _ = event.dump_line();
    }
    let _ = reader.quality();
}

fuzz_target!(|data: &[u8]| drain(data));
