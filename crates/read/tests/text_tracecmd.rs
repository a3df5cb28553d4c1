//! `trace-cmd report` text against `fixtures/samples/tracecmd` (trace-cmd 3.1.6,
//! kernel 6.18). All `report_*.txt` samples were printed from the same `trace_v7_zstd.dat`
//! (formats.md §0 / §13), in different forms:
//!
//! | file | form | loses |
//! |---|---|---|
//! | `report_t_nsec.txt` | plugins, `-t` ns times | the `+` of `R+` (plugin), state letters need remapping |
//! | `report_N_noplugins.txt` | kernel print fmt, µs | ns digits (times rounded to µs) |
//! | `report_R_raw.txt` | raw fields, µs | ns digits; generic payloads are raw fields, not print fmt |
//! | `report_default.txt` | plugins, µs | both of the above |
//! | `report_l_latency.txt` | plugins, µs, latency columns | + context comm cut to 8 (not in the dump) |
//! | `report_tsdiff.txt` | plugins, µs, `(+delta)` column | as default |
//!
//! so the same events must come out of each, modulo exactly those losses.
//!
//! The ftrace samples (`samples/ftrace`, times 307–331 s) and these (392 s) are separate
//! captures, as are `fixtures/sched/*.ftrace.txt` and the perf fixtures, so there is no
//! ftrace ↔ trace-cmd pair to compare event by event.

mod text_support;

use stallscope_model::{InputFormat, Problem, SpanPos};
use stallscope_read::text_common::sniff_text;
use text_support::{count_event_lines, read_as, samples, Read};

const TC: InputFormat = InputFormat::TraceCmdText;

fn read(name: &str) -> Read {
    read_as(&samples().join("tracecmd").join(name), TC)
}

fn at_line(r: &Read, line: u64) -> String {
    let e = r
        .events
        .iter()
        .find(|e| e.span.pos() == SpanPos::Line(line));
    e.map(|e| e.dump_line())
        .unwrap_or_else(|| panic!("no event from line {line}"))
}

/// Splits a dump line into (ts, rest).
fn split_ts(d: &str) -> (u64, &str) {
    let (ts, rest) = d.split_once(' ').expect("ts");
    (ts.parse().expect("ts digits"), rest)
}

/// Drops the preemption mark, the one thing the plugin form cannot carry.
fn without_plus(d: &str) -> String {
    d.replace(" prev_state=R+ ", " prev_state=R ")
}

#[test]
fn every_report_sample_parses_completely_and_event_counts_match() {
    for name in [
        "report_default.txt",
        "report_t_nsec.txt",
        "report_N_noplugins.txt",
        "report_R_raw.txt",
        "report_l_latency.txt",
        "report_tsdiff.txt",
    ] {
        let path = samples().join("tracecmd").join(name);
        let body = std::fs::read_to_string(&path).expect("sample");
        assert_eq!(sniff_text(body.as_bytes()), Some(TC), "{name}");
        let r = read(name);
        assert_eq!(r.dq.count(Problem::UnparsedLines), 0, "{name}: {:?}", r.dq);
        assert_eq!(r.events.len(), count_event_lines(&body), "{name}");
        assert_eq!(r.meta.nr_cpus, Some(2), "{name}: cpus=2");
        // The plugin form is the default; -N and -R keep the kernel's letters.
        let plugin = !matches!(name, "report_N_noplugins.txt" | "report_R_raw.txt");
        let note =
            r.dq.entries()
                .find(|(k, _)| *k == "prev_state_preemption_unavailable");
        assert_eq!(note.is_some(), plugin, "{name}");
        if let Some((_, e)) = note {
            assert_eq!(e.severity, stallscope_model::Severity::Info);
            assert_eq!(
                e.count as usize,
                body.matches(" ==> ").count(),
                "{name}: one per plugin sched_switch"
            );
        }
    }
}

#[test]
fn plugin_form_spot_checks() {
    let r = read("report_default.txt");
    // line 1907:        CPU 0/KVM-12664 [000]   392.348202: sched_switch:         CPU 0/KVM:12664 [120] S ==> swapper/0:0 [120]
    assert_eq!(
        at_line(&r, 1907),
        "392348202000 0 12664 sched_switch prev_comm=\"CPU 0/KVM\" prev_pid=12664 prev_prio=120 prev_state=S next_comm=swapper/0 next_pid=0 next_prio=120"
    );
    // line 1926:      a:b [x] 1.5-12666 [000]   392.349502: sched_switch:         a:b [x] 1.5:12666 [120] R ==> rcu_preempt:15 [120]
    assert_eq!(
        at_line(&r, 1926),
        "392349502000 0 12666 sched_switch prev_comm=\"a:b [x] 1.5\" prev_pid=12666 prev_prio=120 prev_state=R next_comm=rcu_preempt next_pid=15 next_prio=120"
    );
    // line 1928: rcu_preempt:15 [120] W ==> a:b [x] 1.5:12666 [120] — the plugin's `W` is bit 0x80 = I (idle kthread).
    assert_eq!(
        at_line(&r, 1928),
        "392349511000 0 15 sched_switch prev_comm=rcu_preempt prev_pid=15 prev_prio=120 prev_state=I next_comm=\"a:b [x] 1.5\" next_pid=12666 next_prio=120"
    );
    // line 1925: a:b [x] 1.5-12666 [000] 392.349496: sched_wakeup: rcu_preempt:15 [120] CPU:000
    assert_eq!(
        at_line(&r, 1925),
        "392349496000 0 12666 sched_wakeup comm=rcu_preempt pid=15 prio=120 target_cpu=0"
    );
    // line 1920: sched_waking is not rewritten by any plugin.
    assert_eq!(
        at_line(&r, 1920),
        "392348759000 0 12666 sched_waking comm=python3 pid=12623 prio=120 target_cpu=1"
    );
    // block events are native: `254,0 RA 4096 () 12591360 + 8 0x2,0,4 [python3]` (the
    // ioprio column is not kept).
    assert_eq!(at_line(&r, 7), "392164296000 0 12623 block_rq_insert dev=254,0 sector=12591360 nr_sector=8 bytes=4096 rwbs=RA comm=python3");
}

#[test]
fn ns_plugin_kernel_and_raw_renderings_of_one_trace_agree() {
    let t = read("report_t_nsec.txt").dumps();
    let n = read("report_N_noplugins.txt").dumps();
    let raw = read("report_R_raw.txt").dumps();
    assert_eq!((t.len(), n.len(), raw.len()), (39, 39, 39));
    let mut switches = 0;
    for i in 0..t.len() {
        let (t_ns, t_rest) = split_ts(&t[i]);
        let (n_ts, n_rest) = split_ts(&n[i]);
        let (r_ts, r_rest) = split_ts(&raw[i]);
        // µs text is the ns time rounded to the nearest µs.
        assert_eq!(n_ts, (t_ns + 500) / 1000 * 1000, "event {i}");
        assert_eq!(r_ts, n_ts, "event {i}");
        // Plugin vs kernel form: identical once the kernel's `+` is dropped.
        assert_eq!(without_plus(n_rest), t_rest, "event {i}");
        // -R prints raw fields: for scheduler events they decode to the same thing (the raw
        // prev_state number through the 4.14+ table, `parent_comm=` forks); generic events
        // carry raw fields instead of print-fmt text, so only their names can agree.
        if r_rest.contains(" sched_") {
            assert_eq!(r_rest, n_rest, "event {i}");
        } else {
            assert_eq!(
                r_rest.split(' ').take(2).collect::<Vec<_>>(),
                n_rest.split(' ').take(2).collect::<Vec<_>>()
            );
        }
        switches += usize::from(t_rest.contains("sched_switch"));
    }
    assert_eq!(switches, 14);
    // The letters that need remapping are really in this trace: raw 32 (Z, zombie) is
    // printed `X` by the plugin and 128 (I) is printed `W`.
    let body =
        std::fs::read_to_string(samples().join("tracecmd/report_t_nsec.txt")).expect("sample");
    assert!(body.contains("] X ==>") && body.contains("] W ==>"));
    assert!(
        n.iter().any(|d| d.contains("prev_state=Z"))
            && n.iter().any(|d| d.contains("prev_state=I"))
    );
}

#[test]
fn default_latency_and_tsdiff_forms_agree_with_the_ns_form() {
    let default = read("report_default.txt").dumps();
    let t = read("report_t_nsec.txt").dumps();
    for (i, d) in t.iter().enumerate() {
        let (ns, rest) = split_ts(d);
        let (us, drest) = split_ts(&default[i]);
        assert_eq!((us, drest), ((ns + 500) / 1000 * 1000, rest), "event {i}");
    }
    // -l cuts the context comm to 8 bytes, which the dump does not contain.
    assert_eq!(read("report_l_latency.txt").dumps(), default[..39].to_vec());
    assert_eq!(read("report_tsdiff.txt").dumps(), default[..19].to_vec());
}

#[test]
fn edge_cases_file() {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/text/tracecmd_edge.txt");
    let r = read_as(&path, TC);
    assert_eq!(
        r.dumps(),
        vec![
            "392162131000 3 -1 lost_events count=17",
            // plugin `D|W` = raw 0x2|0x80 = D and I on a 4.14+ kernel
            "392162131000 3 12615 sched_switch prev_comm=bash prev_pid=12615 prev_prio=120 prev_state=D|I next_comm=bash next_pid=12622 next_prio=120",
            "392164557000 1 -1 lost_events count=?",
            // COMM:PID split at the last `:`; `success=` of old kernels ignored
            "392164557000 1 0 sched_wakeup comm=old-kernel:1:2 pid=12623 prio=120 target_cpu=1",
            "392164558000 1 0 sched_wakeup_new comm=python3 pid=12624 prio=98",
        ]
    );
    assert_eq!(r.meta.nr_cpus, Some(4));
    assert_eq!(r.dq.count(Problem::LostEvents), 17);
    assert_eq!(r.dq.count(Problem::LostEventsUnknownCount), 1);
}

#[test]
fn a_cut_last_line_is_counted_and_not_used() {
    let body = std::fs::read(samples().join("tracecmd/report_default.txt")).expect("sample");
    let r = text_support::read_bytes("cut.txt", &body[..body.len() - 40], TC);
    let full = read("report_default.txt");
    assert_eq!(r.dumps(), full.dumps()[..full.events.len() - 1].to_vec());
    assert_eq!(
        (
            r.dq.count(Problem::TruncatedLastLine),
            r.dq.count(Problem::UnparsedLines)
        ),
        (1, 0)
    );
}
