//! The metadata of a trace.dat, versions 6 and 7 (formats.md §3, §4): everything before
//! the CPU data, gathered into a [`FileInfo`].
//!
//! ```text
//! v6   17 08 44 "tracing" "6\0" endian long_size u32 page_size
//!      header_page, header_event, ftrace formats, event systems, kallsyms, printk formats,
//!      saved_cmdlines                  (the tracing-data blob, parsed by tracefs_format)
//!      u32 cpus
//!      "options  \0" options… u16 0    (optional)
//!      "flyrecord\0" n × (u64 offset, u64 size)      n = CPUCOUNT option, else cpus
//!      ["latency  \0" = text trace: refused]
//! v7   17 08 44 "tracing" "7\0" endian long_size u32 page_size
//!      "zstd\0" "1.5.4\0" (or "none\0\0", "zlib\0"…)  u64 offset of the first OPTIONS section
//!      sections anywhere: u16 id, u16 flags (1 = compressed), u32 description, u64 size, body
//!      (a compressed body is u32 compressed size, u32 size, data)
//!      OPTIONS (id 0) chain → HEADER_INFO(16) FTRACE_EVENTS(17) EVENT_FORMATS(18) KALLSYMS(19)
//!      PRINTK(20) CMDLINES(21) sections (same bytes as the v6 blocks) and BUFFER options
//! ```
//! Only the top instance's CPU data is read; other instances are listed
//! ([`FileInfo::other_instances`]).

use crate::error::show_bytes;
use crate::sniff::TRACE_DAT_MAGIC;
use crate::tracefs_format::{BlobCursor, Endian, TracingData};

/// `(absolute offset, expected, found)`, as the tracefs_format blob parsers return it.
type BlobError = (u64, String, String);
use crate::ReadError;

use super::compress::Codec;
use super::options::{id, CpuArea, Options};
use super::source::Source;

/// Largest metadata block read at once (sections, the v6 prefix).
const MAX_METADATA: u64 = 1 << 30;
/// Most CPUs a file may declare.
const MAX_CPUS: u64 = 1 << 16;
/// Section header: u16 id, u16 flags, u32 description, u64 size.
const SECTION_HEADER: u64 = 16;
/// Section flag: the body is compressed.
const SECTION_COMPRESSED: u16 = 1;

/// Everything known before reading the CPU data.
pub struct FileInfo {
    /// 6 or 7.
    pub version: u32,
    /// Formats, header_page, printk formats, saved cmdlines; `endian`, `long_size`,
    /// `page_size` from the file header.
    pub tracing: TracingData,
    /// The options.
    pub options: Options,
    /// `zstd 1.5.4`-like text (v7 with compression).
    pub compression: Option<String>,
    /// Algorithm of compressed sections and CPU data.
    pub codec: Option<Codec>,
    /// The top instance's CPU areas.
    pub cpus: Vec<CpuArea>,
    /// Sub-buffer size of the top instance.
    pub subbuf_size: u32,
    /// The top instance's CPU data is chunk-compressed.
    pub cpu_data_compressed: bool,
    /// Name of the instance whose data is read (`""` = top).
    pub instance: String,
    /// Names of instances whose data is not read.
    pub other_instances: Vec<String>,
}

fn blob_err(path: &str) -> impl Fn(BlobError) -> ReadError + '_ {
    move |(off, expected, found)| ReadError::at_byte(path, off, expected, found)
}

/// Reads `n` bytes at `off`; fewer bytes than asked is an error naming the offset.
fn read_exact(
    src: &Source,
    path: &str,
    off: u64,
    n: u64,
    what: &str,
) -> Result<Vec<u8>, ReadError> {
    if n > MAX_METADATA {
        return Err(ReadError::at_byte(
            path,
            off,
            format!("{what} of a plausible size"),
            format!("{n} bytes"),
        ));
    }
    let buf = src
        .read_at(off, n as usize)
        .map_err(|e| ReadError::io(path, &e))?;
    if (buf.len() as u64) < n {
        return Err(ReadError::at_byte(
            path,
            off + buf.len() as u64,
            format!("{what} ({n} bytes from offset {off:#x})"),
            format!("the end of the file (file size {})", src.len()),
        ));
    }
    Ok(buf)
}

/// First read of the tracing-data blob: trace-cmd stores every event format of the kernel
/// (2305 files, 2.1 MB on 6.18), so this usually holds the whole blob at once.
const BLOB_FIRST_READ: u64 = 4 << 20;
/// First read of the option blocks and flyrecord table after the blob (usually a few KB).
const TAIL_FIRST_READ: u64 = 64 << 10;

const _: () = assert!(
    BLOB_FIRST_READ.trailing_zeros().is_multiple_of(2)
        && TAIL_FIRST_READ.trailing_zeros().is_multiple_of(2)
        && MAX_METADATA.trailing_zeros().is_multiple_of(2)
        && BLOB_FIRST_READ <= MAX_METADATA
        && TAIL_FIRST_READ <= MAX_METADATA
);

/// Runs `parse` on the first `first` bytes from `off`, reading more (×4) while it fails and
/// the file has more: metadata blocks have no size up front. `first` is a power of 4 times
/// 64 KB, so every size tried ends at exactly [`MAX_METADATA`] and a parse that fails
/// does so on the same bytes whatever `first` is.
fn parse_growing<T>(
    src: &Source,
    path: &str,
    off: u64,
    first: u64,
    parse: impl Fn(&[u8], u64) -> Result<T, BlobError>,
) -> Result<T, ReadError> {
    let mut n: u64 = first;
    loop {
        let buf = src
            .read_at(off, n as usize)
            .map_err(|e| ReadError::io(path, &e))?;
        match parse(&buf, off) {
            Ok(t) => return Ok(t),
            Err(e) => {
                let at_end = off + buf.len() as u64 >= src.len();
                if at_end || n >= MAX_METADATA {
                    return Err(blob_err(path)(e));
                }
                n *= 4;
            }
        }
    }
}

/// Reads the metadata of `src`.
pub fn read_file_info(src: &Source, path: &str) -> Result<FileInfo, ReadError> {
    let head = src.read_at(0, 64).map_err(|e| ReadError::io(path, &e))?;
    if !head.starts_with(TRACE_DAT_MAGIC) {
        return Err(ReadError::at_byte(
            path,
            0,
            "the trace.dat magic 17 08 44 \"tracing\"",
            show_bytes(&head, 16),
        ));
    }
    let rest = &head[TRACE_DAT_MAGIC.len()..];
    let version_text = rest
        .iter()
        .position(|&b| b == 0)
        .map(|n| String::from_utf8_lossy(&rest[..n]).into_owned());
    match version_text.as_deref() {
        Some("6") => read_v6(src, path),
        Some("7") => read_v7(src, path),
        Some(v) => Err(ReadError::at_byte(
            path,
            10,
            "trace.dat version 6 or 7",
            format!("version `{v}`"),
        )),
        None => Err(ReadError::at_byte(
            path,
            10,
            "a NUL-terminated version",
            show_bytes(rest, 16),
        )),
    }
}

fn read_v6(src: &Source, path: &str) -> Result<FileInfo, ReadError> {
    let tracing = parse_growing(src, path, 0, BLOB_FIRST_READ, |b, _| {
        TracingData::parse(b, 0)
    })?;
    let endian = tracing.endian;
    let tail_at = tracing.consumed as u64;
    let (mut options, mut cpus) = parse_growing(src, path, tail_at, TAIL_FIRST_READ, |b, base| {
        let mut c = BlobCursor::new(b, base, endian);
        let header_cpus = c.u32("the number of CPUs")?;
        parse_v6_blocks(&mut c, header_cpus, Options::default(), endian)
    })?;
    let mut instance = String::new();
    let mut other_instances: Vec<String> = options.buffers.iter().map(|b| b.name.clone()).collect();
    // `trace-cmd extract -B NAME` leaves the top instance empty: read the first instance.
    if cpus.iter().all(|c| c.size == 0) && !options.buffers.is_empty() {
        let b = options.buffers[0].clone();
        let n = options.cpu_count.unwrap_or(cpus.len() as u32);
        let (instance_options, instance_cpus) =
            parse_growing(src, path, b.offset, TAIL_FIRST_READ, |bytes, base| {
                let mut c = BlobCursor::new(bytes, base, endian);
                parse_v6_blocks(&mut c, n, Options::default(), endian)
            })?;
        cpus = instance_cpus;
        instance = b.name;
        other_instances.remove(0);
        options.cpustats = instance_options
            .cpustats
            .into_iter()
            .map(|(_, text)| (instance.clone(), text))
            .collect();
        if instance_options.clock.is_some() {
            options.clock = instance_options.clock;
        }
    }
    let subbuf_size = tracing.page_size;
    Ok(FileInfo {
        version: 6,
        tracing,
        options,
        compression: None,
        codec: None,
        cpus,
        subbuf_size,
        cpu_data_compressed: false,
        instance,
        other_instances,
    })
}

/// Option blocks then the `flyrecord` table of `header_cpus` CPUs (or CPUCOUNT's number).
fn parse_v6_blocks(
    c: &mut BlobCursor<'_>,
    header_cpus: u32,
    mut options: Options,
    endian: Endian,
) -> Result<(Options, Vec<CpuArea>), BlobError> {
    loop {
        let at = c.offset();
        let tag = c.take(10, "a 10-byte tag (\"options  \", \"flyrecord\")")?;
        match tag {
            b"options  \0" => loop {
                let idb = c.take(2, "an option id")?;
                let option = endian.u16(idb, 0).unwrap_or(0);
                if option == id::DONE {
                    break;
                }
                let size = c.u32("an option size")?;
                let data_at = c.offset();
                let data = c.take(u64::from(size), "option data")?;
                options.apply(option, data, endian, false, data_at);
            },
            b"flyrecord\0" => {
                let n = u64::from(options.cpu_count.unwrap_or(header_cpus));
                if n > MAX_CPUS {
                    return Err((at, "a plausible CPU count".into(), format!("{n} CPUs")));
                }
                let mut cpus = Vec::with_capacity(n as usize);
                for cpu in 0..n as u32 {
                    let offset = c.u64("a CPU data offset")?;
                    let size = c.u64("a CPU data size")?;
                    cpus.push(CpuArea { cpu, offset, size });
                }
                return Ok((options, cpus));
            }
            b"latency  \0" => {
                return Err((
                    at,
                    "a flyrecord trace.dat (binary CPU data)".into(),
                    "a latency-tracer trace.dat (text data), which is not supported: read it with `trace-cmd report`".into(),
                ))
            }
            other => {
                return Err((
                    at,
                    "\"options  \\0\" or \"flyrecord\\0\"".into(),
                    show_bytes(other, 10),
                ))
            }
        }
    }
}

/// One v7 section: `(id, flags, body)`, the body decompressed.
fn read_section(
    src: &Source,
    path: &str,
    off: u64,
    codec: Option<Codec>,
) -> Result<(u16, u16, Vec<u8>), ReadError> {
    let h = read_exact(src, path, off, SECTION_HEADER, "a section header")?;
    let e = endian_of(src, path)?;
    // INVARIANT: `h` has SECTION_HEADER bytes.
    let (sid, flags, size) = (
        e.u16(&h, 0).unwrap_or(0),
        e.u16(&h, 2).unwrap_or(0),
        e.u64(&h, 8).unwrap_or(0),
    );
    let body_at = off + SECTION_HEADER;
    if flags & SECTION_COMPRESSED == 0 {
        return Ok((
            sid,
            flags,
            read_exact(src, path, body_at, size, "a section body")?,
        ));
    }
    let Some(codec) = codec else {
        return Err(ReadError::at_byte(
            path,
            off,
            "an uncompressed section (the file header names no compression)",
            "a compressed section",
        ));
    };
    let sizes = read_exact(src, path, body_at, 8, "compressed block sizes")?;
    let (csize, usize_) = (e.u32(&sizes, 0).unwrap_or(0), e.u32(&sizes, 4).unwrap_or(0));
    let data = read_exact(
        src,
        path,
        body_at + 8,
        u64::from(csize),
        "compressed section data",
    )?;
    let body = codec
        .decompress(&data, usize_ as usize)
        .map_err(|why| ReadError::at_byte(path, body_at, "a valid compressed section", why))?;
    Ok((sid, flags, body))
}

fn endian_of(src: &Source, path: &str) -> Result<Endian, ReadError> {
    let h = read_exact(src, path, 12, 1, "the endian byte")?;
    Ok(if h[0] == 0 {
        Endian::Little
    } else {
        Endian::Big
    })
}

fn read_v7(src: &Source, path: &str) -> Result<FileInfo, ReadError> {
    let head = src.read_at(0, 4096).map_err(|e| ReadError::io(path, &e))?;
    let mut c = BlobCursor::new(&head, 0, Endian::Little);
    let err = blob_err(path);
    c.take(12, "magic and version").map_err(&err)?;
    let fixed = c.take(6, "endian, long size and page size").map_err(&err)?;
    let endian = if fixed[0] == 0 {
        Endian::Little
    } else {
        Endian::Big
    };
    let long_size = fixed[1];
    let page_size = endian.u32(fixed, 2).unwrap_or(0);
    let c_at = c.offset();
    let cname = c.cstr("the compression name").map_err(&err)?;
    let cversion = c.cstr("the compression version").map_err(&err)?;
    let codec = Codec::from_name(&cname)
        .map_err(|f| ReadError::at_byte(path, c_at, "compression none, zstd or zlib", f))?;
    let mut c = BlobCursor::new(&head[c.consumed()..], c.offset(), endian);
    let first_options = c
        .u64("the offset of the first OPTIONS section")
        .map_err(&err)?;

    let mut options = Options::default();
    let mut next = first_options;
    let mut visited = Vec::new();
    while next != 0 {
        if visited.contains(&next) {
            return Err(ReadError::at_byte(
                path,
                next,
                "an OPTIONS chain without loops",
                "a section seen before",
            ));
        }
        visited.push(next);
        let (sid, _, body) = read_section(src, path, next, codec)?;
        if sid != id::DONE {
            return Err(ReadError::at_byte(
                path,
                next,
                "an OPTIONS section (id 0)",
                format!("section id {sid}"),
            ));
        }
        next =
            parse_v7_options(&body, next + SECTION_HEADER, endian, &mut options).map_err(&err)?;
    }

    let mut tracing = TracingData {
        version: "7".into(),
        endian,
        long_size,
        page_size,
        ..TracingData::default()
    };
    let mut have_header = false;
    for &(sid, off) in &options.sections {
        let (found, _, body) = read_section(src, path, off, codec)?;
        if found != sid {
            return Err(ReadError::at_byte(
                path,
                off,
                format!("section id {sid}"),
                format!("section id {found}"),
            ));
        }
        let mut c = BlobCursor::new(&body, off + SECTION_HEADER, endian);
        match sid {
            id::HEADER_INFO => {
                tracing.read_header_info(&mut c).map_err(&err)?;
                have_header = true;
            }
            id::FTRACE_EVENTS => tracing.read_ftrace_formats(&mut c).map_err(&err)?,
            id::EVENT_FORMATS => tracing.read_event_systems(&mut c).map_err(&err)?,
            id::KALLSYMS => tracing.kallsyms = c.sized_text_u32("kallsyms").map_err(&err)?,
            id::PRINTK => {
                tracing.printk_formats = c.sized_text_u32("printk formats").map_err(&err)?
            }
            id::CMDLINES => {
                tracing.saved_cmdlines = c.sized_text_u64("saved cmdlines").map_err(&err)?
            }
            _ => {}
        }
    }
    if !have_header {
        return Err(ReadError::at_byte(
            path,
            first_options,
            "a HEADER_INFO option (header_page)",
            "none in the OPTIONS sections",
        ));
    }

    // The top instance (name ""), unless it holds no data and an instance does
    // (`trace-cmd extract -B NAME`).
    let has_data = |b: &super::options::BufferOption| b.cpus.iter().any(|c| c.size > 0);
    let top_index = options
        .buffers
        .iter()
        .position(|b| b.name.is_empty() && has_data(b))
        .or_else(|| options.buffers.iter().position(has_data))
        .or_else(|| options.buffers.iter().position(|b| b.name.is_empty()))
        .or(if options.buffers.is_empty() {
            None
        } else {
            Some(0)
        });
    let Some(top_index) = top_index else {
        return Err(ReadError::at_byte(
            path,
            first_options,
            "a BUFFER option with the CPU data",
            "no BUFFER option",
        ));
    };
    let top = options.buffers[top_index].clone();
    if top.latency {
        return Err(ReadError::at_byte(path, top.offset, "a flyrecord trace.dat (binary CPU data)", "a latency-tracer trace.dat (text data), which is not supported: read it with `trace-cmd report`"));
    }
    let h = read_exact(
        src,
        path,
        top.offset,
        SECTION_HEADER,
        "the BUFFER section header",
    )?;
    let flags = endian.u16(&h, 2).unwrap_or(0);
    let cpu_data_compressed = flags & SECTION_COMPRESSED != 0;
    if cpu_data_compressed && codec.is_none() {
        return Err(ReadError::at_byte(
            path,
            top.offset,
            "uncompressed CPU data (the file header names no compression)",
            "a compressed BUFFER section",
        ));
    }
    let other_instances = options
        .buffers
        .iter()
        .enumerate()
        .filter(|&(i, _)| i != top_index)
        .map(|(_, b)| b.name.clone())
        .collect();
    if let Some(clock) = &top.clock {
        if options.clock.is_none() {
            options.clock = Some(clock.clone());
        }
    }
    Ok(FileInfo {
        version: 7,
        tracing,
        compression: codec.map(|_| format!("{cname} {cversion}")),
        codec,
        cpus: top.cpus.clone(),
        subbuf_size: top.page_size.unwrap_or(page_size),
        cpu_data_compressed,
        instance: top.name.clone(),
        other_instances,
        options,
    })
}

/// Applies the options of one v7 OPTIONS body; returns the next section offset from DONE.
fn parse_v7_options(
    body: &[u8],
    base: u64,
    endian: Endian,
    options: &mut Options,
) -> Result<u64, BlobError> {
    let mut c = BlobCursor::new(body, base, endian);
    loop {
        let idb = c.take(2, "an option id")?;
        let option = endian.u16(idb, 0).unwrap_or(0);
        let size = c.u32("an option size")?;
        let data_at = c.offset();
        let data = c.take(u64::from(size), "option data")?;
        if option == id::DONE {
            return endian.u64(data, 0).ok_or((
                data_at,
                "a u64 next-section offset in DONE".into(),
                format!("{size} bytes"),
            ));
        }
        options.apply(option, data, endian, true, data_at);
    }
}
