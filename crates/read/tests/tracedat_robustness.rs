//! Robustness of the trace.dat reader on damaged files (the stable-toolchain companion of
//! `fuzz/fuzz_targets/tracedat.rs`): truncation at every few hundred bytes and byte flips
//! all over real fixtures must end in events or a `ReadError` naming the file, never a
//! panic or a hang; damage inside CPU data must show up as data-quality counters.

use std::io::Read;

use stallscope_read::tracedat::TraceDatReader;
use stallscope_read::{EventReader, Input};

fn fixture(name: &str) -> Vec<u8> {
    let p = format!(
        "{}/../../fixtures/tracedat/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    let raw = std::fs::read(&p).unwrap();
    if name.ends_with(".xz") {
        let mut out = Vec::new();
        xz2::read::XzDecoder::new(&raw[..])
            .read_to_end(&mut out)
            .unwrap();
        out
    } else {
        raw
    }
}

/// Reads everything; `Ok((events, quality keys))` or the error text.
fn drain(bytes: Vec<u8>) -> Result<(usize, Vec<String>), String> {
    let input = Input::from_bytes("damaged.dat", bytes).map_err(|e| e.to_string())?;
    let mut r = TraceDatReader::open(input, 0).map_err(|e| e.to_string())?;
    let mut n = 0;
    loop {
        match r.next_event() {
            Ok(Some(_)) => n += 1,
            Ok(None) => break,
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok((
        n,
        r.quality().entries().map(|(k, _)| k.to_string()).collect(),
    ))
}

#[test]
fn truncation_anywhere_is_an_error_with_the_path_or_a_shorter_read() {
    for name in ["sched_v7_zstd.dat", "sched_v6.dat.xz"] {
        let full = fixture(name);
        let (all, _) = drain(full.clone()).unwrap();
        let step = (full.len() / 60).max(1);
        for cut in (0..full.len()).step_by(step) {
            match drain(full[..cut].to_vec()) {
                Ok((n, _)) => assert!(n <= all, "{name} cut at {cut}: {n} > {all}"),
                Err(e) => assert!(e.contains("damaged.dat"), "{name} cut at {cut}: {e}"),
            }
        }
    }
}

#[test]
fn flipped_bytes_never_panic_and_damaged_pages_are_counted() {
    for name in [
        "sched_v7_zstd.dat",
        "sched_v6.dat.xz",
        "sched_v7_none.dat.xz",
    ] {
        let full = fixture(name);
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        for round in 0..80 {
            let mut b = full.clone();
            for _ in 0..8 {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                let at = (seed as usize) % b.len();
                b[at] ^= (seed >> 32) as u8 | 1;
            }
            if let Err(e) = drain(b) {
                assert!(e.contains("damaged.dat"), "{name} round {round}: {e}");
            }
        }
    }
    // Garbage over the v6 CPU data (uncompressed, at the end of the file): the metadata is
    // intact, so the file opens and the damage is counted, not fatal.
    let mut v6 = fixture("sched_v6.dat.xz");
    let len = v6.len();
    for (i, b) in v6[len - 200_000..].iter_mut().enumerate() {
        *b = (i as u8).wrapping_mul(37) ^ 0x5a;
    }
    let (_, keys) = drain(v6).unwrap();
    assert!(
        keys.iter().any(|k| k.starts_with("tracedat_")),
        "damage not counted: {keys:?}"
    );
}
