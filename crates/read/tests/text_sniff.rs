//! `sniff_text`: which text dialect an input is, from its first bytes only — with and
//! without headers, and never for binary data.

mod text_support;

use stallscope_model::InputFormat;
use stallscope_read::text_common::sniff_text;
use text_support::{fixtures, samples};

fn head(path: &std::path::Path) -> Vec<u8> {
    let mut b = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    b.truncate(64 * 1024);
    b
}

/// The body without its header lines (`#` comments, `cpus=`), as trace_pipe or a cut file.
fn body_only(bytes: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(bytes);
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with("cpus="))
        .flat_map(|l| format!("{l}\n").into_bytes())
        .collect()
}

#[test]
fn samples_are_recognized_with_and_without_headers() {
    let cases: &[(&str, InputFormat)] = &[
        ("ftrace/trace_default.txt", InputFormat::FtraceText),
        ("ftrace/trace_record_tgid.txt", InputFormat::FtraceText),
        ("ftrace/trace_noirqinfo.txt", InputFormat::FtraceText),
        ("ftrace/trace_latency_format.txt", InputFormat::FtraceText),
        ("ftrace/trace_clock_counter.txt", InputFormat::FtraceText),
        (
            "ftrace/trace_stacktrace_trigger.txt",
            InputFormat::FtraceText,
        ),
        ("tracecmd/report_default.txt", InputFormat::TraceCmdText),
        ("tracecmd/report_t_nsec.txt", InputFormat::TraceCmdText),
        ("tracecmd/report_N_noplugins.txt", InputFormat::TraceCmdText),
        ("tracecmd/report_R_raw.txt", InputFormat::TraceCmdText),
        ("tracecmd/report_l_latency.txt", InputFormat::TraceCmdText),
        ("tracecmd/report_tsdiff.txt", InputFormat::TraceCmdText),
        ("perf/script_sched_default.txt", InputFormat::PerfScriptText),
        (
            "perf/script_sched_F_pid_tid.txt",
            InputFormat::PerfScriptText,
        ),
        ("perf/script_tp_callchain.txt", InputFormat::PerfScriptText),
        ("perf/script_cpu_fp.txt", InputFormat::PerfScriptText),
        ("perf/script_header_only.txt", InputFormat::PerfScriptText),
    ];
    for (name, want) in cases {
        let h = head(&samples().join(name));
        assert_eq!(sniff_text(&h), Some(*want), "{name}");
        if !name.ends_with("header_only.txt") {
            assert_eq!(
                sniff_text(&body_only(&h)),
                Some(*want),
                "{name} without its header"
            );
        }
    }
    let fx = fixtures().join("sched");
    if fx.join("starve.ftrace.txt").exists() {
        assert_eq!(
            sniff_text(&head(&fx.join("starve.ftrace.txt"))),
            Some(InputFormat::FtraceText)
        );
        assert_eq!(
            sniff_text(&head(&fx.join("starve.perf-script-pidtid.txt"))),
            Some(InputFormat::PerfScriptText)
        );
    }
}

#[test]
fn binary_and_foreign_inputs_are_not_text_traces() {
    for name in [
        "tracecmd/trace_v7_zstd.dat",
        "perf/perf_cpu_fp.data",
        "perf/perf_sched.data.xz",
        "ringbuf/cpu0_trace_pipe_raw_4k_pages.bin",
    ] {
        assert_eq!(sniff_text(&head(&samples().join(name))), None, "{name}");
    }
    for name in [
        "ftrace/trace_bin_option.hexdump.txt",
        "perf/report_stdio_children.txt",
        "perf/sched_latency.txt",
    ] {
        assert_eq!(sniff_text(&head(&samples().join(name))), None, "{name}");
    }
    let no_nul_noise: Vec<u8> = (0u32..8192)
        .map(|i| ((i.wrapping_mul(2_654_435_761) >> 11) as u8) | 0x01)
        .collect();
    assert_eq!(sniff_text(&no_nul_noise), None);
    assert_eq!(sniff_text(b""), None);
    assert_eq!(sniff_text(b"\n\n\n"), None);
}
