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
        let mut name = None;
        let mut id = None;
        let mut print_fmt = String::new();
        let mut common_fields = Vec::new();
        let mut fields = Vec::new();
        let mut in_format = false;
        let mut common_block_done = false;
        let mut seen_field = false;
        for (i, raw_line) in text.lines().enumerate() {
            let line_no = i + 1;
            let line = raw_line.trim();
            let err = |message: String| FormatError {
                line: line_no,
                message,
            };
            if let Some(rest) = line.strip_prefix("name:") {
                name = Some(rest.trim().to_string());
            } else if let Some(rest) = line.strip_prefix("ID:") {
                let v = rest
                    .trim()
                    .parse::<u32>()
                    .map_err(|_| err(format!("bad ID {:?}", rest.trim())))?;
                id = Some(v);
            } else if line == "format:" {
                in_format = true;
            } else if let Some(rest) = line.strip_prefix("print fmt:") {
                print_fmt = rest.trim().to_string();
                in_format = false;
            } else if line.is_empty() {
                if in_format && seen_field {
                    common_block_done = true;
                }
            } else if line.starts_with("field") && in_format {
                let f = parse_field_line(line).map_err(err)?;
                seen_field = true;
                if common_block_done {
                    fields.push(f);
                } else {
                    common_fields.push(f);
                }
            }
            // Any other line (comments in header_event-like files) carries nothing we use.
        }
        let name = name.ok_or(FormatError {
            line: 1,
            message: "no `name:` line".into(),
        })?;
        let id = id.ok_or(FormatError {
            line: 2,
            message: "no `ID:` line".into(),
        })?;
        if !common_block_done {
            // No blank line separated the blocks: split by the `common_` prefix instead.
            let (c, e): (Vec<Field>, Vec<Field>) = common_fields
                .into_iter()
                .partition(|f| f.name.starts_with("common_"));
            common_fields = c;
            fields = e;
        }
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

/// Parses `field:DECL;\toffset:N;\tsize:N;\tsigned:N;` (`field special:` accepted too).
pub fn parse_field_line(line: &str) -> Result<Field, String> {
    let mut decl = None;
    let mut offset = None;
    let mut size = None;
    let mut signed = None;
    for part in line.split(';') {
        let part = part.trim();
        if let Some(d) = part
            .strip_prefix("field special:")
            .or_else(|| part.strip_prefix("field:"))
        {
            decl = Some(d.trim());
        } else if let Some(v) = part.strip_prefix("offset:") {
            offset = Some(
                v.trim()
                    .parse::<u32>()
                    .map_err(|_| format!("bad offset {v:?}"))?,
            );
        } else if let Some(v) = part.strip_prefix("size:") {
            size = Some(
                v.trim()
                    .parse::<u32>()
                    .map_err(|_| format!("bad size {v:?}"))?,
            );
        } else if let Some(v) = part.strip_prefix("signed:") {
            signed = Some(v.trim() == "1");
        }
    }
    let decl = decl.ok_or_else(|| format!("no declaration in {line:?}"))?;
    let offset = offset.ok_or_else(|| format!("no offset in {line:?}"))?;
    let size = size.ok_or_else(|| format!("no size in {line:?}"))?;
    let (name, type_name, kind) = parse_decl(decl, size)?;
    let signed = signed.unwrap_or_else(|| default_signed(&type_name));
    Ok(Field {
        name,
        type_name,
        offset,
        size,
        signed,
        kind,
    })
}

/// Splits a C declaration into (name, element type, kind).
fn parse_decl(decl: &str, size: u32) -> Result<(String, String, FieldKind), String> {
    let (loc_word, rest) = if let Some(r) = decl.strip_prefix("__data_loc ") {
        (Some(false), r.trim())
    } else if let Some(r) = decl.strip_prefix("__rel_loc ") {
        (Some(true), r.trim())
    } else {
        (None, decl)
    };
    if let Some(rel) = loc_word {
        // `char[] comm` (type, `[]`, name); tolerate the brackets after the name too.
        let r = rest.strip_suffix("[]").unwrap_or(rest).trim_end();
        let name = trailing_ident(r).ok_or_else(|| format!("no field name in {decl:?}"))?;
        let type_name = r[..r.len() - name.len()]
            .trim()
            .trim_end_matches("[]")
            .trim()
            .to_string();
        let loc = match (rel, size) {
            (false, 2) => LocKind::DataLoc2,
            (true, 2) => LocKind::RelLoc2,
            (false, _) => LocKind::DataLoc4,
            (true, _) => LocKind::RelLoc4,
        };
        let is_char = is_char_type(&type_name);
        let name = name.to_string();
        return Ok((name, type_name, FieldKind::Dynamic { loc, is_char }));
    }
    if let Some(stripped) = rest.strip_suffix(']') {
        let open = stripped
            .rfind('[')
            .ok_or_else(|| format!("unbalanced `]` in {decl:?}"))?;
        let len_text = stripped[open + 1..].trim();
        let before = stripped[..open].trim_end();
        let name = trailing_ident(before).ok_or_else(|| format!("no field name in {decl:?}"))?;
        let type_name = before[..before.len() - name.len()].trim().to_string();
        let is_char = is_char_type(&type_name);
        let name = name.to_string();
        if len_text.is_empty() {
            return Ok((name, type_name, FieldKind::RestOfRecord { is_char }));
        }
        let len = match len_text.parse::<u32>() {
            Ok(n) => n,
            // A symbolic length (`[TASK_COMM_LEN]`): derive it from the size.
            Err(_) => size / elem_size_guess(&type_name).max(1),
        };
        return Ok((name, type_name, FieldKind::FixedArray { len, is_char }));
    }
    let name = trailing_ident(rest).ok_or_else(|| format!("no field name in {decl:?}"))?;
    let type_name = rest[..rest.len() - name.len()].trim().to_string();
    Ok((name.to_string(), type_name, FieldKind::Scalar))
}

/// The identifier at the end of `s` (`prev_comm` of `char prev_comm`).
fn trailing_ident(s: &str) -> Option<&str> {
    let start = s
        .char_indices()
        .rev()
        .take_while(|(_, c)| c.is_ascii_alphanumeric() || *c == '_')
        .last()
        .map(|(i, _)| i)?;
    Some(&s[start..])
}

fn is_char_type(t: &str) -> bool {
    let t = t.strip_prefix("const ").unwrap_or(t).trim();
    t == "char"
}

fn elem_size_guess(t: &str) -> u32 {
    let t = t.strip_prefix("const ").unwrap_or(t).trim();
    match t {
        "char" | "unsigned char" | "signed char" | "u8" | "s8" | "bool" => 1,
        "short" | "unsigned short" | "u16" | "s16" => 2,
        "int" | "unsigned int" | "u32" | "s32" | "pid_t" => 4,
        _ => 8,
    }
}

fn default_signed(t: &str) -> bool {
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
        "/../../../shared/reference/samples/formats"
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
