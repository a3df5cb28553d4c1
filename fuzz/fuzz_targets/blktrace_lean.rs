//! Fuzz target: arbitrary bytes through the lean blktrace walk
//! (`stallscope_read::blktrace::lean::LeanBlktrace`), read from memory as one per-CPU file
//! and, split at a point chosen by the first byte, as two per-CPU files merged by time. The
//! walk must end (`Ok` or `Unusual`); any panic, hang or huge allocation is a bug.
//!
//! `cargo +nightly fuzz run blktrace_lean` (seed corpus: `fixtures/block/loop0/loop0.blktrace.*`).

#![no_main]

use libfuzzer_sys::fuzz_target;
use stallscope_read::blktrace::lean::{LeanBlktrace, LeanRecord};
use stallscope_read::Input;

/// Walks `files` (each an in-memory per-CPU file) and looks at every record.
fn walk(files: &[&[u8]]) {
    let mut inputs = Vec::new();
    for (i, bytes) in files.iter().enumerate() {
        let Ok(index) = u16::try_from(i) else { return };
        match Input::from_bytes(&format!("fuzz.blktrace.{i}"), bytes.to_vec()) {
            Ok(input) => inputs.push((index, input)),
            Err(_) => return,
        }
    }
    let mut last_ts = 0u64;
    let _ = LeanBlktrace::new(inputs).for_each(|rec| match rec {
        LeanRecord::Untracked => {}
        LeanRecord::Block(at, ev) => {
            last_ts = last_ts.max(at.ts);
            let _ = (ev.action, ev.sector, ev.comm);
        }
    });
}

/// The whole target, as a plain function.
fn drain(data: &[u8]) {
    walk(&[data]);
    if let Some((&first, rest)) = data.split_first() {
        let at = usize::from(first) * rest.len() / 256;
        let (a, b) = rest.split_at(at);
        walk(&[a, b]);
    }
}

fuzz_target!(|data: &[u8]| drain(data));
