//! The `ftrace` system's own events, whose records do not follow their format files:
//!
//! ```text
//! kernel_stack   int size; unsigned long caller[8] (or `caller`, size 0)   size = frames that
//!                follow; the record holds exactly those (fewer or more than 8), ULONG_MAX may
//!                end them early
//! user_stack     unsigned int tgid; unsigned long caller[8]                 0 ends the frames
//! print          unsigned long ip; char buf[]                               trace_marker text,
//!                NUL-terminated, usually ending in "\n"
//! bprint         unsigned long ip; const char *fmt; u32 buf[]               trace_printk: `fmt`
//!                is a kernel address looked up in the trace's printk formats
//!                (`0xffffffff82a3c2e8 : "pid=%d comm=%s\n"`), `buf` holds the arguments packed
//!                by the kernel's vbin_printf (see [`format_bprint`])
//! ```
//!
//! [`FtraceDecoder`] turns them into generic events with the text decoded (`print` and
//! `bprint`: `buf` = the text as `trace-cmd report` shows it, without the trailing newline)
//! and, for the stacks, a callchain in perf's shape (`PERF_CONTEXT_KERNEL` or `_USER`, then
//! the frames leaf first) through [`FtraceDecoder::callchain`].

use std::collections::HashMap;
use std::sync::Arc;

use stallscope_model::{EventKind, FieldValue, GenericEvent};

use super::access::IntAccessor;
use super::endian::Endian;
use super::format_file::EventFormat;

/// perf's marker before kernel frames (`PERF_CONTEXT_KERNEL` as u64).
const CONTEXT_KERNEL: u64 = -128i64 as u64;
/// perf's marker before user frames (`PERF_CONTEXT_USER` as u64).
const CONTEXT_USER: u64 = -512i64 as u64;

/// The trace's printk formats: kernel address of a `trace_printk` format → the format.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PrintkFormats(HashMap<u64, String>);

impl PrintkFormats {
    /// Parses the printk-formats text of a trace.dat or perf tracing data: one
    /// `0xADDR : "FORMAT"` per line, with C escapes (`\n`, `\t`, `\"`, `\\`) in the format.
    /// Lines of another shape are skipped.
    pub fn parse(text: &str) -> PrintkFormats {
        let mut map = HashMap::new();
        for line in text.lines() {
            let Some((addr, fmt)) = line.split_once(" : ") else {
                continue;
            };
            let addr = addr.trim();
            let Ok(addr) = u64::from_str_radix(addr.strip_prefix("0x").unwrap_or(addr), 16) else {
                continue;
            };
            let fmt = fmt.trim();
            let Some(body) = fmt.strip_prefix('"').and_then(|f| f.strip_suffix('"')) else {
                continue;
            };
            map.insert(addr, unescape(body));
        }
        PrintkFormats(map)
    }

    /// The format at `addr`.
    pub fn get(&self, addr: u64) -> Option<&str> {
        self.0.get(&addr).map(String::as_str)
    }

    /// Number of formats.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// `\n`, `\t`, `\"`, `\\` → their characters; other escapes stay as written.
fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('"') => out.push('"'),
            Some('\\') => out.push('\\'),
            Some(o) => {
                out.push('\\');
                out.push(o);
            }
            None => out.push('\\'),
        }
    }
    out
}

/// A decoder for one of the `ftrace` events above.
#[derive(Clone, Debug)]
pub enum FtraceDecoder {
    /// `kernel_stack` / `user_stack`.
    Stack {
        /// `user_stack`.
        user: bool,
        /// The frame count (`kernel_stack`).
        size: Option<IntAccessor>,
        /// Where the frames start.
        caller: usize,
        /// Bytes per frame (the kernel's `long`).
        word: usize,
        /// Byte order.
        endian: Endian,
    },
    /// `print` (trace_marker).
    Print {
        /// The caller.
        ip: IntAccessor,
        /// Where the text starts.
        buf: usize,
    },
    /// `bprint` (trace_printk).
    Bprint {
        /// The caller.
        ip: IntAccessor,
        /// The format's address.
        fmt: IntAccessor,
        /// Where the arguments start.
        buf: usize,
        /// Bytes of the kernel's `long` (and pointers).
        word: usize,
        /// Byte order.
        endian: Endian,
        /// The trace's formats ([`FtraceDecoder::set_context`]).
        formats: Arc<PrintkFormats>,
    },
}

impl FtraceDecoder {
    /// The decoder for `format` when it is one of the events above.
    pub fn new(format: &EventFormat, endian: Endian) -> Option<FtraceDecoder> {
        if format.system != "ftrace" {
            return None;
        }
        let field = |n: &str| format.fields.iter().find(|f| f.name == n);
        let int = |n: &str| field(n).and_then(|f| IntAccessor::new(f, endian));
        // the kernel's long: the size of a scalar `unsigned long` field, else 8
        let word = |n: &str| match field(n) {
            Some(f) if f.size == 4 || f.size == 8 => f.size as usize,
            _ => 8,
        };
        Some(match format.name.as_str() {
            "kernel_stack" | "user_stack" => {
                let caller = field("caller")?;
                let per = match caller.kind {
                    super::FieldKind::FixedArray { len, .. } if len > 0 && caller.size > 0 => {
                        (caller.size / len) as usize
                    }
                    _ => 8,
                };
                FtraceDecoder::Stack {
                    user: format.name == "user_stack",
                    size: int("size"),
                    caller: caller.offset as usize,
                    word: if per == 4 { 4 } else { 8 },
                    endian,
                }
            }
            "print" => FtraceDecoder::Print {
                ip: int("ip")?,
                buf: field("buf")?.offset as usize,
            },
            "bprint" => FtraceDecoder::Bprint {
                ip: int("ip")?,
                fmt: int("fmt")?,
                buf: field("buf")?.offset as usize,
                word: word("ip"),
                endian,
                formats: Arc::default(),
            },
            _ => return None,
        })
    }

    /// Sets what the trace says about its kernel: the size of `long` (4 on 32-bit kernels,
    /// whose stack frames are 4 bytes) and the printk formats.
    pub fn set_context(&mut self, long_size: u8, printk: &Arc<PrintkFormats>) {
        match self {
            FtraceDecoder::Stack { word, .. } => {
                if long_size == 4 || long_size == 8 {
                    *word = usize::from(long_size);
                }
            }
            FtraceDecoder::Bprint { formats, word, .. } => {
                *formats = printk.clone();
                if long_size == 4 || long_size == 8 {
                    *word = usize::from(long_size);
                }
            }
            FtraceDecoder::Print { .. } => {}
        }
    }

    /// The stack's frames in perf's callchain shape (marker first), for the stack events;
    /// `None` for the others or a record without frames.
    pub fn callchain(&self, rec: &[u8]) -> Option<Box<[u64]>> {
        let FtraceDecoder::Stack {
            user,
            size,
            caller,
            word,
            endian,
        } = self
        else {
            return None;
        };
        let avail = rec.len().saturating_sub(*caller) / word;
        let n = match size.and_then(|s| s.get_i64(rec)) {
            Some(n) => usize::try_from(n).unwrap_or(0).min(avail),
            None => avail,
        };
        let end_mark = if *word == 4 {
            u64::from(u32::MAX)
        } else {
            u64::MAX
        };
        let mut chain = Vec::with_capacity(n + 1);
        chain.push(if *user { CONTEXT_USER } else { CONTEXT_KERNEL });
        for i in 0..n {
            let at = caller + i * word;
            let v = endian.uint(rec, at, *word as u8)?;
            if v == end_mark || (*user && v == 0) {
                break;
            }
            chain.push(v);
        }
        (chain.len() > 1).then(|| chain.into_boxed_slice())
    }

    /// The event of one record: a generic event with `size` (stacks), or `ip` and the
    /// decoded `buf` text (`print`, `bprint`, with `fmt`'s address). `None` when the record
    /// is too short for its fixed fields.
    pub fn decode(&self, name: &str, rec: &[u8]) -> Option<EventKind> {
        let fields = match self {
            FtraceDecoder::Stack { size, .. } => {
                if let Some(s) = size {
                    s.get_i64(rec)?; // the count must be there
                }
                let frames = self.callchain(rec).map_or(0, |c| c.len() - 1);
                vec![("frames".to_string(), FieldValue::UInt(frames as u64))]
            }
            FtraceDecoder::Print { ip, buf } => {
                let ip = ip.get_u64(rec)?;
                let text = rec.get(*buf..).unwrap_or(&[]);
                vec![
                    ("ip".to_string(), FieldValue::UInt(ip)),
                    ("buf".to_string(), FieldValue::Str(marker_text(text))),
                ]
            }
            FtraceDecoder::Bprint {
                ip,
                fmt,
                buf,
                word,
                endian,
                formats,
            } => {
                let ip = ip.get_u64(rec)?;
                let addr = fmt.get_u64(rec)?;
                let args = rec.get(*buf..).unwrap_or(&[]);
                let text = match formats.get(addr) {
                    Some(f) => format_bprint(f, args, *word, *endian)
                        .unwrap_or_else(|| format!("{} [arguments cut short]", f.trim_end())),
                    None => format!("[format {addr:#x} not in the trace's printk formats]"),
                };
                vec![
                    ("ip".to_string(), FieldValue::UInt(ip)),
                    ("fmt".to_string(), FieldValue::UInt(addr)),
                    ("buf".to_string(), FieldValue::Str(text)),
                ]
            }
        };
        Some(EventKind::Generic(Box::new(GenericEvent {
            system: Some("ftrace".to_string()),
            name: name.to_string(),
            fields,
        })))
    }
}

/// trace_marker text: up to the first NUL, one trailing newline dropped, invalid UTF-8
/// replaced.
fn marker_text(b: &[u8]) -> String {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    let t = String::from_utf8_lossy(&b[..end]);
    t.strip_suffix('\n').unwrap_or(&t).to_string()
}

/// One conversion of a printk format.
struct Spec {
    left: bool,
    zero: bool,
    plus: bool,
    space: bool,
    alt: bool,
    width: Option<usize>,
    precision: Option<usize>,
}

/// Formats `fmt` with the arguments the kernel's `vbin_printf` packed into `args`: each
/// argument aligned to its size within the buffer (8-byte ones to 4), `%s` strings copied
/// inline with their NUL, `%p` with a dereferencing extension (`%pM`, `%pI4`, …) already
/// printed as text by the kernel, `%*` widths as `int`s. `long`, `size_t` and pointers are
/// `word` bytes. Conversions are printed like C's printf; `%p` as `0x` + hex (as
/// `trace-cmd report` does), `%ps`/`%pS` likewise (no kernel symbols here). `None` when the
/// arguments run out.
pub fn format_bprint(fmt: &str, args: &[u8], word: usize, endian: Endian) -> Option<String> {
    let mut out = String::with_capacity(fmt.len() + 16);
    let mut pos = 0usize;
    let take = |pos: &mut usize, size: usize| -> Option<u64> {
        let align = if size == 8 { 4 } else { size };
        *pos = pos.div_ceil(align) * align;
        let v = endian.uint(args, *pos, size as u8)?;
        *pos += size;
        Some(v)
    };
    let b = fmt.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'%' {
            let next = fmt[i..].find('%').map_or(b.len(), |n| i + n);
            out.push_str(&fmt[i..next]);
            i = next;
            continue;
        }
        i += 1;
        if b.get(i) == Some(&b'%') {
            out.push('%');
            i += 1;
            continue;
        }
        let mut spec = Spec {
            left: false,
            zero: false,
            plus: false,
            space: false,
            alt: false,
            width: None,
            precision: None,
        };
        while let Some(&c) = b.get(i) {
            match c {
                b'-' => spec.left = true,
                b'0' => spec.zero = true,
                b'+' => spec.plus = true,
                b' ' => spec.space = true,
                b'#' => spec.alt = true,
                _ => break,
            }
            i += 1;
        }
        if b.get(i) == Some(&b'*') {
            let w = take(&mut pos, 4)? as u32 as i32;
            if w < 0 {
                spec.left = true;
            }
            spec.width = Some(w.unsigned_abs() as usize);
            i += 1;
        } else {
            let s = i;
            while b.get(i).is_some_and(u8::is_ascii_digit) {
                i += 1;
            }
            if i > s {
                spec.width = fmt[s..i].parse().ok();
            }
        }
        if b.get(i) == Some(&b'.') {
            i += 1;
            if b.get(i) == Some(&b'*') {
                let p = take(&mut pos, 4)? as u32 as i32;
                spec.precision = usize::try_from(p).ok();
                i += 1;
            } else {
                let s = i;
                while b.get(i).is_some_and(u8::is_ascii_digit) {
                    i += 1;
                }
                spec.precision = Some(fmt[s..i].parse().unwrap_or(0));
            }
        }
        // length modifier → argument size
        let mut size = 4;
        match b.get(i) {
            Some(b'h') => {
                i += 1;
                size = 2;
                if b.get(i) == Some(&b'h') {
                    i += 1;
                    size = 1;
                }
            }
            Some(b'l') => {
                i += 1;
                size = word;
                if b.get(i) == Some(&b'l') {
                    i += 1;
                    size = 8;
                }
            }
            Some(b'L' | b'q' | b'j') => {
                i += 1;
                size = 8;
            }
            Some(b'z' | b'Z' | b't') => {
                i += 1;
                size = word;
            }
            _ => {}
        }
        let Some(&conv) = b.get(i) else {
            out.push('%');
            break;
        };
        i += 1;
        let body = match conv {
            b'd' | b'i' => {
                let raw = take(&mut pos, size)?;
                let v = sign_extend(raw, size);
                let digits = with_precision(v.unsigned_abs().to_string(), spec.precision);
                let sign = if v < 0 {
                    "-"
                } else if spec.plus {
                    "+"
                } else if spec.space {
                    " "
                } else {
                    ""
                };
                pad_number(sign, "", &digits, &spec)
            }
            b'u' | b'x' | b'X' | b'o' => {
                let v = take(&mut pos, size)?;
                let (digits, prefix) = match conv {
                    b'u' => (v.to_string(), ""),
                    b'x' => (format!("{v:x}"), if spec.alt && v != 0 { "0x" } else { "" }),
                    b'X' => (format!("{v:X}"), if spec.alt && v != 0 { "0X" } else { "" }),
                    _ => (format!("{v:o}"), if spec.alt && v != 0 { "0" } else { "" }),
                };
                pad_number("", prefix, &with_precision(digits, spec.precision), &spec)
            }
            b'c' => {
                let v = take(&mut pos, 1)?;
                pad_text(&char::from(v as u8).to_string(), &spec)
            }
            b's' => {
                let rest = args.get(pos..)?;
                let end = rest.iter().position(|&c| c == 0)?;
                let s = String::from_utf8_lossy(&rest[..end]).into_owned();
                pos += end + 1;
                let s = match spec.precision {
                    Some(p) => s.chars().take(p).collect(),
                    None => s,
                };
                pad_text(&s, &spec)
            }
            b'p' => {
                let ext = b.get(i).copied().filter(u8::is_ascii_alphanumeric);
                while b.get(i).is_some_and(u8::is_ascii_alphanumeric) {
                    i += 1;
                }
                match ext {
                    Some(b'S' | b's' | b'F' | b'f' | b'x' | b'K' | b'e' | b'B') | None => {
                        let v = take(&mut pos, word)?;
                        pad_text(&format!("{v:#x}"), &spec)
                    }
                    Some(_) => {
                        // the kernel printed it already: text with its NUL, 4-byte aligned
                        pos = pos.div_ceil(4) * 4;
                        let rest = args.get(pos..)?;
                        let end = rest.iter().position(|&c| c == 0)?;
                        let s = String::from_utf8_lossy(&rest[..end]).into_owned();
                        pos += end + 1;
                        s
                    }
                }
            }
            b'n' => String::new(),
            other => {
                // unknown conversion: printed as written
                let mut s = String::from("%");
                s.push(char::from(other));
                s
            }
        };
        out.push_str(&body);
    }
    let trimmed = out.strip_suffix('\n').map(str::to_string);
    Some(trimmed.unwrap_or(out))
}

fn sign_extend(raw: u64, size: usize) -> i64 {
    match size {
        1 => raw as u8 as i8 as i64,
        2 => raw as u16 as i16 as i64,
        4 => raw as u32 as i32 as i64,
        _ => raw as i64,
    }
}

fn with_precision(digits: String, precision: Option<usize>) -> String {
    match precision {
        Some(p) if digits.len() < p => format!("{}{digits}", "0".repeat(p - digits.len())),
        Some(0) if digits == "0" => String::new(),
        _ => digits,
    }
}

fn pad_number(sign: &str, prefix: &str, digits: &str, spec: &Spec) -> String {
    let len = sign.len() + prefix.len() + digits.len();
    let width = spec.width.unwrap_or(0);
    if len >= width {
        return format!("{sign}{prefix}{digits}");
    }
    let fill = width - len;
    if spec.left {
        format!("{sign}{prefix}{digits}{}", " ".repeat(fill))
    } else if spec.zero && spec.precision.is_none() {
        format!("{sign}{prefix}{}{digits}", "0".repeat(fill))
    } else {
        format!("{}{sign}{prefix}{digits}", " ".repeat(fill))
    }
}

fn pad_text(s: &str, spec: &Spec) -> String {
    let width = spec.width.unwrap_or(0);
    let len = s.chars().count();
    if len >= width {
        return s.to_string();
    }
    if spec.left {
        format!("{s}{}", " ".repeat(width - len))
    } else {
        format!("{}{s}", " ".repeat(width - len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Packs like vbin_printf: ints aligned to their size, 8-byte values to 4.
    struct Packer(Vec<u8>);
    impl Packer {
        fn align(&mut self, a: usize) {
            while !self.0.len().is_multiple_of(a) {
                self.0.push(0);
            }
        }
        fn u32(mut self, v: u32) -> Self {
            self.align(4);
            self.0.extend_from_slice(&v.to_le_bytes());
            self
        }
        fn u64(mut self, v: u64) -> Self {
            self.align(4);
            self.0.extend_from_slice(&v.to_le_bytes());
            self
        }
        fn str(mut self, s: &str) -> Self {
            self.0.extend_from_slice(s.as_bytes());
            self.0.push(0);
            self
        }
        fn u8(mut self, v: u8) -> Self {
            self.0.push(v);
            self
        }
    }

    #[test]
    fn vbin_arguments_are_read_with_the_kernels_alignment() {
        // the rt-app util_est format (lisa example): %d %s %d %p %lu
        let fmt = "evt=util_est_rq step=pre pid=%d comm=%s cpu=%d rq=%p event=update t_avg=%lu\n";
        let args = Packer(Vec::new())
            .u32(6972)
            .str("sudo")
            .u32(1)
            .u64(0xffff_ffc9_7fed_2f68)
            .u64(966)
            .0;
        assert_eq!(
            format_bprint(fmt, &args, 8, Endian::Little).unwrap(),
            "evt=util_est_rq step=pre pid=6972 comm=sudo cpu=1 rq=0xffffffc97fed2f68 event=update t_avg=966"
        );
        // widths, signs, hex, chars, a %* width, 32-bit longs
        let args = Packer(Vec::new())
            .u32(-5i32 as u32)
            .u32(255)
            .u32(6)
            .u32(42)
            .u8(b'Z')
            .u32(7)
            .0;
        assert_eq!(
            format_bprint("[%4d|%#x|%*d|%c|%-3lu|%%]", &args, 4, Endian::Little).unwrap(),
            "[  -5|0xff|    42|Z|7  |%]"
        );
        // running out of arguments is not a panic
        assert_eq!(
            format_bprint("%d %d", &[1, 0, 0, 0], 8, Endian::Little),
            None
        );
        assert_eq!(format_bprint("%s", b"no nul", 8, Endian::Little), None);
    }

    #[test]
    fn printk_formats_text() {
        let f = PrintkFormats::parse(
            "0xffffffc0008f3fc0 : \"pid=%d \\\"q\\\"\\n\"\nbad line\nffff0001 : \"x\\ty\"\n",
        );
        assert_eq!(f.len(), 2);
        assert_eq!(f.get(0xffffffc0008f3fc0), Some("pid=%d \"q\"\n"));
        assert_eq!(f.get(0xffff0001), Some("x\ty"));
    }

    #[test]
    fn marker_text_drops_the_newline_and_the_nul_padding() {
        assert_eq!(
            marker_text(b"TRACE_MARKER_START\n\0\0\0"),
            "TRACE_MARKER_START"
        );
        assert_eq!(marker_text(b"a\nb"), "a\nb");
    }
}
