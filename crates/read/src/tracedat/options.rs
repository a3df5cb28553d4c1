//! trace.dat options: `u16 id, u32 size, data[size]` records (formats.md §3, §4).
//!
//! ```text
//! v6   "options  \0" { u16 id (≠ 0), u32 size, data }… u16 0          (no size after the 0)
//! v7   OPTIONS section { u16 id, u32 size, data }… ending with DONE (0): u64 next section
//! ```
//! | id | option | data | used for |
//! |---|---|---|---|
//! | 1 | DATE | ASCII `0x…` µs | added ×1000 to timestamps (as `trace-cmd report` does) |
//! | 2 | CPUSTAT | `per_cpu/cpuN/stats` text | lost events per CPU |
//! | 3 | BUFFER | v6: u64 offset, name; v7: + clock, u32 page size, u32 n, n×(u32 cpu, u64 off, u64 size) | CPU data |
//! | 4 | TRACECLOCK | `trace_clock` text, selected clock in `[ ]` | clock name |
//! | 5 | UNAME | `Linux host 6.18.44 x86_64` | kernel release |
//! | 7 | OFFSET | ASCII signed integer (ns) | added to timestamps |
//! | 8 | CPUCOUNT | u32 | CPU count |
//! | 9 | VERSION | `3.1.6 …` | tool version |
//! | 14 | TSC2NSEC | u32 mult, u32 shift, u64 offset | ts = (ts·mult) >> shift |
//! | 16–21 | HEADER_INFO … CMDLINES | u64 section offset (v7) | metadata sections |
//! | 22 | BUFFER_TEXT | u64 offset, name, clock | latency-format instance (refused) |
//! | 0x5353 | stallscope system context | JSON | `meta.system_context` |
//!
//! Every other id (HOOK, TRACEID, PROCMAPS, TIME_SHIFT, GUEST, BTF…) is skipped by its size.

use crate::tracefs_format::Endian;

/// Option ids used here.
pub mod id {
    /// End of an option list (v7: carries the next OPTIONS section offset).
    pub const DONE: u16 = 0;
    /// Wall-clock offset (µs, hex ASCII).
    pub const DATE: u16 = 1;
    /// Per-CPU ring-buffer statistics.
    pub const CPUSTAT: u16 = 2;
    /// A buffer instance and its CPU data.
    pub const BUFFER: u16 = 3;
    /// `trace_clock` contents.
    pub const TRACECLOCK: u16 = 4;
    /// `uname -a`-like text.
    pub const UNAME: u16 = 5;
    /// Timestamp offset in ns.
    pub const OFFSET: u16 = 7;
    /// Number of CPUs.
    pub const CPUCOUNT: u16 = 8;
    /// trace-cmd version.
    pub const VERSION: u16 = 9;
    /// TSC → ns conversion.
    pub const TSC2NSEC: u16 = 14;
    /// First of the v7 metadata section ids (HEADER_INFO).
    pub const HEADER_INFO: u16 = 16;
    /// ftrace's own event formats.
    pub const FTRACE_EVENTS: u16 = 17;
    /// Event systems and formats.
    pub const EVENT_FORMATS: u16 = 18;
    /// `/proc/kallsyms`.
    pub const KALLSYMS: u16 = 19;
    /// `printk_formats`.
    pub const PRINTK: u16 = 20;
    /// `saved_cmdlines`.
    pub const CMDLINES: u16 = 21;
    /// Latency-format text instance.
    pub const BUFFER_TEXT: u16 = 22;
}

/// One CPU's data area as recorded in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CpuArea {
    /// CPU number.
    pub cpu: u32,
    /// File offset of its data.
    pub offset: u64,
    /// Bytes stored (compressed size for compressed data).
    pub size: u64,
}

/// A BUFFER / BUFFER_TEXT option.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BufferOption {
    /// Instance name (`""` = top instance).
    pub name: String,
    /// File offset of its data (v7: the BUFFER section; v6: its option/flyrecord block).
    pub offset: u64,
    /// Clock (v7 only).
    pub clock: Option<String>,
    /// Sub-buffer size (v7 only).
    pub page_size: Option<u32>,
    /// CPU areas (v7 only).
    pub cpus: Vec<CpuArea>,
    /// A latency-format text instance (BUFFER_TEXT).
    pub latency: bool,
}

/// Everything the options said.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Selected trace clock.
    pub clock: Option<String>,
    /// UNAME text.
    pub uname: Option<String>,
    /// VERSION text.
    pub version: Option<String>,
    /// CPUCOUNT.
    pub cpu_count: Option<u32>,
    /// Sum of OFFSET (ns) and DATE (µs·1000) options.
    pub ts_offset: i64,
    /// TSC2NSEC `(mult, shift, offset)`.
    pub tsc2nsec: Option<(u32, u32, u64)>,
    /// CPUSTAT texts in file order, with the buffer instance they belong to (`""` = top;
    /// trace-cmd writes a `Buffer: NAME` CPUSTAT before an instance's per-CPU stats).
    pub cpustats: Vec<(String, String)>,
    /// Instance named by the last `Buffer: NAME` CPUSTAT.
    cpustat_instance: String,
    /// BUFFER / BUFFER_TEXT options.
    pub buffers: Vec<BufferOption>,
    /// v7 metadata sections `(id, offset)`.
    pub sections: Vec<(u16, u64)>,
    /// The stallscope system-context JSON.
    pub system_context: Option<Vec<u8>>,
    /// Ids skipped because this reader does not use them.
    pub skipped: Vec<u16>,
    /// Options whose data could not be read `(id, offset, why)`.
    pub malformed: Vec<(u16, u64, String)>,
}

impl Options {
    /// Applies one option record (`at` = file offset of its data, for messages).
    pub fn apply(&mut self, option: u16, data: &[u8], endian: Endian, v7: bool, at: u64) {
        let text = || {
            let end = memchr::memchr(0, data).unwrap_or(data.len());
            String::from_utf8_lossy(&data[..end]).trim().to_string()
        };
        let bad = |why: &str| self_malformed(option, at, why);
        let problem: Option<(u16, u64, String)> = match option {
            id::DATE => match parse_c_integer(&text()) {
                Some(us) => {
                    self.ts_offset = self.ts_offset.wrapping_add(us.wrapping_mul(1000));
                    None
                }
                None => Some(bad("an ASCII integer")),
            },
            id::OFFSET => match parse_c_integer(&text()) {
                Some(ns) => {
                    self.ts_offset = self.ts_offset.wrapping_add(ns);
                    None
                }
                None => Some(bad("an ASCII integer")),
            },
            id::CPUSTAT => {
                let t = text();
                match t.trim().strip_prefix("Buffer:") {
                    Some(name) => self.cpustat_instance = name.trim().to_string(),
                    None => self.cpustats.push((self.cpustat_instance.clone(), t)),
                }
                None
            }
            id::BUFFER | id::BUFFER_TEXT => match parse_buffer(option, data, endian, v7) {
                Some(b) => {
                    self.buffers.push(b);
                    None
                }
                None => Some(bad("a complete BUFFER option")),
            },
            id::TRACECLOCK => {
                self.clock = selected_clock(&text());
                None
            }
            id::UNAME => {
                self.uname = Some(text());
                None
            }
            id::VERSION => {
                self.version = Some(text());
                None
            }
            id::CPUCOUNT => match endian.u32(data, 0) {
                Some(n) => {
                    self.cpu_count = Some(n);
                    None
                }
                None => Some(bad("a u32")),
            },
            id::TSC2NSEC => match (
                endian.u32(data, 0),
                endian.u32(data, 4),
                endian.u64(data, 8),
            ) {
                (Some(mult), Some(shift), Some(off)) if shift < 64 => {
                    self.tsc2nsec = Some((mult, shift, off));
                    None
                }
                _ => Some(bad("u32 mult, u32 shift (< 64), u64 offset")),
            },
            id::HEADER_INFO..=id::CMDLINES if v7 => match endian.u64(data, 0) {
                Some(off) => {
                    self.sections.push((option, off));
                    None
                }
                None => Some(bad("a u64 section offset")),
            },
            crate::tracedat::OPTION_SYSTEM_CONTEXT => {
                self.system_context = Some(data.to_vec());
                None
            }
            other => {
                if !self.skipped.contains(&other) {
                    self.skipped.push(other);
                }
                None
            }
        };
        if let Some(p) = problem {
            self.malformed.push(p);
        }
    }
}

fn self_malformed(option: u16, at: u64, expected: &str) -> (u16, u64, String) {
    (option, at, format!("expected {expected}"))
}

/// `"[local] global counter"` → `local`.
pub fn selected_clock(text: &str) -> Option<String> {
    let start = text.find('[')?;
    let end = start + text[start..].find(']')?;
    Some(text[start + 1..end].to_string())
}

/// A C `strtoll(s, NULL, 0)`-style integer: optional sign, `0x` hex, or decimal.
pub fn parse_c_integer(s: &str) -> Option<i64> {
    let s = s.trim();
    let (neg, digits) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let v = match digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        Some(hex) => i64::from_str_radix(hex, 16).ok()?,
        None => digits.parse::<i64>().ok()?,
    };
    Some(if neg { -v } else { v })
}

fn parse_buffer(option: u16, data: &[u8], endian: Endian, v7: bool) -> Option<BufferOption> {
    let mut b = BufferOption {
        offset: endian.u64(data, 0)?,
        latency: option == id::BUFFER_TEXT,
        ..BufferOption::default()
    };
    let mut pos = 8;
    let cstr = |pos: &mut usize| -> Option<String> {
        let rest = data.get(*pos..)?;
        let n = memchr::memchr(0, rest)?;
        *pos += n + 1;
        Some(String::from_utf8_lossy(&rest[..n]).into_owned())
    };
    b.name = cstr(&mut pos)?;
    if !v7 {
        return Some(b);
    }
    b.clock = Some(cstr(&mut pos)?);
    if b.latency {
        return Some(b);
    }
    b.page_size = Some(endian.u32(data, pos)?);
    let n = endian.u32(data, pos + 4)?;
    pos += 8;
    // Each entry is 20 bytes: never trust `n` beyond what the option holds.
    if (n as usize).saturating_mul(20) > data.len().saturating_sub(pos) {
        return None;
    }
    for _ in 0..n {
        b.cpus.push(CpuArea {
            cpu: endian.u32(data, pos)?,
            offset: endian.u64(data, pos + 4)?,
            size: endian.u64(data, pos + 12)?,
        });
        pos += 20;
    }
    Some(b)
}

/// Events lost on one CPU according to a CPUSTAT text: `(cpu, overrun + commit overrun +
/// dropped events)`. `None` when the text has no `CPU:` line.
pub fn cpustat_lost(text: &str) -> Option<(u32, u64)> {
    let mut cpu = None;
    let mut lost = 0u64;
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue; // not a `key: value` line (nothing to count: stats are advisory)
        };
        let value = value.trim();
        match key.trim() {
            "CPU" => cpu = value.parse().ok(),
            "overrun" | "commit overrun" | "dropped events" => {
                lost = lost.saturating_add(value.parse().unwrap_or(0));
            }
            _ => {}
        }
    }
    Some((cpu?, lost))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_parsers() {
        assert_eq!(
            selected_clock("local global [counter] uptime"),
            Some("counter".into())
        );
        assert_eq!(selected_clock("local"), None);
        assert_eq!(parse_c_integer("-1500"), Some(-1500));
        assert_eq!(parse_c_integer("0x10"), Some(16));
        assert_eq!(parse_c_integer("x"), None);
        let stat = "CPU: 1\nentries: 0\noverrun: 7\ncommit overrun: 1\nbytes: 0\n\
                    oldest event ts:   392.424886\ndropped events: 2\nread events: 1930\n";
        assert_eq!(cpustat_lost(stat), Some((1, 10)));
        assert_eq!(cpustat_lost("overrun: 3"), None);
    }

    #[test]
    fn buffer_option_bounds_are_checked() {
        let mut d = 4096u64.to_le_bytes().to_vec();
        d.extend_from_slice(b"\0local\0");
        d.extend_from_slice(&4096u32.to_le_bytes());
        d.extend_from_slice(&2u32.to_le_bytes());
        for (cpu, off) in [(0u32, 8192u64), (3, 12288)] {
            d.extend_from_slice(&cpu.to_le_bytes());
            d.extend_from_slice(&off.to_le_bytes());
            d.extend_from_slice(&100u64.to_le_bytes());
        }
        let b = parse_buffer(id::BUFFER, &d, Endian::Little, true).unwrap();
        assert_eq!(
            b.cpus[1],
            CpuArea {
                cpu: 3,
                offset: 12288,
                size: 100
            }
        );
        assert_eq!(b.clock.as_deref(), Some("local"));
        assert!(parse_buffer(id::BUFFER, &d[..d.len() - 1], Endian::Little, true).is_none());
        let mut huge = d.clone();
        huge[8 + 7 + 4..8 + 7 + 8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(parse_buffer(id::BUFFER, &huge, Endian::Little, true).is_none());
    }
}
