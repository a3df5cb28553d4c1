//! [`Source`]: random access to a trace.dat's bytes, shared by the per-CPU decoding threads.
//!
//! trace.dat keeps its metadata and each CPU's data at absolute offsets (v7 sections may be
//! anywhere), so the reader needs positioned reads. An uncompressed regular file is read
//! with `pread` (`FileExt::read_at`, safe from several threads at once). A forward-only
//! input (stdin, `.xz`/`.gz`/`.zst` files) is copied first: to memory up to
//! [`IN_MEMORY_MAX`] bytes, beyond that to an unlinked temporary file, so memory stays
//! bounded for big inputs.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::FileExt;

use crate::{Input, ReadError};

/// Forward-only inputs up to this size are kept in memory.
pub const IN_MEMORY_MAX: usize = 128 << 20;

/// The bytes of one trace.dat.
pub enum Source {
    /// A regular file and its length.
    File(File, u64),
    /// The whole content.
    Memory(Vec<u8>),
}

impl Source {
    /// Makes `input` randomly accessible (copying it when it is a stream).
    pub fn from_input(input: Input) -> Result<Source, ReadError> {
        let path = input.path.clone();
        let io_err = |e: io::Error| ReadError::io(&path, &e);
        match input.into_file() {
            Ok(f) => {
                let len = f.metadata().map_err(io_err)?.len();
                Ok(Source::File(f, len))
            }
            Err(input) => {
                let mut r = input.into_reader();
                let mut mem = Vec::new();
                (&mut r)
                    .take(IN_MEMORY_MAX as u64 + 1)
                    .read_to_end(&mut mem)
                    .map_err(io_err)?;
                if mem.len() <= IN_MEMORY_MAX {
                    return Ok(Source::Memory(mem));
                }
                let mut f = unlinked_temp_file().map_err(io_err)?;
                f.write_all(&mem).map_err(io_err)?;
                drop(mem);
                io::copy(&mut r, &mut f).map_err(io_err)?;
                let len = f.metadata().map_err(io_err)?.len();
                Ok(Source::File(f, len))
            }
        }
    }

    /// Total length in bytes.
    pub fn len(&self) -> u64 {
        match self {
            Source::File(_, len) => *len,
            Source::Memory(m) => m.len() as u64,
        }
    }

    /// Up to `n` bytes at `off` (fewer only at the end of the data).
    pub fn read_at(&self, off: u64, n: usize) -> io::Result<Vec<u8>> {
        let mut buf = Vec::new();
        self.read_into(off, n, &mut buf)?;
        Ok(buf)
    }

    /// Like [`Source::read_at`], reusing `buf`'s allocation (no zeroing of a reused buffer).
    pub fn read_into(&self, off: u64, n: usize, buf: &mut Vec<u8>) -> io::Result<()> {
        let avail = self.len().saturating_sub(off);
        let n = n.min(usize::try_from(avail).unwrap_or(usize::MAX));
        if n == 0 {
            buf.clear();
            return Ok(());
        }
        match self {
            Source::Memory(m) => {
                // INVARIANT: n > 0, so off < len and off + n <= len (through `avail` above).
                let start = off as usize;
                buf.clear();
                buf.extend_from_slice(&m[start..start + n]);
                Ok(())
            }
            Source::File(f, _) => {
                if buf.len() != n {
                    buf.resize(n, 0);
                }
                let mut done = 0;
                while done < n {
                    match f.read_at(&mut buf[done..], off + done as u64) {
                        Ok(0) => break,
                        Ok(k) => done += k,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) => return Err(e),
                    }
                }
                buf.truncate(done);
                Ok(())
            }
        }
    }
}

/// A new file in the temp directory, already unlinked (its descriptor keeps the data).
fn unlinked_temp_file() -> io::Result<File> {
    let dir = std::env::temp_dir();
    for attempt in 0..100u32 {
        let path = dir.join(format!(
            "stallscope-tracedat-{}-{attempt}",
            std::process::id()
        ));
        match OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(f) => {
                std::fs::remove_file(&path)?;
                return Ok(f);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        "no free temporary file name",
    ))
}
