//! trace.dat options that change what the reader reports, checked on a real v7 file to
//! which one more OPTIONS section is appended (v7 chains OPTIONS sections: the last DONE
//! option's data is patched to point at the new one, everything else stays byte-identical).
//!
//! * OFFSET and TSC2NSEC change every timestamp: the oracle is `trace-cmd report -t` on the
//!   very same modified file (trace-cmd applies `ts = (ts·mult) >> shift`, then the offset).
//! * CPUSTAT (`overrun:`, `dropped events:`) → `meta.lost_per_cpu` and `lost_events`.
//! * TRACECLOCK `counter` → `clock_is_ns == false` (unless TSC2NSEC converts).
//! * The stallscope system-context option (JSON) → `meta.system_context`.

use std::io::Read;
use std::path::Path;
use std::process::Command;

use stallscope_model::{Problem, SystemContext};
use stallscope_read::tracedat::{TraceDatReader, OPTION_SYSTEM_CONTEXT};
use stallscope_read::{EventReader, Input};

fn v7_none() -> Vec<u8> {
    let p = format!(
        "{}/../../fixtures/tracedat/sched_v7_none.dat.xz",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut out = Vec::new();
    xz2::read::XzDecoder::new(std::fs::File::open(p).unwrap())
        .read_to_end(&mut out)
        .unwrap();
    out
}

fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes(b[o..o + 2].try_into().unwrap())
}
fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}

/// File offset of the data of the DONE option that ends the OPTIONS chain (value 0).
fn last_done(file: &[u8]) -> usize {
    // magic(3) "tracing"(7) "7\0" endian long page(4) "none\0" "\0"? then u64 offset.
    let mut p = 12 + 6;
    for _ in 0..2 {
        p += file[p..].iter().position(|&b| b == 0).unwrap() + 1;
    }
    let mut section = u64_at(file, p) as usize;
    loop {
        assert_eq!(u16_at(file, section), 0, "an OPTIONS section");
        assert_eq!(u16_at(file, section + 2) & 1, 0, "uncompressed");
        let mut o = section + 16;
        loop {
            let id = u16_at(file, o);
            let size = u32_at(file, o + 2) as usize;
            if id == 0 {
                let next = u64_at(file, o + 6) as usize;
                if next == 0 {
                    return o + 6;
                }
                section = next;
                break;
            }
            o += 6 + size;
        }
    }
}

fn option(id: u16, data: &[u8]) -> Vec<u8> {
    let mut v = id.to_le_bytes().to_vec();
    v.extend_from_slice(&(data.len() as u32).to_le_bytes());
    v.extend_from_slice(data);
    v
}

/// `file` with an extra OPTIONS section holding `options`.
fn with_options(mut file: Vec<u8>, options: &[Vec<u8>]) -> Vec<u8> {
    let done = last_done(&file);
    let at = file.len() as u64;
    let mut body: Vec<u8> = options.concat();
    body.extend_from_slice(&option(0, &0u64.to_le_bytes()));
    file.extend_from_slice(&0u16.to_le_bytes()); // id OPTIONS
    file.extend_from_slice(&0u16.to_le_bytes()); // flags
    file.extend_from_slice(&0u32.to_le_bytes()); // description string id
    file.extend_from_slice(&(body.len() as u64).to_le_bytes());
    file.extend_from_slice(&body);
    file[done..done + 8].copy_from_slice(&at.to_le_bytes());
    file
}

fn read_all(bytes: Vec<u8>) -> (TraceDatReader, Vec<u64>) {
    let input = Input::from_bytes("opts.dat", bytes).unwrap();
    let mut r = TraceDatReader::open(input, 0).unwrap();
    let mut ts = Vec::new();
    while let Some(e) = r.next_event().unwrap() {
        if e.kind.name() != "lost_events" {
            ts.push(e.ts);
        }
    }
    (r, ts)
}

fn trace_cmd_timestamps(bytes: &[u8], tag: &str) -> Vec<u64> {
    let p = std::env::temp_dir().join(format!("stallscope-opts-{tag}-{}.dat", std::process::id()));
    std::fs::write(&p, bytes).unwrap();
    let out = Command::new("trace-cmd")
        .args(["report", "-t"])
        .arg(&p)
        .output()
        .expect("trace-cmd must be installed");
    let _ = std::fs::remove_file(&p);
    assert!(out.status.success());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.contains("EVENTS DROPPED") && !l.starts_with("cpus="))
        .map(|l| {
            // `[NAME: ]COMM-PID [001] 3509.943101842: name: …`: the first `SECS.NSECS:` token.
            let ts = l
                .split_whitespace()
                .find_map(|w| {
                    let t = w.strip_suffix(':')?;
                    let (s, ns) = t.split_once('.')?;
                    (ns.len() == 9 && s.bytes().all(|b| b.is_ascii_digit()))
                        .then(|| s.parse::<u64>().ok().zip(ns.parse::<u64>().ok()))
                        .flatten()
                })
                .unwrap_or_else(|| panic!("no -t timestamp in {l}"));
            ts.0 * 1_000_000_000 + ts.1
        })
        .collect()
}

#[test]
fn offset_and_tsc2nsec_change_timestamps_like_trace_cmd() {
    let base = v7_none();
    let (_, plain) = read_all(base.clone());
    assert_eq!(plain, trace_cmd_timestamps(&base, "plain"));

    let mut tsc = 3u32.to_le_bytes().to_vec(); // mult
    tsc.extend_from_slice(&1u32.to_le_bytes()); // shift: ×1.5
    tsc.extend_from_slice(&0u64.to_le_bytes());
    let modified = with_options(base, &[option(7, b"-1000000000\0"), option(14, &tsc)]);
    let (r, ours) = read_all(modified.clone());
    let theirs = trace_cmd_timestamps(&modified, "tsc");
    assert_eq!(ours.len(), theirs.len());
    assert_eq!(ours, theirs);
    // And independently of trace-cmd: (ts·3 >> 1) − 1 s for every event.
    for (o, p) in ours.iter().zip(&plain) {
        assert_eq!(*o, ((u128::from(*p) * 3) >> 1) as u64 - 1_000_000_000);
    }
    assert!(r.meta().clock_is_ns);
}

#[test]
fn cpustat_clock_and_system_context_reach_the_metadata() {
    let stat = b"CPU: 1\nentries: 0\noverrun: 7\ncommit overrun: 0\nbytes: 0\n\
                 oldest event ts:  3509.9\nnow ts:  3510.1\ndropped events: 2\nread events: 10\n\0";
    let ctx = SystemContext {
        uname: Some("Linux testhost 6.18.44 x86_64".into()),
        nr_cpus: Some(2),
        ..SystemContext::default()
    };
    let json = serde_json::to_vec(&ctx).unwrap();
    let modified = with_options(
        v7_none(),
        &[
            option(2, stat),
            option(4, b"local global [counter] uptime\0"),
            option(OPTION_SYSTEM_CONTEXT, &json),
            option(0x7777, b"unknown options are skipped"),
        ],
    );
    let (r, ts) = read_all(modified);
    assert!(ts.len() > 1000);
    let meta = r.meta();
    assert!(
        meta.lost_per_cpu.contains(&(1, 9)),
        "{:?}",
        meta.lost_per_cpu
    );
    assert_eq!(meta.clock.as_deref(), Some("counter"));
    assert!(!meta.clock_is_ns);
    assert_eq!(meta.system_context.as_ref(), Some(&ctx));
    assert!(r.quality().count(Problem::LostEvents) >= 9);
    assert!(r.quality().count(Problem::TimestampsNotNs) == 1);
}

#[test]
fn helper_finds_the_chain_end_of_the_reference_sample_too() {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/samples/tracecmd/trace_v7_nocompress.dat.xz");
    let mut file = Vec::new();
    xz2::read::XzDecoder::new(std::fs::File::open(p).unwrap())
        .read_to_end(&mut file)
        .unwrap();
    let done = last_done(&file);
    assert_eq!(u64_at(&file, done), 0);
}

/// `trace-cmd dump --options`: the instance's CPUSTAT `overrun:` + `commit overrun:` +
/// `dropped events:` per CPU (after the `Buffer: NAME` marker) are our `lost_per_cpu`, and
/// `lost_events` counts them once even where missed-events markers report the same losses.
#[test]
fn instance_cpu_stats_match_trace_cmd_dump() {
    let file =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/tracedat/sched_v7_zstd.dat");
    let out = Command::new("trace-cmd")
        .args(["dump", "--options", "-i"])
        .arg(&file)
        .output()
        .expect("trace-cmd must be installed");
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    let after = &text[text
        .find("Buffer: stallscope-fixture-")
        .expect("instance CPUSTAT marker")..];
    let mut expected = Vec::new();
    let (mut cpu, mut lost) = (None, 0u64);
    for line in after.lines() {
        if let Some(c) = line.strip_prefix("CPU: ") {
            if let Some(c) = cpu.take() {
                expected.push((c, lost));
            }
            cpu = c.trim().parse::<u32>().ok();
            lost = 0;
        }
        for key in ["overrun: ", "commit overrun: ", "dropped events: "] {
            if let Some(v) = line.strip_prefix(key) {
                lost += v.trim().parse::<u64>().unwrap();
            }
        }
    }
    if let Some(c) = cpu {
        expected.push((c, lost));
    }
    assert!(expected.iter().any(|&(_, n)| n > 0), "{expected:?}");
    let (r, _) = read_all(std::fs::read(&file).unwrap());
    assert_eq!(r.meta().lost_per_cpu, expected);
    // Each CPU's loss counted once: max(CPUSTAT, missed-events count) summed over CPUs.
    let total: u64 = expected.iter().map(|&(_, n)| n).sum();
    assert_eq!(r.quality().count(Problem::LostEvents), total);
}
