//! Test support for the block readers: fixture paths, reading every event of a path, and a
//! writer of synthetic blktrace per-CPU files (edge cases the kernel does not produce on
//! demand: every action, RWBS variant, messages, odd task names, big-endian files).
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use stallscope_model::{DataQuality, Event};

/// Repository root.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// `fixtures/block/loop0`: the shared reference blktrace sample (per-CPU files + peer texts).
pub fn loop0_dir() -> PathBuf {
    repo().join("fixtures/block/loop0")
}

/// Every event of `path` (directory / prefix expansion included), plus the data quality.
pub fn read_all(path: &Path) -> (Vec<Event>, DataQuality) {
    let p = path.to_string_lossy();
    let mut r = stallscope_read::open(&p, None, 0).unwrap_or_else(|e| panic!("{e}"));
    let mut out = Vec::new();
    while let Some(ev) = r.next_event().unwrap_or_else(|e| panic!("{e}")) {
        out.push(ev);
    }
    (out, r.quality().clone())
}

/// `dump` lines of `events`, timestamps shifted down by `base`.
pub fn dump_lines(events: &[Event], base: u64) -> Vec<String> {
    events
        .iter()
        .map(|e| {
            let mut e = e.clone();
            e.ts -= base;
            e.dump_line()
        })
        .collect()
}

/// Whether `blkparse` can be run.
pub fn blkparse_available() -> bool {
    std::process::Command::new("blkparse")
        .arg("-V")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// `blkparse -i NAME -D DIR` output (stdout) on the per-CPU files `DIR/NAME.blktrace.N`.
pub fn run_blkparse(dir: &Path, name: &str, extra: &[&str]) -> String {
    let out = std::process::Command::new("blkparse")
        .args(["-i", name, "-D"])
        .arg(dir)
        .args(extra)
        .output()
        .expect("run blkparse");
    assert!(out.status.success(), "blkparse failed: {out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Category bits (`BLK_TC_*`, unshifted).
pub mod tc {
    pub const READ: u32 = 1;
    pub const WRITE: u32 = 2;
    pub const FLUSH: u32 = 4;
    pub const SYNC: u32 = 8;
    pub const QUEUE: u32 = 16;
    pub const REQUEUE: u32 = 32;
    pub const ISSUE: u32 = 64;
    pub const COMPLETE: u32 = 128;
    pub const FS: u32 = 256;
    pub const NOTIFY: u32 = 1024;
    pub const AHEAD: u32 = 2048;
    pub const META: u32 = 4096;
    pub const DISCARD: u32 = 8192;
    pub const FUA: u32 = 32768;
}

/// One synthetic record.
#[derive(Clone, Debug)]
pub struct Rec {
    pub time: u64,
    pub sector: u64,
    pub bytes: u32,
    /// `code | categories << 16`.
    pub action: u32,
    pub pid: u32,
    pub device: u32,
    pub error: u16,
    pub pdu: Vec<u8>,
}

impl Rec {
    pub fn new(time: u64, code: u32, cats: u32, pid: u32) -> Rec {
        Rec {
            time,
            sector: 0,
            bytes: 0,
            action: code | (cats << 16),
            pid,
            device: 7 << 20,
            error: 0,
            pdu: Vec::new(),
        }
    }
    pub fn io(mut self, sector: u64, sectors: u32) -> Rec {
        self.sector = sector;
        self.bytes = sectors * 512;
        self
    }
    pub fn pdu(mut self, pdu: Vec<u8>) -> Rec {
        self.pdu = pdu;
        self
    }
}

/// Serializes `recs` as the per-CPU file of `cpu` (sequence numbers from 1; notes get 0).
pub fn encode(recs: &[Rec], cpu: u32, big_endian: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let mut seq = 0u32;
    for r in recs {
        let notify = r.action & (tc::NOTIFY << 16) != 0;
        let s = if notify {
            0
        } else {
            seq += 1;
            seq
        };
        let put32 = |v: u32, out: &mut Vec<u8>| {
            out.extend_from_slice(&if big_endian {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            })
        };
        put32(0x6561_7407, &mut out);
        put32(s, &mut out);
        let t = if big_endian {
            r.time.to_be_bytes()
        } else {
            r.time.to_le_bytes()
        };
        out.extend_from_slice(&t);
        let sec = if big_endian {
            r.sector.to_be_bytes()
        } else {
            r.sector.to_le_bytes()
        };
        out.extend_from_slice(&sec);
        put32(r.bytes, &mut out);
        put32(r.action, &mut out);
        put32(r.pid, &mut out);
        put32(r.device, &mut out);
        put32(cpu, &mut out);
        let e16 = |v: u16| {
            if big_endian {
                v.to_be_bytes()
            } else {
                v.to_le_bytes()
            }
        };
        out.extend_from_slice(&e16(r.error));
        out.extend_from_slice(&e16(r.pdu.len() as u16));
        out.extend_from_slice(&r.pdu);
    }
    out
}

/// A process-name note.
pub fn process(time: u64, pid: u32, name: &str) -> Rec {
    let mut pdu = name.as_bytes().to_vec();
    pdu.push(0);
    Rec::new(time, 0, tc::NOTIFY, pid).pdu(pdu)
}

/// A message note.
pub fn message(time: u64, pid: u32, text: &str) -> Rec {
    Rec::new(time, 2, tc::NOTIFY, pid).pdu(text.as_bytes().to_vec())
}

/// Two CPUs' worth of every action, RWBS variant and payload kind (see the test that uses
/// it for what each record exercises).
pub fn synthetic_cpus() -> [Vec<Rec>; 2] {
    use tc::*;
    let q = QUEUE;
    let cpu0 = vec![
        process(1_000, 100, "fio"),
        process(1_000, 300, "kworker/u8:2 x"),
        Rec::new(1_000, 1, q | WRITE | SYNC, 100).io(2048, 8),
        Rec::new(1_100, 4, q | WRITE | SYNC, 100).io(2048, 8),
        Rec::new(1_200, 12, q | WRITE | SYNC, 100).io(2048, 8),
        Rec::new(1_300, 7, ISSUE | WRITE | SYNC, 100).io(2048, 8),
        Rec::new(1_400, 8, COMPLETE | WRITE | SYNC, 0).io(2048, 8),
        Rec::new(1_500, 1, q | READ | AHEAD, 300).io(0, 256),
        Rec::new(1_600, 2, q | READ | AHEAD, 300).io(256, 8),
        Rec::new(1_700, 3, q | READ | SYNC | META, 300).io(248, 8),
        Rec::new(1_800, 6, REQUEUE | READ | AHEAD, 300).io(0, 264),
        Rec::new(1_900, 13, q | WRITE, 300)
            .io(4096, 512)
            .pdu(4352u64.to_be_bytes().to_vec()),
        Rec::new(2_000, 9, q, 300),
        Rec::new(2_100, 10, q, 300).pdu(3u64.to_be_bytes().to_vec()),
        Rec::new(2_200, 11, q, 300).pdu(2u64.to_be_bytes().to_vec()),
        Rec::new(2_300, 14, q | WRITE, 300).io(512, 8),
        message(2_400, 300, "bfq300A put_queue: bfqq 0x1 ref 2"),
        Rec::new(2_500, 8, COMPLETE | READ, 0).io(0, 264),
        Rec::new(2_600, 5, q | WRITE, 100).io(16, 8),
    ];
    let mut remap_pdu = Vec::new();
    remap_pdu.extend_from_slice(&((7u32 << 20) | 1).to_be_bytes());
    remap_pdu.extend_from_slice(&(7u32 << 20).to_be_bytes());
    remap_pdu.extend_from_slice(&40u64.to_be_bytes());
    let mut err = Rec::new(1_650, 8, COMPLETE | WRITE | FUA, 0).io(64, 8);
    err.error = (-5i16) as u16;
    let cpu1 = vec![
        process(1_050, 200, "dd"),
        process(1_050, 201, "a]b[c"),
        Rec::new(1_050, 1, q | WRITE | FLUSH | SYNC, 200),
        Rec::new(1_150, 4, q | WRITE | FLUSH | SYNC, 200),
        Rec::new(1_250, 7, ISSUE | READ | FLUSH, 201),
        Rec::new(1_350, 8, COMPLETE | READ | FLUSH, 0),
        Rec::new(1_450, 1, q | WRITE | FUA | SYNC | FLUSH, 200).io(64, 8),
        Rec::new(1_550, 7, ISSUE | WRITE | FUA, 200).io(64, 8),
        err,
        Rec::new(1_750, 1, q | DISCARD | WRITE, 201).io(8192, 2048),
        Rec::new(1_850, 15, q | WRITE | SYNC, 201)
            .io(48, 8)
            .pdu(remap_pdu),
        Rec::new(1_950, 1, q | WRITE | META, 201).io(96, 8),
        Rec::new(2_050, 1, q | WRITE | SYNC | META, 201).io(104, 8),
        Rec::new(2_150, 1, q | READ, 999).io(120, 8),
        message(2_250, 201, "mq-deadline: dispatch  two  spaces"),
    ];
    [cpu0, cpu1]
}

/// Writes the synthetic CPUs as `dir/synth.blktrace.{0,1}`.
pub fn write_synthetic(dir: &Path, big_endian: bool) {
    std::fs::create_dir_all(dir).unwrap();
    for (cpu, recs) in synthetic_cpus().iter().enumerate() {
        std::fs::write(
            dir.join(format!("synth.blktrace.{cpu}")),
            encode(recs, cpu as u32, big_endian),
        )
        .unwrap();
    }
}

/// A fresh temporary directory under the target dir.
pub fn tmp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("stallscope-block-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}
