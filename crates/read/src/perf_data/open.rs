//! Opening a perf input: magic and byte order, pipe mode (metadata records come first) or
//! file mode (header, attrs with their ids, feature sections after the data, then the data
//! section streamed). Every section is bounds-checked against the file length and a size cap
//! before anything is read, so a corrupt header cannot cause a huge allocation.

use std::io::{Read, Seek, SeekFrom};

use stallscope_model::{InputFormat, Problem, TraceMeta};

use super::attr::Attr;
use super::header::{feat, FileHeader, Section};
use super::pipeline::Pipeline;
use super::spool::{self, ReadSeek};
use super::stream::{DataMap, RawStream};
use crate::tracefs_format::Endian;
use crate::{Input, ReadError};

/// Biggest attrs or feature section read into memory.
const MAX_SECTION: u64 = 256 << 20;

impl Pipeline {
    /// Opens `input` (file or pipe mode, decided by the header size) as input number `index`.
    pub(super) fn open(input: Input, index: u16) -> Result<Pipeline, ReadError> {
        let path = input.path.clone();
        let head = &input.head;
        let endian = if head.starts_with(b"PERFILE2") {
            Endian::Little
        } else if head.starts_with(b"2ELIFREP") {
            Endian::Big
        } else {
            let found = if head.is_empty() {
                "an empty file".to_string()
            } else {
                crate::error::show_bytes(head, 16)
            };
            return Err(ReadError::at_byte(
                &path,
                0,
                "the perf.data magic PERFILE2",
                found,
            ));
        };
        let header_size = endian
            .u64(head, 8)
            .ok_or_else(|| ReadError::at_byte(&path, 8, "the 8-byte header size", "end of file"))?;
        let meta = TraceMeta {
            path: path.clone(),
            compression: input.compression.map(str::to_string),
            clock: Some("perf".to_string()),
            clock_is_ns: true,
            ..TraceMeta::default()
        };
        if header_size == 16 {
            let mut r = input.into_reader();
            let mut magic = [0u8; 16];
            r.read_exact(&mut magic)
                .map_err(|e| ReadError::io(&path, &e))?;
            let raw = RawStream::new(r, 16, None, endian);
            let mut rd = Pipeline::new(path, index, meta, endian, raw, None, InputFormat::PerfPipe);
            rd.read_pipe_prelude()?;
            return Ok(rd);
        }
        if header_size < FileHeader::LEN as u64 {
            return Err(ReadError::at_byte(
                &path,
                8,
                format!("a header size of at least {} bytes", FileHeader::LEN),
                format!("{header_size}"),
            ));
        }
        // `file`: a second handle on a real file, for mapping the data section.
        let (mut src, len, file): (Box<dyn ReadSeek>, u64, Option<std::fs::File>) =
            match input.into_file() {
                Ok(f) => {
                    let len = f.metadata().map_err(|e| ReadError::io(&path, &e))?.len();
                    let file = f.try_clone().ok();
                    (Box::new(f), len, file)
                }
                Err(input) => {
                    let (src, len) =
                        spool::spool(input.into_reader()).map_err(|e| ReadError::io(&path, &e))?;
                    (src, len, None)
                }
            };
        let hbytes = read_section(
            &path,
            &mut src,
            len,
            Section {
                offset: 0,
                size: FileHeader::LEN as u64,
            },
            "the file header",
        )?;
        let mut fh = FileHeader::parse(&hbytes, endian).ok_or_else(|| {
            ReadError::at_byte(&path, 0, "a complete file header", "a short header")
        })?;
        // A `perf record` killed before it finished leaves the header's data size 0 (it is
        // written at the end, with the feature sections after the data); a copy cut short
        // ends inside the data. Either way the records up to the last complete one are
        // read (as perf does), the feature sections are absent, and data quality says why.
        let incomplete = if fh.data.offset > len {
            return Err(ReadError::at_byte(
                &path,
                len,
                format!("the data section to start at offset {:#x}", fh.data.offset),
                "end of file (truncated file?)",
            ));
        } else if fh.data.size == 0 && !features_fit(&mut src, &fh, len, endian) {
            Some(format!(
                "the header's data size is 0: perf record did not finish (killed?); the {} bytes after the header at offset {:#x} are read up to the last complete record, and the feature sections (kernel release, CPU count, command line, event names) are missing",
                len - fh.data.offset,
                fh.data.offset
            ))
        } else if fh.data.end() > len {
            Some(format!(
                "the file ends at offset {len:#x}, inside the data section ({} bytes at offset {:#x}, to end at {:#x}): cut short; records are read up to the last complete one, and the feature sections after the data are missing",
                fh.data.size,
                fh.data.offset,
                fh.data.end()
            ))
        } else {
            None
        };
        if incomplete.is_some() {
            fh.data.size = len - fh.data.offset;
        }
        let attrs = read_attrs(&path, &mut src, len, &fh, endian)?;
        // The data stream is attached below, once the feature sections (read through the
        // same file handle) have been applied.
        let raw_placeholder =
            RawStream::new(Box::new(std::io::empty()), fh.data.offset, Some(0), endian);
        let mut rd = Pipeline::new(
            path,
            index,
            meta,
            endian,
            raw_placeholder,
            Some(fh.data.end()),
            InputFormat::PerfData,
        );
        rd.attrs = attrs;
        rd.ends_early = incomplete.is_some();
        match &incomplete {
            None => rd.read_features(&mut src, len, &fh)?,
            Some(why) => rd.dq.add(Problem::PerfDataIncomplete, 1, || why.clone()),
        }
        if rd.tracing.is_none() {
            rd.formats_from_host(&mut src, &fh, len)?;
        }
        src.seek(SeekFrom::Start(fh.data.offset))
            .map_err(|e| ReadError::io(&rd.path, &e))?;
        // A file's data section is mapped (no read() copies); if mapping fails it is read.
        let map = file
            .filter(|_| fh.data.size > 0)
            .and_then(|f| DataMap::new(&f, fh.data.offset, fh.data.size).ok());
        rd.raw = match map {
            Some(map) => RawStream::mapped(&mut rd.pool, map, endian),
            None => RawStream::new(Box::new(src), fh.data.offset, Some(fh.data.size), endian),
        };
        rd.rebuild();
        Ok(rd)
    }

    /// A file without tracing data whose attrs are tracepoints (a killed `perf record`):
    /// their formats from this host's tracefs when the file was recorded on its running
    /// kernel ([`super::host_formats`]), said in data quality either way.
    fn formats_from_host(
        &mut self,
        src: &mut Box<dyn ReadSeek>,
        fh: &FileHeader,
        len: u64,
    ) -> Result<(), ReadError> {
        let tracepoints = || {
            self.attrs
                .iter()
                .filter(|a| a.kind == super::attr::TYPE_TRACEPOINT)
        };
        let ids: Vec<u64> = tracepoints().map(|a| a.config).collect();
        let sample_type = tracepoints().map(|a| a.sample_type).next().unwrap_or(0);
        if ids.is_empty() {
            return Ok(());
        }
        let n = (len - fh.data.offset).min(1 << 20) as usize;
        let mut start = vec![0u8; n];
        src.seek(SeekFrom::Start(fh.data.offset))
            .and_then(|_| src.read_exact(&mut start))
            .map_err(|e| ReadError::io(&self.path, &e))?;
        match super::host_formats::formats_from_host(&start, self.endian, &ids, sample_type) {
            Ok((td, release)) => {
                let names: Vec<String> = td.events.iter().map(|f| f.full_name()).collect();
                self.dq.add(Problem::PerfFormatsFromHost, 1, || {
                    format!(
                        "{}: {} formats ({}) from this host's tracefs, kernel {release}",
                        self.path,
                        names.len(),
                        names.join(", ")
                    )
                });
                if !release.is_empty() {
                    self.meta.kernel_release = Some(release);
                }
                self.tracing = Some(td);
            }
            Err(why) => self.dq.add(Problem::PerfFormatsMissing, 1, || {
                format!(
                    "{}: {} tracepoints without formats: {why}",
                    self.path,
                    ids.len()
                )
            }),
        }
        Ok(())
    }

    fn read_features(
        &mut self,
        src: &mut Box<dyn ReadSeek>,
        len: u64,
        fh: &FileHeader,
    ) -> Result<(), ReadError> {
        let bits = fh.feature_bits();
        let table = Section {
            offset: fh.data.end(),
            size: 16 * bits.len() as u64,
        };
        let tbytes = read_section(&self.path, src, len, table, "the feature section table")?;
        for (&bit, entry) in bits.iter().zip(tbytes.chunks_exact(16)) {
            let sec = Section::at(entry, 0, self.endian).unwrap_or_default();
            if sec.offset > len || sec.size > len - sec.offset {
                return Err(ReadError::at_byte(
                    &self.path,
                    sec.offset,
                    format!("feature section {bit} ({} bytes)", sec.size),
                    format!("end of file at offset {len:#x} (truncated file?)"),
                ));
            }
            let used = matches!(
                bit,
                feat::TRACING_DATA
                    | feat::BUILD_ID
                    | feat::HOSTNAME
                    | feat::OSRELEASE
                    | feat::VERSION
                    | feat::NRCPUS
                    | feat::CMDLINE
                    | feat::EVENT_DESC
                    | feat::CLOCKID
            );
            if used {
                let bytes =
                    read_section(&self.path, src, len, sec, &format!("feature section {bit}"))?;
                self.apply_feature(bit, &bytes, sec.offset)?;
            }
        }
        Ok(())
    }
}

/// Whether a valid feature section table follows the data (a finished recording writes one
/// after its data; one killed before it finished has none, and its data size is still 0):
/// every entry must lie in the file, after the table.
fn features_fit(src: &mut Box<dyn ReadSeek>, fh: &FileHeader, len: u64, endian: Endian) -> bool {
    let n = fh.feature_bits().len() as u64;
    if n == 0 {
        return true;
    }
    let table = Section {
        offset: fh.data.end(),
        size: 16 * n,
    };
    let Ok(bytes) = read_section("", src, len, table, "") else {
        return false;
    };
    bytes.chunks_exact(16).all(|entry| {
        Section::at(entry, 0, endian).is_some_and(|sec| {
            sec.offset >= table.offset + table.size
                && sec.offset <= len
                && sec.size <= len - sec.offset
        })
    })
}

/// Reads a file section after checking it lies inside the file and is of sane size.
fn read_section(
    path: &str,
    src: &mut Box<dyn ReadSeek>,
    len: u64,
    sec: Section,
    what: &str,
) -> Result<Vec<u8>, ReadError> {
    if sec.size > MAX_SECTION {
        return Err(ReadError::at_byte(
            path,
            sec.offset,
            format!("{what} of at most {MAX_SECTION} bytes"),
            format!("a size of {} bytes", sec.size),
        ));
    }
    if sec.offset > len || sec.size > len - sec.offset {
        return Err(ReadError::at_byte(
            path,
            sec.offset,
            format!("{what} ({} bytes)", sec.size),
            format!("end of file at offset {len:#x}"),
        ));
    }
    let mut buf = vec![0u8; sec.size as usize];
    src.seek(SeekFrom::Start(sec.offset))
        .and_then(|_| src.read_exact(&mut buf))
        .map_err(|e| {
            ReadError::at_byte(
                path,
                sec.offset,
                what.to_string(),
                format!("I/O error: {e}"),
            )
        })?;
    Ok(buf)
}

/// The attrs section with each attr's ids.
fn read_attrs(
    path: &str,
    src: &mut Box<dyn ReadSeek>,
    len: u64,
    fh: &FileHeader,
    e: Endian,
) -> Result<Vec<Attr>, ReadError> {
    if fh.attr_size < 16 + 64 || fh.attr_size > 4096 {
        return Err(ReadError::at_byte(
            path,
            16,
            "an attr entry size between 80 and 4096 bytes",
            format!("{}", fh.attr_size),
        ));
    }
    let bytes = read_section(path, src, len, fh.attrs, "the attrs section")?;
    let stride = fh.attr_size as usize;
    let mut attrs = Vec::new();
    for (i, entry) in bytes.chunks_exact(stride).enumerate() {
        let mut a = Attr::parse(&entry[..stride - 16], e);
        if let Some(ids) = Section::at(entry, stride - 16, e) {
            let what = format!("the ids of attr {i}");
            let b = read_section(path, src, len, ids, &what)?;
            a.ids = b.chunks_exact(8).filter_map(|c| e.u64(c, 0)).collect();
        }
        attrs.push(a);
    }
    Ok(attrs)
}
