//! CPU profiles against perf itself (Debian `linux-perf`, required; CI installs it), on
//! `fixtures/profile/perf_cpu_fp/perf_cpu_fp.data` (781 `cpu-clock` samples with
//! frame-pointer callchains, recorded on another kernel build, so perf and we both leave
//! kernel frames as addresses):
//!
//! - per-function self shares equal `perf report --stdio --no-children --sort sym` run now;
//! - `perf script` text of the same file gives the same stacks as the perf.data path;
//! - a fold of that `perf script` text written here (stackcollapse-style, independent of our
//!   code) read as folded stacks gives the same self and total weights;
//! - perf's own text renderings made on the recording host (with symbols) agree with each
//!   other through our readers (`--sort sym`, `comm,dso,sym`, `--children`, `-g folded`);
//! - off-CPU stacks (`sched:sched_switch` with callchains, `fixtures/profile/
//!   perf_tp_callchain.data.xz`) are the same from perf.data and from `perf script` text.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use stallscope_model::{Problem, Profile, WeightUnit};
use stallscope_read::profile::{
    folded, perf_report, perf_script, read_profile, KernelSymbolSource, ProfileFormat,
    ProfileOptions, ProfileRead,
};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/profile/perf_cpu_fp")
        .join(name)
}

fn no_symbols() -> ProfileOptions {
    ProfileOptions {
        symbols: KernelSymbolSource::Off,
        event: None,
        no_user_symbols: true,
    }
}

fn perf(args: &[&str]) -> String {
    let data = fixture("perf_cpu_fp.data");
    let out = Command::new("perf")
        .args(args)
        .arg("-f")
        .arg("-i")
        .arg(&data)
        .output()
        .expect("perf is installed (apt-get install linux-perf)");
    assert!(
        out.status.success(),
        "perf {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("perf output is UTF-8")
}

fn read_data() -> ProfileRead {
    read_profile(
        fixture("perf_cpu_fp.data").to_str().unwrap(),
        None,
        &no_symbols(),
    )
    .unwrap()
}

/// `part / whole` in hundredths of a percent, rounded half up.
fn bp(part: u64, whole: u64) -> i64 {
    ((u128::from(part) * 20_000 + u128::from(whole)) / (2 * u128::from(whole))) as i64
}

/// Self weight per symbol name (non-zero only).
fn self_by_name(p: &Profile) -> HashMap<String, u64> {
    let w = p.self_weights();
    (0..p.symbols.len())
        .filter(|&i| w[i] > 0)
        .map(|i| (p.symbols[i].to_string(), w[i]))
        .collect()
}

fn total_by_name(p: &Profile) -> HashMap<String, u64> {
    let w = p.total_weights();
    (0..p.symbols.len())
        .filter(|&i| w[i] > 0)
        .map(|i| (p.symbols[i].to_string(), w[i]))
        .collect()
}

/// `    49.17%  [.] 0x00000000000011e9` → (4917, '.', "0x00000000000011e9").
fn report_entries(text: &str) -> Vec<(i64, char, String)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with('#') || t.is_empty() {
            continue;
        }
        let Some((pct, rest)) = t.split_once("%  [") else {
            continue;
        };
        let Some((int, frac)) = pct.split_once('.') else {
            continue;
        };
        let value = int.parse::<i64>().unwrap() * 100 + frac.parse::<i64>().unwrap();
        let mut chars = rest.chars();
        let kind = chars.next().unwrap();
        let sym = rest[3..].trim().to_string();
        out.push((value, kind, sym));
    }
    out
}

#[test]
fn self_shares_equal_perf_report_no_children_sort_sym() {
    let report = perf(&[
        "report",
        "--stdio",
        "--no-children",
        "--sort",
        "sym",
        "-g",
        "none",
        "--percent-limit",
        "0",
    ]);
    let entries = report_entries(&report);
    assert!(entries.len() > 10, "perf report entries: {report}");
    let r = read_data();
    assert_eq!(r.profile.stacks.len(), 781);
    assert_eq!(r.profile.unit, WeightUnit::Period("cpu-clock:pppH".into()));
    let total = r.profile.total_weight();
    assert_eq!(total, 390_695_250, "perf: Event count (approx.): 390695250");
    let ours = self_by_name(&r.profile);
    let kernel_of = |name: &str| {
        r.profile
            .lookup(name)
            .and_then(|id| r.profile.kernel[id as usize])
    };
    // Kernel entries: perf prints unresolved kernel addresses as we name them.
    let mut perf_user = Vec::new();
    let mut kernel_entries = 0;
    for (value, kind, sym) in &entries {
        if *kind == 'k' {
            kernel_entries += 1;
            let w = ours.get(sym).copied().unwrap_or(0);
            assert!(
                (bp(w, total) - value).abs() <= 1,
                "{sym}: perf {value} bp, ours {}",
                bp(w, total)
            );
            assert_eq!(kernel_of(sym), Some(true), "{sym}");
        } else {
            perf_user.push(*value);
        }
    }
    assert!(kernel_entries >= 4, "{report}");
    // User entries: perf names them DSO-relative (or by libc symbol), we by raw address;
    // each leaf address is its own entry on both sides, so the shares match as multisets.
    let mut our_user: Vec<i64> = ours
        .iter()
        .filter(|(name, _)| kernel_of(name) == Some(false))
        .map(|(_, &w)| bp(w, total))
        .collect();
    our_user.sort_unstable();
    perf_user.sort_unstable();
    assert_eq!(our_user.len(), perf_user.len(), "user leaf entries");
    for (a, b) in our_user.iter().zip(&perf_user) {
        assert!(
            (a - b).abs() <= 1,
            "user shares {our_user:?} vs perf {perf_user:?}"
        );
    }
    assert!(
        (r.quality.count(Problem::KernelSymbols)
            + r.quality.count(Problem::KernelSymbolsReleaseUnknown))
            == 0,
        "symbols were off"
    );
}

#[test]
fn perf_script_text_gives_the_same_profile_as_perf_data() {
    let text = perf(&["script"]);
    let s = perf_script::parse("perf-script", &text, &no_symbols()).unwrap();
    let d = read_data();
    assert_eq!(s.format, ProfileFormat::PerfScript);
    assert_eq!(s.event, d.event);
    assert_eq!(s.profile.unit, d.profile.unit);
    assert_eq!(s.profile.stacks.len(), d.profile.stacks.len());
    for (a, b) in s.profile.stacks.iter().zip(&d.profile.stacks) {
        assert_eq!(a.weight, b.weight);
        assert_eq!(a.pid, b.pid);
        assert_eq!(a.comm, b.comm);
        assert_eq!(a.ts, b.ts.map(|t| t / 1000 * 1000), "µs text time");
        assert_eq!(a.frames.len(), b.frames.len(), "stack at {:?}", a.span);
        for (&fa, &fb) in a.frames.iter().zip(&b.frames) {
            let ka = s.profile.kernel[fa as usize];
            assert_eq!(ka, d.profile.kernel[fb as usize]);
            if ka == Some(true) {
                assert_eq!(s.profile.symbol(fa), d.profile.symbol(fb));
            }
        }
    }
    // User symbols perf resolved from the libraries on this host stay named.
    assert!(s.profile.lookup("start_thread").is_some());
}

/// A stackcollapse-perf-like fold written independently of our readers: comm first, then
/// frames root to leaf, `[unknown]` frames as `0x<addr>`, weights = period sums.
fn independent_fold(script: &str) -> String {
    let mut folded: Vec<(String, u64)> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut flush = |comm: &str, period: u64, frames: &mut Vec<String>| {
        if comm.is_empty() {
            return;
        }
        frames.reverse();
        let mut key = comm.replace(' ', "_");
        for f in frames.iter() {
            key.push(';');
            key.push_str(f);
        }
        frames.clear();
        match index.get(&key) {
            Some(&i) => folded[i].1 += period,
            None => {
                index.insert(key.clone(), folded.len());
                folded.push((key, period));
            }
        }
    };
    let (mut comm, mut period, mut frames) = (String::new(), 0u64, Vec::new());
    for line in script.lines() {
        if let Some(frame) = line.strip_prefix('\t') {
            let frame = frame.trim();
            let (addr, rest) = frame.split_once(' ').unwrap();
            let sym = &rest[..rest.rfind(" (").unwrap()];
            let sym = match sym.rfind("+0x") {
                Some(p) => &sym[..p],
                None => sym,
            };
            // unresolved user frames as perf report keys them: DSO file and (DSO-relative,
            // as perf script prints it) address; kernel ones and those of no DSO `0x…`
            let dso = rest[rest.rfind(" (").unwrap() + 2..].trim_end_matches(')');
            let addr = u64::from_str_radix(addr, 16).unwrap();
            frames.push(if sym != "[unknown]" {
                sym.to_string()
            } else if dso == "[unknown]" || dso.starts_with("[kernel.") {
                if addr == 0 {
                    "[unknown]".to_string()
                } else {
                    format!("0x{addr:x}")
                }
            } else {
                format!("[{}+0x{addr:x}]", dso.rsplit('/').next().unwrap())
            });
        } else if line.trim().is_empty() {
            flush(&comm, period, &mut frames);
            comm.clear();
        } else {
            // COMM PID TIME: PERIOD EVENT:
            let colon = line.find(": ").unwrap();
            let head = &line[..colon];
            let head = &head[..head.rfind(' ').unwrap()].trim_end(); // drop time
            comm = head[..head.rfind(' ').unwrap()].trim().to_string(); // drop pid
            period = line[colon + 2..]
                .split_whitespace()
                .next()
                .unwrap()
                .parse()
                .unwrap();
        }
    }
    flush(&comm, period, &mut frames);
    folded.iter().map(|(k, v)| format!("{k} {v}\n")).collect()
}

#[test]
fn independent_fold_of_perf_script_reads_back_to_the_same_shares() {
    let text = perf(&["script"]);
    let s = perf_script::parse("perf-script", &text, &no_symbols()).unwrap();
    let folded_text = independent_fold(&text);
    let f = folded::parse("folded", &folded_text).unwrap();
    assert_eq!(f.profile.total_weight(), s.profile.total_weight());
    assert_eq!(self_by_name(&f.profile), self_by_name(&s.profile));
    let ft = total_by_name(&f.profile);
    for (name, w) in total_by_name(&s.profile) {
        assert_eq!(ft.get(&name), Some(&w), "total of {name}");
    }
    // The comm roots: every sample of the two worker threads.
    assert!(ft["CPU_0/KVM"] + ft["io_worker-1"] + ft["burn"] == f.profile.total_weight());
}

#[test]
fn recording_host_renderings_agree_with_each_other() {
    // perf report on the recording host, three views of the same data: `--sort sym`,
    // the default `comm,dso,sym` (summed per symbol), and `-g folded` sample counts.
    let read = |name: &str| {
        let text = std::fs::read_to_string(fixture(name)).unwrap();
        (perf_report::parse(name, &text).unwrap(), text)
    };
    let (by_sym, sym_text) = read("report_stdio_sort_sym.txt");
    let (by_comm, _) = read("report_stdio_no_children.txt");
    let (folded_counts, _) = read("report_stdio_folded.txt");
    let (children, _) = read("report_stdio_children.txt");
    assert_eq!(by_sym.profile.unit, WeightUnit::BasisPoints);
    assert_eq!(folded_counts.profile.unit, WeightUnit::Samples);
    assert_eq!(by_sym.event.as_deref(), Some("cpu-clock:pppH"));
    let entries = report_entries(&sym_text);
    assert_eq!(entries.len(), 9);
    let s_comm = self_by_name(&by_comm.profile);
    let s_children = self_by_name(&children.profile);
    let s_folded = self_by_name(&folded_counts.profile);
    let n = folded_counts.profile.total_weight();
    assert_eq!(n, 781, "# Samples: 781");
    for (value, _, sym) in entries {
        for (view, map, tolerance) in [
            ("comm,dso,sym", &s_comm, 3),
            ("children Self", &s_children, 3),
        ] {
            let w = map.get(&sym).copied().unwrap_or(0) as i64;
            assert!(
                (w - value).abs() <= tolerance,
                "{view} {sym}: {w} vs {value}"
            );
        }
        let w = s_folded.get(&sym).copied().unwrap_or(0);
        assert!(
            (bp(w, n) - value).abs() <= 1,
            "folded {sym}: {} vs {value}",
            bp(w, n)
        );
    }
}

#[test]
fn recording_host_script_text_has_the_perf_data_stacks() {
    // script_cpu_fp.txt is the head of `perf script` on the recording host (75 samples, the
    // last one cut before its frames), with symbols resolved there.
    let script = std::fs::read_to_string(fixture("script_cpu_fp.txt")).unwrap();
    let s = perf_script::parse("script", &script, &no_symbols()).unwrap();
    let d = read_data();
    assert_eq!(s.profile.stacks.len(), 75);
    assert_eq!(s.quality.count(Problem::ProfileNoCallchain), 1);
    for (a, b) in s.profile.stacks.iter().zip(&d.profile.stacks).take(74) {
        assert_eq!((a.weight, a.pid, a.comm), (b.weight, b.pid, b.comm));
        assert_eq!(a.frames.len(), b.frames.len());
    }
    let leaf = |p: &Profile, i: usize| p.symbol(p.stacks[i].frames[0]).to_string();
    assert_eq!(leaf(&s.profile, 2), "leaf_compute");
    // perf.data: the MMAP records name the file and offset, as `perf report` does
    // (`burn  [.] 0x00000000000011e9`)
    assert_eq!(leaf(&d.profile, 2), "[burn+0x11e9]");
}

#[test]
fn off_cpu_sched_switch_stacks_from_perf_data_and_perf_script_agree() {
    use std::io::Read;
    let xz = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/profile/perf_tp_callchain.data.xz");
    let mut bytes = Vec::new();
    stallscope_read::Input::open(xz.to_str().unwrap())
        .unwrap()
        .into_reader()
        .read_to_end(&mut bytes)
        .unwrap();
    let data =
        std::env::temp_dir().join(format!("stallscope-profile-tp-{}.data", std::process::id()));
    std::fs::write(&data, bytes).unwrap();
    let opts = ProfileOptions {
        symbols: KernelSymbolSource::Off,
        event: Some("sched:sched_switch".into()),
        no_user_symbols: true,
    };
    let d = read_profile(data.to_str().unwrap(), None, &opts).unwrap();
    let out = Command::new("perf")
        .args(["script", "-f", "-i"])
        .arg(&data)
        .output()
        .expect("perf is installed");
    std::fs::remove_file(&data).unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let switches = text
        .lines()
        .filter(|l| l.contains(" sched:sched_switch: "))
        .count();
    let s = perf_script::parse("perf-script", &text, &opts).unwrap();
    assert_eq!(
        d.profile.stacks.len(),
        switches,
        "one stack per sched_switch perf prints"
    );
    assert_eq!(s.profile.stacks.len(), switches);
    assert_eq!(d.profile.unit, WeightUnit::Samples);
    for (a, b) in s.profile.stacks.iter().zip(&d.profile.stacks) {
        assert_eq!(
            (a.pid, a.cpu, a.comm, a.weight),
            (b.pid, b.cpu, b.comm, b.weight)
        );
        assert_eq!(a.ts, b.ts.map(|t| t / 1000 * 1000));
        let names = |p: &Profile, f: &[u32]| -> Vec<String> {
            f.iter()
                .filter(|&&x| p.kernel[x as usize] == Some(true))
                .map(|&x| p.symbol(x).to_string())
                .collect()
        };
        assert_eq!(names(&s.profile, &a.frames), names(&d.profile, &b.frames));
        assert_eq!(a.frames.len(), b.frames.len());
    }
    assert_eq!(
        self_by_name(&s.profile).len(),
        1,
        "every off-CPU stack ends in __schedule's switch point"
    );
}
