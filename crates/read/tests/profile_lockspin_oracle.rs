//! Kernel symbolization against perf on real system-wide captures: the lock-spinning
//! fixtures (`fixtures/detectors/lock-spinning/`, `perf record -a -g -F 499`, kernel
//! 6.18.44-fc-v769, perf 6.1), each with `perf report --no-children --sort sym -g none
//! --percent-limit 0.01` output saved at capture time on the recording host and that host's
//! kallsyms (`kallsyms.txt.xz`, code symbols).
//!
//! - perf.data + `--kallsyms`: every `[k]` entry's share equals ours (same names: alias
//!   choice, module symbols, range ends); the `[.]` entries sum to our user-leaf share;
//! - the saved `perf script` text: every entry, kernel and user, by name.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use stallscope_model::{Problem, Profile};
use stallscope_read::profile::{
    perf_script, read_profile, KernelSymbolSource, ProfileOptions, ProfileRead,
};
use stallscope_read::Input;

const CASES: [&str; 4] = ["xfs-shared", "xfs-private", "tmpfs-shared", "tmpfs-private"];

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/detectors/lock-spinning")
}

fn unxz(name: &str) -> Vec<u8> {
    let mut out = Vec::new();
    Input::open(dir().join(name).to_str().unwrap())
        .unwrap()
        .into_reader()
        .read_to_end(&mut out)
        .unwrap();
    out
}

fn temp_file(name: &str, bytes: &[u8]) -> PathBuf {
    let p = std::env::temp_dir().join(format!(
        "stallscope-lockspin-oracle-{}-{name}",
        std::process::id()
    ));
    std::fs::write(&p, bytes).unwrap();
    p
}

/// `    16.67%  [k] _raw_spin_unlock_irqrestore` → (1667, 'k', name).
fn report_entries(case: &str) -> Vec<(i64, char, String)> {
    let text = std::fs::read_to_string(dir().join(format!("{case}.report-sym.txt"))).unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let (pct, rest) = l.trim_start().split_once("%  [")?;
            let (i, f) = pct.split_once('.')?;
            let kind = rest.chars().next()?;
            let name = rest.get(3..)?.trim().to_string();
            Some((
                i.parse::<i64>().ok()? * 100 + f.parse::<i64>().ok()?,
                kind,
                name,
            ))
        })
        .collect()
}

fn bp(part: u64, whole: u64) -> i64 {
    ((u128::from(part) * 20_000 + u128::from(whole)) / (2 * u128::from(whole))) as i64
}

fn self_shares(p: &Profile) -> HashMap<String, (i64, Option<bool>)> {
    let w = p.self_weights();
    let total = p.total_weight();
    (0..p.symbols.len())
        .filter(|&i| w[i] > 0)
        .map(|i| (p.symbols[i].to_string(), (bp(w[i], total), p.kernel[i])))
        .collect()
}

fn read(path: &Path, symbols: KernelSymbolSource) -> ProfileRead {
    let opts = ProfileOptions {
        symbols,
        event: None,
        no_user_symbols: true,
    };
    read_profile(path.to_str().unwrap(), None, &opts).unwrap()
}

#[test]
fn perf_data_with_kallsyms_matches_perf_report_kernel_entries() {
    let kallsyms = temp_file("kallsyms", &unxz("kallsyms.txt.xz"));
    for case in CASES {
        let data = temp_file("data", &unxz(&format!("{case}.perf.data.xz")));
        let r = read(
            &data,
            KernelSymbolSource::File(kallsyms.to_str().unwrap().into()),
        );
        std::fs::remove_file(&data).unwrap();
        let ours = self_shares(&r.profile);
        let entries = report_entries(case);
        assert!(entries.len() > 20, "{case}");
        let mut user_perf = 0;
        for (value, kind, name) in &entries {
            if *kind == 'k' {
                let got = ours.get(name).map_or(0, |&(v, _)| v);
                assert!(
                    (got - value).abs() <= 1,
                    "{case} {name}: perf {value} bp, ours {got}"
                );
            } else {
                user_perf += value;
            }
        }
        let user_ours: i64 = ours
            .values()
            .filter(|(_, k)| *k == Some(false))
            .map(|(v, _)| v)
            .sum();
        // Rounding: up to half a basis point per printed entry, and entries below 0.01% are
        // not printed.
        let slack = entries.len() as i64 / 2 + 5;
        assert!(
            (user_ours - user_perf).abs() <= slack,
            "{case}: user {user_ours} vs perf {user_perf}"
        );
        assert_eq!(
            (r.quality.count(Problem::KernelSymbols)
                + r.quality.count(Problem::KernelSymbolsReleaseUnknown)),
            0,
            "{case}"
        );
    }
    std::fs::remove_file(&kallsyms).unwrap();
}

#[test]
fn saved_perf_script_text_matches_perf_report_by_name() {
    for case in CASES {
        let text = String::from_utf8(unxz(&format!("{case}.perf-script.txt.xz"))).unwrap();
        let opts = ProfileOptions {
            symbols: KernelSymbolSource::Off,
            event: None,
            no_user_symbols: true,
        };
        let r = perf_script::parse(case, &text, &opts).unwrap();
        let ours = self_shares(&r.profile);
        for (value, kind, name) in report_entries(case) {
            // perf report prints an unresolved address as `0x%016llx`; we write `0x%llx`
            // for kernel frames and `[DSO+0x%llx]` for user frames (perf's key: DSO and
            // offset; this report is sorted by symbol only, so the DSO is looked up).
            let name = match name.strip_prefix("0x").map(|h| u64::from_str_radix(h, 16)) {
                Some(Ok(a)) if kind == 'k' => format!("{a:#x}"),
                Some(Ok(a)) => {
                    let suffix = format!("+{a:#x}]");
                    ours.keys()
                        .find(|n| n.starts_with('[') && n.ends_with(&suffix))
                        .cloned()
                        .unwrap_or_else(|| format!("{a:#x}"))
                }
                _ => name,
            };
            let (got, k) = ours.get(&name).copied().unwrap_or((0, None));
            assert!(
                (got - value).abs() <= 1,
                "{case} {name}: perf {value} bp, ours {got}"
            );
            assert_eq!(k, Some(kind == 'k'), "{case} {name}");
        }
    }
}

#[test]
fn perf_report_graph_text_matches_perf_report_sort_sym() {
    // `perf report --stdio --no-children` (default comm,dso,sym with call graphs), summed
    // per symbol, against `--sort sym -g none` of the same capture.
    for case in CASES {
        let text = std::fs::read_to_string(dir().join(format!("{case}.report-graph.txt"))).unwrap();
        let r = stallscope_read::profile::perf_report::parse(case, &text).unwrap();
        assert_eq!(r.quality.count(Problem::PerfReportBadLine), 0, "{case}");
        let w = r.profile.self_weights();
        let by_name: HashMap<&str, u64> = (0..w.len())
            .map(|i| (&*r.profile.symbols[i], w[i]))
            .collect();
        for (value, _, name) in report_entries(case) {
            let got = by_name.get(name.as_str()).copied().unwrap_or(0) as i64;
            // One rounding per comm/dso entry that makes up the symbol.
            assert!(
                (got - value).abs() <= 3,
                "{case} {name}: perf {value} bp, ours {got}"
            );
        }
    }
}
