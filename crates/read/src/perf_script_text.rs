//! `perf script` text, as printed for `perf sched record` / `perf record -e 'sched:*'`
//! captures, with or without callchains (formats.md §7.3).
//!
//! ```text
//! # os release : 6.18.44-fc-v657               optional --header block (meta: release, nrcpus, …)
//!             perf 13978 [000]   481.124203:       sched:sched_switch: prev_comm=perf prev_pid=13978 … ==> …
//!      migration/0    18/18    [000]   481.124205:       sched:sched_waking: comm=perf pid=13978 …   (-F …,pid,tid)
//!             perf   13978 [000]   481.124195282: sched:sched_stat_runtime: comm=perf pid=13978 runtime=38939 [ns]
//!  kworker/u8:5+lo 11283 [000]   484.665557: sched:sched_switch: prev_comm=kworker/u8:5 … prev_state=R+ ==> …
//!             perf 13978 [000]   481.124203:       sched:sched_switch: … next_prio=0 ffffffff821f8b58 __schedule   (-F +ip,sym)
//! perf 13988 [000]   482.211698:       sched:sched_switch: prev_comm=perf …      with a callchain: comm unpadded,
//! \tffffffff821f8b58 __schedule+0x618 ([kernel.kallsyms])                     then one frame per line (\t = TAB)
//! \t           ee137 sched_setaffinity@@GLIBC_2.3.4+0x7 (/usr/lib/x86_64-linux-gnu/libc.so.6)
//!                                                                              and one blank line
//! burn 17651   725.496088:     500250 cpu-clock:pppH:                          no CPU column, a period
//!          swapper     0/0     [000]     0.000000: PERF_RECORD_FORK(1:1):(0:0)   side band (skipped, counted)
//! ```
//!
//! Context: comm `%16s` (unpadded with callchains), TID `%5d` (perf ≤ 6.4) or `%7d`
//! (≥ 6.5), or `PID/TID`; `[CPU]` when recorded; time `secs.usecs` (µs, truncated) or
//! `secs.nsecs` (`--ns`). The event name is right-aligned `sys:name:`; a tracepoint's
//! `sys` becomes the generic event's `system` (non-tracepoint names such as
//! `cpu-clock:pppH` are kept whole). Payloads are the kernel's `print fmt` output (`R+` is
//! kept). Event.pid is the TID. Callchain frames keep the printed hex address (user
//! addresses are DSO-relative in perf 6.1); symbols are not kept. A trailing sample
//! `ip sym` (`-F +ip,sym`: a 16-digit hex word and a symbol) is removed from the payload.
//! Events without a CPU column are put on CPU 0 and counted under `cpu_not_recorded`.

use memchr::memchr_iter;
use stallscope_model::time::parse_u64;
use stallscope_model::{DataQuality, Event, InputFormat, Problem, TraceMeta};

use crate::text_common::context::{parse_perf_context, Context};
use crate::text_common::kernel_line::{note_payload_form, split_name};
use crate::text_common::lines::{Line, LineSource};
use crate::text_common::payload::event_kind;
use crate::text_common::state::TextState;
use crate::{EventReader, Input, ReadError};

/// Reader of `perf script` text.
pub struct PerfScriptTextReader {
    lines: LineSource,
    st: TextState,
    done: bool,
    /// Reused buffer for callchain addresses.
    ips: Vec<u64>,
    /// Reused buffer for a header line joined with its mail-wrapped continuation.
    joined: Vec<u8>,
    /// Sample lines without a time column (old perf, `-F` without `time`): the first one's
    /// line number, and how many.
    untimed: Option<(u64, u64)>,
    /// Events handed out.
    handed: u64,
    /// Kernel functions the frames named, by start address (`addr − offset` of
    /// `ADDR name+0xOFF ([kernel.kallsyms])`): given as the input's kernel symbol table at
    /// its end, so stacks of pasted text keep the names perf printed.
    kernel_functions: std::collections::BTreeMap<u64, String>,
    /// Functions named since the table was last given (`meta().kallsyms`), and the number of
    /// handed events at which it is given again: early events at once (an excerpt's first
    /// stack shows its names while it is read, in `dump`), later ones at doubling counts so a
    /// long text with many functions does not rebuild the table per stack.
    functions_unpublished: bool,
    publish_at: u64,
    /// Whether `meta().kallsyms` is the table built here (not one the input carried).
    published: bool,
}

/// Whether an indented line is a callchain frame: TAB-indented as perf prints it, or
/// space-indented (pasted through a mail client or a web page) and shaped like one:
/// `ADDR SYMBOL …` (its `(DSO)` may have been wrapped to the next line), not a header.
fn is_frame_line(text: &[u8]) -> bool {
    match text.first() {
        Some(b'\t') => true,
        Some(b' ') => {
            let t = text.trim_ascii();
            t.contains(&b' ') && parse_frame(text).is_some() && parse_perf_context(text).is_none()
        }
        _ => false,
    }
}

/// `(start, name)` of the kernel function a frame line names
/// (`\tffffffff813a89c4 try_to_wake_up+0x3a4 ([kernel.kallsyms])` → `(0xffffffff813a8620,
/// try_to_wake_up)`); `None` for user frames, `[unknown]` and frames without an offset.
fn kernel_function(text: &[u8], ip: u64) -> Option<(u64, String)> {
    let t = std::str::from_utf8(text).ok()?.trim();
    let (_, rest) = t.split_once(' ')?;
    let (sym, dso) = rest.rsplit_once(" (")?;
    if !(dso.starts_with("[kernel.") || dso.starts_with("[guest.kernel")) {
        return None;
    }
    let (name, off) = sym.trim().rsplit_once("+0x")?;
    let off = u64::from_str_radix(off, 16).ok()?;
    (!name.is_empty() && name != "[unknown]").then(|| (ip.wrapping_sub(off), name.to_string()))
}

/// Whether a line after a header is the rest of it, wrapped by a mail client: not blank,
/// not a comment, a frame or a header of its own.
fn is_wrapped_rest(text: &[u8]) -> bool {
    !text.trim_ascii().is_empty()
        && text.first() != Some(&b'#')
        && !is_frame_line(text)
        && parse_perf_context(text).is_none()
}

impl PerfScriptTextReader {
    /// Opens `input` (already decompressed) as input number `index`.
    pub fn open(input: Input, index: u16) -> Result<Self, ReadError> {
        let st = TextState::new(&input, InputFormat::PerfScriptText, index, Some("sched"));
        let lines = LineSource::new(st.path.clone(), input.into_reader());
        let mut reader = PerfScriptTextReader {
            lines,
            st,
            done: false,
            ips: Vec::new(),
            joined: Vec::new(),
            untimed: None,
            handed: 0,
            kernel_functions: std::collections::BTreeMap::new(),
            functions_unpublished: false,
            publish_at: 0,
            published: false,
        };
        reader.read_header_block()?;
        Ok(reader)
    }

    /// Reads the `perf script --header` block at the start (comment and blank lines), so
    /// that what it says of the recording (perf's command line: the CPUs and tasks it
    /// covers; the declared events) is in [`EventReader::meta`] before the first event, as
    /// a perf.data's header is; the first other line is left for the reading.
    fn read_header_block(&mut self) -> Result<(), ReadError> {
        while let Some(line) = self.lines.next_line()? {
            let t = line.text.trim_ascii_start();
            if !t.is_empty() && t[0] != b'#' {
                self.lines.push_back();
                break;
            }
            if self.st.check_line(&line) && !t.is_empty() {
                header_comment(&mut self.st, &line);
            }
        }
        Ok(())
    }

    /// Reads the callchain block that may follow an event header line.
    fn read_callchain(&mut self) -> Result<Option<Box<[u64]>>, ReadError> {
        self.ips.clear();
        // the last frame had no `(DSO)`: its rest may follow, wrapped by a mail client
        let mut rest_may_follow = false;
        while let Some(line) = self.lines.next_line()? {
            if rest_may_follow && is_wrapped_rest(line.text) {
                rest_may_follow = !line.text.trim_ascii_end().ends_with(b")");
                self.st.note(Problem::WrappedLinesJoined, 1, &line);
                continue;
            }
            if is_frame_line(line.text) {
                if !self.st.check_line(&line) {
                    break;
                }
                // a frame line ends with its `(DSO)`: without the newline and the `)` it
                // was cut
                if line.unterminated && line.text.last() != Some(&b')') {
                    self.st.note_truncated(&line);
                    break;
                }
                rest_may_follow = !line.text.trim_ascii_end().ends_with(b")");
                match parse_frame(line.text) {
                    Some(ip) => {
                        self.ips.push(ip);
                        if let Some((start, name)) = kernel_function(line.text, ip) {
                            if let std::collections::btree_map::Entry::Vacant(v) =
                                self.kernel_functions.entry(start)
                            {
                                v.insert(name);
                                self.functions_unpublished = true;
                            }
                        }
                    }
                    None => self.st.note(Problem::BadCallchainLines, 1, &line),
                }
            } else if line.text.trim_ascii().is_empty() {
                self.st.check_line(&line);
                break;
            } else {
                self.lines.push_back();
                break;
            }
        }
        Ok((!self.ips.is_empty()).then(|| self.ips.clone().into_boxed_slice()))
    }

    /// Gives the functions the frames named so far as the input's kernel symbol table
    /// (`meta().kallsyms`), unless the input carries a table of its own.
    fn publish_kernel_functions(&mut self) {
        if !self.functions_unpublished || self.st.meta.kallsyms.is_some() && !self.published {
            return;
        }
        let text: String = self
            .kernel_functions
            .iter()
            .map(|(a, n)| format!("{a:016x} T {n}\n"))
            .collect();
        self.st.meta.kallsyms = Some(text.into());
        self.published = true;
        self.functions_unpublished = false;
    }

    fn step(&mut self) -> Result<(), ReadError> {
        let Some(line) = self.lines.next_line()? else {
            self.st.finish();
            self.publish_kernel_functions();
            self.done = true;
            return Ok(());
        };
        if !self.st.check_line(&line) {
            return Ok(());
        }
        let t = line.text;
        if t.trim_ascii().is_empty() {
            return Ok(());
        }
        if t[0] == b'#' {
            header_comment(&mut self.st, &line);
            return Ok(());
        }
        if is_frame_line(t) {
            // A frame outside a block: nothing to attach it to.
            self.st.note(Problem::BadCallchainLines, 1, &line);
            return Ok(());
        }
        // a header wrapped by a mail client: its rest on the following line(s)
        let (number, lossy, mut unterminated) = (line.number, line.lossy, line.unterminated);
        self.joined.clear();
        self.joined.extend_from_slice(t);
        let mut wraps = 0u64;
        while !unterminated {
            match self.lines.next_line()? {
                Some(next) if is_wrapped_rest(next.text) => {
                    self.joined.push(b' ');
                    self.joined.extend_from_slice(next.text.trim_ascii());
                    unterminated = next.unterminated;
                    wraps += 1;
                }
                Some(_) => {
                    self.lines.push_back();
                    break;
                }
                None => break,
            }
        }
        let joined = std::mem::take(&mut self.joined);
        let line = Line {
            number,
            text: &joined,
            lossy,
            unterminated,
        };
        if wraps > 0 {
            self.st.note(Problem::WrappedLinesJoined, wraps, &line);
        }
        let t = line.text;
        let Some(ctx) = parse_perf_context(t) else {
            if crate::profile::perf_script::is_untimed_header(&String::from_utf8_lossy(t)) {
                let u = self.untimed.get_or_insert((line.number, 0));
                u.1 += 1;
                // its frames belong to no event either
                while let Some(next) = self.lines.next_line()? {
                    if !is_frame_line(next.text) {
                        self.lines.push_back();
                        break;
                    }
                }
            } else {
                self.st.unparsed(&line);
            }
            self.joined = joined;
            return Ok(());
        };
        let Some(mut ev) = build_event(&mut self.st, &line, &ctx) else {
            self.joined = joined;
            return Ok(());
        };
        self.st.note_tgid(ctx.pid, ctx.tgid);
        if !line.unterminated {
            ev.callchain = self.read_callchain()?;
        }
        let before = self.st.out.len();
        self.st.push(ev);
        if line.unterminated {
            self.st.drop_cut_events(before, &line);
        }
        self.joined = joined;
        Ok(())
    }
}

impl EventReader for PerfScriptTextReader {
    fn meta(&self) -> &TraceMeta {
        &self.st.meta
    }

    fn next_event(&mut self) -> Result<Option<Event>, ReadError> {
        loop {
            if let Some(ev) = self.st.out.pop_front() {
                if self.functions_unpublished && self.handed >= self.publish_at {
                    self.publish_kernel_functions();
                    self.publish_at = (self.handed * 2).max(1024);
                }
                self.handed += 1;
                return Ok(Some(ev));
            }
            if self.done {
                // mostly sample lines without a time column: the file is a profile
                let unparsed = self.st.dq.count(Problem::UnparsedLines);
                if let (0, Some((line, n))) = (self.handed, self.untimed.filter(|u| u.1 > unparsed))
                {
                    self.untimed = None;
                    return Err(ReadError::at_line(
                        &self.st.path,
                        line,
                        "perf script sample lines with a time column (`COMM PID [CPU] SECS.USECS: …`)",
                        format!(
                            "{n} sample lines without one (perf before 3.x, or `perf script -F` without `time`): a CPU profile, not a trace; read it with `stallscope profile`"
                        ),
                    ));
                }
                if let Some((line, n)) = self.untimed.take() {
                    let path = self.st.path.clone();
                    self.st
                        .dq
                        .add(Problem::UntimedSampleLines, n, || format!("{path}:{line}"));
                }
                return Ok(None);
            }
            if let Err(e) = self.step() {
                self.done = true;
                return Err(e);
            }
        }
    }

    fn quality(&self) -> &DataQuality {
        &self.st.dq
    }
}

/// perf event modifier letters (`cycles:ukpp`, `cpu-clock:pppH`).
fn is_modifier_suffix(s: &[u8]) -> bool {
    !s.is_empty() && s.len() <= 8 && s.iter().all(|b| b"ukhIGHpPSDWebR".contains(b))
}

/// `sys:name` → (Some(sys), name); `cpu-clock:pppH` / `cycles` → (None, whole).
fn split_system(full: &[u8]) -> (Option<&[u8]>, &[u8]) {
    match memchr::memchr(b':', full) {
        Some(c) if !is_modifier_suffix(&full[c + 1..]) && c + 1 < full.len() => {
            (Some(&full[..c]), &full[c + 1..])
        }
        _ => (None, full),
    }
}

/// Builds the event of a header line; `None` when the line is not an event (side band,
/// unparsable — already counted).
fn build_event(st: &mut TextState, line: &Line<'_>, ctx: &Context<'_>) -> Option<Event> {
    let mut rest = ctx.rest.trim_ascii_start();
    // Optional sample period column.
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    if digits > 0 && rest.get(digits) == Some(&b' ') {
        rest = rest[digits..].trim_ascii_start();
    }
    if rest.starts_with(b"PERF_RECORD_") {
        st.note_deferred(Problem::PerfSideBandLinesSkipped, line);
        return None;
    }
    let Some((full_name, payload)) = split_name(rest) else {
        st.unparsed(line);
        return None;
    };
    let (system, name) = split_system(full_name);
    let (kind, form) = event_kind(system, name, strip_sample_ip(payload), &st.prev_states);
    note_payload_form(st, form, line);
    let cpu = match ctx.cpu {
        Some(c) => c,
        None => {
            st.note_deferred(Problem::CpuNotRecorded, line);
            0
        }
    };
    Some(Event {
        ts: ctx.ts.value(),
        cpu,
        pid: ctx.pid,
        span: st.span(line.number),
        kind,
        callchain: None,
    })
}

/// Removes a trailing `-F +ip,sym[,dso]` column: a 16-digit hex word followed by a symbol
/// (and no `=`), e.g. `… next_prio=0 ffffffff821f8b58 __schedule`.
fn strip_sample_ip(payload: &[u8]) -> &[u8] {
    let mut cut = None;
    for i in memchr_iter(b' ', payload) {
        let word = payload.get(i + 1..i + 17);
        if word.is_some_and(|w| w.iter().all(u8::is_ascii_hexdigit))
            && payload.get(i + 17) == Some(&b' ')
        {
            cut = Some(i);
        }
    }
    match cut {
        Some(i) if !payload[i + 17..].contains(&b'=') => payload[..i].trim_ascii_end(),
        _ => payload,
    }
}

/// `\t    ffffffff821f8b58 __schedule+0x618 ([kernel.kallsyms])` → the address.
fn parse_frame(text: &[u8]) -> Option<u64> {
    let t = text.trim_ascii_start();
    let end = t.iter().position(|&b| b == b' ').unwrap_or(t.len());
    let hex = &t[..end];
    if hex.is_empty() || hex.len() > 16 {
        return None;
    }
    let mut v = 0u64;
    for &b in hex {
        let d = match b {
            b'0'..=b'9' => b - b'0',
            b'a'..=b'f' => b - b'a' + 10,
            b'A'..=b'F' => b - b'A' + 10,
            _ => return None,
        };
        v = (v << 4) | u64::from(d);
    }
    Some(v)
}

/// `perf script --header` facts: `# os release : …`, `# nrcpus online : N`, `# event : name = …`.
fn header_comment(st: &mut TextState, line: &Line<'_>) {
    let t = line
        .text
        .strip_prefix(b"#")
        .unwrap_or(line.text)
        .trim_ascii();
    let Some(colon) = memchr::memmem::find(t, b" : ") else {
        return;
    };
    let (k, v) = (t[..colon].trim_ascii(), t[colon + 3..].trim_ascii());
    let text = || String::from_utf8_lossy(v).into_owned();
    match k {
        b"os release" => st.set_kernel_release(text()),
        b"hostname" => st.meta.hostname = Some(text()),
        b"perf version" => st.meta.tool_version = Some(format!("perf {}", text())),
        b"cmdline" => st.meta.set_perf_cmdline(text()),
        b"nrcpus online" => st.meta.nr_cpus = parse_u64(v).and_then(|n| u32::try_from(n).ok()),
        b"event" => {
            if let Some(name) = v.strip_prefix(b"name = ") {
                let end = name.iter().position(|&b| b == b',').unwrap_or(name.len());
                st.declare_name(String::from_utf8_lossy(&name[..end]).into_owned());
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> (Vec<Event>, PerfScriptTextReader) {
        let input = Input::from_bytes("t.txt", text.as_bytes().to_vec()).expect("input");
        let mut r = PerfScriptTextReader::open(input, 0).expect("open");
        let mut out = Vec::new();
        while let Some(e) = r.next_event().expect("event") {
            out.push(e);
        }
        (out, r)
    }

    #[test]
    fn pid_widths_5_and_7_give_the_same_event() {
        let w5 = "     migration/0    18 [000]   481.124205:       sched:sched_waking: comm=perf pid=13978 prio=120 target_cpu=000\n";
        let w7 = "     migration/0      18 [000]   481.124205:       sched:sched_waking: comm=perf pid=13978 prio=120 target_cpu=000\n";
        let wt = "     migration/0      18/18      [000]   481.124205:       sched:sched_waking: comm=perf pid=13978 prio=120 target_cpu=000\n";
        let dumps: Vec<String> = [w5, w7, wt]
            .iter()
            .map(|t| read(t).0[0].dump_line())
            .collect();
        assert_eq!(
            dumps[0],
            "481124205000 0 18 sched_waking comm=perf pid=13978 prio=120 target_cpu=0"
        );
        assert!(dumps.iter().all(|d| d == &dumps[0]));
    }

    #[test]
    fn callchain_block_is_attached_and_next_header_kept() {
        let text = "perf 13988 [000]   482.211698:       sched:sched_switch: prev_comm=perf prev_pid=13988 prev_prio=120 prev_state=D ==> next_comm=migration/0 next_pid=18 next_prio=0\n\tffffffff821f8b58 __schedule+0x618 ([kernel.kallsyms])\n\t           ee137 operator() (int) const+0x7 (/lib/libc.so.6)\n\n            perf 13988 [000]   482.211699:       sched:sched_waking: comm=a pid=1 prio=120 target_cpu=000\n";
        let (ev, r) = read(text);
        assert_eq!(ev.len(), 2);
        assert_eq!(
            ev[0].callchain.as_deref(),
            Some(&[0xffff_ffff_821f_8b58u64, 0xee137][..])
        );
        assert_eq!(ev[1].callchain, None);
        assert_eq!(ev[1].span.pos(), stallscope_model::SpanPos::Line(5));
        assert!(r.quality().is_empty(), "{:?}", r.quality());
    }

    #[test]
    fn ip_sym_column_side_band_and_profile_lines() {
        let text = "            perf 13978 [000]   481.124195: sched:sched_stat_runtime: comm=perf pid=13978 runtime=38939 [ns] ffffffff813ad60a update_se\n         swapper     0/0     [000]     0.000000: PERF_RECORD_FORK(1:1):(0:0)\nburn 17651   725.496088:     500250 cpu-clock:pppH: \n\t           150af handle_intel.constprop.0+0x2f (/usr/lib/ld.so)\n\n";
        let (ev, r) = read(text);
        assert_eq!(ev.len(), 2);
        assert_eq!(
            ev[0].dump_line(),
            "481124195000 0 13978 sched_stat_runtime comm=perf pid=13978 runtime=38939"
        );
        assert_eq!(ev[1].dump_line(), "725496088000 0 17651 cpu-clock:pppH");
        assert_eq!(ev[1].callchain.as_deref(), Some(&[0x150afu64][..]));
        assert_eq!(r.quality().count(Problem::PerfSideBandLinesSkipped), 1);
        assert_eq!(r.quality().count(Problem::CpuNotRecorded), 1);
    }

    #[test]
    fn system_split() {
        assert_eq!(
            split_system(b"sched:sched_switch"),
            (Some(&b"sched"[..]), &b"sched_switch"[..])
        );
        assert_eq!(
            split_system(b"cpu-clock:pppH"),
            (None, &b"cpu-clock:pppH"[..])
        );
        assert_eq!(split_system(b"cycles"), (None, &b"cycles"[..]));
    }
}
