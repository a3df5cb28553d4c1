//! Bad blktrace / blkparse input never panics and never stops silently: truncated records
//! are fatal errors naming the file and the record's offset, garbage between records and
//! unknown actions are counted, every prefix and single-byte corruption of the real sample
//! is read without a panic (a stable-toolchain stand-in for the `blktrace` fuzz target).

mod block_support;

use block_support::*;
use stallscope_model::{Problem, SpanPos};
use stallscope_read::blktrace::BlktraceReader;
use stallscope_read::{blkparse_text, EventReader, Input, ReadError};

fn drain(name: &str, bytes: Vec<u8>) -> (usize, Option<ReadError>, stallscope_model::DataQuality) {
    let input = Input::from_bytes(name, bytes).unwrap();
    let mut r = BlktraceReader::open(input, 0).unwrap();
    let mut n = 0;
    loop {
        match r.next_event() {
            Ok(Some(_)) => n += 1,
            Ok(None) => return (n, None, r.quality().clone()),
            Err(e) => return (n, Some(e), r.quality().clone()),
        }
    }
}

fn sample() -> Vec<u8> {
    std::fs::read(loop0_dir().join("loop0.blktrace.1")).unwrap()
}

#[test]
fn truncated_record_is_an_error_at_its_offset() {
    let bytes = sample();
    // Record offsets of the file, from its own headers.
    let mut offsets = Vec::new();
    let mut off = 0;
    while off + 48 <= bytes.len() {
        offsets.push(off);
        off += 48 + u16::from_le_bytes([bytes[off + 46], bytes[off + 47]]) as usize;
    }
    assert_eq!(off, bytes.len());
    for &rec in &offsets[1..] {
        for cut in [rec + 1, rec + 47, rec + 48] {
            let (_, err, _) = drain("cut.blktrace.1", bytes[..cut].to_vec());
            let is_complete =
                cut == rec + 48 && u16::from_le_bytes([bytes[rec + 46], bytes[rec + 47]]) == 0;
            if is_complete {
                assert!(err.is_none(), "cut at {cut}");
                continue;
            }
            let e = err.unwrap_or_else(|| panic!("no error for a cut at {cut}"));
            assert_eq!(e.path, "cut.blktrace.1");
            assert_eq!(e.pos, Some(SpanPos::Byte(rec as u64)), "cut at {cut}: {e}");
            assert!(e.found.contains("truncated"), "{e}");
        }
    }
}

#[test]
fn garbage_and_unknown_actions_are_counted() {
    let recs = &synthetic_cpus()[0];
    let mut bytes = encode(&recs[..4], 0, false);
    bytes.extend_from_slice(b"\x01\x02garbage");
    let mut odd = Rec::new(5_000, 0x63, tc::QUEUE, 100);
    odd.sector = 1;
    bytes.extend(encode(&[odd], 0, false));
    bytes.extend(encode(&recs[4..], 0, false));
    let (n, err, dq) = drain("g.blktrace.0", bytes);
    assert!(err.is_none(), "{err:?}");
    assert_eq!(dq.count(Problem::BlktraceGarbage), 1, "{dq:?}");
    assert_eq!(dq.count(Problem::BlktraceUnknownAction), 1, "{dq:?}");
    // Every real record still came out: all but process notes and the sleep request.
    let notes = recs
        .iter()
        .filter(|r| r.action & (tc::NOTIFY << 16) != 0 && r.action & 0xff == 0)
        .count();
    let expected = recs.len() - notes - 1;
    assert_eq!(n, expected);
}

#[test]
fn wrong_version_and_non_blktrace_files_are_errors() {
    let mut bytes = sample();
    bytes[0] = 0x08; // version 8 (blk_io_trace2): not supported
    let (_, err, _) = drain("v8.blktrace.0", bytes);
    let e = err.expect("error");
    assert!(e.found.contains("version 8"), "{e}");
    let (_, err, _) = drain("x.blktrace.0", vec![0x55; 100]);
    assert_eq!(err.expect("error").pos, Some(SpanPos::Byte(0)));
}

#[test]
fn every_prefix_and_byte_flip_reads_without_panic() {
    let bytes = sample();
    for cut in (0..bytes.len()).step_by(7) {
        let _ = drain("p.blktrace.1", bytes[..cut].to_vec());
    }
    for i in (0..bytes.len()).step_by(5) {
        let mut b = bytes.clone();
        b[i] ^= 0xa5;
        let _ = drain("f.blktrace.1", b);
    }
    let text = std::fs::read(loop0_dir().join("blkparse_track_ios.txt")).unwrap();
    for i in (0..text.len()).step_by(97) {
        let mut t = text.clone();
        t[i] = b'#';
        t.truncate(text.len() - i / 3);
        let input = Input::from_bytes("t.txt", t).unwrap();
        let mut r = blkparse_text::open(input, 0).unwrap();
        while let Ok(Some(_)) = r.next_event() {}
    }
}

#[test]
fn odd_blkparse_lines_are_counted_not_fatal() {
    let text = b"  7,0    1        1     0.000000000 17154  Q  WS 0 + 128 [dd]\n\
  7,0    1        2     0.000000100 17154  Q  WX 0 + 128 [dd]\n\
  7,0    1        3     0.000000200 17154  S  WS 0 + 128 [dd]\n\
  7,0    1        4     0.000000300    14  C  WS 0 + 128 [0]\n\
garbage line\n\
CPU0 (loop0):\n Reads Queued: 1\n";
    let input = Input::from_bytes("odd.txt", text.to_vec()).unwrap();
    let mut r = blkparse_text::open(input, 0).unwrap();
    let mut n = 0;
    while r.next_event().unwrap().is_some() {
        n += 1;
    }
    let dq = r.quality();
    assert_eq!(n, 2);
    assert_eq!(dq.count(Problem::UnparsedLines), 2, "{dq:?}");
    assert_eq!(dq.count(Problem::BlkparseUnmodeledAction), 1);
    assert_eq!(dq.count(Problem::BlkparseSummaryLines), 2);
}
