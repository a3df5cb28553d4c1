//! `fixtures/lean-paths.txt` for the lean-path tests (perf_data_lean, perf_data_lean_events
//! (byte-flipped copies only) and tracedat_lean here,
//! and crates/cli/tests/lean_latency.rs, which includes this file by path): every
//! scheduler-bearing perf.data / trace.dat fixture and whether the lean readers must take it.

#![allow(dead_code)]

use std::path::Path;

/// `(path, must the lean path take it)` for every fixture line of the list, in order.
pub fn lean_paths(root: &Path) -> Vec<(String, bool)> {
    let list = std::fs::read_to_string(root.join("fixtures/lean-paths.txt"))
        .expect("fixtures/lean-paths.txt");
    let mut out = Vec::new();
    for line in list.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        let mut words = line.split_whitespace();
        match (words.next(), words.next()) {
            (Some("lean"), Some(p)) => out.push((p.to_string(), true)),
            (Some("general"), Some(p)) => out.push((p.to_string(), false)),
            (None, _) => {}
            _ => panic!("fixtures/lean-paths.txt: bad line {line:?}"),
        }
    }
    assert!(
        out.len() > 20,
        "fixtures/lean-paths.txt lists {} fixtures",
        out.len()
    );
    out
}

/// Whether `path` is a trace.dat fixture (else perf.data).
pub fn is_tracedat(path: &str) -> bool {
    !path.contains(".perf.data")
}

/// `count` copies of `src`, each with 8 bytes set to pseudo-random values at pseudo-random
/// places (a fixed seed: the same copies every run), for robustness tests.
pub fn flipped_copies(src: &[u8], count: usize) -> Vec<Vec<u8>> {
    let mut rng = stallscope_read::test_rng::XorShift::default();
    let mut next = move || rng.next_u64();
    (0..count)
        .map(|_| {
            let mut bytes = src.to_vec();
            for _ in 0..8 {
                let r = next();
                let i = (r as usize) % bytes.len();
                bytes[i] = (r >> 32) as u8;
            }
            bytes
        })
        .collect()
}
