//! btt oracle for `stallscope iolat`.
//!
//! For every blktrace binary capture in the repository (`fixtures/block/**` and
//! `fixtures/detectors/dispatch-starvation/**`: files `DEV.blktrace.N`, optionally `.zst`,
//! `.xz` or `.gz`), this test runs, at test time, the real tools (Debian package `blktrace`):
//!
//! ```text
//! blkparse -D TMP -i DEV -d TMP/dump.bin -O
//! btt -A -i TMP/dump.bin -z TMP/lat          (-z writes each bio's Q2D, "%lf %lf")
//! ```
//!
//! and compares btt's "Per Device" and "Per Process" tables (Q2Q, Q2G, G2I, Q2M, I2D, D2C,
//! Q2C) with `stallscope iolat --format json` to btt's printed precision: N exactly, MIN /
//! MAX / AVG as btt's `%13.9f` of seconds (AVG rebuilt the way btt computes it, a double
//! `total_seconds / N`, from our integer total). Q2D, which btt prints only as per-bio
//! values with 6 decimals (`-z`), is compared per device: N exactly, MIN / MAX as `%.6f`,
//! AVG within half a microsecond of the mean of btt's rounded values.
//!
//! Each capture is also rendered as blkparse default text (at test time, from the same files)
//! and read back: its per-device and per-process phases must equal the binary's.
//!
//! Known, deliberate differences, reconciled here rather than hidden:
//! * btt names a process by the text before the first `/` of its name, truncated to 14
//!   bytes (`kworker/0:1H` → `kworker`), and merges tasks of one name; stallscope keeps the
//!   full name, so our rows are merged the same way before comparing (exactly: N and totals
//!   add up, min/max combine).
//!   Q2Q cannot be merged that way (btt measures it between consecutive `Q`s of the merged
//!   name, we per full name), so for a btt name that merges several of our rows only its N
//!   is checked: btt's N = (our `Q`s of those rows) − 1, and btt's MIN ≤ ours.
//! * btt files Q2Q and Q2C of md / device-mapper majors (9, 253, 254) under `Q2Qdm` /
//!   `Q2Cdm`; we compare our Q2Q / Q2C of those devices against those rows.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// One capture: the per-CPU files of one device.
#[derive(Debug)]
struct Capture {
    device: String,
    files: Vec<PathBuf>,
}

fn blktrace_name(name: &str) -> Option<(&str, &str)> {
    let base = name
        .strip_suffix(".zst")
        .or_else(|| name.strip_suffix(".xz"))
        .or_else(|| name.strip_suffix(".gz"))
        .unwrap_or(name);
    let (dev, cpu) = base.rsplit_once(".blktrace.")?;
    cpu.bytes()
        .all(|b| b.is_ascii_digit())
        .then_some((dev, cpu))
}

fn find_captures(dir: &Path, out: &mut Vec<Capture>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    let mut here: BTreeMap<String, Vec<PathBuf>> = BTreeMap::new();
    for p in entries {
        if p.is_dir() {
            find_captures(&p, out);
        } else if let Some(name) = p.file_name().and_then(|n| n.to_str()) {
            if let Some((dev, _)) = blktrace_name(name) {
                here.entry(dev.to_string()).or_default().push(p.clone());
            }
        }
    }
    for (device, files) in here {
        out.push(Capture { device, files });
    }
}

/// Copies (decompressing) a capture into `tmp` as `DEV.blktrace.N`.
fn stage(c: &Capture, tmp: &Path) {
    for f in &c.files {
        let name = f.file_name().and_then(|n| n.to_str()).unwrap();
        let (dev, cpu) = blktrace_name(name).unwrap();
        let dst = tmp.join(format!("{dev}.blktrace.{cpu}"));
        let tool = match f.extension().and_then(|e| e.to_str()) {
            Some("zst") => Some("zstd"),
            Some("xz") => Some("xz"),
            Some("gz") => Some("gzip"),
            _ => None,
        };
        match tool {
            None => {
                std::fs::copy(f, &dst).unwrap();
            }
            Some(tool) => {
                let out = Command::new(tool)
                    .arg("-dc")
                    .arg(f)
                    .output()
                    .unwrap_or_else(|e| panic!("{tool}: {e}"));
                assert!(out.status.success(), "{tool} -dc {}", f.display());
                std::fs::write(&dst, out.stdout).unwrap();
            }
        }
    }
}

/// btt's `-A` tables: (section, phase, row name) → the four printed fields.
type BttTables = BTreeMap<(String, String, String), [String; 4]>;

fn parse_btt(text: &str) -> BttTables {
    let mut tables = BttTables::new();
    let mut section = String::new();
    let mut phase: Option<String> = None;
    for line in text.lines() {
        if let Some(s) = line.strip_prefix("==================== ") {
            section = s.trim_end_matches(" ====================").to_string();
            phase = None;
            continue;
        }
        if line.trim().is_empty() {
            // btt leaves a blank line between the ALL header and its rows.
            if section != "All Devices" {
                phase = None;
            }
            continue;
        }
        if line.starts_with("---------------") {
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() >= 5 && f[f.len() - 4..] == ["MIN", "AVG", "MAX", "N"] {
            phase = Some(f[0].to_string());
            continue;
        }
        if let Some(p) = &phase {
            if f.len() < 5 || line.len() < 16 {
                continue;
            }
            // "%-15s %13.9f %13.9f %13.9f %11d": the name is the first 15 columns.
            let name = line[..15].trim().to_string();
            let n = f.len();
            tables.insert(
                (section.clone(), p.clone(), name),
                [
                    f[n - 4].to_string(),
                    f[n - 3].to_string(),
                    f[n - 2].to_string(),
                    f[n - 1].to_string(),
                ],
            );
        }
    }
    tables
}

/// Our accumulator of one (group, phase), from the JSON report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Acc {
    n: u64,
    total: u128,
    min: u64,
    max: u64,
}

impl Acc {
    fn merge(&mut self, o: &Acc) {
        if self.n == 0 {
            *self = *o;
        } else {
            self.n += o.n;
            self.total += o.total;
            self.min = self.min.min(o.min);
            self.max = self.max.max(o.max);
        }
    }
    /// The four fields as btt prints them.
    fn btt_fields(&self) -> [String; 4] {
        let s9 = |ns: u64| format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000);
        // btt: BIT_TIME(total) / (double)n, BIT_TIME(t) = (double)secs + (double)nsecs / 1e9.
        let total_secs =
            (self.total / 1_000_000_000) as f64 + (self.total % 1_000_000_000) as f64 / 1.0e9;
        [
            s9(self.min),
            format!("{:.9}", total_secs / self.n as f64),
            s9(self.max),
            self.n.to_string(),
        ]
    }
}

type Group = (String, bool, BTreeMap<String, Acc>, u64);

fn groups(v: &Value) -> Vec<Group> {
    v["groups"]
        .as_array()
        .expect("groups")
        .iter()
        .map(|g| {
            let phases = g["phases"]
                .as_array()
                .expect("phases")
                .iter()
                .map(|p| {
                    let total = p["total_ns"]
                        .as_u64()
                        .map(u128::from)
                        .unwrap_or_else(|| p["total_ns"].as_f64().expect("total_ns") as u128);
                    (
                        p["phase"].as_str().unwrap().to_string(),
                        Acc {
                            n: p["n"].as_u64().unwrap(),
                            total,
                            min: p["min_ns"].as_u64().unwrap(),
                            max: p["max_ns"].as_u64().unwrap(),
                        },
                    )
                })
                .collect();
            (
                g["key"].as_str().unwrap().to_string(),
                g["remapper"].as_bool().unwrap_or(false),
                phases,
                g["bios"].as_u64().expect("bios"),
            )
        })
        .collect()
}

fn iolat_json(files: &[PathBuf], by: &str) -> Value {
    let out = Command::new(env!("CARGO_BIN_EXE_stallscope"))
        .args(["iolat", "--format", "json", "--by", by])
        .args(files)
        .output()
        .expect("run stallscope");
    assert!(
        out.status.success(),
        "stallscope iolat {files:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("json")
}

/// btt's process label: up to the first '/', at most 14 bytes.
fn btt_process_name(name: &str) -> String {
    let cut = name.split('/').next().unwrap_or(name);
    let mut end = cut.len().min(14);
    while !cut.is_char_boundary(end) {
        end -= 1;
    }
    cut[..end].to_string()
}

fn btt_device_label(key: &str) -> String {
    let (ma, mi) = key.split_once(',').unwrap();
    format!("({ma:>3},{mi:>3})")
}

const COMPARED: [&str; 7] = ["Q2Q", "Q2G", "G2I", "Q2M", "I2D", "D2C", "Q2C"];

fn btt_phase(phase: &str, remapper: bool) -> String {
    match phase {
        "Q2Q" | "Q2C" if remapper => format!("{phase}dm"),
        p => p.to_string(),
    }
}

/// Compares one section; returns the mismatches.
fn compare_section(
    section: &str,
    ours: &BTreeMap<(String, String), (bool, Acc)>,
    btt: &BttTables,
    what: &str,
) -> Vec<String> {
    let mut bad = Vec::new();
    let mut seen = 0;
    for ((name, phase), (remapper, acc)) in ours {
        if !COMPARED.contains(&phase.as_str()) {
            continue;
        }
        let key = (
            section.to_string(),
            btt_phase(phase, *remapper),
            name.clone(),
        );
        match btt.get(&key) {
            None => bad.push(format!(
                "{what}: {section} {phase} {name}: btt has no row; ours {:?}",
                acc.btt_fields()
            )),
            Some(b) if *b != acc.btt_fields() => bad.push(format!(
                "{what}: {section} {phase} {name}: btt {b:?} ours {:?}",
                acc.btt_fields()
            )),
            Some(_) => seen += 1,
        }
    }
    for (s, phase, name) in btt.keys() {
        let ours_phase = phase.trim_end_matches("dm").to_string();
        if s == section
            && COMPARED.contains(&ours_phase.as_str())
            && !ours.contains_key(&(name.clone(), ours_phase.clone()))
        {
            bad.push(format!(
                "{what}: {section} {phase} {name}: only btt has this row"
            ));
        }
    }
    if seen == 0 {
        bad.push(format!("{what}: {section}: nothing compared"));
    }
    bad
}

/// btt `-z` Q2D values of one device (seconds, as printed with `%lf`).
fn btt_q2d(tmp: &Path, device: &str) -> Vec<String> {
    let p = tmp.join(format!("lat_{device}_q2d.dat"));
    let text = std::fs::read_to_string(&p).unwrap_or_default();
    text.lines()
        .filter_map(|l| l.split_whitespace().nth(1).map(str::to_string))
        .collect()
}

fn check_capture(i: usize, c: &Capture) -> Vec<String> {
    let what = c.files[0].parent().unwrap().display().to_string();
    let tmp = std::env::temp_dir().join(format!("stallscope-iolat-btt-{}-{i}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    stage(c, &tmp);
    let st = Command::new("blkparse")
        .arg("-D")
        .arg(&tmp)
        .args(["-i", &c.device, "-O", "-d"])
        .arg(tmp.join("dump.bin"))
        .output()
        .expect("blkparse (Debian package blktrace) must be installed for this test");
    assert!(
        st.status.success(),
        "blkparse: {}",
        String::from_utf8_lossy(&st.stderr)
    );
    let bt = Command::new("btt")
        .current_dir(&tmp)
        .args(["-A", "-i", "dump.bin", "-z", "lat"])
        .output()
        .expect("btt (Debian package blktrace) must be installed for this test");
    assert!(
        bt.status.success(),
        "btt: {}",
        String::from_utf8_lossy(&bt.stderr)
    );
    let mut btt = parse_btt(&String::from_utf8_lossy(&bt.stdout));
    assert!(!btt.is_empty(), "{what}: could not parse btt's output");

    let mut bad = Vec::new();
    // Per device.
    let dev_json = iolat_json(&c.files, "device");
    let mut ours = BTreeMap::new();
    for (key, remapper, phases, _) in groups(&dev_json) {
        for (phase, acc) in phases {
            ours.insert((btt_device_label(&key), phase), (remapper, acc));
        }
    }
    bad.extend(compare_section("Per Device", &ours, &btt, &what));
    // All Devices ("ALL" table, one row per phase; M2D appears only here). Devices btt
    // files under the dm columns would move rows, so only plain devices are compared.
    let any_remapper = groups(&dev_json).iter().any(|g| g.1);
    if !any_remapper {
        let all = &dev_json["all"];
        let (_, _, phases, _) = groups(&serde_json::json!({ "groups": [all] }))
            .pop()
            .expect("all");
        let mut seen = 0;
        for phase in ["Q2Q", "Q2G", "G2I", "Q2M", "I2D", "M2D", "D2C", "Q2C"] {
            let key = (
                "All Devices".to_string(),
                "ALL".to_string(),
                phase.to_string(),
            );
            match (btt.get(&key), phases.get(phase)) {
                (None, None) => {}
                (Some(b), Some(acc)) if *b == acc.btt_fields() => seen += 1,
                (b, acc) => bad.push(format!(
                    "{what}: All Devices {phase}: btt {b:?} ours {:?}",
                    acc.map(|a| a.btt_fields())
                )),
            }
        }
        if seen == 0 {
            bad.push(format!("{what}: All Devices: nothing compared"));
        }
    }
    // Per process, merged by btt's name.
    let mut merged: BTreeMap<(String, String), (bool, Acc)> = BTreeMap::new();
    // btt name → (our rows with a Q, their Qs, smallest Q2Q).
    let mut names: BTreeMap<String, (u32, u64, Option<u64>)> = BTreeMap::new();
    for (key, _, phases, bios) in groups(&iolat_json(&c.files, "process")) {
        let e = names.entry(btt_process_name(&key)).or_default();
        if bios > 0 {
            e.0 += 1;
            e.1 += bios;
        }
        if let Some(q2q) = phases.get("Q2Q") {
            e.2 = Some(e.2.map_or(q2q.min, |m| m.min(q2q.min)));
        }
        for (phase, acc) in phases {
            if phase == "Q2Q" && e.0 > 1 {
                continue;
            }
            merged
                .entry((btt_process_name(&key), phase))
                .or_default()
                .1
                .merge(&acc);
        }
    }
    for (name, (rows, bios, min)) in &names {
        if *rows <= 1 {
            continue;
        }
        merged.remove(&(name.clone(), "Q2Q".to_string()));
        let key = ("Per Process".to_string(), "Q2Q".to_string(), name.clone());
        let b = btt.remove(&key);
        let b_n: u64 = b.as_ref().map_or(0, |b| b[3].parse().unwrap());
        if b_n != bios - 1 {
            bad.push(format!(
                "{what}: Per Process Q2Q {name}: btt N {b_n}, ours {bios} Qs over {rows} names"
            ));
        }
        if let (Some(b), Some(min)) = (b, min) {
            let ours_min = format!("{}.{:09}", min / 1_000_000_000, min % 1_000_000_000);
            if b[0].parse::<f64>().unwrap() > ours_min.parse::<f64>().unwrap() {
                bad.push(format!(
                    "{what}: Per Process Q2Q {name}: btt MIN {} > ours {ours_min}",
                    b[0]
                ));
            }
        }
    }
    bad.extend(compare_section("Per Process", &merged, &btt, &what));
    // Q2D per device from btt -z.
    for (key, _, phases, _) in groups(&dev_json) {
        let vals = btt_q2d(&tmp, &key);
        let ours = phases.get("Q2D").copied().unwrap_or_default();
        if vals.len() as u64 != ours.n {
            bad.push(format!(
                "{what}: Q2D {key}: btt N {} ours {}",
                vals.len(),
                ours.n
            ));
            continue;
        }
        if ours.n == 0 {
            continue;
        }
        let secs: Vec<f64> = vals.iter().map(|v| v.parse().unwrap()).collect();
        let min = secs.iter().cloned().fold(f64::INFINITY, f64::min);
        let max = secs.iter().cloned().fold(0.0, f64::max);
        let mean = secs.iter().sum::<f64>() / secs.len() as f64;
        let s6 = |ns: u64| format!("{:.6}", ns as f64 / 1e9);
        if s6(ours.min) != format!("{min:.6}") || s6(ours.max) != format!("{max:.6}") {
            bad.push(format!(
                "{what}: Q2D {key}: btt min/max {min:.6}/{max:.6} ours {}/{}",
                s6(ours.min),
                s6(ours.max)
            ));
        }
        let our_mean = ours.total as f64 / ours.n as f64 / 1e9;
        if (our_mean - mean).abs() > 0.5e-6 + 1e-12 {
            bad.push(format!(
                "{what}: Q2D {key}: btt mean {mean:.9} ours {our_mean:.9}"
            ));
        }
    }
    // The same capture as blkparse's default text (made here from the same files): every
    // per-device and per-process phase equals the binary's, so the btt comparison above holds
    // for the text too.
    let text = Command::new("blkparse")
        .arg("-D")
        .arg(&tmp)
        .args(["-i", &c.device])
        .output()
        .expect("blkparse");
    assert!(text.status.success(), "blkparse text");
    let text_file = tmp.join("blkparse.txt");
    std::fs::write(&text_file, &text.stdout).unwrap();
    for by in ["device", "process"] {
        let from_binary = groups(&iolat_json(&c.files, by));
        let from_text = groups(&iolat_json(std::slice::from_ref(&text_file), by));
        if from_binary != from_text {
            bad.push(format!(
                "{what}: --by {by}: blkparse text gives other phases than the binary files"
            ));
        }
    }
    let _ = std::fs::remove_dir_all(&tmp);
    bad
}

#[test]
fn iolat_agrees_with_btt_on_every_blktrace_fixture() {
    let mut captures = Vec::new();
    find_captures(&root().join("fixtures/block"), &mut captures);
    find_captures(
        &root().join("fixtures/detectors/dispatch-starvation"),
        &mut captures,
    );
    assert!(
        !captures.is_empty(),
        "no blktrace fixtures found under fixtures/block"
    );
    let mut bad = Vec::new();
    for (i, c) in captures.iter().enumerate() {
        bad.extend(check_capture(i, c));
    }
    assert!(
        bad.is_empty(),
        "{} mismatches with btt over {} captures:\n{}",
        bad.len(),
        captures.len(),
        bad.join("\n")
    );
}

#[test]
fn btt_table_parser_reads_btt_rows() {
    // Lines as btt 2.09 (blktrace 1.3.0) prints them with `btt -A`.
    let text = "==================== Per Process ====================\n\n\
            Q2Q           MIN           AVG           MAX           N\n\
--------------- ------------- ------------- ------------- -----------\n\
dd                0.000008101   0.010828660   0.172753300          17\n\
CPU 0           0.000000001   0.000000001   0.000000001           1\n\n";
    let t = parse_btt(text);
    assert_eq!(
        t.get(&("Per Process".into(), "Q2Q".into(), "dd".into())),
        Some(&[
            "0.000008101".to_string(),
            "0.010828660".into(),
            "0.172753300".into(),
            "17".into()
        ])
    );
    assert!(t.contains_key(&("Per Process".into(), "Q2Q".into(), "CPU 0".into())));
    assert_eq!(btt_process_name("kworker/0:1H"), "kworker");
    assert_eq!(
        btt_process_name("averyverylongprocessname"),
        "averyverylongp"
    );
}
