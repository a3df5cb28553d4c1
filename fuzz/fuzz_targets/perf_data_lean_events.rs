//! Fuzz target: arbitrary bytes, written to a temporary file (the lean readers map regular
//! files only), through the lean perf.data event reader
//! (`stallscope_read::perf_data::lean::events::LeanEventReader`) to its end, by batches
//! and by `visit_batch` runs; whether its walkers finish or stop half way (the general
//! reader then takes over), the events, the data-quality notes and the error must be the
//! general reader's (before a fatal error, the general reader's events a prefix of
//! ours). Any panic, hang or huge allocation is a bug.
//!
//! `cargo +nightly fuzz run perf_data_lean_events` (seed corpus:
//! `fixtures/sched/*.perf.data`).

#![no_main]

use libfuzzer_sys::fuzz_target;
use stallscope_model::Event;
use stallscope_read::perf_data::lean::events::LeanEventReader;
use stallscope_read::perf_data::PerfDataReader;
use stallscope_read::{EventReader, Input};

/// Events, notes (debug text) and error text of a reader read to its end.
fn drain(r: &mut dyn EventReader, visiting: bool) -> (Vec<Event>, String, Option<String>) {
    let mut all = Vec::new();
    let mut batch = Vec::new();
    let err = loop {
        let res = if visiting {
            r.visit_batch(&mut batch, &mut |evs| all.extend_from_slice(evs))
        } else {
            let res = r.next_batch(&mut batch);
            all.append(&mut batch);
            res
        };
        match res {
            Ok(true) => {}
            Ok(false) => break None,
            Err(e) => break Some(e.to_string()),
        }
    };
    (all, format!("{:?}", r.quality()), err)
}

/// The whole target, as a plain function.
fn check(data: &[u8]) {
    let path = std::env::temp_dir().join(format!(
        "stallscope-fuzz-leanevents-{}.data",
        std::process::id()
    ));
    if std::fs::write(&path, data).is_err() {
        return;
    }
    let Some(p) = path.to_str() else { return };
    // two walker threads, and one walker run on the ordering thread (the default on two
    // CPUs or fewer)
    for (visiting, walkers) in [(false, 2), (true, 1)] {
        let Ok(mut lean) = LeanEventReader::open_segmented(p, 0, 4096, walkers) else {
            break;
        };
        let got = drain(&mut lean, visiting);
        let want = match Input::open(p).and_then(|i| PerfDataReader::open(i, 0)) {
            Ok(mut r) => drain(&mut r, false),
            Err(e) => (Vec::new(), String::new(), Some(e.to_string())),
        };
        assert_eq!(got.2, want.2, "the same error");
        if want.2.is_some() {
            assert!(got.0.len() >= want.0.len());
            assert!(
                got.0[..want.0.len()] == want.0[..],
                "the general reader's events first"
            );
        } else {
            assert!(got.0 == want.0, "the same events");
            assert_eq!(got.1, want.1, "the same notes");
        }
    }
    let _ = std::fs::remove_file(&path);
}

fuzz_target!(|data: &[u8]| check(data));
