//! Kernel symbol tables in `/proc/kallsyms` format, and address → `symbol+offset` lookup.
//!
//! Grammar (one symbol per line, fields separated by spaces, the module by a TAB; parsed by
//! [`stallscope_model::kallsyms::parse_line`], the one parser every product uses):
//!
//! ```text
//! line    := ADDR SP TYPE SP NAME [ TAB "[" MODULE "]" ]
//! ADDR    := 16 (or 8) hex digits, all zeros when kptr_restrict hides addresses
//! TYPE    := one letter as nm(1) prints it: T/t text, W/w weak, D/d data, B/b bss,
//!            R/r read-only data, A/a absolute, V/v … (lowercase = local)
//!
//! ffffffff81000000 T _text
//! ffffffff812f3a10 t osq_lock
//! ffffffffc0201000 t ftrace_trampoline<TAB>[__builtin__ftrace]
//! ffffffffc03a5010 t xfs_iomap_write_unwritten<TAB>[xfs]
//! ```
//!
//! The same text is what trace.dat's KALLSYMS section and perf.data's TRACING_DATA feature
//! carry when the recorder saved it ([`Kallsyms::parse`] takes either).
//!
//! Only code symbols (types `T t W w`) enter the lookup table: an instruction pointer is
//! never inside data, and a data symbol between two functions would cut the preceding
//! function short. A symbol extends to the next code symbol's address; the last one covers
//! [`LAST_SYMBOL_SPAN`] bytes. When several symbols share an address, the **last** one in
//! the file names it by default ([`Kallsyms::parse_with`] takes trace-cmd's rule, the first
//! one, for the tables trace.dat files carry), as in perf: perf first extends every symbol to the next one's start,
//! which leaves only the last of equal-address symbols with a non-zero size, and then keeps
//! the sized one (`memcpy`, `__memcpy`, `__pi_memcpy` → `__pi_memcpy`, checked against
//! `perf report` 6.1 on fixtures/detectors/lock-spinning).
//!
//! Unprivileged readers of `/proc/kallsyms` see every address as zero when
//! `kernel.kptr_restrict` is set (or without CAP_SYSLOG); such a table resolves nothing and
//! [`Kallsyms::note`] says why. Lines that do not parse are counted in
//! [`Kallsyms::quality`] (`kallsyms_bad_line`), never silently skipped.

use stallscope_model::kallsyms::{is_code, parse_line, KallsymsLine};
use stallscope_model::{DataQuality, Problem, SymbolAliases};

use crate::error::ReadError;

/// Bytes covered by the highest symbol (it has no successor to bound it).
pub const LAST_SYMBOL_SPAN: u64 = 4096;

/// Where the host's table lives.
pub const DEFAULT_PATH: &str = "/proc/kallsyms";

/// One kernel code symbol.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelSymbol {
    /// Start address.
    pub addr: u64,
    /// The nm type letter (`T`, `t`, `W`, `w`).
    pub kind: char,
    /// Symbol name.
    pub name: Box<str>,
    /// Module name (without brackets) for module symbols.
    pub module: Option<Box<str>>,
}

/// The result of a lookup: the symbol containing an address and the offset into it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SymbolAt<'a> {
    /// Symbol name.
    pub name: &'a str,
    /// `address - symbol start`.
    pub offset: u64,
    /// Module, for module symbols.
    pub module: Option<&'a str>,
}

/// A parsed kallsyms table, sorted by address, one symbol per address.
#[derive(Clone, Debug, Default)]
pub struct Kallsyms {
    symbols: Vec<KernelSymbol>,
    source: String,
    zeroed: bool,
    lines: u64,
    quality: DataQuality,
}

impl Kallsyms {
    /// Parses kallsyms `text` read from `source` (a path or a description such as
    /// `trace.dat KALLSYMS`). Fails only when the text is not empty and not one line parses.
    pub fn parse(source: &str, text: &str) -> Result<Kallsyms, ReadError> {
        Self::parse_with(source, text, SymbolAliases::LastListed)
    }

    /// [`Kallsyms::parse`], naming an address several symbols share as `aliases` says
    /// (the peer of the input that carried the table: trace-cmd names it by the first
    /// listed).
    pub fn parse_with(
        source: &str,
        text: &str,
        aliases: SymbolAliases,
    ) -> Result<Kallsyms, ReadError> {
        let mut quality = DataQuality::default();
        let mut symbols = Vec::new();
        let mut lines = 0u64;
        let mut parsed = 0u64;
        let mut any_nonzero = false;
        let mut first_bad: Option<(u64, String)> = None;
        for (i, line) in text.lines().enumerate() {
            let line_no = i as u64 + 1;
            if line.trim().is_empty() {
                continue; // blank lines carry nothing; not a problem
            }
            lines += 1;
            let Some(KallsymsLine {
                addr,
                kind,
                name,
                module,
            }) = parse_line(line)
            else {
                if first_bad.is_none() {
                    first_bad = Some((line_no, line.chars().take(80).collect()));
                }
                quality.add(Problem::KallsymsBadLine, 1, || {
                    format!(
                        "{source}:{line_no}: {}",
                        line.chars().take(80).collect::<String>()
                    )
                });
                continue;
            };
            parsed += 1;
            any_nonzero |= addr != 0;
            if is_code(kind) {
                symbols.push(KernelSymbol {
                    addr,
                    kind,
                    name: name.into(),
                    module: module.map(Into::into),
                });
            }
        }
        if parsed == 0 {
            if let Some((line_no, found)) = first_bad {
                return Err(ReadError::at_line(
                    source,
                    line_no,
                    "a kallsyms line `ADDR TYPE NAME [MODULE]`",
                    format!("{found:?}"),
                ));
            }
        }
        // A stable sort keeps file order among equal addresses.
        symbols.sort_by_key(|s| s.addr);
        let mut unique: Vec<KernelSymbol> = Vec::with_capacity(symbols.len());
        for s in symbols {
            match unique.last_mut() {
                // Same address: the later line wins, or the first (see the module doc).
                Some(last) if last.addr == s.addr => {
                    if aliases == SymbolAliases::LastListed {
                        *last = s;
                    }
                }
                _ => unique.push(s),
            }
        }
        Ok(Kallsyms {
            zeroed: parsed > 0 && !any_nonzero,
            symbols: unique,
            source: source.to_string(),
            lines,
            quality,
        })
    }

    /// Reads and parses the kallsyms file at `path` (gzip / zstd / xz compressed too).
    pub fn load(path: &str) -> Result<Kallsyms, ReadError> {
        let text = load_text(path)?;
        Self::parse(path, &text)
    }

    /// Reads the running kernel's table, [`DEFAULT_PATH`]. Check [`Kallsyms::note`]: without
    /// privileges every address reads as zero and nothing resolves.
    pub fn load_default() -> Result<Kallsyms, ReadError> {
        Self::load(DEFAULT_PATH)
    }

    /// The symbol containing `addr` and the offset into it; `None` when the address is below
    /// the first symbol, past the last one's [`LAST_SYMBOL_SPAN`], or the table is zeroed.
    pub fn lookup(&self, addr: u64) -> Option<SymbolAt<'_>> {
        if self.zeroed {
            return None;
        }
        let idx = self.symbols.partition_point(|s| s.addr <= addr);
        let sym = self.symbols.get(idx.checked_sub(1)?)?;
        let offset = addr - sym.addr;
        if idx == self.symbols.len() && offset >= LAST_SYMBOL_SPAN {
            return None;
        }
        Some(SymbolAt {
            name: &sym.name,
            offset,
            module: sym.module.as_deref(),
        })
    }

    /// The first code symbol named `name` (linear scan).
    pub fn find(&self, name: &str) -> Option<&KernelSymbol> {
        self.symbols.iter().find(|s| &*s.name == name)
    }

    /// Code symbols in address order (one per address).
    pub fn symbols(&self) -> &[KernelSymbol] {
        &self.symbols
    }

    /// Number of lookup entries.
    pub fn len(&self) -> usize {
        self.symbols.len()
    }

    /// Whether the table has no code symbols.
    pub fn is_empty(&self) -> bool {
        self.symbols.is_empty()
    }

    /// Non-blank lines read (all types, including those not kept).
    pub fn lines_read(&self) -> u64 {
        self.lines
    }

    /// Where the table came from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Whether every address was zero (kptr_restrict); lookups then fail.
    pub fn is_zeroed(&self) -> bool {
        self.zeroed
    }

    /// A sentence for the user when the table cannot resolve anything, else `None`.
    pub fn note(&self) -> Option<String> {
        if self.zeroed {
            Some(format!(
                "{}: every address is zero (kernel.kptr_restrict hides them from this user); \
                 kernel frames stay unsymbolized. Run as root, or `sysctl kernel.kptr_restrict=0`, \
                 or pass a saved copy with --kallsyms FILE",
                self.source
            ))
        } else if self.symbols.is_empty() {
            Some(format!(
                "{}: no code symbols (types T/t/W/w); kernel frames stay unsymbolized",
                self.source
            ))
        } else {
            None
        }
    }

    /// Problems met while parsing.
    pub fn quality(&self) -> &DataQuality {
        &self.quality
    }
}

/// The text of the kallsyms file at `path`, decompressed when it is gzip / zstd / xz
/// (invalid UTF-8 replaced: symbol names are ASCII).
pub fn load_text(path: &str) -> Result<String, ReadError> {
    use std::io::Read;
    let mut bytes = Vec::new();
    crate::input::Input::open(path)?
        .into_reader()
        .read_to_end(&mut bytes)
        .map_err(|e| ReadError::io(path, &e))?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
0000000000000000 A fixed_percpu_data
ffffffff81000000 T _stext
ffffffff81000000 T _text
ffffffff81000000 t __pi__text
ffffffff81001000 T do_idle
ffffffff81001200 D some_data
ffffffff81001400 t osq_lock
ffffffffc0201000 t ftrace_trampoline\t[__builtin__ftrace]
";

    #[test]
    fn lookup_binary_search() {
        let k = Kallsyms::parse("t", TEXT).unwrap();
        assert_eq!(k.len(), 4);
        let at = k.lookup(0xffffffff81001010).unwrap();
        assert_eq!((at.name, at.offset), ("do_idle", 0x10));
        // The data symbol does not cut do_idle short.
        assert_eq!(k.lookup(0xffffffff81001300).unwrap().name, "do_idle");
        assert_eq!(k.lookup(0xffffffff81001400).unwrap().name, "osq_lock");
        let m = k.lookup(0xffffffffc0201008).unwrap();
        assert_eq!(m.module, Some("__builtin__ftrace"));
        assert_eq!(m.offset, 8);
        assert!(k.lookup(0xffffffffc0201000 + LAST_SYMBOL_SPAN).is_none());
        assert!(k.lookup(0x1000).is_none());
        assert!(k.note().is_none());
    }

    #[test]
    fn alias_choice_is_the_last_line() {
        let k = Kallsyms::parse("t", TEXT).unwrap();
        // _stext, _text, __pi__text at one address.
        assert_eq!(k.lookup(0xffffffff81000000).unwrap().name, "__pi__text");
    }

    /// trace-cmd names an address several symbols share by the first listed (the function,
    /// not the section marker after it): the table a trace.dat carries is read so.
    #[test]
    fn alias_choice_as_trace_cmd_is_the_first_line() {
        let text = "ffffffffa95ad270 T _raw_spin_unlock_irqrestore\n\
                    ffffffffa95ad270 T __lock_text_start\n\
                    ffffffffa95ad2a0 T _raw_read_trylock\n";
        let k = Kallsyms::parse_with("t.dat", text, SymbolAliases::FirstListed).unwrap();
        assert_eq!(
            k.lookup(0xffffffffa95ad295).unwrap().name,
            "_raw_spin_unlock_irqrestore"
        );
        let k = Kallsyms::parse("perf", text).unwrap();
        assert_eq!(
            k.lookup(0xffffffffa95ad295).unwrap().name,
            "__lock_text_start"
        );
    }

    #[test]
    fn zeroed_table_resolves_nothing_and_says_why() {
        let k = Kallsyms::parse(
            "/proc/kallsyms",
            "0000000000000000 T _text\n0000000000000000 t osq_lock\n",
        )
        .unwrap();
        assert!(k.is_zeroed());
        assert!(k.lookup(0).is_none());
        assert!(k.note().unwrap().contains("kptr_restrict"));
    }

    #[test]
    fn bad_lines_counted_all_bad_is_an_error() {
        let k = Kallsyms::parse("t", "ffffffff81000000 T a\nnonsense\n").unwrap();
        assert_eq!(k.quality().count(Problem::KallsymsBadLine), 1);
        let e = Kallsyms::parse("f", "\nhello world\n").unwrap_err();
        assert_eq!(e.pos, Some(stallscope_model::SpanPos::Line(2)));
        let empty = Kallsyms::parse("f", "").unwrap();
        assert!(empty.is_empty());
        assert!(empty.note().is_some());
    }

    #[test]
    fn host_table_if_readable() {
        // Real data: whatever this host exposes must parse without bad lines.
        if let Ok(k) = Kallsyms::load_default() {
            assert_eq!(k.quality().count(Problem::KallsymsBadLine), 0);
            if !k.is_zeroed() {
                let s = k.find("schedule").expect("schedule in kallsyms");
                assert_eq!(k.lookup(s.addr + 1).unwrap().name, "schedule");
            }
        }
    }
}
