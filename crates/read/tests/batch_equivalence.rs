//! `EventReader::next_batch` against `next_event`: on the shared perf.data samples (worker
//! thread and inline modes, whole and truncated) and trace.dat captures, the batches hold
//! exactly the events `next_event` returns, in the same order (dump line + source offset),
//! and a fatal error comes after the same events with the same message.

use std::io::Read;
use std::path::{Path, PathBuf};

use stallscope_model::{Event, Problem};
use stallscope_read::perf_data::PerfDataReader;
use stallscope_read::tracedat::TraceDatReader;
use stallscope_read::{EventReader, Input};

fn samples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/samples")
}

/// The decompressed bytes of a shared sample.
fn sample_bytes(rel: &str) -> Vec<u8> {
    let p = samples().join(rel);
    let mut out = Vec::new();
    Input::open(p.to_str().unwrap())
        .unwrap()
        .into_reader()
        .read_to_end(&mut out)
        .unwrap();
    out
}

fn line(e: &Event) -> String {
    format!("{} @{}", e.dump_line(), e.span.pos())
}

/// Events by `next_event` until the end or the first error (its message).
fn by_event(r: Box<dyn EventReader>) -> (Vec<String>, Option<String>) {
    let (out, err, _) = by_event_quality(r);
    (out, err)
}

/// [`by_event`], also counting the data-quality notes of a cut last record.
fn by_event_quality(mut r: Box<dyn EventReader>) -> (Vec<String>, Option<String>, u64) {
    let mut out = Vec::new();
    loop {
        match r.next_event() {
            Ok(Some(e)) => out.push(line(&e)),
            Ok(None) => return (out, None, r.quality().count(Problem::PerfDataCutRecord)),
            Err(e) => return (out, Some(e.to_string()), 0),
        }
    }
}

/// Events by `next_batch` until the end or the first error (its message); also the number
/// of batches.
fn by_batch(mut r: Box<dyn EventReader>) -> (Vec<String>, Option<String>, usize) {
    let (mut out, mut batches) = (Vec::new(), 0);
    let mut buf = vec![];
    loop {
        let r = r.next_batch(&mut buf);
        out.extend(buf.iter().map(line));
        match r {
            Ok(true) => {
                assert!(!buf.is_empty(), "Ok(true) with an empty batch");
                batches += 1;
            }
            Ok(false) => {
                assert!(buf.is_empty());
                return (out, None, batches);
            }
            Err(e) => return (out, Some(e.to_string()), batches),
        }
    }
}

fn perf(bytes: &[u8], worker: bool) -> Box<dyn EventReader> {
    let input = Input::from_bytes("test.data", bytes.to_vec()).unwrap();
    Box::new(PerfDataReader::open_with_worker(input, 0, worker).unwrap())
}

#[test]
fn perf_batches_equal_single_events() {
    for name in [
        "perf/perf_sched.data.xz",
        "perf/perf_tp_callchain.data.xz",
        "perf/perf_pipe.data.xz",
        "perf/perf_cpu_fp.data",
    ] {
        let bytes = sample_bytes(name);
        for worker in [true, false] {
            let (one, err1) = by_event(perf(&bytes, worker));
            let (batched, err2, batches) = by_batch(perf(&bytes, worker));
            assert!(!one.is_empty(), "{name}: no events");
            assert_eq!(err1, None, "{name}");
            assert_eq!(err2, None, "{name}");
            assert!(batches >= 1);
            assert_eq!(one, batched, "{name} worker={worker}");
        }
    }
}

#[test]
fn perf_truncated_batches_keep_events_before_the_error() {
    let bytes = sample_bytes("perf/perf_sched.data.xz");
    // a pipe-mode file ends at its data: cutting it leaves a truncated record
    let pipe = sample_bytes("perf/perf_pipe.data.xz");
    let mut errors = 0;
    for (whole, name) in [(bytes, "file"), (pipe, "pipe")] {
        for cut in [whole.len() / 3, whole.len() / 2, whole.len() - 5] {
            for worker in [true, false] {
                let cut_bytes = &whole[..cut];
                let Ok(input) = Input::from_bytes("test.data", cut_bytes.to_vec()) else {
                    continue;
                };
                // a cut inside the header is refused at open: nothing to compare
                let Ok(r1) = PerfDataReader::open_with_worker(input, 0, worker) else {
                    continue;
                };
                let (one, err1, cut_notes) = by_event_quality(Box::new(r1));
                let (batched, err2, _) = by_batch(perf(cut_bytes, worker));
                // a cut file is refused or read to its last whole record with a note
                errors += usize::from(err1.is_some() || cut_notes > 0);
                assert_eq!(err1, err2, "{name} cut {cut} worker={worker}");
                assert_eq!(one, batched, "{name} cut {cut} worker={worker}");
            }
        }
    }
    assert!(
        errors > 0,
        "no cut produced a read error or a cut-record note"
    );
}

#[test]
fn tracedat_batches_equal_single_events() {
    let dir = std::env::temp_dir().join(format!("stallscope-batch-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for name in [
        "tracecmd/trace_v7_zstd.dat",
        "tracecmd/trace_v6.dat.xz",
        "tracecmd/trace_v7_nocompress.dat.xz",
    ] {
        // trace.dat needs a seekable file: write the decompressed bytes out
        let path = dir.join(name.replace('/', "_").trim_end_matches(".xz"));
        std::fs::write(&path, sample_bytes(name)).unwrap();
        let open = || -> Box<dyn EventReader> {
            let input = Input::open(path.to_str().unwrap()).unwrap();
            Box::new(TraceDatReader::open(input, 0).unwrap())
        };
        let (one, err1) = by_event(open());
        let (batched, err2, _) = by_batch(open());
        assert!(!one.is_empty(), "{name}: no events");
        assert_eq!(err1, None, "{name}");
        assert_eq!(err2, None, "{name}");
        assert_eq!(one, batched, "{name}");
        // the data-quality counters end the same (lost-event bookkeeping is per event)
        let mut a = open();
        while a.next_event().unwrap().is_some() {}
        let mut b = open();
        let mut buf = Vec::new();
        while b.next_batch(&mut buf).unwrap() {}
        assert_eq!(
            format!("{:?}", a.quality()),
            format!("{:?}", b.quality()),
            "{name}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
