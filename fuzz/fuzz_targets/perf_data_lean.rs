//! Fuzz target: arbitrary bytes, written to a temporary file (the lean reader maps regular
//! files only), through the lean perf.data scheduler source
//! (`stallscope_read::perf_data::lean`) until its end or its bail-out; when it answers, the
//! general reader must read the same bytes without error or data-quality note and yield as
//! many events of the kinds the lean records stand for. Any panic, hang or huge allocation
//! is a bug.
//!
//! `cargo +nightly fuzz run perf_data_lean` (seed corpus: `fixtures/sched/*.perf.data`).

#![no_main]

use libfuzzer_sys::fuzz_target;
use stallscope_read::lean::SchedSource;
use stallscope_read::perf_data::{lean, PerfDataReader};
use stallscope_read::{EventReader, Input};

/// The whole target, as a plain function.
fn drain(data: &[u8]) {
    let path =
        std::env::temp_dir().join(format!("stallscope-fuzz-lean-{}.data", std::process::id()));
    if std::fs::write(&path, data).is_err() {
        return;
    }
    let Some(p) = path.to_str() else { return };
    let mut lean_records = 0usize;
    let mut answered = false;
    if let Ok(mut src) = lean::open_lean(p) {
        let mut batch = Default::default();
        answered = loop {
            match src.next_batch(&mut batch) {
                Ok(true) => lean_records += batch.records.len(),
                Ok(false) => break true,
                Err(_) => break false,
            }
        };
        let _ = src.progress();
    }
    if answered {
        // The lean path answered: the general reader must agree that the file is clean.
        let input = Input::open(p).expect("general reader opens what the lean one read");
        let mut reader =
            PerfDataReader::open_with_worker(input, 0, false).expect("general reader opens");
        let mut events = 0usize;
        while let Some(_ev) = reader
            .next_event()
            .expect("no error where the lean path answered")
        {
            events += 1;
        }
        assert!(
            reader.quality().is_empty(),
            "lean answered despite data-quality notes"
        );
        // Every event is at least one record (the encoder adds name records).
        assert!(
            lean_records >= events,
            "{lean_records} lean records for {events} events"
        );
    }
    let _ = std::fs::remove_file(&path);
}

fuzz_target!(|data: &[u8]| drain(data));
