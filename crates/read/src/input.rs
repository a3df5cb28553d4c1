//! [`Input`]: a path or `-` (stdin), with gzip / zstd / xz compression removed
//! transparently (detected by magic bytes, not by file name), and the first bytes kept for
//! format sniffing.
//!
//! An uncompressed regular file stays a [`std::fs::File`] so binary readers can seek (perf.data
//! file mode keeps its metadata at the end). Everything else is a forward-only stream.

use std::fs::File;
use std::io::{self, Cursor, Read, Seek, SeekFrom};

use crate::error::ReadError;

/// How many leading bytes are kept for sniffing.
pub const HEAD_LEN: usize = 64 * 1024;

/// An opened input.
pub struct Input {
    /// Path as given (`-` for stdin).
    pub path: String,
    /// Compression that was removed (`gzip`, `zstd`, `xz`).
    pub compression: Option<&'static str>,
    /// The first up to [`HEAD_LEN`] bytes of the (decompressed) content.
    pub head: Vec<u8>,
    body: Body,
}

enum Body {
    /// Uncompressed regular file, positioned at 0.
    File(File),
    /// Stream positioned just after `head`.
    Stream(Box<dyn Read + Send>),
}

fn read_up_to(r: &mut dyn Read, n: usize) -> io::Result<Vec<u8>> {
    let mut buf = Vec::with_capacity(n);
    r.take(n as u64).read_to_end(&mut buf)?;
    Ok(buf)
}

/// Whether `path` can be read only once, from its start: `-` (standard input) or a file that
/// is not a regular file (a named pipe such as bash's `<(cmd)`, a character device). Such an
/// input is read as a stream — never seeked, never opened a second time.
pub fn is_stream(path: &str) -> bool {
    path == "-" || std::fs::metadata(path).is_ok_and(|m| !m.is_file() && !m.is_dir())
}

impl Input {
    /// Opens `path` (`-` = stdin).
    pub fn open(path: &str) -> Result<Input, ReadError> {
        let io_err = |e: io::Error| ReadError::io(path, &e);
        if path == "-" {
            let stdin: Box<dyn Read + Send> = Box::new(io::stdin());
            return Self::from_stream(path, stdin);
        }
        let mut f = File::open(path).map_err(io_err)?;
        let meta = f.metadata().map_err(io_err)?;
        if meta.is_dir() {
            return Err(ReadError::new(path, None, "a trace file", "a directory"));
        }
        if !meta.is_file() {
            // a named pipe or device: read once as a stream, like stdin
            return Self::from_stream(path, Box::new(f));
        }
        let mut magic = [0u8; 6];
        let n = read_up_to(&mut f, 6).map_err(io_err)?;
        magic[..n.len()].copy_from_slice(&n);
        f.seek(SeekFrom::Start(0)).map_err(io_err)?;
        if meta.is_file() && compression_of(&magic[..n.len()]).is_none() {
            let head = read_up_to(&mut f, HEAD_LEN).map_err(io_err)?;
            f.seek(SeekFrom::Start(0)).map_err(io_err)?;
            return Ok(Input {
                path: path.to_string(),
                compression: None,
                head,
                body: Body::File(f),
            });
        }
        Self::from_stream(path, Box::new(f))
    }

    /// Wraps an arbitrary stream (decompressing it if its magic says so).
    pub fn from_stream(path: &str, mut raw: Box<dyn Read + Send>) -> Result<Input, ReadError> {
        let io_err = |e: io::Error| ReadError::io(path, &e);
        let magic = read_up_to(&mut raw, 6).map_err(io_err)?;
        let comp = compression_of(&magic);
        let joined: Box<dyn Read + Send> = Box::new(Cursor::new(magic).chain(raw));
        let mut stream: Box<dyn Read + Send> = match comp {
            Some("gzip") => Box::new(flate2::read::MultiGzDecoder::new(joined)),
            Some("zstd") => Box::new(zstd::stream::read::Decoder::new(joined).map_err(io_err)?),
            Some("xz") => Box::new(xz2::read::XzDecoder::new_multi_decoder(joined)),
            _ => joined,
        };
        let head = read_up_to(&mut stream, HEAD_LEN).map_err(|e| {
            ReadError::new(
                path,
                None,
                format!("a valid {} stream", comp.unwrap_or("input")),
                format!("{e}"),
            )
        })?;
        Ok(Input {
            path: path.to_string(),
            compression: comp,
            head,
            body: Body::Stream(stream),
        })
    }

    /// For tests and fuzzing: an in-memory input.
    pub fn from_bytes(path: &str, bytes: Vec<u8>) -> Result<Input, ReadError> {
        Self::from_stream(path, Box::new(Cursor::new(bytes)))
    }

    /// True when the input is a seekable uncompressed file.
    pub fn is_seekable_file(&self) -> bool {
        matches!(self.body, Body::File(_))
    }

    /// The uncompressed regular file, positioned at 0, or the input back if it is a stream.
    pub fn into_file(self) -> Result<File, Input> {
        match self.body {
            Body::File(f) => Ok(f),
            Body::Stream(_) => Err(self),
        }
    }

    /// The whole content as one forward stream from byte 0.
    pub fn into_reader(self) -> Box<dyn Read + Send> {
        match self.body {
            Body::File(f) => Box::new(f),
            Body::Stream(s) => Box::new(Cursor::new(self.head).chain(s)),
        }
    }
}

/// `gzip`, `zstd` or `xz` from the first bytes.
pub fn compression_of(magic: &[u8]) -> Option<&'static str> {
    if magic.starts_with(&[0x1f, 0x8b]) {
        Some("gzip")
    } else if magic.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        Some("zstd")
    } else if magic.starts_with(&[0xfd, b'7', b'z', b'X', b'Z', 0]) {
        Some("xz")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn decompresses_transparently() {
        let text = b"cpus=2\nhello\n".repeat(10);
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&text).unwrap();
        let gz = gz.finish().unwrap();
        let zs = zstd::encode_all(&text[..], 1).unwrap();
        let mut xz = xz2::write::XzEncoder::new(Vec::new(), 1);
        xz.write_all(&text).unwrap();
        let xz = xz.finish().unwrap();
        for (bytes, name) in [(gz, "gzip"), (zs, "zstd"), (xz, "xz")] {
            let inp = Input::from_bytes("t", bytes).unwrap();
            assert_eq!(inp.compression, Some(name));
            assert_eq!(inp.head, text);
            let mut all = Vec::new();
            inp.into_reader().read_to_end(&mut all).unwrap();
            assert_eq!(all, text);
        }
    }

    #[test]
    fn plain_stream_keeps_all_bytes() {
        let data: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let inp = Input::from_bytes("t", data.clone()).unwrap();
        assert_eq!(inp.compression, None);
        assert_eq!(inp.head.len(), HEAD_LEN);
        let mut all = Vec::new();
        inp.into_reader().read_to_end(&mut all).unwrap();
        assert_eq!(all, data);
    }

    #[test]
    fn missing_file_is_an_error_naming_it() {
        let e = Input::open("/nonexistent/x.data").err().unwrap();
        assert!(e.to_string().contains("/nonexistent/x.data"));
    }

    #[test]
    fn corrupt_compressed_stream_is_an_error() {
        let mut bad = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3];
        bad.extend_from_slice(&[0xff; 64]);
        assert!(Input::from_bytes("bad.gz", bad).is_err());
    }
}
