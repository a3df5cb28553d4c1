//! Fuzz target: arbitrary bytes through the lean trace.dat source
//! (`stallscope_read::tracedat::lean`) and the general reader. The lean source may refuse
//! or bail out anywhere, but it must never panic, and whenever it finishes, its records
//! and data quality must equal what `SchedRecordEncoder` makes of the general reader's
//! events (`compare_with_general`, which runs the lean source twice: each CPU whole, and
//! cut into one piece per sub-buffer; both must bail out or neither): a difference is a
//! bug.
//!
//! `cargo +nightly fuzz run tracedat_lean` (seed corpus: `fixtures/tracedat/*.dat` and the
//! decompressed `*.dat.xz`).

#![no_main]

use libfuzzer_sys::fuzz_target;
use stallscope_read::tracedat::lean::compare_with_general;

fuzz_target!(|data: &[u8]| {
    if let Err(diff) = compare_with_general("fuzz.dat", data.to_vec()) {
        panic!("lean and general trace.dat readers differ: {diff}");
    }
});
