//! Parser for one tracefs event `format` file (`events/<system>/<event>/format`).
//!
//! ```text
//! name: sched_migrate_task
//! ID: 371
//! format:
//!     field:unsigned short common_type;    offset:0;    size:2;    signed:0;
//!     field:int common_pid;    offset:4;    size:4;    signed:1;
//!
//!     field:__data_loc char[] comm;    offset:8;    size:4;    signed:0;
//!     field:pid_t pid;    offset:12;    size:4;    signed:1;
//!
//! print fmt: "comm=%s pid=%d", __get_str(comm), REC->pid
//! ```
//!
//! The first block of fields (up to the first empty line) are the common fields; they are
//! taken from the file, never assumed (old and PREEMPT_RT kernels have extra ones). Every
//! offset comes from `offset:`. A missing `signed:` (very old kernels) defaults from the type.
//! Declarations understood: scalars (`int`, `pid_t`, `unsigned long`, `void *`, `enum x`, …),
//! fixed arrays `T name[N]` (`char name[N]` is a NUL-padded string), `__data_loc T[] name` and
//! `__rel_loc T[] name` (4- or 2-byte locators), and `T name[]` (rest of the record).

use std::fmt;

/// How a dynamic field's locator word is laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LocKind {
    /// `__data_loc`, 4 bytes: low 16 bits offset from the record start, high 16 bits length.
    DataLoc4,
    /// `__data_loc`, 2 bytes (old kernels): offset only, the data is NUL-terminated.
    DataLoc2,
    /// `__rel_loc`, 4 bytes: like `DataLoc4`, offset counted from the end of the field.
    RelLoc4,
    /// `__rel_loc`, 2 bytes.
    RelLoc2,
}

/// The shape of a field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldKind {
    /// A scalar (integer, enum, bool, pointer); `size` bytes.
    Scalar,
    /// `T name[len]`, `size` = len × element size. `is_char`: a NUL-padded string.
    FixedArray {
        /// Number of elements.
        len: u32,
        /// Element type is plain `char`.
        is_char: bool,
    },
    /// `__data_loc` / `__rel_loc` dynamic array or string.
    Dynamic {
        /// Locator layout.
        loc: LocKind,
        /// Element type is plain `char` (a string).
        is_char: bool,
    },
    /// `T name[]` with no locator: the data runs to the end of the record.
    RestOfRecord {
        /// Element type is plain `char`.
        is_char: bool,
    },
}

/// One `field:` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    /// Field name (`prev_comm`).
    pub name: String,
    /// Element type as declared (`char`, `pid_t`, `unsigned long`), without the name,
    /// array brackets or locator keyword.
    pub type_name: String,
    /// Byte offset from the start of the record (`common_type`).
    pub offset: u32,
    /// Size in bytes as declared (4 for a `__data_loc` locator, 0 for `name[]`).
    pub size: u32,
    /// Signedness (from `signed:`, or from the type when the line has none).
    pub signed: bool,
    /// Shape.
    pub kind: FieldKind,
}

/// One parsed event format.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EventFormat {
    /// Subsystem (`sched`, `ftrace`, …): not in the file itself, given by the container.
    pub system: String,
    /// Event name (`sched_switch`).
    pub name: String,
    /// Event id (`common_type` value, perf `attr.config`).
    pub id: u32,
    /// Common fields (first block).
    pub common_fields: Vec<Field>,
    /// The event's own fields.
    pub fields: Vec<Field>,
    /// Text after `print fmt: ` (format literal plus argument expressions).
    pub print_fmt: String,
}

/// Why a format file could not be parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FormatError {
    /// 1-based line in the format text.
    pub line: usize,
    /// What was wrong.
    pub message: String,
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "format line {}: {}", self.line, self.message)
    }
}

impl EventFormat {
    /// Parses a format file's text. `system` is recorded as given.
    pub fn parse(system: &str, text: &str) -> Result<EventFormat, FormatError> {
        Self::parse_with(system, text, &mut Vec::new())
    }

    /// [`EventFormat::parse`] collecting the fields in `scratch` (left empty; reusing it
    /// across formats saves the growth of two vectors per format).
    pub(crate) fn parse_with(
        system: &str,
        text: &str,
        scratch: &mut Vec<Field>,
    ) -> Result<EventFormat, FormatError> {
        scratch.clear();
        let mut name = None;
        let mut id = None;
        let mut print_fmt = String::new();
        let mut n_common = 0;
        let mut in_format = false;
        let mut common_block_done = false;
        for (i, raw_line) in lines(text).enumerate() {
            let line_no = i + 1;
            let line = trim(raw_line);
            let err = |message: String| FormatError {
                line: line_no,
                message,
            };
            match line.as_bytes().first() {
                None => {
                    if in_format && !scratch.is_empty() {
                        common_block_done = true;
                    }
                }
                Some(b'n') if line.starts_with("name:") => {
                    name = Some(trim(&line[5..]).to_string());
                }
                Some(b'I') if line.starts_with("ID:") => {
                    let rest = trim(&line[3..]);
                    let v = rest
                        .parse::<u32>()
                        .map_err(|_| err(format!("bad ID {rest:?}")))?;
                    id = Some(v);
                }
                Some(b'f') if line == "format:" => in_format = true,
                Some(b'p') if line.starts_with("print fmt:") => {
                    print_fmt = trim(&line[10..]).to_string();
                    in_format = false;
                }
                Some(b'f') if in_format && line.starts_with("field") => {
                    let f = parse_field_line(line).map_err(err)?;
                    scratch.push(f);
                    if !common_block_done {
                        n_common += 1;
                    }
                }
                // Any other line (comments in header_event-like files) carries nothing we use.
                Some(_) => {}
            }
        }
        let name = name.ok_or(FormatError {
            line: 1,
            message: "no `name:` line".into(),
        })?;
        let id = id.ok_or(FormatError {
            line: 2,
            message: "no `ID:` line".into(),
        })?;
        let (common_fields, fields) = if common_block_done {
            // Drained into exactly sized vectors; `scratch` keeps its capacity.
            let fields: Vec<Field> = scratch.drain(n_common..).collect();
            (scratch.drain(..n_common).collect(), fields)
        } else {
            // No blank line separated the blocks: split by the `common_` prefix instead.
            scratch
                .drain(..)
                .partition(|f| f.name.starts_with("common_"))
        };
        Ok(EventFormat {
            system: system.to_string(),
            name,
            id,
            common_fields,
            fields,
            print_fmt,
        })
    }

    /// The field called `name` (event fields first, then common ones).
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields
            .iter()
            .chain(self.common_fields.iter())
            .find(|f| f.name == name)
    }

    /// `system:name`.
    pub fn full_name(&self) -> String {
        format!("{}:{}", self.system, self.name)
    }
}

/// The lines of `text` as [`str::lines`] yields them, minus their `\r` (every line is
/// trimmed afterwards): split at `\n`, without the empty piece after a final `\n`.
fn lines(text: &str) -> impl Iterator<Item = &str> {
    // An empty text has no lines (not one empty line).
    let body = (!text.is_empty()).then(|| text.strip_suffix('\n').unwrap_or(text));
    body.into_iter().flat_map(|b| split_at_byte(b, b'\n'))
}

/// The pieces of `s` between the bytes `sep` (an ASCII character), as `s.split(sep)`.
fn split_at_byte(s: &str, sep: u8) -> impl Iterator<Item = &str> {
    let mut rest = Some(s);
    std::iter::from_fn(move || {
        let r = rest?;
        match memchr::memchr(sep, r.as_bytes()) {
            Some(i) => {
                // INVARIANT: `sep` is ASCII, so both sides of it are char boundaries.
                rest = Some(&r[i + 1..]);
                Some(&r[..i])
            }
            None => {
                rest = None;
                Some(r)
            }
        }
    })
}

/// C whitespace as [`char::is_whitespace`] sees it in ASCII (with `\x0b`, unlike
/// [`u8::is_ascii_whitespace`]).
fn is_ascii_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// [`str::trim`], fast for ASCII ends: the Unicode trim runs only when a non-ASCII
/// character is left at either end.
fn trim(s: &str) -> &str {
    let b = s.as_bytes();
    let mut start = 0;
    let mut end = b.len();
    while start < end && is_ascii_space(b[start]) {
        start += 1;
    }
    while end > start && is_ascii_space(b[end - 1]) {
        end -= 1;
    }
    // INVARIANT: only ASCII bytes were skipped, so both ends are char boundaries.
    let t = &s[start..end];
    match (t.as_bytes().first(), t.as_bytes().last()) {
        (Some(&f), Some(&l)) if f >= 0x80 || l >= 0x80 => t.trim(),
        _ => t,
    }
}

/// The value `v` of a field line's `offset:` / `size:` part (`what` names it in the error).
#[inline]
fn number(v: &str, what: &str) -> Result<u32, String> {
    trim(v)
        .parse::<u32>()
        .map_err(|_| format!("bad {what} {v:?}"))
}

/// Parses `field:DECL;\toffset:N;\tsize:N;\tsigned:N;` (`field special:` accepted too).
pub fn parse_field_line(line: &str) -> Result<Field, String> {
    let mut decl = None;
    let mut offset = None;
    let mut size = None;
    let mut signed = None;
    for part in split_at_byte(line, b';') {
        let part = trim(part);
        match part.as_bytes().first() {
            Some(b'f') => {
                if let Some(d) = part
                    .strip_prefix("field special:")
                    .or_else(|| part.strip_prefix("field:"))
                {
                    decl = Some(trim(d));
                }
            }
            Some(b'o') => {
                if let Some(v) = part.strip_prefix("offset:") {
                    offset = Some(number(v, "offset")?);
                }
            }
            Some(b's') => {
                if let Some(v) = part.strip_prefix("size:") {
                    size = Some(number(v, "size")?);
                } else if let Some(v) = part.strip_prefix("signed:") {
                    signed = Some(trim(v) == "1");
                }
            }
            _ => {}
        }
    }
    let decl = decl.ok_or_else(|| format!("no declaration in {line:?}"))?;
    let offset = offset.ok_or_else(|| format!("no offset in {line:?}"))?;
    let size = size.ok_or_else(|| format!("no size in {line:?}"))?;
    let (name, type_name, kind) = parse_decl(decl, size)?;
    let signed = signed.unwrap_or_else(|| default_signed(type_name));
    Ok(Field {
        name: name.to_string(),
        type_name: type_name.to_string(),
        offset,
        size,
        signed,
        kind,
    })
}

/// Splits a C declaration into (name, element type, kind).
fn parse_decl(decl: &str, size: u32) -> Result<(&str, &str, FieldKind), String> {
    let (loc_word, rest) = if let Some(r) = decl.strip_prefix("__data_loc ") {
        (Some(false), trim(r))
    } else if let Some(r) = decl.strip_prefix("__rel_loc ") {
        (Some(true), trim(r))
    } else {
        (None, decl)
    };
    if let Some(rel) = loc_word {
        // `char[] comm` (type, `[]`, name); tolerate the brackets after the name too.
        let r = rest.strip_suffix("[]").unwrap_or(rest).trim_end();
        let name = trailing_ident(r).ok_or_else(|| format!("no field name in {decl:?}"))?;
        let type_name = trim(trim(&r[..r.len() - name.len()]).trim_end_matches("[]"));
        let loc = match (rel, size) {
            (false, 2) => LocKind::DataLoc2,
            (true, 2) => LocKind::RelLoc2,
            (false, _) => LocKind::DataLoc4,
            (true, _) => LocKind::RelLoc4,
        };
        let is_char = is_char_type(type_name);
        return Ok((name, type_name, FieldKind::Dynamic { loc, is_char }));
    }
    if let Some(stripped) = rest.strip_suffix(']') {
        let open = stripped
            .rfind('[')
            .ok_or_else(|| format!("unbalanced `]` in {decl:?}"))?;
        let len_text = trim(&stripped[open + 1..]);
        let before = stripped[..open].trim_end();
        let name = trailing_ident(before).ok_or_else(|| format!("no field name in {decl:?}"))?;
        let type_name = trim(&before[..before.len() - name.len()]);
        let is_char = is_char_type(type_name);
        if len_text.is_empty() {
            return Ok((name, type_name, FieldKind::RestOfRecord { is_char }));
        }
        let len = match len_text.parse::<u32>() {
            Ok(n) => n,
            // A symbolic length (`[TASK_COMM_LEN]`): derive it from the size.
            Err(_) => size / elem_size_guess(type_name).max(1),
        };
        return Ok((name, type_name, FieldKind::FixedArray { len, is_char }));
    }
    let name = trailing_ident(rest).ok_or_else(|| format!("no field name in {decl:?}"))?;
    let type_name = trim(&rest[..rest.len() - name.len()]);
    Ok((name, type_name, FieldKind::Scalar))
}

/// The identifier at the end of `s` (`prev_comm` of `char prev_comm`): ASCII letters,
/// digits and `_` (a non-ASCII character's bytes are all ≥ 0x80, so they end it too).
fn trailing_ident(s: &str) -> Option<&str> {
    let b = s.as_bytes();
    let mut start = b.len();
    while start > 0 && (b[start - 1].is_ascii_alphanumeric() || b[start - 1] == b'_') {
        start -= 1;
    }
    // INVARIANT: only ASCII bytes were skipped, so `start` is a char boundary.
    (start < b.len()).then(|| &s[start..])
}

pub(super) fn is_char_type(t: &str) -> bool {
    let t = t.strip_prefix("const ").unwrap_or(t).trim();
    t == "char"
}

pub(super) fn elem_size_guess(t: &str) -> u32 {
    let t = t.strip_prefix("const ").unwrap_or(t).trim();
    match t {
        "char" | "unsigned char" | "signed char" | "u8" | "s8" | "bool" => 1,
        "short" | "unsigned short" | "u16" | "s16" => 2,
        "int" | "unsigned int" | "u32" | "s32" | "pid_t" => 4,
        _ => 8,
    }
}

pub(super) fn default_signed(t: &str) -> bool {
    let t = t.strip_prefix("const ").unwrap_or(t).trim();
    !(t.starts_with("unsigned")
        || t.starts_with('u')
        || t.ends_with('*')
        || t == "bool"
        || t.starts_with("size_t")
        || t.starts_with("gfp_t")
        || t.starts_with("dev_t")
        || t.starts_with("sector_t"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLES: &str = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/samples/formats"
    );

    fn sample(name: &str) -> String {
        std::fs::read_to_string(format!("{SAMPLES}/{name}")).expect("sample format file")
    }

    #[test]
    fn parses_sched_switch_from_the_real_file() {
        let f = EventFormat::parse("sched", &sample("sched_sched_switch.format")).unwrap();
        assert_eq!((f.name.as_str(), f.id), ("sched_switch", 372));
        let common: Vec<&str> = f.common_fields.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            common,
            [
                "common_type",
                "common_flags",
                "common_preempt_count",
                "common_pid"
            ]
        );
        let c = f.field("prev_comm").unwrap();
        assert_eq!(
            (c.offset, c.size, c.kind),
            (
                8,
                16,
                FieldKind::FixedArray {
                    len: 16,
                    is_char: true
                }
            )
        );
        let s = f.field("prev_state").unwrap();
        assert_eq!(
            (s.offset, s.size, s.signed, s.type_name.as_str()),
            (32, 8, true, "long")
        );
        assert!(f.print_fmt.starts_with("\"prev_comm=%s"));
        assert_eq!(f.fields.len(), 7);
    }

    #[test]
    fn data_loc_comm_of_6_18_sched_migrate_task() {
        let f = EventFormat::parse("sched", &sample("sched_sched_migrate_task.format")).unwrap();
        let c = f.field("comm").unwrap();
        assert_eq!(
            c.kind,
            FieldKind::Dynamic {
                loc: LocKind::DataLoc4,
                is_char: true
            }
        );
        assert_eq!((c.offset, c.size, c.type_name.as_str()), (8, 4, "char"));
    }

    #[test]
    fn rest_of_record_and_pointer_and_long_arrays() {
        let p = EventFormat::parse("ftrace", &sample("ftrace_print.format")).unwrap();
        let buf = p.field("buf").unwrap();
        assert_eq!(
            (buf.size, buf.kind),
            (0, FieldKind::RestOfRecord { is_char: true })
        );
        let k = EventFormat::parse("ftrace", &sample("ftrace_kernel_stack.format")).unwrap();
        let caller = k.field("caller").unwrap();
        assert_eq!(
            caller.kind,
            FieldKind::FixedArray {
                len: 8,
                is_char: false
            }
        );
        assert_eq!(k.common_fields.len(), 4);
    }

    #[test]
    fn declarations_without_signed_and_rel_loc() {
        let f = parse_field_line("field:const char * fmt;\toffset:16;\tsize:8;").unwrap();
        assert_eq!(
            (f.name.as_str(), f.type_name.as_str(), f.signed),
            ("fmt", "const char *", false)
        );
        let f =
            parse_field_line("field:__rel_loc char[] msg;\toffset:8;\tsize:4;\tsigned:0;").unwrap();
        assert_eq!(
            f.kind,
            FieldKind::Dynamic {
                loc: LocKind::RelLoc4,
                is_char: true
            }
        );
        assert_eq!(f.name, "msg");
        let f = parse_field_line("field:__data_loc char[] name;\toffset:8;\tsize:2;\tsigned:0;")
            .unwrap();
        assert_eq!(
            f.kind,
            FieldKind::Dynamic {
                loc: LocKind::DataLoc2,
                is_char: true
            }
        );
        let f = parse_field_line("field:int x;\toffset:8;\tsize:4;").unwrap();
        assert!(f.signed);
        assert!(parse_field_line("field:int x;\toffset:zz;\tsize:4;").is_err());
    }

    #[test]
    fn broken_files_are_errors_not_panics() {
        assert!(EventFormat::parse("x", "").is_err());
        assert!(EventFormat::parse("x", "name: a\nID: b\n").is_err());
        assert!(
            EventFormat::parse("x", "name: a\nID: 1\nformat:\n\tfield:;offset:1;size:1;\n")
                .is_err()
        );
        assert!(EventFormat::parse(
            "x",
            "name: a\nID: 1\nformat:\n\tfield:x];offset:1;size:1;\n"
        )
        .is_err());
    }
}
