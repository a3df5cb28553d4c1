//! Tracepoint formats for a perf.data that lacks them: a `perf record` killed before it
//! finished writes no feature sections, so its tracepoint records (`sched:sched_switch`, …)
//! come with an id and no format (perf itself then refuses the file).
//!
//! When the file was recorded on this host's running kernel, the host's tracefs holds the
//! very formats: the kernel map perf synthesized at the start of the data
//! (`[kernel.kallsyms]_text`, its address) must be where this kernel's `_text` is (with
//! KASLR, a per-boot address), every tracepoint id of the file must be one of the host's
//! events, and the first samples' raw payloads must have the size the host's format of
//! their id gives (another build of the kernel, without KASLR at the same address, numbers
//! its events differently). Then the formats are read from `events/SYSTEM/NAME/format`, the
//! kernel release from `/proc/sys/kernel/osrelease`, and data quality says so. Otherwise the
//! reason is returned, with how to recover.

use crate::tracefs_format::{Endian, EventFormat, FieldKind, HeaderPage, TracingData};

/// PERF_RECORD_MMAP.
const RECORD_MMAP: u32 = 1;

/// tracefs event directories, mounted or under debugfs.
const EVENT_DIRS: [&str; 2] = [
    "/sys/kernel/tracing/events",
    "/sys/kernel/debug/tracing/events",
];

/// How to get a readable file when the host cannot stand in.
const RECOVER: &str = "read it on the recording host while it runs the same kernel (stallscope then takes the formats from its tracefs), or record again and stop perf with Ctrl-C or SIGTERM rather than SIGKILL";

/// The formats of tracepoint `ids` from this host, when the data (`data_start`: the first
/// bytes of the data section) was recorded on its running kernel; `Err` says why not.
pub(super) fn formats_from_host(
    data_start: &[u8],
    endian: Endian,
    ids: &[u64],
    sample_type: u64,
) -> Result<(TracingData, String), String> {
    let missing = |why: String| format!("{why}: {RECOVER}");
    if endian != Endian::Little || cfg!(target_endian = "big") {
        return Err(missing("the file's byte order is not this host's".into()));
    }
    let recorded = kernel_text_of(data_start, endian).ok_or_else(|| {
        missing(
            "the data holds no kernel map ([kernel.kallsyms]_text) to tell the recording kernel by"
                .into(),
        )
    })?;
    let host = host_text().ok_or_else(|| {
        missing(
            "this host's kernel address (_text in /proc/kallsyms) is not readable (not root?)"
                .into(),
        )
    })?;
    if recorded != host {
        return Err(missing(format!(
            "it was recorded on another kernel or boot (its kernel text at {recorded:#x}, this one's at {host:#x})"
        )));
    }
    let mut td = TracingData {
        version: "host tracefs".into(),
        endian: Endian::Little,
        long_size: std::mem::size_of::<usize>() as u8,
        page_size: 4096,
        ..TracingData::default()
    };
    let mut found: Vec<u64> = Vec::new();
    for dir in EVENT_DIRS {
        let Ok(systems) = std::fs::read_dir(dir) else {
            continue;
        };
        if let Ok(text) = std::fs::read_to_string(format!("{dir}/header_page")) {
            td.header_page = HeaderPage::parse(&text).ok();
        }
        for system in systems.flatten().filter(|e| e.path().is_dir()) {
            let sys_name = system.file_name().to_string_lossy().into_owned();
            let Ok(events) = std::fs::read_dir(system.path()) else {
                continue;
            };
            for ev in events.flatten() {
                let id = std::fs::read_to_string(ev.path().join("id"))
                    .ok()
                    .and_then(|t| t.trim().parse::<u64>().ok());
                let Some(id) = id.filter(|i| ids.contains(i) && !found.contains(i)) else {
                    continue;
                };
                let Ok(text) = std::fs::read_to_string(ev.path().join("format")) else {
                    continue;
                };
                match EventFormat::parse(&sys_name, &text) {
                    Ok(f) => {
                        found.push(id);
                        td.events.push(f);
                    }
                    Err(e) => td.bad_formats.push((sys_name.clone(), e.to_string())),
                }
            }
        }
        break;
    }
    let absent: Vec<String> = ids
        .iter()
        .filter(|i| !found.contains(i))
        .map(|i| i.to_string())
        .collect();
    if !absent.is_empty() {
        return Err(missing(format!(
            "tracepoint ids {} are not events of this host's tracefs",
            absent.join(", ")
        )));
    }
    check_payload_sizes(data_start, sample_type, &td).map_err(missing)?;
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    Ok((td, release))
}

/// The address of the kernel map perf synthesizes (`[kernel.kallsyms]_text`: its page
/// offset is `_text`) among the first records of the data.
fn kernel_text_of(data: &[u8], e: Endian) -> Option<u64> {
    let mut off = 0usize;
    for _ in 0..10_000 {
        let rtype = e.u32(data, off)?;
        let size = usize::from(e.u16(data, off + 6)?);
        if size < 8 {
            return None;
        }
        let rec = data.get(off..off + size)?;
        if rtype == RECORD_MMAP && rec.len() > 40 && rec[40..].starts_with(b"[kernel.kallsyms]") {
            return e.u64(rec, 32);
        }
        off += size;
    }
    None
}

/// PERF_RECORD_SAMPLE.
const RECORD_SAMPLE: u32 = 9;

/// Checks the raw payload of the samples among the first records against the size of the
/// format their `common_type` names (fixed-size formats: the payload is the format's size
/// padded to 8 bytes with the u32 size before it; with dynamic fields, at least the size).
fn check_payload_sizes(data: &[u8], sample_type: u64, td: &TracingData) -> Result<(), String> {
    let e = Endian::Little;
    // u64 fields before RAW: IDENTIFIER, IP, TID, TIME, ADDR, ID, STREAM_ID, CPU, PERIOD
    const FIXED: [u64; 9] = [
        1 << 16,
        1 << 0,
        1 << 1,
        1 << 2,
        1 << 3,
        1 << 6,
        1 << 9,
        1 << 7,
        1 << 8,
    ];
    const READ: u64 = 1 << 4;
    const CALLCHAIN: u64 = 1 << 5;
    const RAW: u64 = 1 << 10;
    if sample_type & RAW == 0 || sample_type & READ != 0 {
        return Err("its samples' layout cannot be checked against this host's formats".into());
    }
    let before = 8 * FIXED.iter().filter(|&&b| sample_type & b != 0).count();
    let (mut off, mut checked) = (0usize, 0u32);
    while checked < 64 {
        let (Some(rtype), Some(size)) = (e.u32(data, off), e.u16(data, off + 6)) else {
            break;
        };
        let size = usize::from(size);
        let Some(rec) = data.get(off..off + size).filter(|_| size >= 8) else {
            break;
        };
        off += size;
        if rtype != RECORD_SAMPLE {
            continue;
        }
        let mut at = 8 + before;
        if sample_type & CALLCHAIN != 0 {
            let Some(nr) = e.u64(rec, at) else { continue };
            at += 8 + 8 * usize::try_from(nr).unwrap_or(usize::MAX / 16).min(1 << 20);
        }
        let (Some(raw_size), Some(id)) = (e.u32(rec, at), e.u16(rec, at + 4)) else {
            continue;
        };
        let Some(f) = td.events.iter().find(|f| f.id == u32::from(id)) else {
            continue;
        };
        let fields = f.common_fields.iter().chain(&f.fields);
        let want = fields.clone().map(|x| x.offset + x.size).max().unwrap_or(0);
        let dynamic = fields
            .clone()
            .any(|x| matches!(x.kind, FieldKind::Dynamic { .. }));
        let fits = match dynamic {
            true => raw_size >= want,
            false => (want..want + 8).contains(&raw_size),
        };
        if !fits {
            return Err(format!(
                "its {}:{} records carry {raw_size} bytes where this host's format has {want}: another kernel",
                f.system, f.name
            ));
        }
        checked += 1;
    }
    match checked {
        0 => Err("no sample among its first records to check this host's formats against".into()),
        _ => Ok(()),
    }
}

/// This kernel's `_text` address (0 when /proc/kallsyms hides addresses: not returned).
fn host_text() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/kallsyms").ok()?;
    text.lines().find_map(|l| {
        let mut it = l.split_whitespace();
        let (addr, _, name) = (it.next()?, it.next()?, it.next()?);
        (name == "_text")
            .then(|| u64::from_str_radix(addr, 16).ok())
            .flatten()
            .filter(|&a| a != 0)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernel_map_is_found_among_the_first_records() {
        // a COMM record, then perf's kernel map
        let mut d = Vec::new();
        d.extend_from_slice(&3u32.to_le_bytes());
        d.extend_from_slice(&0u16.to_le_bytes());
        d.extend_from_slice(&16u16.to_le_bytes());
        d.extend_from_slice(&[0; 8]);
        let name = b"[kernel.kallsyms]_text\0\0";
        d.extend_from_slice(&1u32.to_le_bytes());
        d.extend_from_slice(&0u16.to_le_bytes());
        d.extend_from_slice(&((40 + name.len()) as u16).to_le_bytes());
        d.extend_from_slice(&(-1i32).to_le_bytes());
        d.extend_from_slice(&0u32.to_le_bytes());
        d.extend_from_slice(&0xffff_ffff_8100_0000u64.to_le_bytes());
        d.extend_from_slice(&0x100u64.to_le_bytes());
        d.extend_from_slice(&0xffff_ffff_8100_0000u64.to_le_bytes());
        d.extend_from_slice(name);
        assert_eq!(
            kernel_text_of(&d, Endian::Little),
            Some(0xffff_ffff_8100_0000)
        );
        assert_eq!(kernel_text_of(&d[..16], Endian::Little), None);
    }
}
