//! The `/proc/kallsyms` line grammar, shared by every product that names kernel addresses
//! (the profile reader's table, the stacks of findings, the workqueue function names):
//!
//! ```text
//! line    := ADDR SP TYPE SP NAME [ TAB "[" MODULE "]" ]
//! ADDR    := hex digits, all zeros when kptr_restrict hides addresses
//! TYPE    := one letter as nm(1) prints it: T/t text, W/w weak, D/d data, B/b bss, … (lowercase = local)
//!
//! ffffffff812f3a10 t osq_lock
//! ffffffffc03a5010 t xfs_iomap_write_unwritten<TAB>[xfs]
//! ```
//! Only code symbols ([`is_code`]) name instruction addresses. Which of several symbols at
//! one address names it is each table's rule ([`crate::SymbolAliases`]).

/// One parsed line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KallsymsLine<'a> {
    /// Address (0 when hidden).
    pub addr: u64,
    /// nm type letter.
    pub kind: char,
    /// Symbol name.
    pub name: &'a str,
    /// Module name without brackets, for module symbols.
    pub module: Option<&'a str>,
}

impl KallsymsLine<'_> {
    /// Text or weak symbol: the only kinds an instruction address is in.
    pub fn is_code(&self) -> bool {
        is_code(self.kind)
    }

    /// A global (upper-case) symbol.
    pub fn is_global(&self) -> bool {
        self.kind.is_ascii_uppercase()
    }
}

/// Text (`T t`) or weak (`W w`) symbol type.
pub fn is_code(kind: char) -> bool {
    matches!(kind, 'T' | 't' | 'W' | 'w')
}

/// Parses one line; `None` when it does not have the grammar's shape.
pub fn parse_line(line: &str) -> Option<KallsymsLine<'_>> {
    let (body, module) = match line.split_once('\t') {
        Some((b, m)) => {
            let m = m.trim();
            let m = m.strip_prefix('[')?.strip_suffix(']')?;
            (b, Some(m))
        }
        None => (line, None),
    };
    let mut parts = body.split_ascii_whitespace();
    let addr = u64::from_str_radix(parts.next()?, 16).ok()?;
    let kind_text = parts.next()?;
    let mut kind_chars = kind_text.chars();
    let kind = kind_chars.next()?;
    if kind_chars.next().is_some() || !kind.is_ascii_alphabetic() {
        return None;
    }
    let name = parts.next()?;
    // A module written with spaces instead of a TAB (hand-edited files) is still accepted.
    let module = match (module, parts.next()) {
        (Some(m), None) => Some(m),
        (None, Some(m)) => Some(m.strip_prefix('[')?.strip_suffix(']')?),
        (None, None) => None,
        (Some(_), Some(_)) => return None,
    };
    if parts.next().is_some() {
        return None;
    }
    Some(KallsymsLine {
        addr,
        kind,
        name,
        module,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_of_every_shape() {
        let l = parse_line("ffffffff812f3a10 t osq_lock").unwrap();
        assert_eq!(
            (l.addr, l.kind, l.name, l.module),
            (0xffffffff812f3a10, 't', "osq_lock", None)
        );
        assert!(l.is_code() && !l.is_global());
        let m = parse_line("ffffffffc03a5010 t xfs_iomap\t[xfs]").unwrap();
        assert_eq!(m.module, Some("xfs"));
        assert_eq!(
            parse_line("ffffffffc03a5010 t xfs_iomap [xfs]")
                .unwrap()
                .module,
            Some("xfs")
        );
        assert!(!parse_line("ffffffff81e00000 D init_task")
            .unwrap()
            .is_code());
        for bad in [
            "",
            "zz t x",
            "ffff tt x",
            "ffff t",
            "ffff t a b c",
            "ffff t a\tbad",
        ] {
            assert_eq!(parse_line(bad), None, "{bad:?}");
        }
    }
}
