//! Fuzz target: arbitrary bytes through the whole analysis — format sniffing, the reader,
//! the merge, the timeline, every detector with its default thresholds, and the JSON and
//! text reports. Any panic, hang or allocation beyond what the input's size and CPU count
//! justify is a bug (the readers' own targets never reach the detectors).
//!
//! `cargo +nightly fuzz run analyze` (seed corpus: `fixtures/`, see scripts/fuzz.sh).

#![no_main]

use libfuzzer_sys::fuzz_target;
use stallscope::detect::registry::DETECTORS;
use stallscope::detect::{Engine, Params};
use stallscope::model::{Capabilities, Report};
use stallscope::read::{open_as, sniff::sniff, Input};

fn analyze(data: &[u8]) {
    let Ok(input) = Input::from_bytes("fuzz.in", data.to_vec()) else {
        return;
    };
    let Ok(format) = sniff(&input) else {
        return;
    };
    let Ok(reader) = open_as(input, format, 0) else {
        return;
    };
    let mut inputs = stallscope::Inputs::from_readers(vec![reader]);
    let metas: Vec<_> = inputs.metas().into_iter().cloned().collect();
    let meta_refs: Vec<_> = metas.iter().collect();
    let detectors = DETECTORS
        .iter()
        .map(|e| (e.make)(&Params::defaults(e.info.params)))
        .collect();
    let mut engine = Engine::new(detectors, &meta_refs);
    let mut buf = Vec::new();
    while let Ok(true) = inputs.visit_batch(&mut buf, &mut |run| engine.process_run(run)) {}
    let out = engine.finish();
    let mut report = Report::new();
    report.capabilities = Capabilities {
        events: out.events,
        events_read: out.events_read,
        first_ts_ns: out.first_ts,
        last_ts_ns: out.last_ts,
        system_context: false,
    };
    report.data_quality = stallscope::report::quality_entries(&out.quality);
    for o in out.outcomes {
        if let Ok(f) = o.result {
            report.findings.extend(f);
        }
    }
    report.sort_findings();
    let mut sink = Vec::new();
    let _ = stallscope::report::json::write(&mut sink, &report);
    let _ = stallscope::report::text::write(
        &mut sink,
        &report,
        stallscope::report::text::TextOptions {
            oneline: false,
            color: false,
            quiet: false,
        },
    );
}

fuzz_target!(|data: &[u8]| analyze(data));
