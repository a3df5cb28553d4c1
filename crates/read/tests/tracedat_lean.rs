//! The lean trace.dat source against its definition: on every trace.dat fixture it takes,
//! its batches concatenated equal `SchedRecordEncoder` applied to the general reader's
//! events of the same file (records field by field, names resolved), threaded and inline.
//! Fixtures it must refuse (data-quality notes it cannot carry) are refused; truncated and
//! corrupted copies bail out or are refused without panicking. Every fixture's CPUs are
//! also cut into pieces of a few sub-buffers (decoded in parallel, merged back in order).
//! Also: the general reader's data-quality examples do not depend on thread timing.

mod lean_support;

use std::io::Read;
use std::path::{Path, PathBuf};

use stallscope_model::sched_record::SchedRecordEncoder;
use stallscope_model::{Comm, Problem, SchedBatch, SchedRecord, SchedRecordKind};
use stallscope_read::lean::SchedSource;
use stallscope_read::tracedat::{lean, TraceDatReader};
use stallscope_read::{EventReader, Input};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The fixture's bytes (decompressed).
fn bytes(fixture: &str) -> Vec<u8> {
    let raw = std::fs::read(root().join(fixture)).expect("fixture");
    let mut out = Vec::new();
    if fixture.ends_with(".xz") {
        xz2::read::XzDecoder::new(&raw[..])
            .read_to_end(&mut out)
            .unwrap();
    } else if fixture.ends_with(".zst") {
        zstd::stream::read::Decoder::new(&raw[..])
            .unwrap()
            .read_to_end(&mut out)
            .unwrap();
    } else {
        return raw;
    }
    out
}

/// A private temporary copy of `data`: a new file on every call, since tests run in
/// parallel and rewriting a file another test has mapped would kill the process (SIGBUS).
fn temp_file(name: &str, data: &[u8]) -> PathBuf {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("stallscope-tdlean-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join(format!("{n}-{name}"));
    std::fs::write(&p, data).unwrap();
    p
}

/// A record with its name (for the kinds that carry one) instead of a comm index.
type Resolved = (SchedRecord, Option<Comm>);

fn resolve(batch: &SchedBatch, out: &mut Vec<Resolved>) {
    for r in &batch.records {
        let name = match r.kind {
            SchedRecordKind::PayloadComm | SchedRecordKind::Fork | SchedRecordKind::TaskComm => {
                Some(batch.comm(r.value))
            }
            _ => None,
        };
        let mut r = *r;
        if name.is_some() {
            r.value = 0;
        }
        out.push((r, name));
    }
}

/// The definition: the encoder over the general reader's events (and its data quality).
fn general(path: &Path) -> (Vec<Resolved>, String) {
    let input = Input::open(path.to_str().unwrap()).unwrap();
    let mut reader = TraceDatReader::open(input, 0).unwrap();
    let mut enc = SchedRecordEncoder::default();
    let mut batch = SchedBatch::default();
    let mut out = Vec::new();
    while let Some(ev) = reader.next_event().unwrap() {
        batch.clear();
        enc.push(&ev, &mut batch);
        resolve(&batch, &mut out);
    }
    batch.clear();
    enc.finish(&mut batch);
    resolve(&batch, &mut out);
    (out, serde_json::to_string(reader.quality()).unwrap())
}

/// The lean source's output and data quality, or why it refused / bailed out.
fn lean_records(path: &Path, threaded: bool) -> Result<(Vec<Resolved>, String), String> {
    lean_sized(path, threaded, None)
}

/// [`lean_records`] with `(batch records, piece sub-buffers)` instead of the defaults.
fn lean_sized(
    path: &Path,
    threaded: bool,
    sizes: Option<(usize, usize)>,
) -> Result<(Vec<Resolved>, String), String> {
    lean_pieces(path, threaded, sizes).map(|(out, _)| out)
}

/// [`lean_sized`], and how many pieces the CPU data was decoded in.
fn lean_pieces(
    path: &Path,
    threaded: bool,
    sizes: Option<(usize, usize)>,
) -> Result<((Vec<Resolved>, String), u64), String> {
    let p = path.to_str().unwrap();
    let src = match sizes {
        Some((batch, piece)) => lean::open_sized(p, Some(threaded), batch, piece),
        None => lean::open_with(p, Some(threaded)),
    };
    let mut src = src.ok_or_else(|| "refused at open".to_string())?;
    assert!(
        !src.waking_declared(),
        "the general reader declares none at open"
    );
    let mut batch = SchedBatch::default();
    let mut out = Vec::new();
    let mut last_progress = 0;
    while src.next_batch(&mut batch).map_err(|b| b.reason)? {
        assert!(!batch.records.is_empty());
        resolve(&batch, &mut out);
        let (done, total) = src.progress();
        assert!(done >= last_progress && done <= total);
        last_progress = done;
    }
    assert!(batch.records.is_empty());
    let quality = serde_json::to_string(&src.quality()).unwrap();
    Ok(((out, quality), src.pieces()))
}

fn assert_same(fixture: &str, lean: &(Vec<Resolved>, String), general: &(Vec<Resolved>, String)) {
    for (i, (l, g)) in lean.0.iter().zip(&general.0).enumerate() {
        assert_eq!(l, g, "{fixture}: record {i} differs");
    }
    assert_eq!(lean.0.len(), general.0.len(), "{fixture}: record counts");
    assert_eq!(lean.1, general.1, "{fixture}: data quality");
}

/// `fixtures/lean-paths.txt`: the trace.dat fixtures the lean path must take (among them
/// lost-events markers, CPUSTAT losses, an instance read, discarded items, block and other
/// non-scheduler events).
fn taken() -> Vec<String> {
    let out: Vec<String> = lean_support::lean_paths(&root())
        .into_iter()
        .filter(|(p, lean)| *lean && lean_support::is_tracedat(p))
        .map(|(p, _)| p)
        .collect();
    assert!(out.len() >= 8, "{} trace.dat fixtures listed", out.len());
    out
}

/// trace.dat fixtures the lean path must refuse, and why.
const REFUSED: &[(&str, &str)] = &[
    // chunk-compressed CPU data
    ("fixtures/tracedat/sched_v7_zstd.dat", "refused at open"),
];

#[test]
fn lean_equals_the_encoder_over_general_events() {
    for fixture in &taken() {
        let name = Path::new(fixture).file_name().unwrap().to_str().unwrap();
        let path = temp_file(name, &bytes(fixture));
        let want = general(&path);
        assert!(
            want.0
                .iter()
                .any(|(r, _)| r.kind == SchedRecordKind::Switch)
                || fixture.contains("block"),
            "{fixture}: no switches"
        );
        for threaded in [false, true] {
            let got = lean_records(&path, threaded)
                .unwrap_or_else(|why| panic!("{fixture}: lean path not taken: {why}"));
            assert_same(fixture, &got, &want);
        }
    }
}

/// Tiny batches and pieces put a batch end on every piece end and every CPU switch: the
/// merge must keep its order across all of them.
#[test]
fn every_batch_and_piece_size_gives_the_same_records() {
    for fixture in [
        "fixtures/tracedat/sched_v6.dat.xz",
        "fixtures/detectors/worker-flood/sparse.dat.xz",
    ] {
        let name = Path::new(fixture).file_name().unwrap().to_str().unwrap();
        let path = temp_file(name, &bytes(fixture));
        let want = general(&path);
        for (batch, piece) in [(1, 1), (2, 3), (5, 7), (64, 1), (3, 300), (4096, 2)] {
            for threaded in [false, true] {
                let got = lean_sized(&path, threaded, Some((batch, piece)))
                    .unwrap_or_else(|why| panic!("{fixture}: {why}"));
                assert_same(
                    &format!("{fixture} {batch}/{piece}/{threaded}"),
                    &got,
                    &want,
                );
            }
        }
    }
}

/// Every CPU of every fixture cut into pieces of 1–3 sub-buffers, decoded side by side
/// and merged back: the same records and data quality (lost-events markers, discarded
/// items, CPUSTAT losses summed per CPU over its pieces) as the general reader.
#[test]
fn cpus_split_into_small_pieces_give_the_same_records() {
    for fixture in &taken() {
        let name = Path::new(fixture).file_name().unwrap().to_str().unwrap();
        let path = temp_file(name, &bytes(fixture));
        let want = general(&path);
        let (_, whole) = lean_pieces(&path, true, None).unwrap();
        for piece in [1, 2, 3] {
            for threaded in [false, true] {
                let (got, pieces) = lean_pieces(&path, threaded, Some((8192, piece)))
                    .unwrap_or_else(|why| panic!("{fixture}: lean path not taken: {why}"));
                // One piece per sub-buffer: at least 4 per CPU on every fixture.
                let least = if piece == 1 { whole * 4 } else { whole + 1 };
                assert!(
                    pieces >= least,
                    "{fixture}: {pieces} pieces of {piece} sub-buffers, {whole} by default"
                );
                assert_same(&format!("{fixture} {piece}/{threaded}"), &got, &want);
            }
        }
    }
}

#[test]
fn lean_refuses_what_it_cannot_report() {
    for (fixture, why) in REFUSED {
        let name = Path::new(fixture).file_name().unwrap().to_str().unwrap();
        let path = temp_file(name, &bytes(fixture));
        for threaded in [false, true] {
            let Err(err) = lean_records(&path, threaded) else {
                panic!("{fixture}: taken")
            };
            assert!(err.contains(why), "{fixture}: {err}");
        }
    }
}

/// File offset of the first event record (not a lost-events marker), from the general
/// reader's spans.
fn first_record_offset(path: &Path) -> u64 {
    let input = Input::open(path.to_str().unwrap()).unwrap();
    let mut r = TraceDatReader::open(input, 0).unwrap();
    let mut ev = r.next_event().unwrap().unwrap();
    while matches!(ev.kind, stallscope_model::EventKind::Lost { .. }) {
        ev = r.next_event().unwrap().unwrap();
    }
    match ev.span.pos() {
        stallscope_model::SpanPos::Byte(b) => b,
        other => panic!("{other:?}"),
    }
}

#[test]
fn damaged_copies_bail_out_without_panicking() {
    let data = bytes("fixtures/tracedat/sched_v6.dat.xz");
    let path = temp_file("intact.dat", &data);
    let first = first_record_offset(&path) as usize;
    // Truncated: refused at open (the CPU areas end past the file), never a panic.
    for cut in [data.len() / 2, first + 100, data.len() - 1] {
        let p = temp_file("cut.dat", &data[..cut]);
        assert!(
            lean_records(&p, false).is_err(),
            "truncated at {cut}: taken"
        );
    }
    // A corrupted event header (type_len 0 with a length word of 1): the general reader
    // counts a bad sub-buffer, so the lean source bails out.
    let mut bad = data.clone();
    bad[first..first + 8].copy_from_slice(&[0, 0, 0, 0, 1, 0, 0, 0]);
    let p = temp_file("bad_item.dat", &bad);
    let Err(err) = lean_records(&p, true) else {
        panic!("a corrupted item was taken")
    };
    assert!(err.contains("sub-buffer"), "{err}");
    // Garbage over many places: whatever happens, no panic, and when the lean path does
    // finish, it agrees with the general reader.
    for step in [997usize, 4093, 65_537] {
        let mut g = data.clone();
        let mut i = first;
        while i < g.len() {
            g[i] ^= 0x5a;
            i += step;
        }
        let p = temp_file("garbage.dat", &g);
        if let Ok(got) = lean_records(&p, false) {
            assert_same("garbage", &got, &general(&p));
        }
        let _ = lean_records(&p, true);
    }
}

/// Data-quality examples of the general reader come in the same order whatever the
/// threads do (they used to follow the worker threads' timing).
#[test]
fn general_reader_quality_examples_are_deterministic() {
    let fixture = "fixtures/detectors/dispatch-starvation/deadline.trace.dat.zst";
    let path = temp_file("deadline.dat", &bytes(fixture));
    let quality = |threads: Option<usize>| {
        let input = Input::open(path.to_str().unwrap()).unwrap();
        let mut r = TraceDatReader::open_with_threads(input, 0, threads).unwrap();
        while r.next_event().unwrap().is_some() {}
        let dq = r.quality();
        assert!(dq.count(Problem::TracedatDiscardedRecords) > 0, "{fixture}");
        (
            serde_json::to_string(dq).unwrap(),
            r.meta().declared_events.clone(),
        )
    };
    let inline = quality(Some(0));
    for threads in [Some(1), Some(2), Some(4), None, Some(2), Some(3), Some(2)] {
        assert_eq!(quality(threads), inline, "{threads:?} threads vs inline");
    }
}

/// The benchmark file, when present (`STALLSCOPE_LEAN_BIG=path`): too big for every run.
#[test]
fn big_file_when_given() {
    let Ok(p) = std::env::var("STALLSCOPE_LEAN_BIG") else {
        return;
    };
    let path = PathBuf::from(p);
    let got = lean_records(&path, true).expect("lean path taken");
    assert_same("big", &got, &general(&path));
}

/// Deterministic mutations of a real file (the fuzz target's check in miniature): the lean
/// source may bail out, but when it finishes it agrees with the general reader.
#[test]
fn mutated_files_never_make_the_readers_differ() {
    let data = bytes("fixtures/tracedat/sched_v6.dat.xz");
    let path = temp_file("intact2.dat", &data);
    let first = first_record_offset(&path) as usize;
    assert_eq!(
        lean::compare_with_general("intact.dat", data.clone()),
        Ok(true)
    );
    let mut seed = 0x9e37_79b9_7f4a_7c15u64;
    let mut taken = 0;
    for round in 0..40 {
        let mut m = data.clone();
        for _ in 0..1 + round % 4 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let at = first + (seed as usize) % (m.len() - first);
            m[at] ^= 1u8 << (seed >> 61);
        }
        match lean::compare_with_general("mutated.dat", m) {
            Ok(true) => taken += 1,
            Ok(false) => {}
            Err(diff) => panic!("round {round}: {diff}"),
        }
    }
    assert!(taken > 0, "every mutation made the lean source bail out");
}

/// Missed-events markers with stored counts on later sub-buffers of CPU 0 (whose CPUSTAT
/// losses the markers then partly explain): split into pieces, the lean source must sum
/// each CPU's marker counts over all its pieces and keep the notes in file order, as the
/// general reader does.
#[test]
fn lost_events_markers_in_later_pieces_sum_per_cpu() {
    const PAGE: u64 = 4096;
    const COMMIT_MASK: u64 = (1 << 27) - 1;
    let fixture = "fixtures/tracedat/sched_v7_none.dat.xz";
    let mut data = bytes(fixture);
    let path = temp_file("v7.dat", &data);
    // Sub-buffers (4 KiB, page-aligned in this file) holding CPU 0's events, in file order.
    let mut pages: Vec<u64> = Vec::new();
    let mut reader = TraceDatReader::open(Input::open(path.to_str().unwrap()).unwrap(), 0).unwrap();
    while let Some(ev) = reader.next_event().unwrap() {
        if let (0, stallscope_model::SpanPos::Byte(b)) = (ev.cpu, ev.span.pos()) {
            if pages.last() != Some(&(b / PAGE * PAGE)) {
                pages.push(b / PAGE * PAGE);
            }
        }
    }
    assert!(pages.len() > 20, "{} pages", pages.len());
    // Markers (counts 7, 11, 13) on pages with room for the count after their data.
    let mut marked = Vec::new();
    for (&page, count) in pages[pages.len() / 4..]
        .iter()
        .step_by(5)
        .zip([7u64, 11, 13])
    {
        let at = page as usize;
        let commit = u64::from_le_bytes(data[at + 8..at + 16].try_into().unwrap());
        let end = at + 16 + (commit & COMMIT_MASK) as usize;
        assert!(end + 8 <= at + PAGE as usize, "page {page:#x} full");
        let flags = commit | (1 << 31) | (1 << 30);
        data[at + 8..at + 16].copy_from_slice(&flags.to_le_bytes());
        data[end..end + 8].copy_from_slice(&count.to_le_bytes());
        marked.push(page);
    }
    assert_eq!(marked.len(), 3);
    let path = temp_file("v7-markers.dat", &data);
    let want = general(&path);
    for page in &marked {
        assert!(
            want.1.contains(&format!("CPU 0 sub-buffer at {page:#x}")),
            "marker at {page:#x} not noted: {}",
            want.1
        );
    }
    assert!(
        want.1
            .contains("31 of them reported by missed-events markers"),
        "{}",
        want.1
    );
    for piece in [0, 1, 2, 5] {
        for threaded in [false, true] {
            let got = lean_sized(&path, threaded, Some((8192, piece)))
                .unwrap_or_else(|why| panic!("lean path not taken: {why}"));
            assert_same(&format!("markers {piece}/{threaded}"), &got, &want);
        }
    }
}
