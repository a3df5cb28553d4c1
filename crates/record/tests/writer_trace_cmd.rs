//! The trace.dat writer against `trace-cmd report` (needs no root): a file built from the real
//! 6.18 format files in `samples/formats/` and hand-built sub-buffers (formats.md §2) must be
//! read by trace-cmd with exactly the fields, timestamps, lost-event counts and CPU stats we
//! put in. Skips when trace-cmd is missing and `CI` is unset; fails in CI.

use std::path::{Path, PathBuf};
use std::process::Command;

use stallscope_record::tracedat_writer::{
    self as writer, CpuData, TraceDatHeader, OPTION_CPUCOUNT, OPTION_CPUSTAT,
};

const SAMPLES: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../fixtures/samples/formats"
);
const PAGE: usize = 4096;
/// `ID:` of sched_switch in samples/formats/sched_sched_switch.format.
const SCHED_SWITCH_ID: u16 = 372;

fn sample(name: &str) -> Vec<u8> {
    std::fs::read(Path::new(SAMPLES).join(name)).unwrap()
}

/// trace-cmd is there (else the test fails naming the install command; see
/// stallscope-testkit).
fn trace_cmd_available() -> bool {
    stallscope_testkit::require_trace_cmd()
}

fn comm16(s: &str) -> [u8; 16] {
    let mut c = [0u8; 16];
    c[..s.len()].copy_from_slice(s.as_bytes());
    c
}

/// sched_switch payload laid out by the format file's offsets (64 bytes).
#[allow(clippy::too_many_arguments)]
fn sched_switch(
    pid: i32,
    prev: &str,
    prev_pid: i32,
    prev_prio: i32,
    state: i64,
    next: &str,
    next_pid: i32,
    next_prio: i32,
) -> Vec<u8> {
    let mut p = vec![0u8; 64];
    p[0..2].copy_from_slice(&SCHED_SWITCH_ID.to_le_bytes());
    p[4..8].copy_from_slice(&pid.to_le_bytes());
    p[8..24].copy_from_slice(&comm16(prev));
    p[24..28].copy_from_slice(&prev_pid.to_le_bytes());
    p[28..32].copy_from_slice(&prev_prio.to_le_bytes());
    p[32..40].copy_from_slice(&state.to_le_bytes());
    p[40..56].copy_from_slice(&comm16(next));
    p[56..60].copy_from_slice(&next_pid.to_le_bytes());
    p[60..64].copy_from_slice(&next_prio.to_le_bytes());
    p
}

/// One sub-buffer: page timestamp, events `(delta, payload)`, optional stored lost count.
fn page(ts: u64, events: &[(u32, Vec<u8>)], lost: Option<u64>) -> Vec<u8> {
    let mut data = Vec::new();
    for (delta, payload) in events {
        assert_eq!(payload.len() % 4, 0);
        let type_len = (payload.len() / 4) as u32;
        data.extend_from_slice(&(type_len | (delta << 5)).to_le_bytes());
        data.extend_from_slice(payload);
    }
    let mut commit = data.len() as u64;
    if let Some(n) = lost {
        // MISSED_EVENTS | MISSED_STORED as the kernel writes them: an int sign-extended into
        // the 64-bit commit word; the count follows the data.
        commit |= 0xffff_ffff_c000_0000;
        data.extend_from_slice(&n.to_le_bytes());
    }
    let mut p = vec![0u8; PAGE];
    p[0..8].copy_from_slice(&ts.to_le_bytes());
    p[8..16].copy_from_slice(&commit.to_le_bytes());
    p[16..16 + data.len()].copy_from_slice(&data);
    p
}

fn write_file(name: &str, cpu0: Vec<u8>, cpu1: Vec<u8>) -> PathBuf {
    let header = TraceDatHeader {
        page_size: PAGE as u32,
        header_page: sample("header_page"),
        header_event: sample("header_event"),
        ftrace_formats: vec![],
        systems: vec![("sched".into(), vec![sample("sched_sched_switch.format")])],
        kallsyms: vec![],
        printk_formats: vec![],
        saved_cmdlines: b"123 alpha\n456 beta\n".to_vec(),
        nr_cpus: 2,
        options: vec![
            writer::text_option(writer::OPTION_TRACECLOCK, "[local] global\n"),
            writer::text_option(writer::OPTION_UNAME, "Linux test 6.18.44 x86_64"),
            writer::text_option(
                OPTION_CPUSTAT,
                "CPU: 0\nentries: 0\noverrun: 7\ncommit overrun: 0\nbytes: 0\n\
                 oldest event ts:     1.000000\nnow ts:     2.000000\ndropped events: 0\n\
                 read events: 3\n",
            ),
            (OPTION_CPUCOUNT, 2u32.to_le_bytes().to_vec()),
        ],
    };
    let dir = std::env::temp_dir().join(format!("stallscope-writer-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(name);
    let (l0, l1) = (cpu0.len() as u64, cpu1.len() as u64);
    let mut c0 = std::io::Cursor::new(cpu0);
    let mut c1 = std::io::Cursor::new(cpu1);
    let mut out = std::fs::File::create(&path).unwrap();
    writer::write(
        &mut out,
        &header,
        &mut [
            CpuData {
                source: &mut c0,
                len: l0,
            },
            CpuData {
                source: &mut c1,
                len: l1,
            },
        ],
    )
    .unwrap();
    path
}

fn report(path: &Path, extra: &[&str]) -> String {
    let o = Command::new("trace-cmd")
        .arg("report")
        .args(extra)
        .arg("-i")
        .arg(path)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "trace-cmd report: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn trace_cmd_reads_events_timestamps_and_lost_counts() {
    if !trace_cmd_available() {
        return;
    }
    let cpu0 = [
        page(
            1_000_000_000,
            &[
                (0, sched_switch(123, "alpha", 123, 120, 1, "beta", 456, 110)),
                (
                    1500,
                    sched_switch(456, "beta", 456, 110, 0, "alpha", 123, 120),
                ),
            ],
            None,
        ),
        page(
            2_000_000_000,
            &[(
                250,
                sched_switch(123, "alpha", 123, 120, 2, "beta", 456, 110),
            )],
            Some(7),
        ),
    ]
    .concat();
    let path = write_file("two_cpus.dat", cpu0, Vec::new());
    let text = report(&path, &["-N", "-t"]);
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("sched_switch"))
        .collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(
        lines[0].contains("1.000000000: sched_switch"),
        "{}",
        lines[0]
    );
    assert!(
        lines[0].contains(
            "prev_comm=alpha prev_pid=123 prev_prio=120 prev_state=S ==> next_comm=beta next_pid=456 next_prio=110"
        ),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].contains("1.000001500: sched_switch"),
        "{}",
        lines[1]
    );
    assert!(lines[1].contains("prev_state=R ==>"), "{}", lines[1]);
    assert!(
        lines[2].contains("2.000000250: sched_switch"),
        "{}",
        lines[2]
    );
    assert!(lines[2].contains("prev_state=D ==>"), "{}", lines[2]);
    assert!(text.contains("[7 EVENTS DROPPED]"), "{text}");
    // CPU stats and CPU data table as trace-cmd sees them.
    let stat = report(&path, &["--stat"]);
    assert!(stat.contains("overrun: 7"), "{stat}");
    assert!(stat.contains("8192 bytes in size"), "{stat}");
}

#[test]
fn empty_cpu_streams_are_valid() {
    if !trace_cmd_available() {
        return;
    }
    let path = write_file("empty.dat", Vec::new(), Vec::new());
    let text = report(&path, &[]);
    assert!(!text.contains("sched_switch"), "{text}");
}
