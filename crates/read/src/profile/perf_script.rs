//! `perf script` text of samples with callchains (`perf record -g` then `perf script`) →
//! [`Profile`].
//!
//! ```text
//! block   := header NL { TAB frame NL } [ blank line ]
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
//! sample. Only the first event name seen is profiled; other events, side-band lines
//! (`PERF_RECORD_*`), unparsable lines and orphan frames are counted in the data quality.
//! `# os release : …` (from `perf script --header`) gives the kernel release.

use std::collections::HashMap;

use stallscope_model::time::parse_u64;
use stallscope_model::{
    Comm, DataQuality, Profile, Severity, Span, SpanPos, SymbolId, WeightUnit, WeightedStack,
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

/// Whether a frame is a kernel frame (see the module doc).
fn is_kernel(frame: &ScriptFrame<'_>) -> bool {
    frame
        .dso
        .is_some_and(|d| d.starts_with("[kernel.") || d.starts_with("[guest.kernel"))
        || frame.addr >= super::KERNEL_ADDR_MIN
}

/// A parsed header line.
struct Header<'a> {
    comm: &'a str,
    pid: i32,
    cpu: Option<u32>,
    ts: u64,
    period: Option<u64>,
    event: &'a str,
}

fn parse_header(line: &str) -> Option<Header<'_>> {
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
        ts: ctx.ts.value(),
        period,
        event,
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
    release: Option<String>,
    event: Option<String>,
    any_period: bool,
    /// Printed address → (printed symbol, id): a hit costs no allocation.
    names: HashMap<u64, Vec<(Box<str>, SymbolId)>>,
    /// The stack being filled: `Some` while inside a profiled sample's block.
    current: Option<WeightedStack>,
    in_skipped_block: bool,
    first_line: Option<(u64, String)>,
}

impl<'o> ScriptProfiler<'o> {
    fn new(path: &str, opts: &'o ProfileOptions) -> Self {
        ScriptProfiler {
            path: path.to_string(),
            opts,
            profile: Profile::new(WeightUnit::Samples),
            quality: DataQuality::default(),
            table: None,
            table_chosen: false,
            release: None,
            event: opts.event.clone(),
            any_period: false,
            names: HashMap::new(),
            current: None,
            in_skipped_block: false,
            first_line: None,
        }
    }

    fn note(&mut self, key: &str, sev: Severity, desc: &str, line_no: u64, line: &str) {
        let path = &self.path;
        self.quality.add(key, sev, desc, 1, || {
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
        let sym = if known {
            Some(f.symbol)
        } else if kernel {
            self.table
                .as_ref()
                .and_then(|k| k.lookup(f.addr))
                .map(|s| s.name)
        } else {
            None
        };
        let name = frame_name(sym, f.addr);
        let id = self.profile.intern(&name, Some(kernel));
        self.names
            .entry(f.addr)
            .or_default()
            .push((f.symbol.into(), id));
        id
    }

    fn end_block(&mut self) {
        if let Some(s) = self.current.take() {
            self.profile.stacks.push(s);
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
            if let Some(r) = comment.trim_start().strip_prefix("os release :") {
                self.release = Some(r.trim().to_string());
            }
            return Ok(());
        }
        if !self.table_chosen {
            self.table_chosen = true;
            self.table = kernel_symbols_for(
                &self.opts.symbols,
                self.release.as_deref(),
                &mut self.quality,
            )?;
        }
        if line.starts_with('\t') || line.starts_with(' ') && parse_header(line).is_none() {
            match (parse_frame(line), self.current.is_some()) {
                (Some(f), true) => {
                    let id = self.frame(&f);
                    if let Some(s) = self.current.as_mut() {
                        s.frames.push(id);
                    }
                }
                (Some(_), false) if self.in_skipped_block => {} // frames of a counted, skipped sample
                _ => self.note(
                    "profile-bad-frame",
                    Severity::Warning,
                    "indented lines that are not a frame of a sample (`ADDR SYMBOL (DSO)`), ignored",
                    line_no,
                    line,
                ),
            }
            return Ok(());
        }
        self.end_block();
        self.in_skipped_block = true;
        let Some(h) = parse_header(line) else {
            self.note(
                "profile-bad-line",
                Severity::Warning,
                "lines that are neither a sample header nor a frame (ignored)",
                line_no,
                line,
            );
            return Ok(());
        };
        if h.event.starts_with("PERF_RECORD_") {
            self.note(
                "profile-side-band",
                Severity::Info,
                "perf side-band records (PERF_RECORD_*), skipped",
                line_no,
                line,
            );
            return Ok(());
        }
        match &self.event {
            None => self.event = Some(h.event.to_string()),
            Some(e) if !super::event_matches(e, h.event) => {
                self.note(
                    "profile-other-event",
                    Severity::Info,
                    "samples of other events than the profiled one (ignored)",
                    line_no,
                    line,
                );
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
        self.current = Some(WeightedStack {
            frames: Vec::new(),
            weight,
            weight_new: None,
            comm: (!h.comm.is_empty() && !unknown_comm).then(|| Comm::new(h.comm)),
            pid: Some(h.pid),
            cpu: h.cpu,
            ts: Some(h.ts),
            span: Span::new(0, SpanPos::Line(line_no)),
        });
        Ok(())
    }

    fn finish(mut self) -> Result<ProfileRead, ReadError> {
        self.end_block();
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
            self.quality.add(
                "profile-no-callchain",
                Severity::Info,
                "samples printed without frames (recorded without -g, or perf script -F without ip): they weigh in the total but have no function",
                empty,
                || format!("{empty} samples"),
            );
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

/// Whether `head` looks like `perf script` sample output: a header line parsed by the
/// context parser directly followed by a TAB-indented frame.
pub fn sniff(head: &[u8]) -> bool {
    let text = String::from_utf8_lossy(head);
    let mut prev_header = false;
    for line in text.lines().take(200) {
        if line.starts_with('\t') && prev_header && parse_frame(line).is_some() {
            return true;
        }
        prev_header = !line.starts_with('\t') && parse_header(line).is_some();
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
    fn headers_frames_and_odd_symbols() {
        let r = parse(
            "t",
            TEXT,
            &ProfileOptions {
                symbols: crate::profile::KernelSymbolSource::Off,
                event: None,
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
                "0x11e9",
                "0x60ee0"
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
            },
        )
        .unwrap_err();
        assert_eq!(e.pos, Some(SpanPos::Line(3)));
        assert!(parse(
            "g",
            "",
            &ProfileOptions {
                symbols: crate::profile::KernelSymbolSource::Off,
                event: None
            }
        )
        .is_err());
    }
}
