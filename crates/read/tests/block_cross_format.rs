//! Cross-format: one capture read as blktrace binary files and as text renderings of the
//! same files gives identical `dump` lines.
//!
//! * `blkparse_default.txt` / `blkparse_track_ios.txt` (shared sample, rendered by blkparse
//!   1.2.0 from fixtures/block/loop0/loop0.blktrace.*): times are relative to the first
//!   record, so the binary's are shifted by that one amount;
//! * `ftrace_blk_tracer_classic.txt` (the kernel `blk` tracer's `blk_classic` text of the
//!   same run): absolute ns, no shift;
//! * `ftrace_blk_tracer.txt` (the kernel `blk` tracer's default ftrace text of the same
//!   run): µs times, which the kernel rounds (`ns2usecs` adds 500 ns);
//! * blkparse run at test time on synthetic files holding every action (skipped with a
//!   printed reason when blkparse is missing). blkparse prints pid 0 on message lines, so
//!   message pids are set to 0 on the binary side before comparing.

mod block_support;

use block_support::*;
use stallscope_model::{BlockAction, EventKind, Problem};

fn text_dump(path: &std::path::Path) -> Vec<String> {
    let (events, dq) = read_all(path);
    assert_eq!(dq.count(Problem::UnparsedLines), 0, "{dq:?}");
    dump_lines(&events, 0)
}

#[test]
fn blkparse_text_equals_binary() {
    let dir = loop0_dir();
    let (bin, _) = read_all(&dir.join("loop0.blktrace."));
    let base = bin[0].ts; // blkparse's zero: the first record (a process note at the same time)
    let expected = dump_lines(&bin, base);
    for name in ["blkparse_default.txt", "blkparse_track_ios.txt"] {
        let (events, dq) = read_all(&dir.join(name));
        assert!(
            dq.count(Problem::BlkparseSummaryLines) > 0,
            "{name}: summary seen"
        );
        assert_eq!(dq.count(Problem::UnparsedLines), 0, "{name}: {dq:?}");
        assert_eq!(dump_lines(&events, 0), expected, "{name}");
    }
}

#[test]
fn kernel_blk_classic_text_equals_binary() {
    let dir = loop0_dir();
    let (bin, _) = read_all(&dir);
    assert_eq!(
        text_dump(&dir.join("ftrace_blk_tracer_classic.txt")),
        dump_lines(&bin, 0)
    );
}

#[test]
fn blkparse_of_synthetic_files_equals_binary() {
    if !stallscope_testkit::require("blkparse", blkparse_available(), "apt-get install blktrace") {
        return;
    }
    let dir = tmp_dir("cross");
    write_synthetic(&dir, false);
    let text = run_blkparse(&dir, "synth", &[]);
    let txt = dir.join("synth.txt");
    std::fs::write(&txt, &text).unwrap();
    let (mut bin, bin_dq) = read_all(&dir.join("synth"));
    for ev in &mut bin {
        if let EventKind::Block(b) = &ev.kind {
            if b.action == BlockAction::Message {
                ev.pid = 0;
            }
        }
    }
    let (events, dq) = read_all(&txt);
    assert_eq!(dq.count(Problem::UnparsedLines), 0, "{dq:?}");
    assert_eq!(
        dq.count(Problem::BlkparseUnmodeledAction),
        bin_dq.count(Problem::BlktraceUnmodeledAction)
    );
    let base = bin[0].ts - events[0].ts;
    assert_eq!(dump_lines(&events, 0), dump_lines(&bin, base));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn kernel_blk_tracer_ftrace_text_equals_binary_at_us_precision() {
    let dir = loop0_dir();
    let (mut bin, _) = read_all(&dir);
    for ev in &mut bin {
        ev.ts = (ev.ts + 500) / 1000 * 1000;
    }
    assert_eq!(
        text_dump(&dir.join("ftrace_blk_tracer.txt")),
        dump_lines(&bin, 0)
    );
}

#[test]
fn compressed_per_cpu_files_in_a_directory_equal_the_plain_ones() {
    let dir = tmp_dir("zst");
    for cpu in 0..2 {
        let name = format!("loop0.blktrace.{cpu}");
        let raw = std::fs::read(loop0_dir().join(&name)).unwrap();
        let z = zstd::encode_all(&raw[..], 3).unwrap();
        let out = if cpu == 0 {
            name
        } else {
            format!("{name}.zst")
        };
        std::fs::write(dir.join(out), z).unwrap();
    }
    let (plain, _) = read_all(&loop0_dir().join("loop0"));
    let (by_dir, _) = read_all(&dir);
    let (by_prefix, _) = read_all(&dir.join("loop0"));
    assert_eq!(dump_lines(&by_dir, 0), dump_lines(&plain, 0));
    assert_eq!(dump_lines(&by_prefix, 0), dump_lines(&plain, 0));
    let _ = std::fs::remove_dir_all(&dir);
}
