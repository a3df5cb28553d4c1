//! Excerpts as incident reports paste them (fixtures/excerpts, capture.sh there): a few
//! `perf script` events with stacks must say what they show, with the names the text printed.

mod common;
use common::{json, root, run};

fn fixture(name: &str) -> String {
    root()
        .join("fixtures/excerpts")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

/// The `perf script` event header lines of `text`: (time ns, the line).
fn headers(text: &str) -> Vec<(u64, &str)> {
    text.lines()
        .filter(|l| !l.is_empty() && !l.starts_with(char::is_whitespace))
        .map(|l| {
            let secs = l
                .split_whitespace()
                .find(|w| w.ends_with(':') && w.contains('.'));
            let secs = secs.expect("time column").trim_end_matches(':');
            let (s, frac) = secs.split_once('.').expect("seconds");
            let ns = s.parse::<u64>().unwrap() * 1_000_000_000
                + format!("{frac:0<9}").parse::<u64>().unwrap();
            (ns, l)
        })
        .collect()
}

/// Three events — the reader asleep, the waker's wakeup of it, the waker switched out
/// runnable 11 µs later — are one wakeup preemption: reported LOW as one cycle, with both
/// sites from the stacks and what a longer capture would measure (before: nothing).
#[test]
fn a_three_event_excerpt_with_stacks_is_one_wakeup_preemption() {
    let file = fixture("wakeup_preemption.excerpt.txt");
    let text = std::fs::read_to_string(&file).unwrap();
    let h = headers(&text);
    assert_eq!(h.len(), 3, "{h:?}");
    let r = json(&["analyze", "--format", "json", &file]);
    let fs = r["findings"].as_array().unwrap();
    assert_eq!(fs.len(), 1, "{r:#}");
    let f = &fs[0];
    assert_eq!(f["detector"], "wakeup-ping-pong");
    assert_eq!(f["severity"], "low");
    assert_eq!(f["cause"]["kind"], "wakeup_preemption");
    // the time from the wakeup to the switch-out, as the text prints them
    assert_eq!(f["measures"]["preempted_after_ns"], h[2].0 - h[1].0);
    assert_eq!(f["measures"]["cycles"], 1);
    let title = f["title"].as_str().unwrap();
    for site in [
        "anon_pipe_write",
        "exit_to_user_mode_loop",
        "one wakeup preemption",
    ] {
        assert!(title.contains(site), "{site:?} not in {title}");
    }
    let roles: Vec<(&str, &str)> = f["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["comm"].as_str().unwrap(), t["role"].as_str().unwrap()))
        .collect();
    assert_eq!(roles, [("waker", "waker"), ("woken", "woken")]);
    let hint = f["hint"].as_str().unwrap();
    assert!(
        hint.contains("one cycle") && hint.contains("perf record"),
        "{hint}"
    );
}

/// The rule is for excerpts: the whole capture (65 switches, above `excerpt_max_switches`)
/// has too few handoffs for a ping-pong and gets no single-cycle finding; raising the limit
/// above its switch count gives one.
#[test]
fn the_single_cycle_rule_is_for_excerpts_only() {
    let file = fixture("wakeup_preemption.perf-script.txt.zst");
    let findings = |set: &[&str]| -> Vec<serde_json::Value> {
        let mut args = vec![
            "analyze",
            "--format",
            "json",
            "--select",
            "wakeup-ping-pong",
        ];
        args.extend_from_slice(set);
        args.push(&file);
        json(&args)["findings"].as_array().unwrap().clone()
    };
    assert_eq!(findings(&[]).len(), 0);
    let fs = findings(&["--set", "wakeup-ping-pong.excerpt_max_switches=1000"]);
    assert_eq!(fs.len(), 1, "{fs:#?}");
    assert_eq!(fs[0]["severity"], "low");
}

/// `dump --source` names kernel frames as the text printed them (`__schedule+0x618`), not
/// `[unknown] (ADDR)`: the names a perf script text gives are its kernel symbol table, from
/// the first stack on.
#[test]
fn dump_shows_the_kernel_frame_names_the_text_printed() {
    let file = fixture("wakeup_preemption.excerpt.txt");
    let text = std::fs::read_to_string(&file).unwrap();
    // perf's frames: `\tADDR NAME+0xOFF ([kernel.kallsyms])`
    let perf: Vec<String> = text
        .lines()
        .filter(|l| l.starts_with('\t') && l.ends_with("([kernel.kallsyms])"))
        .map(|l| {
            let mut w = l.split_whitespace();
            let addr = w.next().unwrap();
            format!("\t=> {} ({addr})", w.next().unwrap())
        })
        .collect();
    assert!(perf.len() >= 20, "{perf:?}");
    let out = run(&["dump", "--source", &file]);
    assert!(out.status.success());
    let ours: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter(|l| l.starts_with("\t=> ") && !l.contains("[unknown]"))
        .map(str::to_string)
        .collect();
    assert_eq!(ours, perf);
}
