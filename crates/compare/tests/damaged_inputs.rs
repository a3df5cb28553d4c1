//! Damaged metric files never panic: every committed fixture of fixtures/compare, truncated at
//! many points and with bytes flipped (deterministic SplitMix64 mutations), goes through the
//! sniffer and the parsers, which must return a value or an error naming the file.

use stallscope_compare::{metrics, stats::rng::SplitMix64};

fn fixtures() -> Vec<(String, Vec<u8>)> {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/compare");
    let mut out = Vec::new();
    for dir in ["perf-stat", "fio"] {
        let mut names: Vec<_> = std::fs::read_dir(root.join(dir))
            .expect("fixture dir")
            .map(|e| e.expect("entry").path())
            .collect();
        names.sort();
        for p in names.into_iter().take(4) {
            out.push((p.display().to_string(), std::fs::read(&p).expect("read")));
        }
    }
    out
}

fn parse_all(path: &str, bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    for format in ["perf-stat", "perf-stat-csv", "fio-json"] {
        if let Err(e) = metrics::parse(path, format, &text) {
            assert_eq!(e.path, path);
        }
    }
    let _ = metrics::sniff(&text);
}

#[test]
fn truncated_and_flipped_files_do_not_panic() {
    let mut rng = SplitMix64::new(99);
    let files = fixtures();
    assert!(files.len() >= 6, "fixtures missing");
    for (path, bytes) in &files {
        parse_all(path, bytes);
        for _ in 0..40 {
            let cut = rng.below(bytes.len() + 1);
            parse_all(path, &bytes[..cut]);
            let mut flipped = bytes.clone();
            for _ in 0..1 + rng.below(8) {
                let i = rng.below(flipped.len());
                flipped[i] = (rng.next_u64() & 0xff) as u8;
            }
            parse_all(path, &flipped);
        }
    }
}
