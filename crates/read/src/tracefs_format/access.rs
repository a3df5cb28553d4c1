//! Field accessors resolved once per event format and applied to each raw record with plain
//! bounds-checked slice reads: [`IntAccessor`] for scalars, [`StrAccessor`] for strings
//! (fixed `char[N]`, `__data_loc`/`__rel_loc`, rest-of-record), and [`decode_field`], the
//! slower generic decoder (allocates) for events stallscope does not model natively.
//!
//! `__data_loc` example: locator word `0x0005001c` → the string starts 28 bytes into the
//! record and is 5 bytes long (`"perf\0"`). `__rel_loc` offsets count from the end of the
//! locator field. 2-byte locators hold only an offset; their data is NUL-terminated.

use stallscope_model::{Comm, FieldValue};

use super::endian::Endian;
use super::format_file::{Field, FieldKind, LocKind};

/// Reads one scalar field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IntAccessor {
    off: usize,
    size: u8,
    signed: bool,
    endian: Endian,
}

impl IntAccessor {
    /// For a scalar field of 1, 2, 4 or 8 bytes; `None` for anything else.
    pub fn new(field: &Field, endian: Endian) -> Option<IntAccessor> {
        let size = u8::try_from(field.size).ok()?;
        (field.kind == FieldKind::Scalar && matches!(size, 1 | 2 | 4 | 8)).then_some(IntAccessor {
            off: field.offset as usize,
            size,
            signed: field.signed,
            endian,
        })
    }

    /// The value, sign-extended when the field is signed; `None` when the record is too short.
    #[inline]
    pub fn get_i64(&self, rec: &[u8]) -> Option<i64> {
        if self.signed {
            self.endian.int(rec, self.off, self.size)
        } else {
            self.endian.uint(rec, self.off, self.size).map(|v| v as i64)
        }
    }

    /// The raw value zero-extended (a signed field's bits are kept as they are stored).
    #[inline]
    pub fn get_u64(&self, rec: &[u8]) -> Option<u64> {
        self.endian.uint(rec, self.off, self.size)
    }

    /// As `i32` (pids, prios, cpus), truncating wider fields like C does.
    #[inline]
    pub fn get_i32(&self, rec: &[u8]) -> Option<i32> {
        self.get_i64(rec).map(|v| v as i32)
    }
}

/// Reads one string or byte-array field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StrAccessor {
    /// `char name[len]` at `off`.
    Fixed {
        /// Offset.
        off: usize,
        /// Bytes.
        len: usize,
    },
    /// `__data_loc` / `__rel_loc` locator at `off`.
    Loc {
        /// Offset of the locator.
        off: usize,
        /// Layout.
        loc: LocKind,
        /// Byte order.
        endian: Endian,
    },
    /// `char name[]` running from `off` to the end of the record.
    Rest {
        /// Offset.
        off: usize,
    },
}

impl StrAccessor {
    /// For any array-like field (fixed, dynamic or rest-of-record); `None` for scalars.
    pub fn new(field: &Field, endian: Endian) -> Option<StrAccessor> {
        let off = field.offset as usize;
        match field.kind {
            FieldKind::Scalar => None,
            FieldKind::FixedArray { .. } => Some(StrAccessor::Fixed {
                off,
                len: field.size as usize,
            }),
            FieldKind::Dynamic { loc, .. } => Some(StrAccessor::Loc { off, loc, endian }),
            FieldKind::RestOfRecord { .. } => Some(StrAccessor::Rest { off }),
        }
    }

    /// The field's bytes inside `rec` (strings include their NUL padding); `None` when the
    /// record is too short or a locator points outside it.
    #[inline]
    pub fn bytes<'a>(&self, rec: &'a [u8]) -> Option<&'a [u8]> {
        match *self {
            StrAccessor::Fixed { off, len } => rec.get(off..off.checked_add(len)?),
            StrAccessor::Rest { off } => rec.get(off..),
            StrAccessor::Loc { off, loc, endian } => match loc {
                LocKind::DataLoc4 | LocKind::RelLoc4 => {
                    let word = endian.u32(rec, off)?;
                    let mut start = (word & 0xffff) as usize;
                    if loc == LocKind::RelLoc4 {
                        start += off + 4;
                    }
                    let len = (word >> 16) as usize;
                    rec.get(start..start.checked_add(len)?)
                }
                LocKind::DataLoc2 | LocKind::RelLoc2 => {
                    let mut start = endian.u16(rec, off)? as usize;
                    if loc == LocKind::RelLoc2 {
                        start += off + 2;
                    }
                    let tail = rec.get(start..)?;
                    let end = memchr::memchr(0, tail).unwrap_or(tail.len());
                    Some(&tail[..end])
                }
            },
        }
    }

    /// The field as a task name (stops at the first NUL).
    #[inline]
    pub fn comm(&self, rec: &[u8]) -> Option<Comm> {
        self.bytes(rec).map(Comm::from_bytes)
    }

    /// The field as text up to the first NUL (lossy UTF-8).
    pub fn string(&self, rec: &[u8]) -> Option<String> {
        self.bytes(rec).map(c_string)
    }
}

/// Bytes up to the first NUL as text (invalid UTF-8 replaced).
pub(crate) fn c_string(b: &[u8]) -> String {
    let end = memchr::memchr(0, b).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

/// Decodes any field generically: integers by size and sign, `char` arrays and strings as
/// text, other arrays as bytes. `None` when the record is too short for the field.
pub fn decode_field(field: &Field, rec: &[u8], endian: Endian) -> Option<FieldValue> {
    if let Some(acc) = IntAccessor::new(field, endian) {
        return Some(if field.signed {
            FieldValue::Int(acc.get_i64(rec)?)
        } else {
            FieldValue::UInt(acc.get_u64(rec)?)
        });
    }
    let is_char = match field.kind {
        FieldKind::Scalar => {
            // An odd-sized scalar: keep its bytes.
            let off = field.offset as usize;
            let end = off.checked_add(field.size as usize)?;
            return rec.get(off..end).map(|b| FieldValue::Bytes(b.to_vec()));
        }
        FieldKind::FixedArray { is_char, .. }
        | FieldKind::Dynamic { is_char, .. }
        | FieldKind::RestOfRecord { is_char } => is_char,
    };
    let bytes = StrAccessor::new(field, endian)?.bytes(rec)?;
    Some(if is_char {
        FieldValue::Str(c_string(bytes))
    } else {
        FieldValue::Bytes(bytes.to_vec())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tracefs_format::format_file::parse_field_line;

    #[test]
    fn data_loc_0x0005001c_is_offset_28_len_5() {
        let f = parse_field_line("field:__data_loc char[] comm;\toffset:8;\tsize:4;\tsigned:0;")
            .unwrap();
        let mut rec = vec![0u8; 40];
        rec[8..12].copy_from_slice(&0x0005_001cu32.to_le_bytes());
        rec[28..33].copy_from_slice(b"perf\0");
        let acc = StrAccessor::new(&f, Endian::Little).unwrap();
        assert_eq!(acc.bytes(&rec), Some(&b"perf\0"[..]));
        assert_eq!(
            acc.comm(&rec).map(|c| c.to_string()),
            Some("perf".to_string())
        );
        // Locator pointing past the record: None, not a panic.
        rec[8..12].copy_from_slice(&0x0010_0020u32.to_le_bytes());
        assert_eq!(acc.bytes(&rec), None);
    }

    #[test]
    fn rel_loc_counts_from_the_end_of_the_field() {
        let f =
            parse_field_line("field:__rel_loc char[] msg;\toffset:8;\tsize:4;\tsigned:0;").unwrap();
        let mut rec = vec![0u8; 20];
        rec[8..12].copy_from_slice(&0x0003_0000u32.to_le_bytes());
        rec[12..15].copy_from_slice(b"hi\0");
        assert_eq!(
            decode_field(&f, &rec, Endian::Little),
            Some(FieldValue::Str("hi".into()))
        );
        let f2 =
            parse_field_line("field:__data_loc char[] s;\toffset:8;\tsize:2;\tsigned:0;").unwrap();
        let mut rec2 = vec![0u8; 16];
        rec2[8..10].copy_from_slice(&12u16.to_le_bytes());
        rec2[12..15].copy_from_slice(b"abc");
        assert_eq!(
            decode_field(&f2, &rec2, Endian::Little),
            Some(FieldValue::Str("abc".into()))
        );
    }

    #[test]
    fn ints_by_size_and_sign() {
        let f = parse_field_line("field:int x;\toffset:0;\tsize:4;\tsigned:1;").unwrap();
        let rec = (-5i32).to_le_bytes();
        assert_eq!(
            decode_field(&f, &rec, Endian::Little),
            Some(FieldValue::Int(-5))
        );
        let u = parse_field_line("field:u16 y;\toffset:2;\tsize:2;\tsigned:0;").unwrap();
        assert_eq!(
            decode_field(&u, &rec, Endian::Little),
            Some(FieldValue::UInt(0xffff))
        );
        assert_eq!(decode_field(&u, &rec[..3], Endian::Little), None);
        let a = parse_field_line("field:u8 mac[3];\toffset:1;\tsize:3;\tsigned:0;").unwrap();
        assert_eq!(
            decode_field(&a, &rec, Endian::Little),
            Some(FieldValue::Bytes(vec![0xff, 0xff, 0xff]))
        );
    }
}
