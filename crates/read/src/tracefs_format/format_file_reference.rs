//! Test-only: the straightforward first version of the format-file parser (`str::lines`,
//! `split(';')`, `char_indices`), kept as the reference the faster parser in
//! [`super::format_file`] must agree with on every input (real files and mutated ones).
//! The type rules (`is_char_type`, `elem_size_guess`, `default_signed`) were not rewritten:
//! both parsers use the ones in [`super::format_file`].

use super::format_file::{
    default_signed, elem_size_guess, is_char_type, EventFormat, Field, FieldKind, FormatError,
    LocKind,
};

pub fn parse_event_format(system: &str, text: &str) -> Result<EventFormat, FormatError> {
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

#[cfg(test)]
mod tests {
    use super::super::format_batch::fixture_formats;
    use super::super::format_file;
    use super::*;

    /// Small deterministic generator for the mutations (xorshift).
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            (self.0 % n.max(1) as u64) as usize
        }
    }

    /// Pieces inserted by the mutations: separators, whitespace the two trims must agree on
    /// (`\x0b`, NBSP, the ideographic space), brackets, keywords.
    const INSERTS: &[&str] = &[
        " ",
        "\t",
        "\r",
        "\n",
        "\n\n",
        ";",
        "[",
        "]",
        "[]",
        ":",
        "_",
        "x",
        "9",
        "\u{0b}",
        "\u{0c}",
        "\u{a0}",
        "\u{3000}",
        "é",
        "__data_loc ",
        "__rel_loc ",
        "field:",
        "field special:",
        "offset:",
        "size:2",
        "signed:",
        "ID:",
        "name:",
        "format:\n",
        "print fmt:",
        "common_",
    ];

    fn mutate(text: &str, rng: &mut Rng) -> String {
        let mut s = text.to_string();
        for _ in 0..1 + rng.below(3) {
            let mut at = rng.below(s.len() + 1);
            while !s.is_char_boundary(at) {
                at -= 1;
            }
            match rng.below(4) {
                0 => {
                    let end = (at + 1 + rng.below(6)).min(s.len());
                    let mut end = end;
                    while !s.is_char_boundary(end) {
                        end += 1;
                    }
                    s.replace_range(at..end, "");
                }
                1 => s.truncate(at),
                _ => s.insert_str(at, INSERTS[rng.below(INSERTS.len())]),
            }
        }
        s
    }

    fn assert_same(system: &str, text: &str) {
        assert_eq!(
            format_file::EventFormat::parse(system, text),
            parse_event_format(system, text),
            "{text:?}"
        );
        for line in text.lines() {
            let line = line.trim();
            if line.starts_with("field") {
                assert_eq!(
                    format_file::parse_field_line(line),
                    parse_field_line(line),
                    "{line:?}"
                );
            }
        }
    }

    #[test]
    fn fast_parser_agrees_with_the_reference_on_real_and_mutated_formats() {
        let formats = fixture_formats();
        assert_eq!(formats.len(), 18 + 2305);
        let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
        let mut parsed = 0;
        for (system, bytes) in &formats {
            let text = String::from_utf8_lossy(bytes);
            assert_same(system, &text);
            parsed += usize::from(parse_event_format(system, &text).is_ok());
            for _ in 0..6 {
                assert_same(system, &mutate(&text, &mut rng));
            }
        }
        // The fixture's formats all parse (a 6.18 kernel's files).
        assert_eq!(parsed, 18 + 2305);
        let dir = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fixtures/samples/formats"
        );
        for entry in std::fs::read_dir(dir).expect("samples") {
            let text = std::fs::read_to_string(entry.expect("entry").path()).expect("sample");
            assert_same("s", &text);
            for _ in 0..200 {
                assert_same("s", &mutate(&text, &mut rng));
            }
        }
        for text in [
            "",
            "\n",
            "name: a\nID: 1\nformat:\n\tfield:int common_x;\toffset:0;\tsize:4;\n\tfield:int y;\toffset:4;\tsize:4;\n",
            "name: a\nID: 1\nformat:\n\tfield:int common_x;\toffset:0;\tsize:4;\n\n",
            "\u{a0}name:\u{3000}a\u{a0}\nID: 1\u{0b}\n",
            "name: a\nID: +7\nformat:\n field:char c[\u{a0}];offset:0;size:0;\n",
        ] {
            assert_same("s", text);
        }
    }
}
