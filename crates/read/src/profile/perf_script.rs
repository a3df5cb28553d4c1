//! `perf script` text of samples with callchains (`perf record -g` then `perf script`) →
//! [`Profile`].
//!
//! ```text
//! block   := header NL { [TAB] frame NL } [ blank line ]   (old perf: frames at column 0)
//! header  := COMM ␣+ PID[/TID] ␣+ [ "[" CPU "]" ␣+ ] SECS.FRAC ":" ␣+ [ PERIOD ␣+ ] EVENT ":" [ payload ]
//! frame   := ␣* HEXADDR ␣ SYMBOL[+0xOFF] ␣ "(" DSO ")"
//!
//! burn 17651   725.496088:     500250 cpu-clock:pppH:
//! <TAB>           150af handle_intel.constprop.0+0x2f (/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2)
//! <TAB>ffffffff822010c9 _raw_spin_unlock_irqrestore+0x19 ([kernel.kallsyms])
//! <TAB>            11e9 [unknown] (/tmp/work/perf/burn)
//! <TAB>           ee137 operator() (int) const+0x7 (/lib/libc.so.6)
//! CPU 0/KVM 17653 [001]   725.497648:     500250 cpu-clock:pppH:   (comm with spaces, -a: CPU)
//! ```
//!
//! The context columns (comm with spaces, `PID/TID`, `[CPU]`, µs or ns time) are split by
//! the shared perf-script context parser (`text_common::context`); the comm is what
//! precedes the pid. The DSO is the last parenthesized group of a frame line, matched from
//! the end (`(/memfd:sealed-91 (deleted))` is one DSO), so symbols with spaces and
//! parentheses (`operator() (int) const`) stay whole; the `+0x…` offset is removed.
//! A frame is a kernel frame when its DSO is `[kernel.kallsyms]` / `[guest.kernel…]`
//! or its address is at or above [`super::KERNEL_ADDR_MIN`]; `[unknown]` frames are named by
//! their printed address (`0x11e9`: perf prints user addresses DSO-relative), and unknown
//! kernel frames are looked up in the kernel symbol table when one is available, as in
//! [`super::perf_samples`], so both paths name frames alike.
//!
//! A comm printed as `:TID` is perf's placeholder for an unknown name and is dropped.
//! Weight = the PERIOD column when printed (default for sampling events), else 1 per
//! sample. One event is profiled: when the text carries `perf script --header`'s
//! `# event : name = …` lines (the perf.data's attrs, in order) and declares several, the
//! first declared one with samples — perf report's first section, as for the perf.data
//! itself; otherwise the first event name seen. Other events, side-band lines
//! (`PERF_RECORD_*`), unparsable lines and orphan frames are counted in the data quality.
//! `# os release : …` (from `perf script --header`) gives the kernel release.

use std::collections::HashMap;

use stallscope_model::time::parse_u64;
use stallscope_model::{
    Comm, DataQuality, Problem, Profile, Span, SpanPos, SymbolId, WeightUnit, WeightedStack,
};

use super::{frame_name, kernel_symbols_for, Kallsyms, ProfileFormat, ProfileOptions, ProfileRead};
use crate::text_common::context::parse_perf_context;
use crate::{Input, ReadError};

/// One parsed frame line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScriptFrame<'a> {
    /// Printed address.
    pub addr: u64,
    /// Symbol as printed (with its offset), `[unknown]` when perf did not resolve it.
    pub symbol: &'a str,
    /// DSO as printed inside the parentheses.
    pub dso: Option<&'a str>,
}

/// Parses `ADDR SYMBOL (DSO)` (leading TAB/spaces allowed); `None` when there is no hex
/// address first.
pub fn parse_frame(line: &str) -> Option<ScriptFrame<'_>> {
    let t = line.trim_start();
    let (hex, rest) = t.split_once(' ').unwrap_or((t, ""));
    if hex.is_empty() || hex.len() > 16 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let addr = u64::from_str_radix(hex, 16).ok()?;
    let rest = rest.trim();
    let (symbol, dso) = match dso_open(rest) {
        Some(open) => (
            rest[..open].trim_end(),
            Some(&rest[open + 1..rest.len() - 1]),
        ),
        None => (rest, None),
    };
    Some(ScriptFrame { addr, symbol, dso })
}

/// Byte index of the `(` that opens the trailing `(DSO)` group, matching parentheses from
/// the end so a DSO like `(/memfd:x (deleted))` stays whole; it must start the text or
/// follow a space.
fn dso_open(rest: &str) -> Option<usize> {
    if !rest.ends_with(')') {
        return None;
    }
    let mut depth = 0usize;
    for (i, b) in rest.bytes().enumerate().rev() {
        match b {
            b')' => depth += 1,
            b'(' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return (i == 0 || rest.as_bytes()[i - 1] == b' ').then_some(i);
                }
            }
            _ => {}
        }
    }
    None
}

/// Whether a frame is a kernel frame (see the module doc): by its DSO when that names the
/// kernel (`[kernel.kallsyms]`, `[guest.kernel…]`, a `vmlinux` image, a module `*.ko*`),
/// else by its address (which cannot tell on 32-bit kernels, whose kernel addresses are
/// below the 64-bit kernel range).
fn is_kernel(frame: &ScriptFrame<'_>) -> bool {
    frame.dso.is_some_and(is_kernel_dso) || frame.addr >= super::KERNEL_ADDR_MIN
}

/// Whether a DSO as perf prints it names the kernel or a kernel module.
fn is_kernel_dso(dso: &str) -> bool {
    if dso.starts_with("[kernel.") || dso.starts_with("[guest.kernel") {
        return true;
    }
    let file = dso.rsplit('/').next().unwrap_or(dso);
    file == "vmlinux"
        || file.starts_with("vmlinux-")
        || file.starts_with("vmlinuz")
        || file.ends_with(".ko")
        || [".ko.gz", ".ko.xz", ".ko.zst"]
            .iter()
            .any(|s| file.ends_with(s))
}

/// The name of an unresolved user frame: `[DSO-file+0xADDR]` when perf printed the DSO
/// (perf script prints such addresses DSO-relative, and perf report keys them by DSO and
/// offset, as [`super::perf_samples`] names them from perf.data), else `0xADDR`.
fn unresolved_user_name(f: &ScriptFrame<'_>) -> String {
    match f.dso {
        Some(d) if !d.is_empty() && d != "[unknown]" => {
            let file = d.rsplit('/').next().unwrap_or(d);
            format!("[{file}+{:#x}]", f.addr)
        }
        _ => frame_name(None, f.addr),
    }
}

/// A parsed header line.
struct Header<'a> {
    comm: &'a str,
    pid: i32,
    cpu: Option<u32>,
    /// `None` for old perf's lines without a time column.
    ts: Option<u64>,
    period: Option<u64>,
    event: &'a str,
    /// The sample's ip printed on the header line (`perf script` of samples recorded
    /// without `-g`: `cycles:  ffffffff9b201293 do_idle+0x13 ([kernel.kallsyms])`).
    inline_frame: Option<ScriptFrame<'a>>,
}

/// The frame printed after the event name on a header line, when the rest is exactly one
/// `ADDR SYMBOL (DSO)` (tracepoint payloads are `key=value` text and never parse as one).
fn inline_frame(after_event: &str) -> Option<ScriptFrame<'_>> {
    let t = after_event.trim();
    if t.is_empty() {
        return None;
    }
    parse_frame(t).filter(|f| f.dso.is_some() && !f.symbol.contains('='))
}

fn parse_header(line: &str) -> Option<Header<'_>> {
    parse_timed_header(line).or_else(|| parse_untimed_header(line))
}

/// `COMM PID[/TID] [[CPU]] [PERIOD] EVENT: …` without a time column, as perf before 3.x
/// and `perf script -F comm,pid,event,ip,sym` print it: the event is the first word ending
/// in `:` that follows a PID (optionally a `[CPU]` and a period after it).
pub(crate) fn is_untimed_header(line: &str) -> bool {
    parse_untimed_header(line).is_some()
}

fn parse_untimed_header(line: &str) -> Option<Header<'_>> {
    let is_pid = |w: &str| {
        let (p, t) = w.split_once('/').unwrap_or((w, "0"));
        !p.is_empty()
            && p.bytes().all(|b| b.is_ascii_digit())
            && t.bytes().all(|b| b.is_ascii_digit())
    };
    let is_cpu = |w: &str| {
        w.strip_prefix('[')
            .and_then(|w| w.strip_suffix(']'))
            .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
    };
    let digits = |w: &str| !w.is_empty() && w.bytes().all(|b| b.is_ascii_digit());
    let words: Vec<(usize, &str)> = line
        .split(' ')
        .scan(0usize, |at, w| {
            let start = *at;
            *at += w.len() + 1;
            Some((start, w))
        })
        .filter(|(_, w)| !w.is_empty())
        .collect();
    for i in 1..words.len() {
        let (at, w) = words[i];
        let Some(event) = w.strip_suffix(':') else {
            continue;
        };
        if event.is_empty() || event.ends_with(':') {
            continue;
        }
        // walk back: [PERIOD] [CPU] PID
        let mut j = i;
        let mut period = None;
        let mut cpu = None;
        if j >= 2 && digits(words[j - 1].1) && (is_pid(words[j - 2].1) || is_cpu(words[j - 2].1)) {
            period = parse_u64(words[j - 1].1.as_bytes());
            j -= 1;
        }
        if j >= 2 && is_cpu(words[j - 1].1) {
            cpu = words[j - 1].1[1..words[j - 1].1.len() - 1].parse().ok();
            j -= 1;
        }
        if j == 0 || !is_pid(words[j - 1].1) {
            return None;
        }
        let pid_word = words[j - 1].1;
        let tid = pid_word.rsplit('/').next()?.parse::<i32>().ok()?;
        let comm = line[..words[j - 1].0].trim();
        let rest = line.get(at + w.len()..)?;
        return Some(Header {
            comm,
            pid: tid,
            cpu,
            ts: None,
            period,
            event,
            inline_frame: inline_frame(rest),
        });
    }
    None
}

fn parse_timed_header(line: &str) -> Option<Header<'_>> {
    let ctx = parse_perf_context(line.as_bytes())?;
    let cut = line.len().checked_sub(ctx.rest.len())?;
    let prefix = line.get(..cut)?; // COMM PID[/TID] [CPU] TS:
    let rest = line.get(cut..)?.trim_start();
    // Prefix right to left: "TS:", optional "[CPU]", "PID[/TID]", then the comm.
    let mut p = prefix.trim_end();
    p = p.strip_suffix(':')?;
    p = p.trim_end();
    p = p.get(..p.rfind(' ')?)?.trim_end(); // drop TS
    if p.ends_with(']') {
        p = p.get(..p.rfind('[')?)?.trim_end();
    }
    let comm = match p.rfind(' ') {
        Some(i) => p.get(..i)?.trim(),
        None => "",
    };
    let (period, after) = {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0 && rest.as_bytes().get(digits) == Some(&b' ') {
            (
                parse_u64(&rest.as_bytes()[..digits]),
                rest[digits..].trim_start(),
            )
        } else {
            (None, rest)
        }
    };
    // EVENT: the first `:`-terminated word with its modifier (`cpu-clock:pppH:`,
    // `sched:sched_switch:`) — up to the last ':' before the first space.
    let word_end = after.find(' ').unwrap_or(after.len());
    let word = after.get(..word_end)?;
    let event = word.strip_suffix(':').unwrap_or(word);
    if event.is_empty() {
        return None;
    }
    Some(Header {
        comm,
        pid: ctx.pid,
        cpu: ctx.cpu,
        ts: Some(ctx.ts.value()),
        period,
        event,
        inline_frame: inline_frame(&after[word_end..]),
    })
}

/// Builds the profile from `perf script` text, one line at a time (bounded memory: only the
/// profile grows).
struct ScriptProfiler<'o> {
    path: String,
    opts: &'o ProfileOptions,
    profile: Profile,
    quality: DataQuality,
    /// Kernel symbols, chosen at the first line after the `--header` block.
    table: Option<Kallsyms>,
    table_chosen: bool,
    /// What choosing the table noted (a missing table): shown only when some kernel frame
    /// was printed without a symbol and needed it.
    table_quality: DataQuality,
    /// Kernel frames printed without a symbol (looked up in `table`).
    kernel_lookups: u64,
    release: Option<String>,
    event: Option<String>,
    /// Events the `--header` block declares, in order.
    declared: Vec<String>,
    /// With several declared events and none asked for: each sample's stack and line, by
    /// event, until the end chooses (`current_event` names the open block's).
    by_event: Vec<(String, Vec<HeldSample>)>,
    current_event: Option<(String, u64, String)>,
    /// The event profiled is the first one the text sampled (none asked for, none
    /// declared), and the other events it sampled: said at the end, since perf report's
    /// first section is the first event given to perf record, which such a text omits.
    first_seen: bool,
    other_events: Vec<String>,
    any_period: bool,
    /// Printed address → (printed symbol, id): a hit costs no allocation.
    names: HashMap<u64, Vec<(Box<str>, SymbolId)>>,
    /// The stack being filled: `Some` while inside a profiled sample's block.
    current: Option<WeightedStack>,
    in_skipped_block: bool,
    first_line: Option<(u64, String)>,
}

/// A sample kept until the event to profile is chosen: its stack, and its header line (number
/// and text) for the data quality if another event is chosen.
type HeldSample = (WeightedStack, u64, String);

impl<'o> ScriptProfiler<'o> {
    fn new(path: &str, opts: &'o ProfileOptions) -> Self {
        ScriptProfiler {
            path: path.to_string(),
            opts,
            profile: Profile::new(WeightUnit::Samples),
            quality: DataQuality::default(),
            table: None,
            table_chosen: false,
            table_quality: DataQuality::default(),
            kernel_lookups: 0,
            release: None,
            event: opts.event.clone(),
            declared: Vec::new(),
            by_event: Vec::new(),
            current_event: None,
            first_seen: false,
            other_events: Vec::new(),
            any_period: false,
            names: HashMap::new(),
            current: None,
            in_skipped_block: false,
            first_line: None,
        }
    }

    fn note(&mut self, problem: Problem, line_no: u64, line: &str) {
        let path = &self.path;
        self.quality.add(problem, 1, || {
            format!(
                "{path}:{line_no}: {}",
                line.chars().take(100).collect::<String>()
            )
        });
    }

    fn frame(&mut self, f: &ScriptFrame<'_>) -> SymbolId {
        if let Some(hit) = self
            .names
            .get(&f.addr)
            .and_then(|v| v.iter().find(|(s, _)| &**s == f.symbol))
        {
            return hit.1;
        }
        let kernel = is_kernel(f);
        let known = !f.symbol.is_empty() && f.symbol != "[unknown]";
        let name = if known {
            frame_name(Some(f.symbol), f.addr)
        } else if kernel {
            self.kernel_lookups += 1;
            let sym = self
                .table
                .as_ref()
                .and_then(|k| k.lookup(f.addr))
                .map(|s| s.name);
            frame_name(sym, f.addr)
        } else {
            unresolved_user_name(f)
        };
        let id = self.profile.intern(&name, Some(kernel));
        self.names
            .entry(f.addr)
            .or_default()
            .push((f.symbol.into(), id));
        id
    }

    fn end_block(&mut self) {
        if let Some(s) = self.current.take() {
            match self.current_event.take() {
                Some((event, line_no, line)) => {
                    match self.by_event.iter_mut().find(|(e, _)| *e == event) {
                        Some((_, v)) => v.push((s, line_no, line)),
                        None => self.by_event.push((event, vec![(s, line_no, line)])),
                    }
                }
                None => self.profile.stacks.push(s),
            }
        }
    }

    /// Several declared events: the first declared one with samples is the profile (perf
    /// report's first section); the others' samples are counted as other events.
    fn choose_declared(&mut self) {
        let by_event = std::mem::take(&mut self.by_event);
        let chosen = self.declared.iter().find_map(|d| {
            by_event
                .iter()
                .position(|(e, _)| super::event_matches(d, e))
        });
        let chosen = chosen.or((!by_event.is_empty()).then_some(0));
        for (i, (event, samples)) in by_event.into_iter().enumerate() {
            if Some(i) == chosen {
                self.event = Some(event);
                self.profile.stacks.extend(samples.into_iter().map(|s| s.0));
            } else {
                for (_, line_no, line) in samples {
                    self.note(Problem::ProfileOtherEvent, line_no, &line);
                }
            }
        }
    }

    /// Takes line `line_no` (without its newline).
    fn line(&mut self, line_no: u64, raw: &str) -> Result<(), ReadError> {
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        if line.trim().is_empty() {
            self.end_block();
            self.in_skipped_block = false;
            return Ok(());
        }
        if self.first_line.is_none() {
            self.first_line = Some((line_no, line.chars().take(80).collect()));
        }
        if let Some(comment) = line.strip_prefix('#') {
            // `perf script --header`: the release names the kernel symbol table.
            let comment = comment.trim_start();
            if let Some(r) = comment.strip_prefix("os release :") {
                self.release = Some(r.trim().to_string());
            }
            if let Some(e) = comment.strip_prefix("event : name = ") {
                let name = e.split(',').next().unwrap_or("").trim();
                if !name.is_empty() && self.profile.stacks.is_empty() {
                    self.declared.push(name.to_string());
                }
            }
            return Ok(());
        }
        if !self.table_chosen {
            self.table_chosen = true;
            self.table = kernel_symbols_for(
                &self.opts.symbols,
                self.release.as_deref(),
                &mut self.table_quality,
            )?;
        }
        let indented = line.starts_with('\t') || line.starts_with(' ');
        // An indented line is a frame unless it is a header (perf right-aligns comms);
        // a header without a time column is tried only after the frame reading fails.
        // Old perf printed frames at column 0: inside a sample, a line that is no header
        // and reads as `ADDR SYMBOL (DSO)` is a frame (stackcollapse-perf.pl's rule).
        let frame_line = line.starts_with('\t')
            || indented
                && parse_timed_header(line).is_none()
                && (parse_frame(line).is_some_and(|f| f.dso.is_some())
                    || parse_untimed_header(line).is_none())
            || !indented
                && (self.current.is_some() || self.in_skipped_block)
                && is_unindented_frame(line);
        if frame_line {
            match (parse_frame(line), self.current.is_some()) {
                (Some(f), true) => {
                    let id = self.frame(&f);
                    if let Some(s) = self.current.as_mut() {
                        s.frames.push(id);
                    }
                }
                (Some(_), false) if self.in_skipped_block => {} // frames of a counted, skipped sample
                _ => self.note(Problem::ProfileBadFrame, line_no, line),
            }
            return Ok(());
        }
        self.end_block();
        self.in_skipped_block = true;
        let Some(h) = parse_header(line) else {
            self.note(Problem::ProfileBadLine, line_no, line);
            return Ok(());
        };
        if h.event.starts_with("PERF_RECORD_") {
            self.note(Problem::ProfileSideBand, line_no, line);
            return Ok(());
        }
        match &self.event {
            // several declared: every event's samples are kept until the end chooses
            None if self.declared.len() > 1 => {
                self.current_event = Some((h.event.to_string(), line_no, line.to_string()))
            }
            None => {
                self.event = Some(h.event.to_string());
                self.first_seen = self.declared.is_empty();
            }
            Some(e) if !super::event_matches(e, h.event) => {
                if self.first_seen && !self.other_events.iter().any(|o| o == h.event) {
                    self.other_events.push(h.event.to_string());
                }
                self.note(Problem::ProfileOtherEvent, line_no, line);
                return Ok(());
            }
            Some(_) => {}
        }
        self.in_skipped_block = false;
        let weight = match h.period {
            Some(p) if p > 0 => {
                self.any_period = true;
                p
            }
            _ => 1,
        };
        // perf prints `:TID` when it knows no name for the thread.
        let unknown_comm = h.comm.strip_prefix(':') == Some(h.pid.to_string().as_str());
        let frames = match &h.inline_frame {
            Some(f) => vec![self.frame(f)],
            None => Vec::new(),
        };
        self.current = Some(WeightedStack {
            frames,
            weight,
            weight_new: None,
            comm: (!h.comm.is_empty() && !unknown_comm).then(|| Comm::new(h.comm)),
            pid: Some(h.pid),
            cpu: h.cpu,
            ts: h.ts,
            span: Span::new(0, SpanPos::Line(line_no)),
        });
        Ok(())
    }

    fn finish(mut self) -> Result<ProfileRead, ReadError> {
        self.end_block();
        if self.event.is_none() && self.declared.len() > 1 {
            self.choose_declared();
        }
        if self.profile.stacks.is_empty() {
            let (line_no, found) = self.first_line.unwrap_or((1, "an empty input".to_string()));
            return Err(ReadError::at_line(
                &self.path,
                line_no,
                "perf script sample lines (`COMM PID TS: [PERIOD] EVENT:` then TAB-indented frames)",
                format!("{found:?}"),
            ));
        }
        let empty = self
            .profile
            .stacks
            .iter()
            .filter(|s| s.frames.is_empty())
            .count() as u64;
        if empty > 0 {
            self.quality.add(Problem::ProfileNoCallchain, empty, || {
                format!("{empty} samples")
            });
        }
        if self.kernel_lookups > 0 {
            self.quality.merge(&self.table_quality);
        }
        if let (true, Some(chosen)) = (!self.other_events.is_empty(), &self.event) {
            let others = self.other_events.join(", ");
            self.quality.add(Problem::ProfileEventFirstSeen, 1, || {
                format!(
                    "profiled {chosen}, the first event sampled in the text; also sampled: {others}. \
                     perf report's first section is the event given first to perf record, which \
                     only `perf script --header` prints; `--event NAME` chooses"
                )
            });
        }
        if self.any_period {
            self.profile.unit = WeightUnit::Period(self.event.clone().unwrap_or_default());
        }
        Ok(ProfileRead {
            profile: self.profile,
            quality: self.quality,
            format: ProfileFormat::PerfScript,
            event: self.event,
            kernel_release: self.release,
            reported_totals: None,
        })
    }
}

/// Parses `perf script` text (see the module doc) read from `path`.
pub fn parse(path: &str, text: &str, opts: &ProfileOptions) -> Result<ProfileRead, ReadError> {
    let mut sp = ScriptProfiler::new(path, opts);
    for (i, line) in text.lines().enumerate() {
        sp.line(i as u64 + 1, line)?;
    }
    sp.finish()
}

/// Reads `input` as `perf script` text, streaming (invalid UTF-8 is replaced, not fatal).
pub fn read(input: Input, opts: &ProfileOptions) -> Result<ProfileRead, ReadError> {
    use std::io::BufRead;
    let path = input.path.clone();
    let mut reader = std::io::BufReader::with_capacity(1 << 16, input.into_reader());
    let mut sp = ScriptProfiler::new(&path, opts);
    let mut buf = Vec::new();
    let mut line_no = 0u64;
    loop {
        buf.clear();
        let n = reader
            .read_until(b'\n', &mut buf)
            .map_err(|e| ReadError::io(&path, &e))?;
        if n == 0 {
            break;
        }
        line_no += 1;
        let bytes = buf.strip_suffix(b"\n").unwrap_or(&buf);
        sp.line(line_no, &String::from_utf8_lossy(bytes))?;
    }
    sp.finish()
}

/// A frame line printed at column 0 (old perf, FlameGraph's examples): `ADDR SYMBOL
/// (DSO)` that is no sample header.
fn is_unindented_frame(line: &str) -> bool {
    parse_frame(line).is_some_and(|f| f.dso.is_some()) && parse_header(line).is_none()
}

/// Whether `head` looks like `perf script` sample output: a header line parsed by the
/// context parser directly followed by a frame (TAB-indented, or at column 0 as old perf
/// printed them).
pub fn sniff(head: &[u8]) -> bool {
    let text = String::from_utf8_lossy(head);
    let mut prev_header = false;
    for line in text.lines().take(200) {
        let indented = line.starts_with('\t') || line.starts_with(' ');
        let frame = match indented {
            true => parse_frame(line).is_some_and(|f| f.dso.is_some()),
            false => is_unindented_frame(line),
        };
        if prev_header && frame {
            return true;
        }
        let header = if line.starts_with('\t') {
            None
        } else {
            parse_header(line)
        };
        // a sample printed with its ip on the header line (recorded without -g)
        if header.as_ref().is_some_and(|h| h.inline_frame.is_some()) {
            return true;
        }
        prev_header = header.is_some();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "burn 17651   725.496088:     500250 cpu-clock:pppH: \n\
\t           150af handle_intel.constprop.0+0x2f (/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2)\n\
\t               0 [unknown] ([unknown])\n\
\n\
CPU 0/KVM 17653/17653 [001]  725.497648:     500250 cpu-clock:pppH: \n\
\tffffffff822010c9 _raw_spin_unlock_irqrestore+0x19 ([kernel.kallsyms])\n\
\t           ee137 operator() (int) const+0x7 (/lib/libc.so.6)\n\
\t            11e9 [unknown] (/tmp/work/perf/burn)\n\
\t           60ee0 [unknown] (/memfd:sealed-91 (deleted))\n\
\n";

    #[test]
    fn kernel_frames_by_dso_and_untimed_headers() {
        // perf 4.1 with a vmlinux DSO: kernel frames below 64-bit kernel addresses
        let text = concat!(
            "dd 29776 666709.771979:   10101010 cpu-clock: \n",
            "\t          414b3b fsnotify (/lib/modules/4.1.0-virtual/build/vmlinux)\n",
            "\t           e5f70 read (/lib/x86_64-linux-gnu/libc-2.15.so)\n",
            "\t               0 [unknown] ([unknown])\n",
            "\n",
            "node-v011 31912 cpu-clock: \n",
            "            13a80b608e0a RegExp:[&<>] (/tmp/perf-7539.map)\n",
            "                  c0ffee [unknown] (/usr/lib/ext4.ko)\n",
        );
        let r = parse("t", text, &ProfileOptions::default()).unwrap();
        let p = &r.profile;
        assert_eq!(p.stacks.len(), 2);
        let k = |name: &str| {
            p.kernel[p
                .lookup(name)
                .unwrap_or_else(|| panic!("{name} not in {:?}", p.symbols))
                as usize]
        };
        assert_eq!(k("fsnotify"), Some(true));
        assert_eq!(k("read"), Some(false));
        assert_eq!(k("0xc0ffee"), Some(true));
        assert_eq!(p.stacks[1].ts, None);
        assert_eq!(p.stacks[1].pid, Some(31912));
        assert_eq!(p.stacks[1].comm.unwrap().as_str(), "node-v011");
        // every kernel frame had a symbol but one module frame: the note is about that one
        assert_eq!(r.quality.count(Problem::KernelSymbolsReleaseUnknown), 1);
        assert!(parse_untimed_header("\t  400570 func_b (/root/func_ab)").is_none());
        let h =
            parse_untimed_header("CPU 0/KVM 17653/17654 [001] 500250 cpu-clock:pppH: ").unwrap();
        assert_eq!(
            (h.comm, h.pid, h.cpu, h.period),
            ("CPU 0/KVM", 17654, Some(1), Some(500250))
        );
    }

    #[test]
    fn headers_frames_and_odd_symbols() {
        let r = parse(
            "t",
            TEXT,
            &ProfileOptions {
                symbols: crate::profile::KernelSymbolSource::Off,
                event: None,
                no_user_symbols: false,
            },
        )
        .unwrap();
        let p = &r.profile;
        assert_eq!(r.event.as_deref(), Some("cpu-clock:pppH"));
        assert_eq!(p.stacks.len(), 2);
        let s = &p.stacks[1];
        let names: Vec<&str> = s.frames.iter().map(|&f| p.symbol(f)).collect();
        assert_eq!(
            names,
            [
                "_raw_spin_unlock_irqrestore",
                "operator() (int) const",
                "[burn+0x11e9]",
                "[memfd:sealed-91 (deleted)+0x60ee0]"
            ]
        );
        assert_eq!(s.comm.unwrap().as_str(), "CPU 0/KVM");
        assert_eq!(
            (s.pid, s.cpu, s.ts),
            (Some(17653), Some(1), Some(725_497_648_000))
        );
        assert_eq!(s.weight, 500250);
        assert_eq!(p.stacks[0].comm.unwrap().as_str(), "burn");
        assert_eq!(
            p.kernel[p.lookup("_raw_spin_unlock_irqrestore").unwrap() as usize],
            Some(true)
        );
        assert!(sniff(TEXT.as_bytes()));
    }

    #[test]
    fn garbage_is_an_error_with_the_line() {
        let e = parse(
            "g",
            "\n\nhello there\n",
            &ProfileOptions {
                symbols: crate::profile::KernelSymbolSource::Off,
                event: None,
                no_user_symbols: false,
            },
        )
        .unwrap_err();
        assert_eq!(e.pos, Some(SpanPos::Line(3)));
        assert!(parse(
            "g",
            "",
            &ProfileOptions {
                symbols: crate::profile::KernelSymbolSource::Off,
                event: None,
                no_user_symbols: false,
            }
        )
        .is_err());
    }
}
