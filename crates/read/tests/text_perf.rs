//! `perf script` text against `fixtures/samples/perf` (perf 6.1, kernel 6.18), the
//! repository's `fixtures/sched` captures, and hand-made edge cases.
//!
//! Provenance (formats.md §0, fixtures/sched/README.md): `script_sched_default.txt`,
//! `script_sched_ns.txt`, `script_sched_F_pid_tid.txt` and `script_sched_F_ip_sym.txt` are
//! renderings of the same `perf_sched.data`; `script_tp_callchain.txt` and
//! `script_tp_callchain_hidden.txt` (`-G`) of the same `perf_tp_callchain.data`;
//! `starve.perf-script{,-us,-pidtid}.txt` of `starve.perf.data`.

mod text_support;

use stallscope_model::{InputFormat, Problem, SpanPos};
use stallscope_read::text_common::sniff_text;
use text_support::{count_event_lines, fixtures, read_as, read_bytes, samples, Read};

const PERF: InputFormat = InputFormat::PerfScriptText;

fn sample(name: &str) -> std::path::PathBuf {
    samples().join("perf").join(name)
}

fn read(name: &str) -> Read {
    read_as(&sample(name), PERF)
}

fn at_line(r: &Read, line: u64) -> String {
    let e = r
        .events
        .iter()
        .find(|e| e.span.pos() == SpanPos::Line(line));
    e.map(|e| e.dump_line())
        .unwrap_or_else(|| panic!("no event from line {line}"))
}

fn split_ts(d: &str) -> (u64, &str) {
    let (ts, rest) = d.split_once(' ').expect("ts");
    (ts.parse().expect("ts digits"), rest)
}

#[test]
fn every_sched_and_callchain_sample_parses_completely() {
    for name in [
        "script_sched_default.txt",
        "script_sched_ns.txt",
        "script_sched_F_pid_tid.txt",
        "script_sched_F_ip_sym.txt",
        "script_sched_all_tp.txt",
        "script_tp_callchain.txt",
        "script_tp_callchain_hidden.txt",
        "script_pipe.txt",
    ] {
        let body = std::fs::read_to_string(sample(name)).expect("sample");
        assert_eq!(sniff_text(body.as_bytes()), Some(PERF), "{name}");
        let r = read(name);
        assert!(r.dq.is_empty(), "{name}: {:?}", r.dq);
        assert_eq!(r.events.len(), count_event_lines(&body), "{name}");
        assert!(
            r.events
                .iter()
                .all(|e| e.pid > 0 || e.kind.name().starts_with("sched_")),
            "{name}"
        );
    }
}

#[test]
fn spot_checks_r_plus_kworker_suffix_and_comm_with_space() {
    let r = read("script_pipe.txt");
    // line 6:  kworker/u8:5+lo 11283 [000]   484.665557: sched:sched_switch: prev_comm=kworker/u8:5 … prev_state=R+ ==> next_comm=ksoftirqd/0 …
    assert_eq!(
        at_line(&r, 6),
        "484665557000 0 11283 sched_switch prev_comm=kworker/u8:5 prev_pid=11283 prev_prio=120 prev_state=R+ next_comm=ksoftirqd/0 next_pid=14 next_prio=120"
    );
    // line 9:  kworker/0:114-d 13396 [000]   484.665628: sched:sched_wakeup: comm=fio pid=13837 prio=120 target_cpu=001
    assert_eq!(
        at_line(&r, 9),
        "484665628000 0 13396 sched_wakeup comm=fio pid=13837 prio=120 target_cpu=1"
    );
    let r = read("script_sched_all_tp.txt");
    // line 34:        CPU 0/KVM 14011 [001]   485.913137: sched:sched_switch: prev_comm=CPU 0/KVM prev_pid=14011 … prev_state=R ==> …
    assert_eq!(
        at_line(&r, 34),
        "485913137000 1 14011 sched_switch prev_comm=\"CPU 0/KVM\" prev_pid=14011 prev_prio=120 prev_state=R next_comm=rcu_preempt next_pid=15 next_prio=120"
    );
    assert_eq!(
        r.meta
            .declared_events
            .iter()
            .filter(|n| n.starts_with("sched:"))
            .count(),
        r.meta.declared_events.len()
    );
}

#[test]
fn us_ns_pid_tid_and_ip_sym_renderings_agree() {
    let ns = read("script_sched_ns.txt").dumps();
    let us = read("script_sched_default.txt").dumps();
    let pid_tid = read("script_sched_F_pid_tid.txt").dumps();
    let ip_sym = read("script_sched_F_ip_sym.txt").dumps();
    assert_eq!(ns.len(), 40);
    for (i, d) in ns.iter().enumerate() {
        let (t_ns, rest) = split_ts(d);
        let (t_us, us_rest) = split_ts(&us[i]);
        // perf prints µs truncated (ns / 1000), not rounded.
        assert_eq!((t_us, us_rest), (t_ns / 1000 * 1000, rest), "event {i}");
    }
    assert_eq!(pid_tid, us[..40].to_vec(), "PID/TID column");
    assert_eq!(
        ip_sym,
        us[..40].to_vec(),
        "-F +ip,sym column removed from payloads"
    );
}

#[test]
fn callchains_are_attached_with_the_printed_addresses() {
    let path = sample("script_tp_callchain.txt");
    let body = std::fs::read_to_string(&path).expect("sample");
    let r = read("script_tp_callchain.txt");
    let hidden = read("script_tp_callchain_hidden.txt");
    // -G prints the same events without the blocks.
    assert_eq!(r.dumps(), hidden.dumps()[..r.events.len()].to_vec());
    assert!(hidden.events.iter().all(|e| e.callchain.is_none()));
    // Every block, parsed here independently: tab lines until a blank line, first word hex.
    let mut blocks: Vec<Vec<u64>> = Vec::new();
    for l in body.lines() {
        if let Some(frame) = l.strip_prefix('\t') {
            let word = frame.split_whitespace().next().expect("address");
            blocks
                .last_mut()
                .expect("block")
                .push(u64::from_str_radix(word, 16).expect("hex"));
        } else if !l.is_empty() {
            blocks.push(Vec::new());
        }
    }
    let got: Vec<Vec<u64>> = r
        .events
        .iter()
        .map(|e| e.callchain.as_deref().unwrap_or_default().to_vec())
        .collect();
    assert_eq!(got, blocks);
    assert_eq!(
        got[0][0], 0xffff_ffff_813a_89c4,
        "try_to_wake_up+0x3a4, leaf first"
    );
    assert_eq!(got[0][9], 0xee137, "user address as printed (DSO-relative)");
    // Header lines of callchain events have an unpadded comm: `perf 13988 [000] …`
    assert_eq!(
        at_line(&r, 40),
        "482211698000 0 13988 sched_switch prev_comm=perf prev_pid=13988 prev_prio=120 prev_state=D next_comm=migration/0 next_pid=18 next_prio=0"
    );
}

#[test]
fn header_block_fills_meta() {
    let r = read("script_header_only.txt");
    assert!(r.events.is_empty());
    assert_eq!(r.meta.kernel_release.as_deref(), Some("6.18.44-fc-v657"));
    assert_eq!(r.meta.hostname.as_deref(), Some("vm"));
    assert_eq!(r.meta.tool_version.as_deref(), Some("perf 6.1.192"));
    assert_eq!(r.meta.nr_cpus, Some(2));
    assert_eq!(
        r.meta.cmdline.as_deref(),
        Some("/usr/bin/perf sched record -o perf_sched.data -- ./burn 0.05")
    );
    assert_eq!(
        r.meta.declared_events[..2],
        [
            "sched:sched_switch".to_string(),
            "sched:sched_stat_runtime".to_string()
        ]
    );
    assert_eq!(
        r.meta.declared_events.len(),
        7,
        "six sched events and dummy:HG"
    );
}

#[test]
fn side_band_lines_are_counted_not_events() {
    let r = read("script_task_events.txt");
    assert!(r.events.is_empty());
    assert_eq!(r.dq.count(Problem::PerfSideBandLinesSkipped), 5);
    assert_eq!(r.dq.count(Problem::UnparsedLines), 0);
}

#[test]
fn pid_width_7_gives_the_same_events_as_width_5() {
    // perf >= 6.5 prints `%7d` (and `%7d/%-7d`) where 6.1 printed `%5d`: widen every pid
    // field of a real sample and expect identical events.
    let body = std::fs::read_to_string(sample("script_sched_ns.txt")).expect("sample");
    let widened: String = body
        .lines()
        .map(|l| {
            let i = l.find(" [").expect("cpu column");
            let (head, tail) = l.split_at(i);
            let (comm, pid) = head.rsplit_once(' ').expect("pid");
            format!("{:>16} {pid:>7}{tail}\n", comm.trim())
        })
        .collect();
    assert!(widened.contains("migration/0      18 [000]"));
    let a = read_bytes("w5.txt", body.as_bytes(), PERF);
    let b = read_bytes("w7.txt", widened.as_bytes(), PERF);
    assert_eq!(a.dumps(), b.dumps());
    assert!(b.dq.is_empty());
}

#[test]
fn edge_cases_file() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/text/perf_script_edge.txt");
    let r = read_as(&path, PERF);
    assert_eq!(
        r.dumps(),
        vec![
            "481124205000 0 18 sched_waking comm=perf pid=13978 prio=120 target_cpu=0",
            "481124300000 11 1234 sched_switch prev_comm=kworker/11:68 prev_pid=1234 prev_prio=120 prev_state=I next_comm=\"a:b [x] 1.5\" next_pid=77 next_prio=120",
            "481124400000 11 77 sched_switch prev_comm=\"a:b [x] 1.5\" prev_pid=77 prev_prio=120 prev_state=R+ next_comm=swapper/11 next_pid=0 next_prio=120",
            "481124500000 11 77 sched_waking comm=x pid=9 prio=120 target_cpu=1",
        ]
    );
    assert_eq!(
        r.events[3].callchain.as_deref(),
        Some(&[0x7f00_1122_3344, 0xffff_ffff_821f_8b58][..])
    );
    assert_eq!(r.dq.count(Problem::PerfSideBandLinesSkipped), 1);
    assert_eq!(r.dq.count(Problem::UnparsedLines), 0);
}

#[test]
fn fixture_renderings_of_one_capture_agree() {
    let dir = fixtures().join("sched");
    let ns_path = dir.join("starve.perf-script.txt");
    assert!(ns_path.exists(), "{} is missing", ns_path.display());
    let ns = read_as(&ns_path, PERF);
    let us = read_as(&dir.join("starve.perf-script-us.txt"), PERF);
    let pid_tid = read_as(&dir.join("starve.perf-script-pidtid.txt"), PERF);
    let body = std::fs::read_to_string(&ns_path).expect("fixture");
    assert_eq!(ns.events.len(), count_event_lines(&body));
    assert!(ns.dq.is_empty(), "{:?}", ns.dq);
    assert_eq!(pid_tid.dumps(), ns.dumps());
    assert_eq!(us.events.len(), ns.events.len());
    for (a, b) in ns.dumps().iter().zip(us.dumps()) {
        let (t_ns, rest) = split_ts(a);
        let (t_us, us_rest) = split_ts(&b);
        assert_eq!((t_us, us_rest), (t_ns / 1000 * 1000, rest));
    }
    // perf prints tid -1 and comm `:-1` for samples of a task that was already gone.
    assert!(ns.events.iter().any(|e| e.pid == -1));
    for name in [
        "equal",
        "sched_all",
        "sched_callchain",
        "sched_pipe",
        "sched_zstd",
        "starve_wakeup",
    ] {
        let path = dir.join(format!("{name}.perf-script.txt"));
        let body = std::fs::read_to_string(&path).expect("fixture");
        let r = read_as(&path, PERF);
        assert_eq!(r.events.len(), count_event_lines(&body), "{name}");
        assert!(r.dq.is_empty(), "{name}: {:?}", r.dq);
    }
}

#[test]
fn a_file_cut_inside_a_callchain_block_or_a_header_line() {
    let body = std::fs::read_to_string(sample("script_tp_callchain.txt")).expect("sample");
    let full = read("script_tp_callchain.txt");
    // Cut in the middle of the 5th frame of the third event (line 45) …
    let cut_at = body.lines().take(44).map(|l| l.len() + 1).sum::<usize>() + 10;
    let r = read_bytes("cut.txt", &body.as_bytes()[..cut_at], PERF);
    assert_eq!(r.events.len(), 3);
    assert_eq!(
        r.events[2].callchain.as_deref(),
        Some(&full.events[2].callchain.as_deref().unwrap_or_default()[..4])
    );
    assert_eq!(r.dq.count(Problem::TruncatedLastLine), 1);
    assert_eq!(
        r.dq.count(Problem::UnparsedLines) + r.dq.count(Problem::BadCallchainLines),
        0
    );
    // … and in the middle of the header line of the fourth (line 61): it is not used.
    let cut_at = body.lines().take(60).map(|l| l.len() + 1).sum::<usize>() + 50;
    let r = read_bytes("cut.txt", &body.as_bytes()[..cut_at], PERF);
    assert_eq!(r.dumps(), full.dumps()[..3].to_vec());
    assert_eq!(r.dq.count(Problem::TruncatedLastLine), 1);
}

/// What a mail client does to `perf script` text: TABs become spaces and lines longer than
/// `width` are broken at their last space before it (format=flowed style, the rest on the
/// next line at column 0).
fn mail_wrap(text: &str, width: usize) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let mut rest = line.replace('\t', "        ");
        while rest.len() > width {
            let cut = rest[..width]
                .rfind(' ')
                .filter(|&c| c > 0 && !rest[..c].trim().is_empty());
            let Some(cut) = cut else { break };
            out.push_str(rest[..cut].trim_end());
            out.push('\n');
            rest = rest[cut + 1..].to_string();
        }
        out.push_str(&rest);
        out.push('\n');
    }
    out
}

#[test]
fn mail_wrapped_callchain_text_reads_like_perf_script() {
    // `perf record -e 'sched:*' -g` text, as pasted through a mail client: every event and
    // every callchain is the one perf printed
    let body = std::fs::read_to_string(sample("script_tp_callchain.txt")).expect("sample");
    let full = read("script_tp_callchain.txt");
    for width in [72, 78, 100] {
        let wrapped = mail_wrap(&body, width);
        assert!(
            wrapped.lines().count() > body.lines().count(),
            "{width}: something wrapped"
        );
        let r = read_bytes("mail.txt", wrapped.as_bytes(), PERF);
        assert_eq!(r.dumps(), full.dumps(), "width {width}");
        let chains = |r: &Read| {
            r.events
                .iter()
                .map(|e| e.callchain.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(chains(&r), chains(&full), "width {width}");
        assert!(r.dq.count(Problem::WrappedLinesJoined) > 0, "width {width}");
        assert_eq!(
            r.dq.count(Problem::UnparsedLines),
            0,
            "width {width}: {:?}",
            r.dq
        );
        assert_eq!(r.dq.count(Problem::BadCallchainLines), 0, "width {width}");
    }
    // only TABs turned into spaces, no wrapping
    let spaced = body.replace('\t', "        ");
    let r = read_bytes("spaced.txt", spaced.as_bytes(), PERF);
    assert_eq!(r.dumps(), full.dumps());
    assert_eq!(
        r.events
            .iter()
            .map(|e| e.callchain.clone())
            .collect::<Vec<_>>(),
        full.events
            .iter()
            .map(|e| e.callchain.clone())
            .collect::<Vec<_>>()
    );
}

#[test]
fn kernel_frame_names_become_the_inputs_symbol_table() {
    // `ADDR name+0xOFF ([kernel.kallsyms])`: the function starts at ADDR − OFF
    let r = read("script_tp_callchain.txt");
    let k = r.meta.kallsyms.as_deref().expect("a table from the frames");
    assert!(
        k.contains("ffffffff813a8620 T try_to_wake_up\n"),
        "{}",
        &k[..k.len().min(400)]
    );
    assert!(!k.contains("[unknown]"));
}
