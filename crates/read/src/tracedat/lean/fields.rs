//! Field reads for the lean decoder: the general decoder's accessors
//! ([`IntAccessor`], [`StrAccessor`]) with the common layouts of this kernel family
//! special-cased (little-endian 2-, 4- and 8-byte integers; `char[16]` and 4-byte `__data_loc`
//! names), returning exactly what the general accessors return.
//!
//! ```text
//! Int::Le32 { off, signed }   u32 at off, little endian (pid, prio, cpu fields)
//! Int::Le16 { off, signed }   u16 at off, little endian (common_type)
//! Int::Le64 { off }           u64 at off, little endian (prev_state, runtime)
//! Name::Fixed { off, len }    rec[off..off+len]            (char prev_comm[16])
//! Name::DataLoc4Le { off }    w = u32 at off: rec[w & 0xffff ..][.. w >> 16]   (6.18 comm)
//! ```
//! A name's key is its bytes zero-padded to 16 (bytes that differ only in trailing
//! zeros make the same `Comm`, which stops at the first NUL), loaded with one 16-byte read
//! when the record has room.

use crate::tracefs_format::{Endian, EventFormat, IntAccessor, LocKind, StrAccessor};

/// An integer field.
#[derive(Clone, Copy, Debug)]
pub enum Int {
    /// 4 bytes, little endian.
    Le32 { off: usize, signed: bool },
    /// 2 bytes, little endian (`common_type`).
    Le16 { off: usize, signed: bool },
    /// 8 bytes, little endian (`prev_state`, `runtime`).
    Le64 { off: usize },
    /// Anything else, through the general accessor.
    Any(IntAccessor),
}

impl Int {
    /// The field `name` of `f`, if it is an integer the general accessor reads.
    pub fn of(f: &EventFormat, name: &str, endian: Endian) -> Option<Int> {
        let field = f.field(name)?;
        let general = IntAccessor::new(field, endian)?;
        let (off, signed) = (field.offset as usize, field.signed);
        Some(match (endian, field.size) {
            (Endian::Little, 4) => Int::Le32 { off, signed },
            (Endian::Little, 2) => Int::Le16 { off, signed },
            (Endian::Little, 8) => Int::Le64 { off },
            _ => Int::Any(general),
        })
    }

    #[inline(always)]
    fn raw32(rec: &[u8], off: usize) -> Option<u32> {
        let b = rec.get(off..off.checked_add(4)?)?;
        Some(u32::from_le_bytes(<[u8; 4]>::try_from(b).ok()?))
    }

    #[inline(always)]
    fn raw64(rec: &[u8], off: usize) -> Option<u64> {
        let b = rec.get(off..off.checked_add(8)?)?;
        Some(u64::from_le_bytes(<[u8; 8]>::try_from(b).ok()?))
    }

    #[inline(always)]
    fn raw16(rec: &[u8], off: usize) -> Option<u16> {
        let b = rec.get(off..off.checked_add(2)?)?;
        Some(u16::from_le_bytes(<[u8; 2]>::try_from(b).ok()?))
    }

    /// `IntAccessor::get_i32`.
    #[inline(always)]
    pub fn i32(&self, rec: &[u8]) -> Option<i32> {
        match *self {
            Int::Le32 { off, .. } => Self::raw32(rec, off).map(|v| v as i32),
            Int::Le16 { .. } | Int::Le64 { .. } | Int::Any(_) => self.i64(rec).map(|v| v as i32),
        }
    }

    /// `IntAccessor::get_i64`.
    #[inline(always)]
    pub fn i64(&self, rec: &[u8]) -> Option<i64> {
        match *self {
            Int::Le32 { off, signed: true } => Self::raw32(rec, off).map(|v| v as i32 as i64),
            Int::Le32 { off, signed: false } => Self::raw32(rec, off).map(i64::from),
            Int::Le16 { off, signed: true } => Self::raw16(rec, off).map(|v| v as i16 as i64),
            Int::Le16 { off, signed: false } => Self::raw16(rec, off).map(i64::from),
            // 8 bytes: the same bits whether signed or not.
            Int::Le64 { off } => Self::raw64(rec, off).map(|v| v as i64),
            Int::Any(a) => a.get_i64(rec),
        }
    }

    /// `IntAccessor::get_u64`.
    #[inline(always)]
    pub fn u64(&self, rec: &[u8]) -> Option<u64> {
        match *self {
            Int::Le32 { off, .. } => Self::raw32(rec, off).map(u64::from),
            Int::Le16 { off, .. } => Self::raw16(rec, off).map(u64::from),
            Int::Le64 { off } => Self::raw64(rec, off),
            Int::Any(a) => a.get_u64(rec),
        }
    }
}

/// A task-name field.
#[derive(Clone, Copy, Debug)]
pub enum Name {
    /// `char name[len]`.
    Fixed { off: usize, len: usize },
    /// 4-byte little-endian `__data_loc`.
    DataLoc4Le { off: usize },
    /// Anything else, through the general accessor.
    Any(StrAccessor),
}

/// Where a name's bytes are: `rec[start..start + len]`.
#[derive(Clone, Copy, Debug)]
pub struct NameAt {
    pub start: usize,
    pub len: usize,
}

impl Name {
    /// The field `name` of `f`, if the general accessor reads it as a string.
    pub fn of(f: &EventFormat, name: &str, endian: Endian) -> Option<Name> {
        let general = StrAccessor::new(f.field(name)?, endian)?;
        Some(match general {
            StrAccessor::Fixed { off, len } => Name::Fixed { off, len },
            StrAccessor::Loc {
                off,
                loc: LocKind::DataLoc4,
                endian: Endian::Little,
            } => Name::DataLoc4Le { off },
            other => Name::Any(other),
        })
    }

    /// Where the bytes `StrAccessor::bytes` returns are (`None` where it returns `None`).
    #[inline(always)]
    pub fn at(&self, rec: &[u8]) -> Option<NameAt> {
        let (start, len) = match *self {
            Name::Fixed { off, len } => (off, len),
            Name::DataLoc4Le { off } => {
                let w = Int::raw32(rec, off)?;
                ((w & 0xffff) as usize, (w >> 16) as usize)
            }
            Name::Any(a) => {
                let b = a.bytes(rec)?;
                // INVARIANT: `b` is a sub-slice of `rec`.
                let start = (b.as_ptr() as usize).wrapping_sub(rec.as_ptr() as usize);
                (start, b.len())
            }
        };
        (start.checked_add(len)? <= rec.len()).then_some(NameAt { start, len })
    }
}

/// The 16-byte key of a name of at most 16 bytes at `at` (see the module docs): one
/// 16-byte load, from the name's start when the record has room, else ending at the
/// name's end (a `__data_loc` name is the record's last field).
#[inline(always)]
pub fn key16(rec: &[u8], at: NameAt) -> u128 {
    debug_assert!(at.len <= 16);
    let load = |from: usize| -> Option<u128> {
        let b = rec.get(from..from.checked_add(16)?)?;
        Some(u128::from_le_bytes(<[u8; 16]>::try_from(b).ok()?))
    };
    if at.len == 0 {
        return 0;
    }
    if let Some(w) = load(at.start) {
        return if at.len >= 16 {
            w
        } else {
            w & ((1u128 << (at.len * 8)) - 1)
        };
    }
    let end = at.start + at.len;
    if let Some(w) = end.checked_sub(16).and_then(load) {
        // The name is the top `len` bytes of `w`.
        return w >> ((16 - at.len) * 8);
    }
    let mut k = [0u8; 16];
    if let Some(b) = rec.get(at.start..end) {
        k[..at.len].copy_from_slice(b);
    }
    u128::from_le_bytes(k)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tracefs_format::{Field, FieldKind};

    fn format_with(size: u32, signed: bool) -> EventFormat {
        EventFormat {
            system: "t".into(),
            name: "t".into(),
            id: 1,
            common_fields: Vec::new(),
            fields: vec![Field {
                name: "x".into(),
                type_name: "int".into(),
                offset: 3,
                size,
                signed,
                kind: FieldKind::Scalar,
            }],
            print_fmt: String::new(),
        }
    }

    #[test]
    fn integers_read_like_the_general_accessor() {
        let bytes: Vec<u8> = (0..16u8).map(|i| i.wrapping_mul(37) ^ 0xa5).collect();
        for size in [1, 2, 4, 8] {
            for signed in [false, true] {
                for endian in [Endian::Little, Endian::Big] {
                    let f = format_with(size, signed);
                    let fast = Int::of(&f, "x", endian).unwrap();
                    let general = IntAccessor::new(&f.fields[0], endian).unwrap();
                    for len in 0..bytes.len() {
                        let rec = &bytes[..len];
                        let what = (size, signed, endian, len);
                        assert_eq!(fast.i32(rec), general.get_i32(rec), "{what:?}");
                        assert_eq!(fast.i64(rec), general.get_i64(rec), "{what:?}");
                        assert_eq!(fast.u64(rec), general.get_u64(rec), "{what:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn keys_are_the_zero_padded_bytes_wherever_the_name_is() {
        let rec: Vec<u8> = (1..=40u8).collect();
        for start in 0..40 {
            for len in 0..=16usize.min(40 - start) {
                let mut k = [0u8; 16];
                k[..len].copy_from_slice(&rec[start..start + len]);
                let want = u128::from_le_bytes(k);
                assert_eq!(key16(&rec, NameAt { start, len }), want, "{start} {len}");
            }
        }
        // A record shorter than 16 bytes: the copying fallback.
        assert_eq!(key16(&rec[..5], NameAt { start: 1, len: 3 }), 0x04_03_02);
    }
}
