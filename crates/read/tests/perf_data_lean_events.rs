//! The lean event reader (`perf_data::lean::events::LeanEventReader`, what `stallscope_read::open`
//! uses for plain perf.data files) against the general reader: on every perf.data fixture
//! and sample it takes, the same events in the same order (whole `Event`s compared,
//! names, priorities, waker tids and spans included), the same metadata and no
//! data-quality note, read by batches, by `visit_batch` runs and with the data cut into
//! small segments read by two threads; on damaged copies, where the walkers stop half
//! way, the general reader takes over without changing the result (events, notes, error).

mod lean_support;

use std::io::Read;
use std::path::{Path, PathBuf};

use stallscope_model::{DataQuality, Event, EventKind};
use stallscope_read::perf_data::lean::events::LeanEventReader;
use stallscope_read::perf_data::PerfDataReader;
use stallscope_read::{EventReader, Input, ReadError};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Every perf.data fixture and sample (perf.data in file mode or not, compressed or not).
fn perf_files() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(&p, out);
            } else {
                let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
                let base = name.trim_end_matches(".xz").trim_end_matches(".zst");
                if base.ends_with(".perf.data")
                    || base.ends_with(".data") && !base.ends_with(".dat")
                {
                    out.push(p);
                }
            }
        }
    }
    let mut out = Vec::new();
    walk(&root().join("fixtures"), &mut out);
    walk(&root().join("fixtures/samples/perf"), &mut out);
    out.sort();
    out
}

/// The file as a plain file (decompressed into `dir` when it is compressed).
fn plain(src: &Path, dir: &Path) -> PathBuf {
    let name = src.file_name().unwrap().to_str().unwrap();
    if !name.ends_with(".xz") && !name.ends_with(".zst") {
        return src.to_path_buf();
    }
    let input = Input::open(src.to_str().unwrap()).unwrap();
    let mut bytes = Vec::new();
    input.into_reader().read_to_end(&mut bytes).unwrap();
    let dst = dir.join(name.trim_end_matches(".xz").trim_end_matches(".zst"));
    std::fs::write(&dst, bytes).unwrap();
    dst
}

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "stallscope-leanevents-{tag}-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// All events of `r` by `next_batch`, its notes, and the error that ended it, if any.
fn drain(r: &mut dyn EventReader) -> (Vec<Event>, String, Option<String>) {
    let mut all = Vec::new();
    let mut batch = Vec::new();
    let err = loop {
        match r.next_batch(&mut batch) {
            Ok(true) => all.append(&mut batch),
            Ok(false) => break None,
            Err(e) => {
                all.append(&mut batch);
                break Some(error_text(&e));
            }
        }
    };
    (all, quality_text(r.quality()), err)
}

/// [`drain`] by `visit_batch`.
fn drain_visiting(r: &mut dyn EventReader) -> (Vec<Event>, String, Option<String>) {
    let mut all = Vec::new();
    let mut buf = Vec::new();
    let err = loop {
        let res = r.visit_batch(&mut buf, &mut |evs| all.extend_from_slice(evs));
        match res {
            Ok(true) => {}
            Ok(false) => break None,
            Err(e) => break Some(error_text(&e)),
        }
    };
    (all, quality_text(r.quality()), err)
}

/// Notes compared by their debug rendering (every counter, example and severity).
fn quality_text(dq: &DataQuality) -> String {
    format!("{dq:?}")
}

fn error_text(e: &ReadError) -> String {
    e.to_string()
}

fn general(path: &str) -> (Vec<Event>, String, Option<String>) {
    match PerfDataReader::open(Input::open(path).unwrap(), 0) {
        Ok(mut r) => drain(&mut r),
        Err(e) => (
            Vec::new(),
            quality_text(&DataQuality::default()),
            Some(error_text(&e)),
        ),
    }
}

fn assert_same(what: &str, got: &[Event], want: &[Event]) {
    assert_eq!(got.len(), want.len(), "{what}: event count");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert_eq!(g, w, "{what}: event {i}");
    }
}

#[test]
fn lean_events_equal_the_general_readers_events() {
    let dir = temp_dir("eq");
    let (mut taken, mut events, mut wakers) = (0, 0usize, 0usize);
    let mut declined = Vec::new();
    for file in perf_files() {
        let path = plain(&file, &dir);
        let p = path.to_str().unwrap();
        let what = file.display().to_string();
        let mut lean = match LeanEventReader::open(p, 0) {
            Ok(r) => r,
            Err(why) => {
                declined.push(format!("{what}: {}", why.reason));
                continue;
            }
        };
        let (want, want_dq, want_err) = general(p);
        let general_meta = PerfDataReader::open(Input::open(p).unwrap(), 0)
            .unwrap()
            .meta()
            .clone();
        assert_eq!(
            format!("{:?}", lean.meta()),
            format!("{general_meta:?}"),
            "{what}: metadata"
        );
        let (got, dq, err) = drain(&mut lean);
        assert_eq!(lean.bailed_out(), None, "{what}: the walkers stopped");
        assert_same(&what, &got, &want);
        assert_eq!((dq, err), (want_dq, want_err), "{what}: notes and errors");
        // by runs, and cut into small segments read by one walker thread or two
        for (seg, walkers) in [(64 << 10, 2), (300 << 10, 2), (64 << 10, 1)] {
            let mut cut = LeanEventReader::open_segmented(p, 0, seg, walkers).unwrap();
            let (got, _, err) = drain_visiting(&mut cut);
            let how = format!("{what} cut {seg}, {walkers} walker(s)");
            assert_eq!(cut.bailed_out(), None, "{how}");
            assert_eq!(err, None, "{how}");
            assert_same(&how, &got, &want);
        }
        taken += 1;
        events += want.len();
        // wakeups whose waker is not the woken task (the tid kept above the name id)
        wakers += want
            .iter()
            .filter(|e| matches!(&e.kind, EventKind::Waking(w) if w.task.pid != e.pid))
            .count();
    }
    // Every scheduler fixture recorded by `perf sched record` / `perf record -e sched:*`
    // in file mode without call chains is taken (the rest is listed in `declined`).
    assert!(
        taken >= 20 && events > 50_000 && wakers > 1_000,
        "{taken} files, {events} events, {wakers} wakeups by another task; declined: {declined:#?}"
    );
    for must in [
        "fixtures/sched/starve.perf.data",
        "detectors/runqueue-starvation/nice",
    ] {
        assert!(
            !declined.iter().any(|d| d.contains(must)),
            "{must} declined: {declined:#?}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The same events, notes and error; except that before a fatal error (which is all a
/// command then reports) the general reader may stop handing out events earlier than the
/// walkers did (it fails on the round that holds the damage): its events are then a
/// prefix of ours.
fn assert_same_end(
    what: &str,
    got: &(Vec<Event>, String, Option<String>),
    want: &(Vec<Event>, String, Option<String>),
) {
    assert_eq!(got.2, want.2, "{what}: error");
    if want.2.is_some() {
        assert!(got.0.len() >= want.0.len(), "{what}: fewer events");
        assert_same(what, &got.0[..want.0.len()], &want.0);
    } else {
        assert_same(what, &got.0, &want.0);
        assert_eq!(got.1, want.1, "{what}: notes");
    }
}

#[test]
fn damaged_copies_end_like_the_general_reader() {
    let dir = temp_dir("bad");
    let src = std::fs::read(root().join("fixtures/sched/starve.perf.data")).unwrap();
    // Data section bounds from the header (offset 40: u64 offset, u64 size).
    let data_off = u64::from_le_bytes(src[40..48].try_into().unwrap()) as usize;
    let path = dir.join("bad.perf.data");
    let p = path.to_str().unwrap();
    let data_size = u64::from_le_bytes(src[48..56].try_into().unwrap()) as usize;
    // A record three quarters into the data (the walkers hand out the events of the rounds
    // that end before it: this file's rounds are long, so a few dozen).
    let mut at = data_off;
    while at < data_off + data_size * 3 / 4 {
        at += usize::from(u16::from_le_bytes([src[at + 6], src[at + 7]]));
    }
    let variants: Vec<(&str, Vec<u8>)> = vec![
        ("zero size", {
            let mut b = src.clone();
            b[at + 6..at + 8].copy_from_slice(&0u16.to_le_bytes());
            b
        }),
        ("unknown type", {
            let mut b = src.clone();
            b[at..at + 4].copy_from_slice(&4000u32.to_le_bytes());
            b
        }),
        ("lost record", {
            let mut b = src.clone();
            b[at..at + 4].copy_from_slice(&2u32.to_le_bytes());
            b
        }),
    ];
    for (what, bytes) in variants {
        std::fs::write(&path, &bytes).unwrap();
        let mut lean = LeanEventReader::open_segmented(p, 0, 64 << 10, 2)
            .unwrap_or_else(|b| panic!("{what}: the damage is in the data: {}", b.reason));
        let got = drain(&mut lean);
        assert!(lean.bailed_out().is_some(), "{what}: the walkers must stop");
        let want = general(p);
        assert!(
            got.0.len() > 50,
            "{what}: the damage must come after events ({} before it)",
            got.0.len()
        );
        assert_same_end(what, &got, &want);
    }

    // Random byte flips anywhere: never a panic, and the same result as the general reader
    // (when both open the file).
    let mut bailed = 0;
    for (k, bytes) in lean_support::flipped_copies(&src, 40)
        .into_iter()
        .enumerate()
    {
        std::fs::write(&path, &bytes).unwrap();
        if let Ok(mut lean) = LeanEventReader::open_segmented(p, 0, 64 << 10, 1 + k % 2) {
            let got = drain_visiting(&mut lean);
            bailed += usize::from(lean.bailed_out().is_some());
            let want = general(p);
            assert_same_end("flipped", &got, &want);
        }
    }
    assert!(
        bailed > 3,
        "only {bailed} flipped copies made the walkers stop"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
