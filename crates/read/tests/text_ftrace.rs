//! Kernel ftrace text (`trace`, `trace_pipe`) against the real samples of
//! `fixtures/samples/ftrace` (kernel 6.18) and hand-made edge cases.
//!
//! Expected values are read off the sample lines by hand or counted from the text by rules
//! independent of the reader (see `text_support::count_event_lines`).

mod text_support;

use stallscope_model::{InputFormat, Problem, SpanPos};
use stallscope_read::text_common::sniff_text;
use text_support::{count_event_lines, read_as, read_bytes, samples, Read};

const FTRACE: InputFormat = InputFormat::FtraceText;

fn sample(name: &str) -> std::path::PathBuf {
    samples().join("ftrace").join(name)
}

fn text(name: &str) -> String {
    std::fs::read_to_string(sample(name)).expect("sample")
}

/// The dump line of the event that came from 1-based line `line`.
fn at_line(r: &Read, line: u64) -> String {
    let e = r
        .events
        .iter()
        .find(|e| e.span.pos() == SpanPos::Line(line));
    e.map(|e| e.dump_line())
        .unwrap_or_else(|| panic!("no event from line {line}"))
}

fn count(r: &Read, key: &str) -> u64 {
    let problem =
        Problem::from_key(key).unwrap_or_else(|| panic!("no problem {key} in the registry"));
    r.dq.count(problem)
}

#[test]
fn every_sample_parses_completely_and_event_counts_match() {
    // (file, lines the reader deliberately does not turn into events, with the key that counts them)
    let cases: &[(&str, &str)] = &[
        ("trace_default.txt", ""),
        ("trace_pipe.txt", ""),
        ("trace_record_tgid.txt", ""),
        ("trace_noirqinfo.txt", ""),
        ("trace_latency_format.txt", ""),
        ("trace_clock_counter.txt", ""),
        ("trace_clock_x86tsc.txt", ""),
        ("trace_clock_mono.txt", ""),
        ("trace_stacktrace_trigger.txt", "stack_trace_lines_skipped"),
        ("trace_userstacktrace.txt", "stack_trace_lines_skipped"),
        ("trace_raw_option.txt", "ftrace_raw_or_hex_lines"),
        ("trace_hex_option.txt", "ftrace_raw_or_hex_lines"),
    ];
    for (name, skipped_key) in cases {
        let body = text(name);
        assert_eq!(sniff_text(body.as_bytes()), Some(FTRACE), "{name}");
        let r = read_as(&sample(name), FTRACE);
        assert_eq!(count(&r, "unparsed_lines"), 0, "{name}: {:?}", r.dq);
        assert_eq!(r.events.len(), count_event_lines(&body), "{name}");
        if !skipped_key.is_empty() {
            // Every non-comment, non-blank line that is not an event is counted under the key.
            let non_event = body
                .lines()
                .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
                .count()
                - r.events.len();
            assert_eq!(count(&r, skipped_key), non_event as u64, "{name}");
            assert!(non_event > 0, "{name}");
        }
        assert_eq!(r.meta.format, Some(FTRACE));
        assert_eq!(
            r.meta.nr_cpus,
            if *name == "trace_pipe.txt" {
                None
            } else {
                Some(2)
            },
            "{name}: #P:2 header"
        );
    }
}

#[test]
fn odd_comms_r_plus_and_payload_comms_are_exact() {
    let r = read_as(&sample("trace_default.txt"), FTRACE);
    // line 675:        CPU 0/KVM-8455    [001] d..2.   307.316366: sched_waking: comm=python3 pid=8414 prio=120 target_cpu=000
    assert_eq!(
        at_line(&r, 675),
        "307316366000 1 8455 sched_waking comm=python3 pid=8414 prio=120 target_cpu=0"
    );
    // line 684: … sched_switch: prev_comm=CPU 0/KVM prev_pid=8455 prev_prio=120 prev_state=S ==> next_comm=rcu_preempt …
    assert_eq!(
        at_line(&r, 684),
        "307317551000 1 8455 sched_switch prev_comm=\"CPU 0/KVM\" prev_pid=8455 prev_prio=120 prev_state=S next_comm=rcu_preempt next_pid=15 next_prio=120"
    );
    // line 705:      a:b [x] 1.5-8457    [000] d..2.   307.318833: sched_switch: prev_comm=python3 prev_pid=8457 … prev_state=R ==> …
    assert_eq!(
        at_line(&r, 705),
        "307318833000 0 8457 sched_switch prev_comm=python3 prev_pid=8457 prev_prio=120 prev_state=R next_comm=python3 next_pid=8414 next_prio=120"
    );
    // line 18: python3-8414 [001] d..2. 307.122934: sched_switch: prev_comm=bash … prev_state=R+ ==> next_comm=migration/1 …
    assert_eq!(
        at_line(&r, 18),
        "307122934000 1 8414 sched_switch prev_comm=bash prev_pid=8414 prev_prio=120 prev_state=R+ next_comm=migration/1 next_pid=21 next_prio=0"
    );
    // Every R+ in the text is an R+ event.
    let plus_lines = text("trace_default.txt").matches("prev_state=R+ ").count();
    let plus_events = r
        .dumps()
        .iter()
        .filter(|d| d.contains(" prev_state=R+ "))
        .count();
    assert_eq!((plus_events, plus_lines), (11, 11));
    assert!(r.dq.is_empty(), "{:?}", r.dq);
}

#[test]
fn irq_info_off_and_record_tgid_give_the_same_event_shape() {
    let r = read_as(&sample("trace_noirqinfo.txt"), FTRACE);
    // line 10:  python3-8854    [000]    317.266974: sched_switch: prev_comm=bash prev_pid=8854 … prev_state=R+ ==> next_comm=migration/0 …
    assert_eq!(
        at_line(&r, 10),
        "317266974000 0 8854 sched_switch prev_comm=bash prev_pid=8854 prev_prio=120 prev_state=R+ next_comm=migration/0 next_pid=18 next_prio=0"
    );
    let r = read_as(&sample("trace_record_tgid.txt"), FTRACE);
    // line 18:      rcu_preempt-15      (     15) [001] d..2.   316.945635: sched_switch: prev_comm=rcu_preempt … prev_state=I ==> next_comm=python3 …
    assert_eq!(
        at_line(&r, 18),
        "316945635000 1 15 sched_switch prev_comm=rcu_preempt prev_pid=15 prev_prio=120 prev_state=I next_comm=python3 next_pid=8790 next_prio=120"
    );
}

#[test]
fn four_char_flags_parse_like_five_char_flags() {
    // Older kernels print no migrate-disable column: drop the 5th flag character of every
    // event line of a real sample and expect identical events.
    let body = text("trace_default.txt");
    let four: String = body
        .lines()
        .map(|l| match l.find("] ") {
            Some(i) if !l.starts_with('#') && l.as_bytes().get(i + 7) == Some(&b' ') => {
                format!("{}{}\n", &l[..i + 6], &l[i + 7..])
            }
            _ => format!("{l}\n"),
        })
        .collect();
    assert_ne!(four, body);
    assert!(
        four.contains("[001] d..2   307.122622: sched_switch:"),
        "the rewrite must produce 4-char flags"
    );
    let a = read_bytes("five.txt", body.as_bytes(), FTRACE);
    let b = read_bytes("four.txt", four.as_bytes(), FTRACE);
    assert_eq!(a.dumps(), b.dumps());
    assert_eq!(count(&b, "unparsed_lines"), 0);
}

#[test]
fn raw_count_clocks_are_kept_as_counts_and_flagged() {
    for (name, first, lost) in [
        // line 13:      kworker/0:2-369     [000] d..4.            4: sched_wakeup: comm=fio pid=8974 …
        ("trace_clock_counter.txt", "4 0 369 sched_wakeup comm=fio pid=8974 prio=120 target_cpu=1", 27378 - 25499),
        // line 13:             bash-8786    [000] d..2. 731737749176: sched_switch: prev_comm=bash …
        (
            "trace_clock_x86tsc.txt",
            "731737749176 0 8786 sched_switch prev_comm=bash prev_pid=8786 prev_prio=120 prev_state=S next_comm=bash next_pid=9044 next_prio=120",
            0,
        ),
    ] {
        let r = read_as(&sample(name), FTRACE);
        assert_eq!(r.dumps()[0], first, "{name}");
        assert!(!r.meta.clock_is_ns, "{name}");
        assert_eq!(count(&r, "timestamps_not_ns"), r.events.len() as u64, "{name}");
        assert_eq!(count(&r, "lost_events"), lost, "{name}: entries-in-buffer/entries-written");
    }
    let r = read_as(&sample("trace_clock_mono.txt"), FTRACE);
    assert!(r.meta.clock_is_ns);
    assert_eq!(count(&r, "cpu_buffer_started_late"), 1);
    assert_eq!(count(&r, "lost_events"), 26187 - 25220);
}

#[test]
fn latency_format_is_read_and_flagged() {
    let r = read_as(&sample("trace_latency_format.txt"), FTRACE);
    assert_eq!(r.meta.kernel_release.as_deref(), Some("6.18.44-fc-v657"));
    assert_eq!(r.meta.nr_cpus, Some(2));
    assert_eq!(count(&r, "latency_format"), r.events.len() as u64);
    // line 22:  python3-8930      0d..2. 23801us : sched_switch: prev_comm=bash prev_pid=8930 … (delay mark is a space)
    assert_eq!(
        at_line(&r, 22),
        "23801000 0 8930 sched_switch prev_comm=bash prev_pid=8930 prev_prio=120 prev_state=R next_comm=rcu_preempt next_pid=15 next_prio=120"
    );
}

#[test]
fn stack_traces_are_skipped_and_counted() {
    let body = text("trace_stacktrace_trigger.txt");
    let r = read_as(&sample("trace_stacktrace_trigger.txt"), FTRACE);
    let frames = body.lines().filter(|l| l.starts_with(" => ")).count();
    let headers = body
        .lines()
        .filter(|l| l.ends_with(": <stack trace>"))
        .count();
    assert!(frames > 0 && headers > 0);
    assert_eq!(
        count(&r, "stack_trace_lines_skipped"),
        (frames + headers) as u64
    );
    assert!(r
        .events
        .iter()
        .all(|e| e.kind.name() == "sched_switch" || e.kind.name() == "sched_wakeup"));
}

#[test]
fn edge_cases_file() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/text/ftrace_edge.txt");
    let r = read_as(&path, FTRACE);
    let d = r.dumps();
    assert_eq!(
        d,
        vec![
            "1000000001000 3 12 sched_waking comm=bash pid=1234567 prio=120 target_cpu=7",
            "1000000002000 7 1234567 sched_switch prev_comm=bash prev_pid=1234567 prev_prio=120 prev_state=R+ next_comm=\"x-12 [005] y\" next_pid=5 next_prio=139",
            "1000000003000 7 5 sched_switch prev_comm=\"x-12 [005] y\" prev_pid=5 prev_prio=139 prev_state=D|K next_comm=swapper/7 next_pid=0 next_prio=120",
            // the LOST marker takes the timestamp of the next event line
            "1000000010000 2 -1 lost_events count=41",
            "1000000010000 2 0 sched_wakeup comm=kworker/2:1 pid=99 prio=120 target_cpu=2",
            "1000000020000 1 4242 tracing_mark_write payload=\"phase: start x=1\"",
            "1000000021000 1 4242 function payload=\"do_sys_open <-__x64_sys_openat\"",
            "1000000030000 1 4242 sched_process_exec filename=\"/usr/bin/my prog\" pid=4242 old_pid=4242",
        ]
    );
    assert_eq!(r.events[3].span.pos(), SpanPos::Line(8));
    assert_eq!(r.meta.nr_cpus, Some(8));
    assert_eq!(
        count(&r, "lost_events"),
        2 + 41,
        "12 written - 10 kept, plus the LOST marker"
    );
    assert_eq!(count(&r, "unparsed_lines"), 1);
    let entry =
        r.dq.entries()
            .find(|(k, _)| *k == "unparsed_lines")
            .map(|(_, e)| e.clone())
            .expect("entry");
    assert!(
        entry.examples[0].ends_with("ftrace_edge.txt:12: this line is not a trace line"),
        "{:?}",
        entry.examples
    );
    assert_eq!(
        r.meta.declared_events,
        vec![
            "sched_waking",
            "sched_switch",
            "sched_wakeup",
            "tracing_mark_write",
            "function",
            "sched_process_exec"
        ]
    );
}

#[test]
fn lost_markers_in_trace_pipe_and_a_cut_last_line() {
    let body = text("trace_pipe.txt");
    let lines: Vec<&str> = body.lines().collect();
    let mut edited: String = lines[..10].iter().map(|l| format!("{l}\n")).collect();
    edited.push_str("CPU:0 [LOST 523 EVENTS]\n");
    for l in &lines[10..] {
        edited.push_str(l);
        edited.push('\n');
    }
    let cut = &lines[5][..lines[5].len() / 2];
    edited.push_str(cut); // no newline: a file cut in the middle of a line
    let r = read_bytes("pipe.txt", edited.as_bytes(), FTRACE);
    assert_eq!(
        r.events.len(),
        100 + 1,
        "100 events and the LOST marker; the cut line is not used"
    );
    assert_eq!(r.dumps()[10], "327266604000 0 -1 lost_events count=523");
    assert_eq!(r.events[10].span.pos(), SpanPos::Line(11));
    assert_eq!(count(&r, "lost_events"), 523);
    assert_eq!(count(&r, "truncated_last_line"), 1);
    assert_eq!(
        count(&r, "unparsed_lines"),
        0,
        "the cut line is counted once, as truncated"
    );
}

#[test]
fn non_utf8_bytes_are_replaced_and_counted() {
    let mut bytes = text("trace_pipe.txt").into_bytes();
    let at = bytes
        .windows(10)
        .position(|w| w == b"comm=bash ")
        .expect("comm=bash")
        + 5;
    bytes[at] = 0xff; // "comm=\xffash"
    let r = read_bytes("bad.txt", &bytes, FTRACE);
    assert_eq!(r.events.len(), 100);
    assert_eq!(count(&r, "non_utf8_lines"), 1);
    assert!(
        r.dumps().iter().any(|d| d.contains("=\u{fffd}ash ")),
        "lossy comm kept"
    );
}

#[test]
fn binary_garbage_is_not_text_and_does_not_panic_the_reader() {
    let garbage: Vec<u8> = (0u32..20_000)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 7) as u8)
        .collect();
    assert_eq!(sniff_text(&garbage), None);
    assert_eq!(
        sniff_text(&std::fs::read(samples().join("tracecmd/trace_v7_zstd.dat")).expect("dat")),
        None
    );
    assert_eq!(
        sniff_text(text("trace_bin_option.hexdump.txt").as_bytes()),
        None,
        "an xxd dump is not a trace"
    );
    let r = read_bytes("garbage.bin", &garbage, FTRACE);
    assert!(r.events.is_empty());
    assert!(count(&r, "unparsed_lines") > 0);
}

/// `entries-in-buffer` in the header is the kernel's own count of the events in the file
/// (for complete files: the samples other than trace_default.txt were cut to a few lines).
fn entries_in_buffer(body: &str) -> usize {
    let line = body
        .lines()
        .find(|l| l.contains("entries-in-buffer/entries-written:"))
        .expect("header");
    let v = line.split(':').nth(1).expect("value").trim();
    v.split('/').next().expect("kept").parse().expect("number")
}

#[test]
fn complete_files_hold_exactly_the_kernels_entry_count() {
    let mut paths = vec![sample("trace_default.txt")];
    let fx = text_support::fixtures().join("sched");
    for name in ["starve.ftrace.txt", "equal.ftrace.txt"] {
        if fx.join(name).exists() {
            paths.push(fx.join(name));
        }
    }
    for path in paths {
        let body = std::fs::read_to_string(&path).expect("file");
        let r = read_as(&path, FTRACE);
        assert!(r.dq.is_empty(), "{}: {:?}", path.display(), r.dq);
        assert_eq!(
            r.events.len(),
            entries_in_buffer(&body),
            "{}",
            path.display()
        );
        assert_eq!(
            r.events.len(),
            count_event_lines(&body),
            "{}",
            path.display()
        );
    }
}
