//! Writes trace-cmd `trace.dat` version 6 with flyrecord CPU data (formats.md §3).
//!
//! ```text
//! 17 08 44 "tracing" "6\0"  endian(0=LE)  sizeof(long)  u32 page size
//! "header_page\0"  u64 size  <events/header_page>
//! "header_event\0" u64 size  <events/header_event>
//! u32 N  N × (u64 size, <events/ftrace/X/format>)
//! u32 S  S × ("system\0", u32 count, count × (u64 size, <format>))
//! u32 size <kallsyms>      u32 size <printk_formats>      u64 size <saved_cmdlines>
//! u32 cpus
//! "options  \0"  (u16 id, u32 size, data)…  u16 0
//! "flyrecord\0"  cpus × (u64 offset, u64 size)   then each CPU's sub-buffers at a
//!                page-aligned offset
//! ```
//! Integers are in the host's byte order, which is the recording kernel's (the sub-buffers are
//! copied verbatim); the endian byte says which.

use std::io::{self, Read, Seek, SeekFrom, Write};

/// Option id: contents of `trace_clock`.
pub const OPTION_TRACECLOCK: u16 = 4;
/// Option id: `sysname nodename release machine`.
pub const OPTION_UNAME: u16 = 5;
/// Option id: recorder version string.
pub const OPTION_VERSION: u16 = 9;
/// Option id: one CPU's `per_cpu/cpuN/stats`, prefixed with `CPU: N\n`.
pub const OPTION_CPUSTAT: u16 = 2;
/// Option id: u32 CPU count.
pub const OPTION_CPUCOUNT: u16 = 8;

/// Everything before the CPU data.
#[derive(Clone, Debug, Default)]
pub struct TraceDatHeader {
    /// Page (= sub-buffer) size.
    pub page_size: u32,
    /// `events/header_page`.
    pub header_page: Vec<u8>,
    /// `events/header_event`.
    pub header_event: Vec<u8>,
    /// `events/ftrace/*/format` (may be empty).
    pub ftrace_formats: Vec<Vec<u8>>,
    /// Event formats per system.
    pub systems: Vec<(String, Vec<Vec<u8>>)>,
    /// `/proc/kallsyms` text (may be empty).
    pub kallsyms: Vec<u8>,
    /// `printk_formats` text.
    pub printk_formats: Vec<u8>,
    /// `saved_cmdlines` text (`PID COMM` lines).
    pub saved_cmdlines: Vec<u8>,
    /// Number of CPU data streams.
    pub nr_cpus: u32,
    /// Options, written in this order.
    pub options: Vec<(u16, Vec<u8>)>,
}

/// One CPU's data: a reader positioned anywhere, and its length in bytes.
pub struct CpuData<'a> {
    /// Source of the sub-buffers.
    pub source: &'a mut dyn ReadSeek,
    /// Bytes to copy.
    pub len: u64,
}

/// Read + Seek.
pub trait ReadSeek: Read + Seek {}
impl<T: Read + Seek> ReadSeek for T {}

/// A text option payload: the bytes plus the NUL trace-cmd expects.
pub fn text_option(id: u16, text: &str) -> (u16, Vec<u8>) {
    let mut v = text.as_bytes().to_vec();
    v.push(0);
    (id, v)
}

fn u32_len(what: &str, len: usize) -> io::Result<u32> {
    u32::try_from(len).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{what} too large for trace.dat v6 ({len} bytes)"),
        )
    })
}

/// Serializes everything up to and including the `flyrecord` tag.
fn header_bytes(h: &TraceDatHeader) -> io::Result<Vec<u8>> {
    let mut b = Vec::with_capacity(1 << 16);
    b.extend_from_slice(&[0x17, 0x08, 0x44]);
    b.extend_from_slice(b"tracing6\0");
    b.push(u8::from(cfg!(target_endian = "big")));
    b.push(std::mem::size_of::<libc::c_long>() as u8);
    b.extend_from_slice(&h.page_size.to_ne_bytes());
    b.extend_from_slice(b"header_page\0");
    b.extend_from_slice(&(h.header_page.len() as u64).to_ne_bytes());
    b.extend_from_slice(&h.header_page);
    b.extend_from_slice(b"header_event\0");
    b.extend_from_slice(&(h.header_event.len() as u64).to_ne_bytes());
    b.extend_from_slice(&h.header_event);
    b.extend_from_slice(&u32_len("ftrace formats", h.ftrace_formats.len())?.to_ne_bytes());
    for f in &h.ftrace_formats {
        b.extend_from_slice(&(f.len() as u64).to_ne_bytes());
        b.extend_from_slice(f);
    }
    b.extend_from_slice(&u32_len("systems", h.systems.len())?.to_ne_bytes());
    for (sys, formats) in &h.systems {
        b.extend_from_slice(sys.as_bytes());
        b.push(0);
        b.extend_from_slice(&u32_len("events", formats.len())?.to_ne_bytes());
        for f in formats {
            b.extend_from_slice(&(f.len() as u64).to_ne_bytes());
            b.extend_from_slice(f);
        }
    }
    b.extend_from_slice(&u32_len("kallsyms", h.kallsyms.len())?.to_ne_bytes());
    b.extend_from_slice(&h.kallsyms);
    b.extend_from_slice(&u32_len("printk_formats", h.printk_formats.len())?.to_ne_bytes());
    b.extend_from_slice(&h.printk_formats);
    b.extend_from_slice(&(h.saved_cmdlines.len() as u64).to_ne_bytes());
    b.extend_from_slice(&h.saved_cmdlines);
    b.extend_from_slice(&h.nr_cpus.to_ne_bytes());
    b.extend_from_slice(b"options  \0");
    for (id, data) in &h.options {
        b.extend_from_slice(&id.to_ne_bytes());
        b.extend_from_slice(&u32_len("option", data.len())?.to_ne_bytes());
        b.extend_from_slice(data);
    }
    b.extend_from_slice(&0u16.to_ne_bytes());
    b.extend_from_slice(b"flyrecord\0");
    Ok(b)
}

fn align_up(x: u64, to: u64) -> u64 {
    x.div_ceil(to) * to
}

/// Writes a trace.dat to `out_file` whose CPU data comes from per-CPU spool files:
/// `spools` is `(cpu, file, bytes)` in CPU order; every CPU of `all_cpus` without one gets an
/// empty stream. Returns the bytes of CPU data written.
pub fn write_from_spools(
    out_file: std::fs::File,
    h: &TraceDatHeader,
    spools: &mut [(u32, std::fs::File, u64)],
    all_cpus: &[u32],
) -> io::Result<u64> {
    let mut empties: Vec<io::Cursor<Vec<u8>>> = all_cpus
        .iter()
        .map(|_| io::Cursor::new(Vec::new()))
        .collect();
    let mut bytes = 0;
    let mut cpu_data: Vec<CpuData<'_>> = Vec::new();
    let mut it = spools.iter_mut().peekable();
    for (&cpu, empty) in all_cpus.iter().zip(empties.iter_mut()) {
        match it.next_if(|(c, _, _)| *c == cpu) {
            Some((_, f, len)) => {
                bytes += *len;
                cpu_data.push(CpuData {
                    source: f,
                    len: *len,
                });
            }
            None => cpu_data.push(CpuData {
                source: empty,
                len: 0,
            }),
        }
    }
    let mut out = io::BufWriter::with_capacity(1 << 20, out_file);
    write(&mut out, h, &mut cpu_data)?;
    out.flush()?;
    Ok(bytes)
}

/// Writes the whole file. `cpus.len()` must equal `h.nr_cpus`.
pub fn write(out: &mut dyn Write, h: &TraceDatHeader, cpus: &mut [CpuData<'_>]) -> io::Result<()> {
    if cpus.len() != h.nr_cpus as usize {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{} CPU streams for {} CPUs", cpus.len(), h.nr_cpus),
        ));
    }
    let page = u64::from(h.page_size.max(1));
    let head = header_bytes(h)?;
    let table_end = head.len() as u64 + 16 * cpus.len() as u64;
    let mut offsets = Vec::with_capacity(cpus.len());
    let mut pos = align_up(table_end, page);
    for c in cpus.iter() {
        offsets.push(pos);
        pos = align_up(pos + c.len, page);
    }
    out.write_all(&head)?;
    for (c, off) in cpus.iter().zip(&offsets) {
        out.write_all(&off.to_ne_bytes())?;
        out.write_all(&c.len.to_ne_bytes())?;
    }
    let mut written = table_end;
    for (c, &off) in cpus.iter_mut().zip(&offsets) {
        io::copy(&mut io::repeat(0).take(off - written), out)?;
        c.source.seek(SeekFrom::Start(0))?;
        let copied = io::copy(&mut (&mut c.source).take(c.len), out)?;
        if copied != c.len {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "CPU spool shorter than recorded ({copied} of {} bytes)",
                    c.len
                ),
            ));
        }
        written = off + c.len;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_of_a_tiny_file() {
        let h = TraceDatHeader {
            page_size: 4096,
            header_page: b"hp".to_vec(),
            header_event: b"he".to_vec(),
            systems: vec![("sched".into(), vec![b"fmt".to_vec()])],
            saved_cmdlines: b"1 init\n".to_vec(),
            nr_cpus: 2,
            options: vec![text_option(OPTION_UNAME, "Linux x")],
            ..Default::default()
        };
        let mut a = io::Cursor::new(vec![7u8; 4096]);
        let mut b = io::Cursor::new(Vec::new());
        let mut out = Vec::new();
        write(
            &mut out,
            &h,
            &mut [
                CpuData {
                    source: &mut a,
                    len: 4096,
                },
                CpuData {
                    source: &mut b,
                    len: 0,
                },
            ],
        )
        .unwrap();
        assert_eq!(&out[..13], b"\x17\x08Dtracing6\0\0");
        let fly = out.windows(10).position(|w| w == b"flyrecord\0").unwrap() + 10;
        let off = u64::from_le_bytes(out[fly..fly + 8].try_into().unwrap());
        let len = u64::from_le_bytes(out[fly + 8..fly + 16].try_into().unwrap());
        assert_eq!((off % 4096, len), (0, 4096));
        assert!(out[off as usize..].iter().all(|&x| x == 7));
        assert_eq!(out.len() as u64, off + 4096);
        // options block: UNAME, then the terminating 0 id right before "flyrecord".
        assert_eq!(&out[fly - 12..fly - 10], &[0, 0]);
    }
}
