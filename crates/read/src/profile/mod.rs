//! CPU-profile inputs, each normalized into a [`stallscope_model::Profile`]: one module per
//! format, plus the kernel symbol table used to name kernel frames.
//!
//! - [`kallsyms`]: `/proc/kallsyms` text, address → `symbol+offset`.
//! - [`perf_samples`]: perf.data samples with callchains (through the perf.data event reader).
//! - [`perf_script`]: `perf script` text of samples with callchains.
//! - [`folded`]: folded stacks (`stackcollapse-*.pl`), plain and differential.
//! - [`perf_report`]: `perf report --stdio` call-graph text (children / no-children views).
//!
//! Frame naming is the same for every input, so one capture read through two formats gives
//! the same profile ([`frame_name`]): a symbol without its `+0x…` offset; an unresolved
//! address as `0x` + lowercase hex (kernel addresses raw, user addresses as the input gives
//! them: perf.data has raw virtual addresses, `perf script` prints DSO-relative ones).
//!
//! [`read_profile`] opens a path, sniffs which of these it is ([`sniff_profile`]) and reads
//! it, with the kernel symbol table chosen by [`kernel_symbols_for`].

pub mod address_space;
pub mod folded;
pub mod kallsyms;
pub mod perf_report;
pub mod perf_samples;
pub mod perf_script;
pub mod user_symbols;

pub use kallsyms::{Kallsyms, KernelSymbol, SymbolAt};

use stallscope_model::{DataQuality, InputFormat, Problem, Profile, SymbolAliases};

use crate::error::ReadError;
use crate::input::Input;

/// Lowest kernel virtual address on x86-64 and arm64 (the canonical upper half); frames at
/// or above it are kernel frames when the input carries no context marker.
pub const KERNEL_ADDR_MIN: u64 = 0xffff_8000_0000_0000;

/// Which profile format an input is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProfileFormat {
    /// perf.data (file or pipe mode) with samples.
    PerfData,
    /// `perf script` text.
    PerfScript,
    /// Folded stacks.
    Folded,
    /// `perf report --stdio` text.
    PerfReport,
}

impl ProfileFormat {
    /// Name as printed and accepted by `--input-format`.
    pub fn name(self) -> &'static str {
        match self {
            ProfileFormat::PerfData => "perf-data",
            ProfileFormat::PerfScript => "perf-script-text",
            ProfileFormat::Folded => "folded",
            ProfileFormat::PerfReport => "perf-report-text",
        }
    }

    /// Every profile format.
    pub const ALL: [ProfileFormat; 4] = [
        ProfileFormat::PerfData,
        ProfileFormat::PerfScript,
        ProfileFormat::Folded,
        ProfileFormat::PerfReport,
    ];

    /// The format named `s` (see [`ProfileFormat::name`]).
    pub fn from_name(s: &str) -> Option<ProfileFormat> {
        Self::ALL.into_iter().find(|f| f.name() == s)
    }
}

/// A profile read from one input, with what is known about it.
#[derive(Clone, Debug)]
pub struct ProfileRead {
    /// The normalized profile.
    pub profile: Profile,
    /// Recoverable problems and notes (symbolization, pruning, skipped lines).
    pub quality: DataQuality,
    /// The format read.
    pub format: ProfileFormat,
    /// The sampled event (`cpu-clock:pppH`, `cycles`), when the input names it.
    pub event: Option<String>,
    /// Kernel release of the recording, when the input says.
    pub kernel_release: Option<String>,
    /// Total ("children") weight per symbol as the input printed it, when it did
    /// (`perf report --children`: the Children column summed over the entries of a symbol,
    /// in basis points). Stacks rebuilt from a pruned report cannot give these exactly.
    pub reported_totals: Option<Vec<(String, u64)>>,
}

/// How to name kernel frames.
#[derive(Clone, Debug, Default)]
pub enum KernelSymbolSource {
    /// The host's `/proc/kallsyms` when the input's kernel release equals the running one.
    #[default]
    Auto,
    /// This kallsyms file (`--kallsyms FILE`).
    File(String),
    /// None: kernel frames stay addresses.
    Off,
}

/// How to read a profile.
#[derive(Clone, Debug, Default)]
pub struct ProfileOptions {
    /// Where kernel symbol names come from.
    pub symbols: KernelSymbolSource,
    /// The sampled event to profile (`cpu-clock:pppH`, `sched:sched_switch`); default: the
    /// first event with a callchain. Ignored by folded and perf report input.
    pub event: Option<String>,
    /// Leave user frames of perf.data named by file and offset instead of looking for
    /// their binaries on this host ([`user_symbols`]).
    pub no_user_symbols: bool,
}

/// Whether sample event `name` is the `wanted` one: equal, or equal up to a `sys:` prefix
/// (`sched:sched_switch` = `sched_switch`) or a modifier suffix (`cpu-clock` =
/// `cpu-clock:pppH`).
pub fn event_matches(wanted: &str, name: &str) -> bool {
    let suffix = |long: &str, short: &str| {
        long.len() > short.len()
            && (long.ends_with(short) && long.as_bytes()[long.len() - short.len() - 1] == b':'
                || long.starts_with(short) && long.as_bytes()[short.len()] == b':')
    };
    wanted == name || suffix(wanted, name) || suffix(name, wanted)
}

/// Name of a frame: `symbol` when known (its `+0x…` offset removed), else `0x<hex addr>`;
/// address 0 (the end of a frame-pointer chain that perf prints as `0 [unknown]`) is
/// `[unknown]`, as perf report names it.
pub fn frame_name(symbol: Option<&str>, addr: u64) -> String {
    match symbol {
        Some(s) if !s.is_empty() && s != "[unknown]" => strip_offset(s).to_string(),
        _ if addr == 0 => "[unknown]".to_string(),
        _ => format!("{addr:#x}"),
    }
}

/// `do_idle+0x1f` → `do_idle`; names without a hex offset suffix are returned whole.
pub fn strip_offset(sym: &str) -> &str {
    if let Some(plus) = sym.rfind("+0x") {
        let hex = &sym[plus + 3..];
        if !hex.is_empty() && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return &sym[..plus];
        }
    }
    sym
}

/// The running kernel's release (`uname -r`), from `/proc/sys/kernel/osrelease`.
pub fn host_release() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// Like [`kernel_symbols_for`], but in [`KernelSymbolSource::Auto`] mode the input's own
/// kallsyms text (`embedded`: trace.dat KALLSYMS, perf TRACING_DATA, see
/// `TraceMeta::kallsyms`) comes first, when it resolves anything.
pub fn kernel_symbols_with_embedded(
    source: &KernelSymbolSource,
    release: Option<&str>,
    embedded: Option<(&str, &str, SymbolAliases)>,
    quality: &mut DataQuality,
) -> Result<Option<Kallsyms>, ReadError> {
    if let (KernelSymbolSource::Auto, Some((path, text, aliases))) = (source, embedded) {
        if !text.trim().is_empty() {
            let source = format!("{path} (its own kallsyms)");
            match Kallsyms::parse_with(&source, text, aliases) {
                Ok(k) if k.note().is_none() => {
                    quality.merge(k.quality());
                    return Ok(Some(k));
                }
                Ok(k) => quality.add(Problem::KernelSymbolsEmbedded, 1, || {
                    k.note().unwrap_or_default()
                }),
                Err(e) => quality.add(Problem::KernelSymbolsEmbedded, 1, || e.to_string()),
            }
        }
    }
    kernel_symbols_for(source, release, quality)
}

/// Chooses the kernel symbol table for an input recorded on `release`: the explicit file,
/// or the host's table when the releases match. Why nothing was chosen (or why the table is
/// useless) goes to `quality` as `kernel_symbols`.
pub fn kernel_symbols_for(
    source: &KernelSymbolSource,
    release: Option<&str>,
    quality: &mut DataQuality,
) -> Result<Option<Kallsyms>, ReadError> {
    let table = match source {
        KernelSymbolSource::Off => return Ok(None),
        KernelSymbolSource::File(path) => Kallsyms::load(path)?,
        KernelSymbolSource::Auto => {
            let host = host_release();
            match (release, host.as_deref()) {
                (Some(r), Some(h)) if r == h => match Kallsyms::load_default() {
                    Ok(k) => k,
                    Err(e) => {
                        quality.add(Problem::KernelSymbols, 1, || e.to_string());
                        return Ok(None);
                    }
                },
                (Some(r), h) => {
                    let h = h.unwrap_or("unknown").to_string();
                    quality.add(Problem::KernelSymbols, 1, || {
                        format!(
                            "kernel release differs: recorded on {r}, running {h}; \
                             pass the recording host's table with --kallsyms FILE"
                        )
                    });
                    return Ok(None);
                }
                (None, _) => {
                    quality.add(Problem::KernelSymbolsReleaseUnknown, 1, || {
                        "the input does not name its kernel release; pass --kallsyms FILE \
                         (e.g. /proc/kallsyms of the recording host)"
                            .to_string()
                    });
                    return Ok(None);
                }
            }
        }
    };
    if let Some(note) = table.note() {
        quality.add(Problem::KernelSymbols, 1, || note);
        return Ok(None);
    }
    quality.merge(table.quality());
    Ok(Some(table))
}

/// Detects a profile format from the first bytes of an input; `None` when none fits.
/// perf.data by magic; perf report text by its `# Samples:` / `# Overhead` / `# Children`
/// header; perf script text by a sample header followed by a frame; folded by its first
/// data lines. ([`read_profile`] also takes `perf script` text without callchains.)
pub fn sniff_profile(head: &[u8]) -> Option<ProfileFormat> {
    if head.starts_with(b"PERFILE2") || head.starts_with(b"2ELIFREP") {
        return Some(ProfileFormat::PerfData);
    }
    if memchr::memchr(0, head).is_some() {
        return None;
    }
    if perf_report::sniff(head) {
        return Some(ProfileFormat::PerfReport);
    }
    if perf_script::sniff(head) {
        return Some(ProfileFormat::PerfScript);
    }
    if folded::sniff(head) {
        return Some(ProfileFormat::Folded);
    }
    None
}

/// [`read_profile`] of an input that may hold no profile (a scheduler trace): `None` when
/// the input is no profile format, or a perf.data or `perf script` text without samples
/// of a profiled event; read errors are still errors.
pub fn read_profile_if_any(
    path: &str,
    opts: &ProfileOptions,
) -> Result<Option<ProfileRead>, ReadError> {
    let input = Input::open(path)?;
    let sniffed = sniff_profile(&input.head).or_else(|| {
        (crate::text_common::sniff_text(&input.head) == Some(InputFormat::PerfScriptText))
            .then_some(ProfileFormat::PerfScript)
    });
    drop(input);
    let Some(format) = sniffed else {
        return Ok(None);
    };
    match read_profile(path, Some(format), opts) {
        Ok(r) if r.profile.stacks.is_empty() => Ok(None),
        Ok(r) => Ok(Some(r)),
        Err(e) if e.is_no_samples() => Ok(None),
        Err(e) => Err(e),
    }
}

/// Opens `path` (`-` = stdin), sniffs its profile format unless `forced`, and reads it.
pub fn read_profile(
    path: &str,
    forced: Option<ProfileFormat>,
    opts: &ProfileOptions,
) -> Result<ProfileRead, ReadError> {
    let input = Input::open(path)?;
    let sniffed = sniff_profile(&input.head).or_else(|| {
        // Samples printed without callchains are still a (flat) profile.
        (crate::text_common::sniff_text(&input.head) == Some(InputFormat::PerfScriptText))
            .then_some(ProfileFormat::PerfScript)
    });
    let format = match forced.or(sniffed) {
        Some(f) => f,
        None => return Err(ReadError::at_byte(
            path,
            0,
            "a CPU profile (formats tried: perf-data, perf-report-text, perf-script-text, folded)",
            if input.head.is_empty() {
                "an empty file".to_string()
            } else {
                format!(
                    "unrecognized content starting with {}",
                    crate::error::show_bytes(&input.head, 16)
                )
            },
        )),
    };
    match format {
        ProfileFormat::PerfData => {
            // File and pipe mode share the reader (it tells them apart itself); the general
            // one, with the MMAP records that name user frames by file and offset.
            let mut reader = crate::perf_data::PerfDataReader::open_with_mappings(input, 0)?;
            // Several events recorded: perf report's first section is the first event (in
            // the file's order) with samples; find it, then read that event's samples.
            let declared = crate::EventReader::meta(&reader).declared_events.clone();
            if opts.event.is_none() && declared.len() > 1 && !crate::is_stream(path) {
                let first = perf_samples::first_sampled_event(&mut reader, &declared)?;
                let mut again =
                    crate::perf_data::PerfDataReader::open_with_mappings(Input::open(path)?, 0)?;
                let opts = ProfileOptions {
                    event: first,
                    ..opts.clone()
                };
                return perf_samples::read(&mut again, &opts);
            }
            perf_samples::read(&mut reader, opts)
        }
        ProfileFormat::PerfScript => perf_script::read(input, opts),
        ProfileFormat::Folded => folded::read(input),
        ProfileFormat::PerfReport => perf_report::read(input),
    }
}

/// Reads the whole (decompressed) input as text; invalid UTF-8 is replaced, not fatal.
pub(crate) fn read_text(input: Input) -> Result<(String, String), ReadError> {
    use std::io::Read;
    let path = input.path.clone();
    let mut bytes = Vec::new();
    input
        .into_reader()
        .read_to_end(&mut bytes)
        .map_err(|e| ReadError::io(&path, &e))?;
    let text = match String::from_utf8(bytes) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    };
    Ok((path, text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_kallsyms_first_then_release_rule() {
        let mut q = DataQuality::default();
        let k = kernel_symbols_with_embedded(
            &KernelSymbolSource::Auto,
            Some("some-other-release"),
            Some((
                "t.dat",
                "ffffffff81000000 T do_idle\n",
                SymbolAliases::FirstListed,
            )),
            &mut q,
        )
        .unwrap()
        .unwrap();
        assert_eq!(k.lookup(0xffffffff81000004).unwrap().name, "do_idle");
        assert!(q.is_empty());
        let none = kernel_symbols_with_embedded(
            &KernelSymbolSource::Auto,
            Some("some-other-release"),
            Some((
                "t.dat",
                "0000000000000000 T do_idle\n",
                SymbolAliases::FirstListed,
            )),
            &mut q,
        )
        .unwrap();
        assert!(none.is_none());
        assert_eq!(q.count(Problem::KernelSymbolsEmbedded), 1);
        assert_eq!(q.count(Problem::KernelSymbols), 1, "release differs");
        let off = kernel_symbols_with_embedded(
            &KernelSymbolSource::Off,
            None,
            Some((
                "t.dat",
                "ffffffff81000000 T do_idle\n",
                SymbolAliases::FirstListed,
            )),
            &mut q,
        )
        .unwrap();
        assert!(off.is_none());
    }

    #[test]
    fn frame_names() {
        assert_eq!(frame_name(Some("do_idle+0x1f"), 1), "do_idle");
        assert_eq!(frame_name(Some("[unknown]"), 0x11e9), "0x11e9");
        assert_eq!(frame_name(Some("[unknown]"), 0), "[unknown]");
        assert_eq!(frame_name(None, 0xffffffff81000e06), "0xffffffff81000e06");
        assert_eq!(strip_offset("a+b"), "a+b");
        assert!(event_matches("sched:sched_switch", "sched_switch"));
        assert!(event_matches("cpu-clock", "cpu-clock:pppH"));
        assert!(!event_matches("cycles", "cpu-clock:pppH"));
        assert_eq!(strip_offset("operator+0x"), "operator+0x");
    }
}
