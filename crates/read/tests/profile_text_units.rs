//! Units for the text profile readers on perf's own renderings
//! (`fixtures/profile/perf_cpu_fp/report_stdio_*.txt`, made by perf 6.1 on the recording
//! host) and on hand-written edge cases (`fixtures/profile/odd_symbols.folded`). Expected
//! values are read off perf's text, not produced by our code.

use std::path::{Path, PathBuf};

use stallscope_model::{Problem, Profile, SpanPos, WeightUnit};
use stallscope_read::profile::{
    folded, perf_report, perf_script, read_profile, sniff_profile, Kallsyms, KernelSymbolSource,
    ProfileFormat, ProfileOptions, ProfileRead,
};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/profile")
        .join(name)
}

fn report(name: &str) -> ProfileRead {
    let path = fixture(&format!("perf_cpu_fp/{name}"));
    let text = std::fs::read_to_string(&path).unwrap();
    perf_report::parse(name, &text).unwrap()
}

/// Stacks as (comm, leaf-first names, weight).
fn stacks(p: &Profile) -> Vec<(String, Vec<String>, u64)> {
    p.stacks
        .iter()
        .map(|s| {
            (
                s.comm.map(|c| c.as_str().to_string()).unwrap_or_default(),
                s.frames.iter().map(|&f| p.symbol(f).to_string()).collect(),
                s.weight,
            )
        })
        .collect()
}

fn has(p: &Profile, comm: &str, frames: &[&str], weight: u64) -> bool {
    stacks(p)
        .iter()
        .any(|(c, f, w)| c == comm && f == frames && *w == weight)
}

#[test]
fn no_children_graph_callee_first() {
    // `---leaf_compute / worker / start_thread` under `49.30%  CPU 0/KVM … [.] leaf_compute`.
    let r = report("report_stdio_no_children.txt");
    let p = &r.profile;
    assert_eq!(p.unit, WeightUnit::BasisPoints);
    assert!(has(
        p,
        "CPU 0/KVM",
        &["leaf_compute", "worker", "start_thread"],
        4930
    ));
    assert!(has(
        p,
        "io worker-1",
        &["leaf_compute", "worker", "start_thread"],
        4866
    ));
    // Entries without graph: one frame; the [k] marker is kept.
    assert!(has(p, "io worker-1", &["common_nsleep"], 13));
    let id = p.lookup("common_nsleep").unwrap();
    assert_eq!(p.kernel[id as usize], Some(true));
    // 12 entries, the printed percentages sum to 100.01%.
    assert_eq!(p.stacks.len(), 12);
    assert_eq!(p.total_weight(), 10001);
    assert_eq!(r.quality.count(Problem::PerfReportBadLine), 0);
    assert_eq!(r.quality.count(Problem::PerfReportLossy), 1);
}

#[test]
fn caller_graph_and_flat_graph_give_the_same_stacks() {
    let callee = stacks(&report("report_stdio_no_children.txt").profile);
    assert_eq!(stacks(&report("report_stdio_caller.txt").profile), callee);
    let flat = report("report_stdio_flat.txt");
    assert_eq!(stacks(&flat.profile), callee);
    assert_eq!(flat.quality.count(Problem::PerfReportBadLine), 0);
}

#[test]
fn children_view_self_column_and_branch_glyphs() {
    // `49.81%    49.30%  CPU 0/KVM … leaf_compute` with branches
    // `|--49.30%--start_thread / worker / leaf_compute` and ` --0.51%--leaf_compute / …`.
    let r = report("report_stdio_children.txt");
    let p = &r.profile;
    assert!(has(
        p,
        "CPU 0/KVM",
        &["leaf_compute", "worker", "start_thread"],
        4930
    ));
    assert!(has(
        p,
        "io worker-1",
        &["leaf_compute", "worker", "start_thread"],
        4866
    ));
    // `0.51%  0.38%  CPU 0/KVM … irqentry_exit_to_user_mode` (no graph): self 0.38%.
    assert!(has(p, "CPU 0/KVM", &["irqentry_exit_to_user_mode"], 38));
    // Entries with zero self weight give no stack.
    assert!(stacks(p).iter().all(|(_, f, _)| f[0] != "start_thread"));
    assert_eq!(r.quality.count(Problem::PerfReportBadLine), 0);
    // `50.06% start_thread` → `--49.94%--worker`: 0.12% pruned below the threshold.
    assert!(r.quality.count(Problem::PerfReportPruned) >= 1);
    // The Children column as printed: start_thread 50.06% + 49.55% (two comms).
    let totals = r.reported_totals.as_ref().unwrap();
    let t = |n: &str| totals.iter().find(|(s, _)| s == n).map(|&(_, w)| w);
    assert_eq!(t("start_thread"), Some(5006 + 4955));
    assert_eq!(t("leaf_compute"), Some(4981 + 4917));
    assert_eq!(t("__folio_start_writeback"), Some(13));
    assert!(report("report_stdio_no_children.txt")
        .reported_totals
        .is_none());
}

#[test]
fn sort_sym_graph_without_entry_frame_and_nested_branch() {
    // `97.95%  [.] leaf_compute` / `---worker / start_thread`: the entry is prepended.
    // `0.77%  [k] irqentry_exit_to_user_mode` / ` --0.64%--asm_sysvec_apic_timer_interrupt …`
    let r = report("report_stdio_sort_sym.txt");
    let p = &r.profile;
    assert!(has(
        p,
        "",
        &["leaf_compute", "worker", "start_thread"],
        9795
    ));
    assert!(has(
        p,
        "",
        &[
            "irqentry_exit_to_user_mode",
            "asm_sysvec_apic_timer_interrupt",
            "leaf_compute",
            "worker",
            "start_thread"
        ],
        64
    ));
    // The 0.13% pruned below the branch stays on the entry alone.
    assert!(has(p, "", &["irqentry_exit_to_user_mode"], 13));
    assert_eq!(r.quality.count(Problem::PerfReportPruned), 1);
}

#[test]
fn folded_report_lines_count_first() {
    // `385 start_thread;worker;leaf_compute` under the CPU 0/KVM entry.
    let r = report("report_stdio_folded.txt");
    let p = &r.profile;
    assert_eq!(p.unit, WeightUnit::Samples);
    assert!(has(
        p,
        "CPU 0/KVM",
        &["leaf_compute", "worker", "start_thread"],
        385
    ));
    assert!(has(
        p,
        "io worker-1",
        &["leaf_compute", "worker", "start_thread"],
        380
    ));
    assert_eq!(p.total_weight(), 781);
}

#[test]
fn folded_odd_symbols() {
    let text = std::fs::read_to_string(fixture("odd_symbols.folded")).unwrap();
    let r = folded::parse("odd_symbols.folded", &text).unwrap();
    let p = &r.profile;
    assert!(has(
        p,
        "",
        &[
            "std::vector<int, std::allocator<int> >::push_back",
            "start_thread",
            "CPU_0/KVM"
        ],
        3
    ));
    assert!(has(
        p,
        "",
        &["osq_lock", "do_syscall_64", "entry_SYSCALL_64", "fio"],
        7
    ));
    assert_eq!(p.kernel[p.lookup("osq_lock").unwrap() as usize], Some(true));
    assert!(has(p, "", &["Foo::bar", "Interpreter", "java"], 2));
    assert!(has(p, "", &["operator() (int) const", "[foo;bar]", "x"], 2));
    assert!(has(p, "", &["leaf", "[unbalanced", "x"], 1));
    assert!(has(p, "", &["anon", "<lambda>::call", "x"], 1));
    assert!(has(
        p,
        "",
        &["try_to_wake_up_[w]", "--", "schedule", "waker"],
        4
    ));
    assert!(has(p, "", &["compute", "main", "x"], 2)); // 1.5 rounded
    assert_eq!(r.quality.count(Problem::FoldedFractionalCount), 1);
    let diff = p.stacks.iter().find(|s| s.weight == 40).unwrap();
    assert_eq!(diff.weight_new, Some(52));
    assert_eq!(r.quality.count(Problem::FoldedBadLine), 0);
}

#[test]
fn sniffing_each_format() {
    let head = |name: &str| std::fs::read(fixture(name)).unwrap();
    assert_eq!(
        sniff_profile(&head("perf_cpu_fp/perf_cpu_fp.data")),
        Some(ProfileFormat::PerfData)
    );
    assert_eq!(
        sniff_profile(&head("perf_cpu_fp/script_cpu_fp.txt")),
        Some(ProfileFormat::PerfScript)
    );
    for f in [
        "children",
        "no_children",
        "caller",
        "flat",
        "folded",
        "nograph",
        "sort_sym",
    ] {
        let h = head(&format!("perf_cpu_fp/report_stdio_{f}.txt"));
        assert_eq!(sniff_profile(&h), Some(ProfileFormat::PerfReport), "{f}");
    }
    assert_eq!(
        sniff_profile(&head("odd_symbols.folded")),
        Some(ProfileFormat::Folded)
    );
    assert_eq!(sniff_profile(b"hello world\nthis is not a profile\n"), None);
    assert_eq!(sniff_profile(b""), None);
}

#[test]
fn empty_and_garbage_inputs_are_errors_with_the_line() {
    let off = ProfileOptions {
        symbols: KernelSymbolSource::Off,
        event: None,
        no_user_symbols: false,
    };
    let e = folded::parse("f", "# only a comment\n\nnot a stack\n").unwrap_err();
    assert_eq!(e.pos, Some(SpanPos::Line(3)));
    assert!(e.to_string().contains("folded stacks"));
    let e = perf_script::parse("s", "garbage line\n", &off).unwrap_err();
    assert_eq!(e.pos, Some(SpanPos::Line(1)));
    let e = perf_report::parse("r", "# Overhead  Symbol\nxx\n").unwrap_err();
    assert_eq!(e.pos, Some(SpanPos::Line(1)));
    assert!(folded::parse("f", "").is_err());
    // Through the sniffer: an unknown format names what was tried.
    let dir = std::env::temp_dir().join(format!("stallscope-profile-units-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let garbage = dir.join("garbage.bin");
    std::fs::write(&garbage, b"\x00\x01\x02 not a profile").unwrap();
    let e = read_profile(garbage.to_str().unwrap(), None, &off).unwrap_err();
    assert!(e.to_string().contains("formats tried"), "{e}");
    let empty = dir.join("empty.txt");
    std::fs::write(&empty, b"").unwrap();
    let e = read_profile(empty.to_str().unwrap(), None, &off).unwrap_err();
    assert!(e.to_string().contains("empty"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The fuzz target's body on stable: fixture texts cut, flipped and spliced at pseudo-random
/// places (xorshift, fixed seed) through every text parser; none may panic.
#[test]
fn mutated_inputs_never_panic() {
    let mut seeds: Vec<Vec<u8>> = ["odd_symbols.folded", "perf_cpu_fp/script_cpu_fp.txt"]
        .iter()
        .map(|n| std::fs::read(fixture(n)).unwrap())
        .collect();
    for f in ["children", "no_children", "sort_sym", "flat", "folded"] {
        seeds.push(std::fs::read(fixture(&format!("perf_cpu_fp/report_stdio_{f}.txt"))).unwrap());
    }
    let off = ProfileOptions {
        symbols: KernelSymbolSource::Off,
        event: None,
        no_user_symbols: false,
    };
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move |n: usize| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % n.max(1) as u64) as usize
    };
    const GLYPHS: &[&[u8]] = &[
        b"|", b"--", b"%--", b"---", b";", b"\t", b"\n", b" 12", b"[", b"]", b"+0x", b"(",
    ];
    for round in 0..600 {
        let mut data = seeds[round % seeds.len()].clone();
        for _ in 0..1 + next(6) {
            let at = next(data.len() + 1);
            match next(4) {
                0 => data.truncate(at),
                1 if at < data.len() => data[at] = next(256) as u8,
                2 => {
                    let g = GLYPHS[next(GLYPHS.len())];
                    data.splice(at..at, g.iter().copied());
                }
                _ => {
                    let len = next(40).min(data.len() - at.min(data.len()));
                    data.drain(at..at + len);
                }
            }
        }
        let text = String::from_utf8_lossy(&data);
        let _ = sniff_profile(&data);
        if let Ok(k) = Kallsyms::parse("m", &text) {
            let _ = (k.lookup(0xffff_ffff_8100_0000), k.lookup(0x11e9), k.note());
        }
        for r in [
            folded::parse("m", &text),
            perf_script::parse("m", &text, &off),
            perf_report::parse("m", &text),
        ]
        .into_iter()
        .flatten()
        {
            let _ = (r.profile.self_weights(), r.profile.total_weights());
        }
    }
}

#[test]
fn second_event_section_is_counted_not_merged() {
    // `perf record -e a -e b` reports one section per event: the first is read.
    let one = std::fs::read_to_string(fixture("perf_cpu_fp/report_stdio_nograph.txt")).unwrap();
    let two = one.replace("of event 'cpu-clock:pppH'", "of event 'cycles'");
    let r = perf_report::parse("two", &format!("{one}{two}")).unwrap();
    let single = perf_report::parse("one", &one).unwrap();
    assert_eq!(stacks(&r.profile), stacks(&single.profile));
    assert_eq!(r.event.as_deref(), Some("cpu-clock:pppH"));
    assert_eq!(r.quality.count(Problem::PerfReportOtherEvent), 1);
    assert_eq!(r.quality.count(Problem::PerfReportBadLine), 0);
}
