//! A seekable copy of a forward-only input (stdin, `.xz`/`.gz`/`.zst` files): perf.data file
//! mode keeps its metadata after the data, so the data cannot be decoded before the end has
//! been seen. Small inputs are kept in memory; past [`SPOOL_IN_MEMORY`] bytes the content
//! goes to an unlinked temporary file (so the memory footprint stays bounded).

use std::fs::{File, OpenOptions};
use std::io::{self, Cursor, Read, Seek, SeekFrom, Write};

/// Inputs up to this size are spooled to memory.
pub const SPOOL_IN_MEMORY: usize = 64 << 20;

/// `Read + Seek` as one object-safe trait.
pub trait ReadSeek: Read + Seek + Send {}
impl<T: Read + Seek + Send> ReadSeek for T {}

/// A seekable source and its length.
pub fn spool(mut r: Box<dyn Read + Send>) -> io::Result<(Box<dyn ReadSeek>, u64)> {
    let mut mem = Vec::new();
    (&mut r)
        .take(SPOOL_IN_MEMORY as u64 + 1)
        .read_to_end(&mut mem)?;
    if mem.len() <= SPOOL_IN_MEMORY {
        let len = mem.len() as u64;
        return Ok((Box::new(Cursor::new(mem)), len));
    }
    let mut f = temp_file()?;
    f.write_all(&mem)?;
    drop(mem);
    io::copy(&mut r, &mut f)?;
    let len = f.stream_position()?;
    f.seek(SeekFrom::Start(0))?;
    Ok((Box::new(f), len))
}

/// A new file in the temp directory, already unlinked.
fn temp_file() -> io::Result<File> {
    let dir = std::env::temp_dir();
    for attempt in 0..100u32 {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let path = dir.join(format!(
            "stallscope-spool-{}-{nanos}-{attempt}",
            std::process::id()
        ));
        match OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(&path)
        {
            Ok(f) => {
                // The open descriptor keeps the data; nothing is left behind on exit.
                std::fs::remove_file(&path)?;
                return Ok(f);
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    Err(io::Error::new(
        io::ErrorKind::AlreadyExists,
        "no free temporary file name",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_inputs_stay_in_memory_and_seek() {
        let (mut s, len) = spool(Box::new(Cursor::new(b"hello world".to_vec()))).unwrap();
        assert_eq!(len, 11);
        s.seek(SeekFrom::Start(6)).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        assert_eq!(out, "world");
    }

    #[test]
    fn temp_files_vanish() {
        let mut f = temp_file().unwrap();
        f.write_all(b"x").unwrap();
        let leftovers = std::fs::read_dir(std::env::temp_dir())
            .unwrap()
            .filter_map(Result::ok)
            .filter(|e| {
                e.file_name()
                    .to_string_lossy()
                    .starts_with(&format!("stallscope-spool-{}-", std::process::id()))
            })
            .count();
        assert_eq!(leftovers, 0);
    }
}
