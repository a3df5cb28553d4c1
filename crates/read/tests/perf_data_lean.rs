//! The lean perf.data source (`perf_data::lean`) against its definition: on every perf.data
//! fixture it takes, its batches, concatenated and with names resolved, equal
//! `SchedRecordEncoder` applied to the general reader's events of the same file. Fixtures it
//! must take are listed (a bail-out there fails); on damaged copies it bails out without
//! panicking.

mod lean_support;

use std::io::Read;
use std::path::{Path, PathBuf};

use stallscope_model::sched_record::SchedRecordEncoder;
use stallscope_model::{Comm, PrevState, SchedBatch, SchedRecordKind};
use stallscope_read::lean::SchedSource;
use stallscope_read::perf_data::{lean, PerfDataReader};
use stallscope_read::{EventReader, Input};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The perf.data fixtures of `fixtures/lean-paths.txt`.
fn perf_fixtures() -> Vec<(String, bool)> {
    lean_support::lean_paths(&root())
        .into_iter()
        .filter(|(p, _)| !lean_support::is_tracedat(p))
        .collect()
}

/// One record with its name resolved (comm indices differ between batchings).
type Resolved = (
    SchedRecordKind,
    u64,
    u32,
    u64,
    i32,
    i32,
    u64,
    PrevState,
    Comm,
);

fn resolve(b: &SchedBatch, out: &mut Vec<Resolved>) {
    for r in &b.records {
        let (value, comm) = match r.kind {
            SchedRecordKind::PayloadComm | SchedRecordKind::Fork | SchedRecordKind::TaskComm => {
                (0, b.comm(r.value))
            }
            _ => (r.value, Comm::EMPTY),
        };
        out.push((
            r.kind,
            r.ts,
            r.cpu,
            r.pos,
            r.a,
            r.b,
            value,
            r.prev_state,
            comm,
        ));
    }
}

/// The fixture as a plain file (decompressed into `dir` when it is compressed).
fn plain(fixture: &str, dir: &Path) -> PathBuf {
    let src = root().join(fixture);
    if !fixture.ends_with(".xz") && !fixture.ends_with(".zst") {
        return src;
    }
    let input = Input::open(src.to_str().unwrap()).unwrap();
    let mut bytes = Vec::new();
    input.into_reader().read_to_end(&mut bytes).unwrap();
    let name = Path::new(fixture).file_name().unwrap().to_str().unwrap();
    let dst = dir.join(name.trim_end_matches(".xz").trim_end_matches(".zst"));
    std::fs::write(&dst, bytes).unwrap();
    dst
}

/// The encoder over the general reader's events; `None` when the general reader reports
/// an error or a data-quality note (the lean path must bail out then).
fn general(path: &str) -> Option<Vec<Resolved>> {
    let mut reader = PerfDataReader::open(Input::open(path).ok()?, 0).ok()?;
    let mut enc = SchedRecordEncoder::default();
    let mut batch = SchedBatch::default();
    while let Some(ev) = reader.next_event().ok()? {
        enc.push(&ev, &mut batch);
    }
    enc.finish(&mut batch);
    if !reader.quality().is_empty() {
        return None;
    }
    let mut out = Vec::new();
    resolve(&batch, &mut out);
    Some(out)
}

/// The lean records, or the bail-out reason.
fn lean_records(path: &str) -> Result<Vec<Resolved>, String> {
    lean_records_cut(path, None)
}

/// [`lean_records`] with the data section cut into segments of about `segment` bytes.
fn lean_records_cut(path: &str, segment: Option<u64>) -> Result<Vec<Resolved>, String> {
    lean_records_segs(path, segment).map(|(r, _)| r)
}

/// [`lean_records_cut`] and the number of segments.
fn lean_records_segs(path: &str, segment: Option<u64>) -> Result<(Vec<Resolved>, usize), String> {
    let mut src = match segment {
        Some(s) => lean::open_lean_segmented(path, s),
        None => lean::open_lean(path),
    }
    .map_err(|b| b.reason)?;
    let segs = src.segment_count();
    let mut batch = SchedBatch::default();
    let mut out = Vec::new();
    while src.next_batch(&mut batch).map_err(|b| b.reason)? {
        assert!(!batch.records.is_empty(), "{path}: an empty batch");
        resolve(&batch, &mut out);
    }
    let (done, total) = src.progress();
    assert_eq!(done, total, "{path}: progress at the end");
    Ok((out, segs))
}

fn temp_dir(tag: &str) -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("stallscope-perflean-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn lean_records_equal_the_encoder_over_general_events() {
    let dir = temp_dir("eq");
    let (mut switches, mut taken, mut cuts) = (0, 0, 0);
    let fixtures = perf_fixtures();
    let must = fixtures.iter().filter(|f| f.1).count();
    for (fixture, must_be_lean) in &fixtures {
        let fixture = fixture.as_str();
        let path = plain(fixture, &dir);
        let path = path.to_str().unwrap();
        let want = general(path);
        match lean_records(path) {
            Ok(_) if want.is_none() => {
                panic!("{fixture}: lean answered where the general reader reports")
            }
            Ok(got) => {
                let want = want.unwrap_or_default();
                // The same with the data cut into small segments read by two threads.
                for seg in [64 << 10, 300 << 10] {
                    let (cut, n) = lean_records_segs(path, Some(seg))
                        .unwrap_or_else(|why| panic!("{fixture} cut {seg}: {why}"));
                    cuts += n - 1;
                    assert!(
                        cut == want,
                        "{fixture}: cut into {seg}-byte segments differs"
                    );
                }
                assert_eq!(got.len(), want.len(), "{fixture}: record count");
                for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                    assert_eq!(g, w, "{fixture}: record {i}");
                }
                assert!(!want.is_empty(), "{fixture}: the comparison needs records");
                switches += want
                    .iter()
                    .filter(|r| r.0 == SchedRecordKind::Switch)
                    .count();
                taken += 1;
            }
            Err(why) => assert!(!must_be_lean, "{fixture} bailed out: {why}"),
        }
    }
    assert!(
        taken >= must && must >= 15 && switches > 10_000,
        "{taken} files, {switches} switches"
    );
    assert!(
        cuts > 20,
        "only {cuts} segment cuts: the two-thread path is barely tested"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn damaged_copies_bail_out_without_panicking() {
    let dir = temp_dir("bad");
    let src = std::fs::read(root().join("fixtures/sched/starve.perf.data")).unwrap();
    let whole = lean_records(
        root()
            .join("fixtures/sched/starve.perf.data")
            .to_str()
            .unwrap(),
    )
    .expect("the intact file takes the lean path");
    // Data section bounds from the header (offset 40: u64 offset, u64 size).
    let data_off = u64::from_le_bytes(src[40..48].try_into().unwrap()) as usize;
    let data_size = u64::from_le_bytes(src[48..56].try_into().unwrap()) as usize;
    let path = dir.join("bad.perf.data");
    let path_s = path.to_str().unwrap();

    // A record size of 0 in the middle of the data: an impossible size.
    let mut zero = src.clone();
    let mut at = data_off;
    for _ in 0..200 {
        at += usize::from(u16::from_le_bytes([zero[at + 6], zero[at + 7]]));
    }
    zero[at + 6..at + 8].copy_from_slice(&0u16.to_le_bytes());
    std::fs::write(&path, &zero).unwrap();
    let why = lean_records(path_s).expect_err("zero-size record must bail out");
    assert!(why.contains("size"), "{why}");

    // An unknown record type.
    let mut unknown = src.clone();
    unknown[at..at + 4].copy_from_slice(&4000u32.to_le_bytes());
    std::fs::write(&path, &unknown).unwrap();
    let why = lean_records(path_s).expect_err("unknown record type must bail out");
    assert!(why.contains("type 4000"), "{why}");

    // A LOST record (the general reader notes lost events).
    let mut lost = src.clone();
    lost[at..at + 4].copy_from_slice(&2u32.to_le_bytes());
    std::fs::write(&path, &lost).unwrap();
    assert!(lean_records(path_s).is_err());

    // Truncated files: cut inside the data section (the header still claims the whole
    // section: the general reader refuses to open, so does the lean one) and a data section
    // that claims a record past its end.
    for cut in [data_off + data_size / 2, data_off + 3] {
        std::fs::write(&path, &src[..cut]).unwrap();
        assert!(lean_records(path_s).is_err(), "cut at {cut}");
    }
    let mut short = src.clone();
    short[48..56].copy_from_slice(&((data_size - 5) as u64).to_le_bytes());
    std::fs::write(&path, &short).unwrap();
    let why = lean_records(path_s).expect_err("a data section ending inside a record");
    assert!(why.contains("truncated") || why.contains("size"), "{why}");

    // Random byte flips anywhere: never a panic; when the lean path still answers, it
    // answers what the general reader would.
    for bytes in lean_support::flipped_copies(&src, 40) {
        std::fs::write(&path, &bytes).unwrap();
        if let Ok(got) = lean_records(path_s) {
            assert_eq!(
                Some(got),
                general(path_s),
                "lean answered, so must the general reader"
            );
        }
    }
    assert!(!whole.is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}
