//! trace.dat v7 compression: the algorithm named in the file header (`zstd`, `zlib` or
//! `none`) and its two framings.
//!
//! ```text
//! compressed section body   u32 compressed size, u32 uncompressed size, data
//! compressed CPU data       u32 chunk count, count × (u32 compressed size,
//!                           u32 uncompressed size (a multiple of the page size), data)
//! ```
//! `zlib` blocks are zlib streams (RFC 1950, what `compress2` writes); `zstd` blocks are
//! zstd frames. Decompressed sizes come from the file and are checked, and memory is
//! reserved only as the data actually decompresses (a corrupt size cannot allocate much).

use std::io::Read;

/// Compression algorithm of a v7 file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Codec {
    /// zstd frames.
    Zstd,
    /// zlib streams.
    Zlib,
}

/// Largest decompressed block accepted (trace-cmd writes chunks of about a MiB and
/// metadata sections of a few MiB).
pub const MAX_BLOCK: usize = 64 << 20;

impl Codec {
    /// From the header's algorithm name; `Ok(None)` for `none`, `Err` for an unknown name.
    pub fn from_name(name: &str) -> Result<Option<Codec>, String> {
        match name {
            "none" | "" => Ok(None),
            "zstd" => Ok(Some(Codec::Zstd)),
            "zlib" => Ok(Some(Codec::Zlib)),
            other => Err(format!("compression `{other}`")),
        }
    }

    /// Decompresses `data`, which must expand to exactly `expected` bytes.
    pub fn decompress(self, data: &[u8], expected: usize) -> Result<Vec<u8>, String> {
        if expected > MAX_BLOCK {
            return Err(format!("a decompressed size of {expected} bytes"));
        }
        let mut out = Vec::with_capacity(expected.min(16 << 20));
        let limit = expected as u64 + 1;
        let res = match self {
            Codec::Zstd => zstd::stream::read::Decoder::with_buffer(data)
                .and_then(|d| d.take(limit).read_to_end(&mut out)),
            Codec::Zlib => flate2::read::ZlibDecoder::new(data)
                .take(limit)
                .read_to_end(&mut out),
        };
        match res {
            Ok(_) if out.len() == expected => Ok(out),
            Ok(_) => Err(format!(
                "a block decompressing to {} bytes instead of the {expected} announced",
                out.len()
            )),
            Err(e) => Err(format!("corrupt {self:?} data ({e})")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn round_trips_and_checks_the_size() {
        let text = b"sched_switch ".repeat(1000);
        let z = zstd::encode_all(&text[..], 3).unwrap();
        assert_eq!(Codec::Zstd.decompress(&z, text.len()).unwrap(), text);
        assert!(Codec::Zstd.decompress(&z, text.len() - 1).is_err());
        assert!(Codec::Zstd.decompress(&z, text.len() + 1).is_err());
        let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
        e.write_all(&text).unwrap();
        let zl = e.finish().unwrap();
        assert_eq!(Codec::Zlib.decompress(&zl, text.len()).unwrap(), text);
        assert!(Codec::Zlib.decompress(&zl[..10], text.len()).is_err());
        assert!(Codec::Zstd.decompress(&[1, 2, 3], 10).is_err());
        assert!(Codec::Zstd.decompress(&z, usize::MAX).is_err());
        assert_eq!(Codec::from_name("none"), Ok(None));
        assert!(Codec::from_name("lz4").is_err());
    }
}
