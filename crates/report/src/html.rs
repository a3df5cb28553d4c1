//! HTML rendering: one self-contained page (`stallscope analyze --html FILE`).
//!
//! Layout of the page:
//!
//! ```text
//! <head>  Content-Security-Policy forbidding every network access; inlined report.css
//! <body>  header (inputs, events, detectors) · finding list · one <section class="finding">
//!         per finding (title, severity, window, tasks with roles and measures, measures,
//!         timeline placeholder, evidence lines, hint) · runnable-wait histograms (log2
//!         buckets, plain HTML bars) · data quality · skipped detectors · what was left out
//!         <script type="application/json" id="stallscope-report">   the report/1 document
//!         <script type="application/json" id="stallscope-windows">  the FindingWindows
//!         <script> inlined report.js: per-CPU swimlane timelines drawn on canvas (plus a
//!                  lane per block device with the requests from issue to completion)
//! ```
//!
//! Everything except the timelines is static HTML, readable with JavaScript disabled. The
//! page never names an external URL. The size is bounded by [`HtmlOptions::max_bytes`]: the
//! room left by the rest of the page is shared equally among the windows; a window smaller
//! than its share keeps all its items (and leaves the rest to the others), a bigger one keeps
//! the earliest items of each kind that fit (and always the longest wait of each of the
//! finding's own tasks, [`stallscope_model::RunnableWait::subject`]), and one whose share is under
//! `MIN_WINDOW_BYTES` (4 KiB) is dropped. If the page without any window is still too big,
//! evidence is cut to [`EVIDENCE_KEPT_WHEN_OVER`] lines per finding. The page says what it
//! left out.

use std::fmt::Write as _;
use std::io::{self, Write};

use stallscope_model::{Finding, FindingWindow, FindingWindows, Report, TaskStateSpan};

/// The page's Content-Security-Policy: no network, inline style and script only.
pub const CSP: &str =
    "default-src 'none'; style-src 'unsafe-inline'; script-src 'unsafe-inline'; img-src data:";

/// Default size bound of the page (5 MB).
pub const DEFAULT_MAX_BYTES: usize = 5_000_000;

/// Evidence lines kept per finding when the page is over its bound without windows.
pub const EVIDENCE_KEPT_WHEN_OVER: usize = 5;

const CSS: &str = include_str!("html/report.css");
const JS: &str = include_str!("html/report.js");

/// Rendering options.
#[derive(Clone, Copy, Debug)]
pub struct HtmlOptions {
    /// Upper bound of the page size in bytes.
    pub max_bytes: usize,
}

impl Default for HtmlOptions {
    fn default() -> Self {
        HtmlOptions {
            max_bytes: DEFAULT_MAX_BYTES,
        }
    }
}

/// What was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HtmlStats {
    /// Page size.
    pub bytes: usize,
    /// Windows embedded.
    pub windows: usize,
    /// Findings without a window (caps, size bound, or not gathered).
    pub findings_without_window: usize,
    /// True when evidence was cut to fit the bound.
    pub evidence_cut: bool,
}

/// Escapes text for HTML element content and attribute values.
pub fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            _ => o.push(c),
        }
    }
    o
}

/// JSON safe inside `<script>`: every `<` becomes `\u003c` (only possible inside strings).
/// `serde_json::to_string` of a model value; the model types serialize without error (no
/// maps with non-string keys), so an error can only be a bug and yields `null`.
fn script_json(json: Result<String, serde_json::Error>) -> String {
    json.unwrap_or_else(|_| "null".to_string())
        .replace('<', "\\u003c")
}

/// `12.345 ms` style duration, integer arithmetic.
fn fmt_dur(ns: i64) -> String {
    let a = ns.unsigned_abs();
    let sign = if ns < 0 { "-" } else { "" };
    if a >= 1_000_000_000 {
        format!(
            "{sign}{}.{:03} s",
            a / 1_000_000_000,
            a % 1_000_000_000 / 1_000_000
        )
    } else if a >= 1_000_000 {
        format!("{sign}{}.{:03} ms", a / 1_000_000, a % 1_000_000 / 1_000)
    } else if a >= 1_000 {
        format!("{sign}{}.{:03} µs", a / 1_000, a % 1_000)
    } else {
        format!("{sign}{a} ns")
    }
}

fn fmt_ts(ts: u64) -> String {
    format!("{}.{:06}", ts / 1_000_000_000, ts % 1_000_000_000 / 1_000)
}

/// A measure value with its unit made readable (`worst_wait_ns` → `98.766 ms`).
fn fmt_measure(name: &str, v: i64) -> String {
    if name.ends_with("_ns") {
        fmt_dur(v)
    } else if name.ends_with("_permille") {
        format!("{}.{}%", v / 10, (v % 10).abs())
    } else {
        v.to_string()
    }
}

fn measures_html(m: &std::collections::BTreeMap<String, i64>) -> String {
    m.iter()
        .map(|(k, v)| {
            format!(
                "<span class=\"mono\">{}</span>&nbsp;{}",
                escape(k),
                escape(&fmt_measure(k, *v))
            )
        })
        .collect::<Vec<_>>()
        .join(" · ")
}

fn finding_html(o: &mut String, i: usize, f: &Finding, window: Option<&FindingWindow>) {
    let has_window = window.is_some();
    let sev = f.severity.name();
    let _ = write!(
        o,
        "<section class=\"finding sev-{sev}\" id=\"finding-{i}\" data-finding=\"{i}\" \
data-severity=\"{sev}\" data-detector=\"{det}\">\n<h3><span class=\"sev\">{sev}</span> \
<span class=\"det\">{det}</span><br><span class=\"title\">{title}</span></h3>\n",
        det = escape(&f.detector),
        title = escape(&f.title)
    );
    let cpus: Vec<String> = f.cpus.iter().map(|c| c.to_string()).collect();
    let _ = writeln!(
        o,
        "<p class=\"muted\">window {} .. {} s ({}) · CPUs {}</p>",
        fmt_ts(f.window.start_ns),
        fmt_ts(f.window.end_ns),
        fmt_dur(f.window.end_ns.saturating_sub(f.window.start_ns) as i64),
        escape(&cpus.join(", "))
    );
    if !f.tasks.is_empty() {
        o.push_str("<table class=\"tasks\"><tr><th>pid</th><th>task</th><th>role</th><th>measures</th></tr>\n");
        for t in &f.tasks {
            let role = escape(&t.role);
            let _ = writeln!(
                o,
                "<tr class=\"task\" data-pid=\"{}\" data-role=\"{role}\"><td class=\"num\">{}</td>\
<td>{}</td><td class=\"role-{role}\">{role}</td><td>{}</td></tr>",
                t.pid,
                t.pid,
                escape(&t.comm),
                measures_html(&t.measures)
            );
        }
        o.push_str("</table>\n");
    }
    if !f.measures.is_empty() {
        let _ = writeln!(
            o,
            "<p class=\"measures\">{}</p>",
            measures_html(&f.measures)
        );
    }
    if has_window {
        let _ = writeln!(
            o,
            "<div class=\"timeline\" data-finding=\"{i}\"><noscript><p class=\"tl-note\">\
The timeline of this finding needs JavaScript.</p></noscript></div>"
        );
    } else {
        o.push_str("<p class=\"tl-note\">No timeline for this finding (see “What this file leaves out”).</p>\n");
    }
    if let Some(w) = window.filter(|w| !w.markers.is_empty()) {
        let _ = write!(
            o,
            "<details open class=\"markers\"><summary>Trace markers in this window ({}{})</summary><pre class=\"markers\">",
            w.markers.len(),
            if w.omitted.markers > 0 {
                format!(", {} more left out", w.omitted.markers)
            } else {
                String::new()
            }
        );
        for m in &w.markers {
            let _ = writeln!(
                o,
                "<span class=\"muted\">{} CPU {} pid {} {}</span>  {}",
                fmt_ts(m.ts_ns),
                m.cpu,
                m.pid,
                escape(&m.event),
                escape(&m.text)
            );
        }
        o.push_str("</pre></details>\n");
    }
    if !f.evidence.is_empty() {
        let _ = write!(
            o,
            "<details open><summary>Evidence ({})</summary><pre class=\"evidence\">",
            f.evidence.len()
        );
        for e in &f.evidence {
            let _ = writeln!(
                o,
                "<span class=\"muted\">{}</span>  {}",
                escape(&e.source),
                escape(&e.text)
            );
            if let Some(site) = &e.site {
                let _ = writeln!(o, "  <span class=\"site\">↳ {}</span>", escape(site));
            }
            if !e.stack.is_empty() {
                let _ = writeln!(
                    o,
                    "    <span class=\"muted\">stack: {}</span>",
                    escape(&e.stack.join(" ← "))
                );
            }
        }
        o.push_str("</pre></details>\n");
    }
    if !f.hint.is_empty() {
        let _ = writeln!(o, "<p class=\"hint\">{}</p>", escape(&f.hint));
    }
    o.push_str("</section>\n");
}

fn histograms_html(o: &mut String, w: &FindingWindows) {
    if w.histograms.is_empty() {
        return;
    }
    o.push_str(
        "<h2 id=\"histograms\">Runnable waits of the tasks named in findings</h2>\n<p class=\"muted\">\
Time from wakeup (or preemption) until the task ran, over the whole analyzed trace, in log2 buckets.</p>\n",
    );
    for h in &w.histograms {
        let peak = h.buckets.iter().copied().max().unwrap_or(0).max(1);
        let first = h.buckets.iter().position(|&c| c > 0).unwrap_or(0);
        let _ = writeln!(
            o,
            "<div class=\"hist\" data-pid=\"{}\"><h3>{} ({}) — {} waits, max {}</h3><table>",
            h.pid,
            escape(&h.comm),
            h.pid,
            h.waits,
            fmt_dur(h.max_ns as i64)
        );
        for (b, &count) in h.buckets.iter().enumerate().skip(first) {
            let lo = 1u64 << b;
            let width = (count * 240).div_ceil(peak);
            let long = if lo >= 10_000_000 { " long" } else { "" };
            let _ = writeln!(
                o,
                "<tr><td class=\"num mono\">≥ {}</td><td><div class=\"bar{long}\" style=\"width:{width}px\"></div></td>\
<td class=\"num\">{count}</td></tr>",
                fmt_dur(lo as i64)
            );
        }
        o.push_str("</table></div>\n");
    }
}

fn page(report: &Report, windows: &FindingWindows, left_out: &[String]) -> String {
    let mut o = String::new();
    let inputs: Vec<String> = report.inputs.iter().map(|i| i.path.clone()).collect();
    let _ = write!(
        o,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n\
<meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">\n\
<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
<title>stallscope: {}</title>\n<style>\n{CSS}</style></head>\n<body>\n",
        escape(&inputs.join(", "))
    );
    o.push_str("<header><h1>stallscope report</h1>\n");
    for i in &report.inputs {
        let _ = writeln!(
            o,
            "<p><span class=\"mono\">{}</span> <span class=\"muted\">{}{}{}</span></p>",
            escape(&i.path),
            escape(i.format.as_deref().unwrap_or("unknown format")),
            i.kernel_release
                .as_deref()
                .map(|k| format!(" · kernel {}", escape(k)))
                .unwrap_or_default(),
            i.nr_cpus
                .map(|n| format!(" · {n} CPUs"))
                .unwrap_or_default()
        );
    }
    let c = &report.capabilities;
    let span = match (c.first_ts_ns, c.last_ts_ns) {
        (Some(a), Some(b)) => format!(
            " from {} to {} s ({})",
            fmt_ts(a),
            fmt_ts(b),
            fmt_dur(b.saturating_sub(a) as i64)
        ),
        _ => String::new(),
    };
    let _ = writeln!(
        o,
        "<p>{} events{span} · detectors run: {}</p></header>",
        c.events_read,
        escape(&report.detectors_run.join(", "))
    );
    let _ = writeln!(
        o,
        "<nav id=\"finding-list\"><h2>Findings ({})</h2>",
        report.findings.len()
    );
    if report.findings.is_empty() {
        o.push_str("<p>No findings.</p>\n");
    } else {
        o.push_str("<ol>\n");
        for (i, f) in report.findings.iter().enumerate() {
            let _ = writeln!(
                o,
                "<li class=\"sev-{sev}\" data-finding=\"{i}\"><a href=\"#finding-{i}\"><span class=\"sev\">{sev}</span> \
<span class=\"det\">{}</span> {}</a></li>",
                escape(&f.detector),
                escape(&f.title),
                sev = f.severity.name()
            );
        }
        o.push_str("</ol>\n");
    }
    o.push_str("</nav>\n");
    for (i, f) in report.findings.iter().enumerate() {
        let window = windows.windows.iter().find(|w| w.finding == i);
        finding_html(&mut o, i, f, window);
    }
    histograms_html(&mut o, windows);
    if !report.data_quality.is_empty() {
        o.push_str("<h2 id=\"quality\">Data quality</h2>\n<table><tr><th>key</th><th>severity</th><th>count</th><th>meaning</th></tr>\n");
        for (k, q) in &report.data_quality {
            let _ = writeln!(
                o,
                "<tr><td class=\"mono\">{}</td><td>{}</td><td class=\"num\">{}</td><td>{}</td></tr>",
                escape(k),
                escape(&q.severity),
                q.count,
                escape(&q.description)
            );
        }
        o.push_str("</table>\n");
    }
    if !report.skipped.is_empty() {
        o.push_str("<h2 id=\"skipped\">Detectors not run</h2>\n<ul>\n");
        for s in &report.skipped {
            let _ = writeln!(
                o,
                "<li><b>{}</b>: {} — record with <code>{}</code></li>",
                escape(&s.id),
                escape(&s.reason),
                escape(&s.record_command)
            );
        }
        o.push_str("</ul>\n");
    }
    o.push_str("<h2 id=\"left-out\">What this file leaves out</h2>\n<ul>\n");
    for l in left_out {
        let _ = writeln!(o, "<li>{}</li>", escape(l));
    }
    o.push_str("</ul>\n");
    let _ = write!(
        o,
        "<script type=\"application/json\" id=\"stallscope-report\">{}</script>\n\
<script type=\"application/json\" id=\"stallscope-windows\">{}</script>\n<script>\n{JS}</script>\n\
</body></html>\n",
        script_json(serde_json::to_string(report)),
        script_json(serde_json::to_string(windows))
    );
    o
}

/// Bytes a window adds to the page: its JSON, its timeline element, separators.
fn window_cost(w: &FindingWindow) -> usize {
    script_json(serde_json::to_string(w)).len() + 200
}

/// A thinned window's state tracks keep this many spans per task at most ×2 before its
/// share is applied (they are coarsened, never cut: a track tiles its window).
const STATE_SPANS_PER_TASK_THINNED: usize = 1000;

/// Windows thinner than this are dropped rather than drawn nearly empty.
const MIN_WINDOW_BYTES: usize = 4096;

/// `w` with each item list cut to its earliest items so that it costs at most `budget`
/// bytes (the cut items counted in `omitted`); `None` when not even a useful part fits.
fn thin(w: &FindingWindow, budget: usize) -> Option<FindingWindow> {
    if budget < MIN_WINDOW_BYTES {
        return None;
    }
    let full = window_cost(w);
    // keep/1000 of every list; shrink until it fits (JSON size is close to linear in items)
    let mut keep = (budget * 1000 / full.max(1)).min(1000);
    while keep > 0 {
        let mut t = w.clone();
        let cut = |len: usize| len * keep / 1000;
        let n = cut(t.slices.len());
        t.omitted.slices += (t.slices.len() - n) as u64;
        t.slices.truncate(n);
        // the finding's own tasks' longest waits are kept (its subject is always drawn)
        let n = cut(t.waits.len());
        let before = t.waits.len();
        let mut k = 0;
        t.waits.retain(|w| {
            k += 1;
            k <= n || w.subject
        });
        t.omitted.waits += (before - t.waits.len()) as u64;
        let n = cut(t.wakeups.len());
        t.omitted.wakeups += (t.wakeups.len() - n) as u64;
        t.wakeups.truncate(n);
        let n = cut(t.migrations.len());
        t.omitted.migrations += (t.migrations.len() - n) as u64;
        t.migrations.truncate(n);
        let n = cut(t.requests.len());
        t.omitted.requests += (t.requests.len() - n) as u64;
        t.requests.truncate(n);
        let n = cut(t.markers.len());
        t.omitted.markers += (t.markers.len() - n) as u64;
        t.markers.truncate(n);
        // state tracks must tile the window: coarser, never cut
        let per_task = cut(STATE_SPANS_PER_TASK_THINNED).max(4);
        t.omitted.task_states +=
            TaskStateSpan::coarsen(&mut t.task_states, t.end_ns - t.start_ns, per_task);
        if window_cost(&t) <= budget {
            return Some(t);
        }
        keep = keep * 9 / 10;
    }
    None
}

/// Builds the page within `opts.max_bytes` (see the module doc for what is dropped first).
pub fn render(
    report: &Report,
    mut windows: FindingWindows,
    opts: HtmlOptions,
) -> (String, HtmlStats) {
    let mut base_notes = vec![format!(
        "Timelines show only a window of ±{} around each finding, with at most {} run slices, \
runnable waits, wakeups, migrations and block requests each; the rest of the trace is summarized by the findings \
and the histograms. The page is bounded to {} bytes.",
        fmt_dur(windows.margin_ns as i64),
        windows.max_items,
        opts.max_bytes
    )];
    if !windows.note.is_empty() {
        base_notes.push(windows.note.clone());
    }
    let mut report = report.clone();
    // the windows are moved into the page, not copied (they are most of its memory)
    let all = std::mem::take(&mut windows.windows);
    let total = all.len();
    let mut kept = windows;
    let mut evidence_cut = false;
    let mut base = page(&report, &kept, &base_notes).len() + 512;
    if base > opts.max_bytes {
        for f in &mut report.findings {
            f.evidence.truncate(EVIDENCE_KEPT_WHEN_OVER);
        }
        evidence_cut = true;
        base = page(&report, &kept, &base_notes).len() + 512;
    }
    // Water-filling: every window gets an equal share of what is left; windows smaller than
    // their share keep everything and leave the rest to the others; bigger ones are thinned.
    let mut avail = opts.max_bytes.saturating_sub(base);
    let mut order: Vec<(usize, usize)> = all.iter().map(window_cost).enumerate().collect();
    let mut all: Vec<Option<FindingWindow>> = all.into_iter().map(Some).collect();
    order.sort_by_key(|&(_, cost)| cost);
    let mut chosen: Vec<FindingWindow> = Vec::new();
    let mut thinned = 0;
    for (k, &(i, cost)) in order.iter().enumerate() {
        let share = avail / (order.len() - k);
        let Some(w) = all.get_mut(i).and_then(Option::take) else {
            continue;
        };
        if cost <= share {
            avail -= cost;
            chosen.push(w);
        } else if let Some(t) = thin(&w, share) {
            avail -= window_cost(&t);
            thinned += 1;
            chosen.push(t);
        }
    }
    chosen.sort_by_key(|w| w.finding);
    kept.windows = chosen;
    let without = report.findings.len() - kept.windows.len().min(report.findings.len());
    let mut notes = base_notes;
    let dropped = total - kept.windows.len();
    if dropped > 0 {
        notes.push(format!(
            "{dropped} finding windows were left out to stay under the size bound."
        ));
    }
    if kept.omitted_windows > 0 && kept.note.is_empty() {
        notes.push(format!(
            "{} findings beyond the first {total} have no timeline.",
            kept.omitted_windows
        ));
    }
    if thinned > 0 {
        notes.push(format!(
            "{thinned} finding windows were thinned (their latest items left out) to stay under the size bound."
        ));
    }
    let capped = kept
        .windows
        .iter()
        .filter(|w| !w.omitted.is_empty())
        .count();
    if capped > 0 {
        notes.push(format!(
            "{capped} windows reached the item cap; each says how many items it left out."
        ));
    }
    if evidence_cut {
        notes.push(format!(
            "Evidence was cut to {EVIDENCE_KEPT_WHEN_OVER} lines per finding to stay under the size bound \
(the JSON report has all of it)."
        ));
    }
    kept.omitted_windows += dropped;
    let html = page(&report, &kept, &notes);
    let stats = HtmlStats {
        bytes: html.len(),
        windows: kept.windows.len(),
        findings_without_window: without,
        evidence_cut,
    };
    (html, stats)
}

/// Writes the page; see [`render`].
pub fn write(
    out: &mut dyn Write,
    report: &Report,
    windows: FindingWindows,
    opts: HtmlOptions,
) -> io::Result<HtmlStats> {
    let (html, stats) = render(report, windows, opts);
    out.write_all(html.as_bytes())?;
    Ok(stats)
}

#[cfg(test)]
mod tests {
    use super::*;
    use stallscope_model::{
        Evidence, FindingSeverity, FindingTask, FindingWindow, Omitted, RunSlice, Window,
    };

    fn report() -> Report {
        let mut r = Report::new();
        r.findings.push(Finding {
            cause: None,
            detector: "runqueue-starvation".into(),
            severity: FindingSeverity::High,
            title: "a <b> waited & </script> ran".into(),
            window: Window {
                start_ns: 1_000_000_000,
                end_ns: 1_098_766_000,
            },
            cpus: vec![1],
            tasks: vec![FindingTask {
                pid: 7,
                comm: "victim".into(),
                role: "victim".into(),
                measures: Default::default(),
            }],
            measures: [("worst_wait_ns".to_string(), 98_766_000)].into(),
            evidence: (0..50)
                .map(|i| Evidence {
                    ts_ns: i,
                    source: "f:1".into(),
                    text: "x".repeat(100),
                    ..Evidence::default()
                })
                .collect(),
            hint: "h".into(),
        });
        r
    }

    fn windows(slices: usize) -> FindingWindows {
        FindingWindows {
            margin_ns: 50_000_000,
            max_items: 4000,
            windows: vec![FindingWindow {
                finding: 0,
                start_ns: 0,
                end_ns: 10,
                cpus: vec![1],
                tasks: vec![],
                slices: (0..slices)
                    .map(|i| RunSlice {
                        cpu: 1,
                        start_ns: i as u64,
                        end_ns: i as u64 + 1,
                        pid: 7,
                        before_trace: false,
                    })
                    .collect(),
                waits: vec![],
                wakeups: vec![],
                migrations: vec![],
                requests: vec![],
                markers: vec![stallscope_model::TextMark {
                    ts_ns: 5,
                    cpu: 1,
                    pid: 7,
                    event: "print".into(),
                    text: "B|7|<commit>".into(),
                }],
                task_states: vec![],
                density: vec![],
                omitted: Omitted::default(),
            }],
            ..Default::default()
        }
    }

    #[test]
    fn escapes_text_and_script_json() {
        let (html, stats) = render(&report(), windows(3), HtmlOptions::default());
        assert!(html.contains("a &lt;b&gt; waited &amp; &lt;/script&gt; ran"));
        // the embedded JSON cannot close its script element
        assert_eq!(html.matches("</script>").count(), 3);
        assert!(html.contains("98.766 ms"));
        assert_eq!(stats.windows, 1);
        assert!(!html.contains("http://") && !html.contains("https://"));
    }

    #[test]
    fn trace_markers_are_listed_under_their_finding() {
        let (html, _) = render(&report(), windows(3), HtmlOptions::default());
        assert!(
            html.contains("Trace markers in this window (1)"),
            "static list"
        );
        assert!(html.contains("B|7|&lt;commit&gt;"), "escaped text");
    }

    #[test]
    fn size_bound_drops_windows_then_evidence() {
        let (full, _) = render(&report(), windows(1000), HtmlOptions::default());
        let bound = full.len() - 1000;
        let (html, stats) = render(&report(), windows(1000), HtmlOptions { max_bytes: bound });
        assert!(html.len() <= bound, "{} > {bound}", html.len());
        // thinned, not dropped: fewer slices, the cut ones counted
        assert_eq!(stats.windows, 1);
        assert!(html.contains("thinned (their latest items left out)"));
        let (no_window, _) = render(&report(), windows(0), HtmlOptions::default());
        let tight = no_window.len() + 2_000; // room for less than MIN_WINDOW_BYTES
        let (html, stats) = render(&report(), windows(1000), HtmlOptions { max_bytes: tight });
        assert!(html.len() <= tight);
        assert_eq!(stats.windows, 0, "no useful part fits");
        assert!(html.contains("left out to stay under the size bound"));
        let (no_window, _) = render(&report(), windows(0), HtmlOptions::default());
        let bound = no_window.len() - 1000;
        let (small, stats) = render(&report(), windows(0), HtmlOptions { max_bytes: bound });
        assert!(stats.evidence_cut);
        assert!(small.len() <= bound, "{} > {bound}", small.len());
    }

    #[test]
    fn a_window_of_dense_state_tracks_is_coarsened_to_fit_never_dropped() {
        // 20 000 state changes of the finding's task: the page could not hold them all,
        // and a window whose tracks cannot be cut used to be dropped whole (the most severe
        // findings of a context-switch storm had no timeline); now its track is coarsened
        let mut w = windows(0);
        let win = &mut w.windows[0];
        win.end_ns = 20_000;
        win.task_states = (0..20_000u64)
            .map(|i| stallscope_model::TaskStateSpan {
                pid: 7,
                state: if i % 2 == 0 { "running" } else { "runnable" }.into(),
                cpu: (i % 2 == 0).then_some(1),
                start_ns: i,
                end_ns: i + 1,
            })
            .collect();
        let (full, _) = render(&report(), w.clone(), HtmlOptions::default());
        let bound = full.len() / 4;
        let (html, stats) = render(&report(), w.clone(), HtmlOptions { max_bytes: bound });
        assert!(html.len() <= bound, "{} > {bound}", html.len());
        assert_eq!(stats.windows, 1, "thinned, not dropped");
        let kept = page_windows(&html);
        let track = &kept.windows[0].task_states;
        assert!(track.len() < 20_000 && !track.is_empty());
        assert_eq!(
            (track[0].start_ns, track[track.len() - 1].end_ns),
            (0, 20_000)
        );
        assert!(track.windows(2).all(|p| p[0].end_ns == p[1].start_ns));
        assert!(kept.windows[0].omitted.task_states > 0);
    }

    /// The timeline data a page embeds.
    fn page_windows(html: &str) -> FindingWindows {
        let start = html.find("id=\"stallscope-windows\">").expect("windows");
        let body = &html[start..];
        let body = &body[body.find('>').expect(">") + 1..body.find("</script>").expect("end")];
        serde_json::from_str(body).expect("windows JSON")
    }

    #[test]
    fn thinning_keeps_the_subjects_longest_wait() {
        // 20 000 waits, the finding's task's longest the last: thinned to fit, the window
        // keeps its earliest waits and that one
        let mut w = windows(0);
        let win = &mut w.windows[0];
        win.end_ns = 30_000;
        win.waits = (0..20_000u64)
            .map(|i| stallscope_model::RunnableWait {
                pid: 8,
                cpu: 1,
                start_ns: i,
                end_ns: i + 1,
                open: false,
                subject: false,
            })
            .collect();
        let longest = stallscope_model::RunnableWait {
            pid: 7,
            cpu: 1,
            start_ns: 20_000,
            end_ns: 30_000,
            open: false,
            subject: true,
        };
        win.waits.push(longest.clone());
        let (full, _) = render(&report(), w.clone(), HtmlOptions::default());
        let bound = full.len() / 4;
        let (html, stats) = render(&report(), w, HtmlOptions { max_bytes: bound });
        assert_eq!(stats.windows, 1, "thinned, not dropped");
        let kept = page_windows(&html);
        let waits = &kept.windows[0].waits;
        assert!(waits.len() < 20_001 && waits.len() > 1, "{}", waits.len());
        assert_eq!(waits.last(), Some(&longest));
        assert_eq!(kept.windows[0].omitted.waits as usize + waits.len(), 20_001);
    }

    #[test]
    fn durations() {
        assert_eq!(fmt_dur(98_766_000), "98.766 ms");
        assert_eq!(fmt_dur(1_500), "1.500 µs");
        assert_eq!(fmt_dur(2_000_000_000), "2.000 s");
        assert_eq!(fmt_measure("share_permille", 425), "42.5%");
    }
}
