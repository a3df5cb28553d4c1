//! Bad input never panics: real sample lines mutated at random (bytes replaced, inserted,
//! deleted, lines cut) are fed to the three text readers and to `sniff_text`; every run
//! must end normally, with problems counted instead of events invented from nothing.

mod text_support;

use stallscope_model::InputFormat;
use stallscope_read::text_common::sniff_text;
use text_support::{read_bytes, samples};

/// xorshift64*: deterministic, dependency-free randomness.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Bytes that matter to the grammars, so mutations hit interesting paths.
const SPICE: &[u8] = b" -:[]()=/|+>.0123456789\t\n\xff";

fn mutate(rng: &mut Rng, line: &[u8]) -> Vec<u8> {
    let mut v = line.to_vec();
    for _ in 0..=rng.below(4) {
        let at = rng.below(v.len() + 1);
        match rng.below(4) {
            0 if at < v.len() => v[at] = SPICE[rng.below(SPICE.len())],
            1 => v.insert(at, SPICE[rng.below(SPICE.len())]),
            2 if at < v.len() => {
                v.remove(at);
            }
            _ => v.truncate(at),
        }
    }
    v
}

#[test]
fn mutated_sample_lines_never_panic() {
    let files = [
        "ftrace/trace_default.txt",
        "ftrace/trace_record_tgid.txt",
        "ftrace/trace_latency_format.txt",
        "ftrace/trace_stacktrace_trigger.txt",
        "tracecmd/report_default.txt",
        "tracecmd/report_l_latency.txt",
        "tracecmd/report_tsdiff.txt",
        "perf/script_sched_F_pid_tid.txt",
        "perf/script_tp_callchain.txt",
        "perf/script_sched_F_ip_sym.txt",
    ];
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    for name in files {
        let body = std::fs::read(samples().join(name)).expect("sample");
        let lines: Vec<&[u8]> = body.split(|&b| b == b'\n').take(120).collect();
        for _round in 0..60 {
            let mut text = Vec::new();
            for l in &lines {
                if rng.below(3) == 0 {
                    text.extend(mutate(&mut rng, l));
                } else {
                    text.extend_from_slice(l);
                }
                text.push(b'\n');
            }
            text.truncate(rng.below(text.len() + 1).max(text.len() * 9 / 10));
            let _ = sniff_text(&text);
            // Every dialect reads every mutated file: wrong-format input must not panic either.
            for format in [
                InputFormat::FtraceText,
                InputFormat::TraceCmdText,
                InputFormat::PerfScriptText,
            ] {
                let r = read_bytes(name, &text, format);
                assert!(
                    r.events.len() <= lines.len() + 1,
                    "{name}: more events than lines"
                );
            }
        }
    }
}

#[test]
fn every_single_byte_truncation_of_a_line_is_handled() {
    let samples_lines = [
        ("         python3-8414    [001] d..2.   307.122934: sched_switch: prev_comm=bash prev_pid=8414 prev_prio=120 prev_state=R+ ==> next_comm=migration/1 next_pid=21 next_prio=0", InputFormat::FtraceText),
        ("     a:b [x] 1.5-12666 [000]   392.349502: sched_switch:         a:b [x] 1.5:12666 [120] R ==> rcu_preempt:15 [120]", InputFormat::TraceCmdText),
        (" kworker/u8:5+lo 11283 [000]   484.665557: sched:sched_switch: prev_comm=kworker/u8:5 prev_pid=11283 prev_prio=120 prev_state=R+ ==> next_comm=ksoftirqd/0 next_pid=14 next_prio=120", InputFormat::PerfScriptText),
    ];
    for (line, format) in samples_lines {
        for cut in 0..=line.len() {
            let mut text = line.as_bytes()[..cut].to_vec();
            text.push(b'\n');
            let r = read_bytes("cut.txt", &text, format);
            let problems: u64 = r.dq.entries().map(|(_, e)| e.count).sum();
            assert!(
                r.events.len() + problems as usize >= usize::from(!line[..cut].trim().is_empty()),
                "cut {cut}: silently dropped"
            );
        }
    }
}
