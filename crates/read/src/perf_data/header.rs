//! The perf.data file header and the feature sections (file mode), and the feature payloads
//! shared with pipe mode (`HEADER_FEATURE` records carry the same bytes).
//!
//! ```text
//! 0   "PERFILE2" (byte-swapped "2ELIFREP" = big-endian file)
//! 8   u64 header size (104; 16 = pipe mode)
//! 16  u64 attr_size (perf_event_attr + 16)
//! 24  {u64 offset, u64 size} attrs: n × (attr, {u64 offset, u64 size} ids → u64[])
//! 40  {u64 offset, u64 size} data
//! 56  {u64 offset, u64 size} event_types (legacy)
//! 72  u64 features[4] bitmap; after the data section: one {offset, size} per set bit
//! ```
//! Features used: 1 TRACING_DATA, 3 HOSTNAME, 4 OSRELEASE, 5 VERSION, 7 NRCPUS
//! (`u32 available, u32 online`), 11 CMDLINE (`u32 n` strings), 12 EVENT_DESC
//! (`u32 n, u32 attr_size, n × {attr, u32 nr_ids, string name, u64 ids[]}`), 23 CLOCKID.
//! A string is `u32 len` + `len` bytes, NUL-padded.

use crate::tracefs_format::Endian;

/// Feature bit numbers.
pub mod feat {
    /// HEADER_TRACING_DATA.
    pub const TRACING_DATA: u32 = 1;
    /// HEADER_BUILD_ID: build ids of the binaries the recording touched.
    pub const BUILD_ID: u32 = 2;
    /// Host name.
    pub const HOSTNAME: u32 = 3;
    /// Kernel release.
    pub const OSRELEASE: u32 = 4;
    /// perf version.
    pub const VERSION: u32 = 5;
    /// CPU counts.
    pub const NRCPUS: u32 = 7;
    /// perf command line.
    pub const CMDLINE: u32 = 11;
    /// Event names.
    pub const EVENT_DESC: u32 = 12;
    /// Clock id.
    pub const CLOCKID: u32 = 23;
}

/// `{offset, size}`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Section {
    /// Offset in the file.
    pub offset: u64,
    /// Size in bytes.
    pub size: u64,
}

impl Section {
    /// Reads a section at `off` of `b`.
    pub fn at(b: &[u8], off: usize, e: Endian) -> Option<Section> {
        Some(Section {
            offset: e.u64(b, off)?,
            size: e.u64(b, off + 8)?,
        })
    }

    /// End offset (saturating).
    pub fn end(&self) -> u64 {
        self.offset.saturating_add(self.size)
    }
}

/// The file-mode header.
#[derive(Clone, Copy, Debug)]
pub struct FileHeader {
    /// Bytes of one attrs-section entry.
    pub attr_size: u64,
    /// Attrs section.
    pub attrs: Section,
    /// Data section.
    pub data: Section,
    /// Feature bitmap.
    pub features: [u64; 4],
}

impl FileHeader {
    /// Bytes of the header this reader needs.
    pub const LEN: usize = 104;

    /// Parses the first [`FileHeader::LEN`] bytes (the magic already checked).
    pub fn parse(b: &[u8], e: Endian) -> Option<FileHeader> {
        let mut features = [0; 4];
        for (i, f) in features.iter_mut().enumerate() {
            *f = e.u64(b, 72 + 8 * i)?;
        }
        Some(FileHeader {
            attr_size: e.u64(b, 16)?,
            attrs: Section::at(b, 24, e)?,
            data: Section::at(b, 40, e)?,
            features,
        })
    }

    /// Set feature bits in increasing order.
    pub fn feature_bits(&self) -> Vec<u32> {
        (0..256u32)
            .filter(|&bit| self.features[(bit / 64) as usize] & (1 << (bit % 64)) != 0)
            .collect()
    }
}

/// A perf header string (`u32 len`, bytes, NUL-padded) at `*off`; advances `off`.
pub fn header_string(b: &[u8], off: &mut usize, e: Endian) -> Option<String> {
    let len = e.u32(b, *off)? as usize;
    let start = *off + 4;
    let s = b.get(start..start.checked_add(len)?)?;
    *off = start + len;
    let end = memchr::memchr(0, s).unwrap_or(s.len());
    Some(String::from_utf8_lossy(&s[..end]).into_owned())
}

/// EVENT_DESC: `(name, ids)` per event.
pub fn event_desc(b: &[u8], e: Endian) -> Option<Vec<(String, Vec<u64>)>> {
    let nr = e.u32(b, 0)? as usize;
    let attr_size = e.u32(b, 4)? as usize;
    let mut off: usize = 8;
    let mut out = Vec::new();
    for _ in 0..nr {
        off = off.checked_add(attr_size)?;
        let nr_ids = e.u32(b, off)? as usize;
        off += 4;
        let name = header_string(b, &mut off, e)?;
        let ids_len = nr_ids.checked_mul(8)?;
        let ids_bytes = b.get(off..off.checked_add(ids_len)?)?;
        let ids = (0..nr_ids)
            .filter_map(|i| e.u64(ids_bytes, 8 * i))
            .collect();
        off += ids_len;
        out.push((name, ids));
    }
    Some(out)
}

/// CMDLINE: the arguments joined by spaces.
pub fn cmdline(b: &[u8], e: Endian) -> Option<String> {
    let nr = e.u32(b, 0)? as usize;
    let mut off = 4;
    let mut parts = Vec::new();
    for _ in 0..nr {
        parts.push(header_string(b, &mut off, e)?);
    }
    Some(parts.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_and_event_desc_never_read_past_the_end() {
        let mut b = Vec::new();
        b.extend_from_slice(&8u32.to_le_bytes());
        b.extend_from_slice(b"vm\0\0\0\0\0\0");
        let mut off = 0;
        assert_eq!(
            header_string(&b, &mut off, Endian::Little).as_deref(),
            Some("vm")
        );
        assert_eq!(off, 12);
        let mut off = 0;
        assert_eq!(header_string(&b[..6], &mut off, Endian::Little), None);

        let mut d = Vec::new();
        d.extend_from_slice(&1u32.to_le_bytes());
        d.extend_from_slice(&8u32.to_le_bytes());
        d.extend_from_slice(&[0; 8]);
        d.extend_from_slice(&2u32.to_le_bytes());
        d.extend_from_slice(&4u32.to_le_bytes());
        d.extend_from_slice(b"a:b\0");
        d.extend_from_slice(&224u64.to_le_bytes());
        d.extend_from_slice(&225u64.to_le_bytes());
        assert_eq!(
            event_desc(&d, Endian::Little),
            Some(vec![("a:b".to_string(), vec![224, 225])])
        );
        assert_eq!(event_desc(&d[..d.len() - 1], Endian::Little), None);
        let mut huge = d.clone();
        huge[0..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(event_desc(&huge, Endian::Little), None);
    }
}
