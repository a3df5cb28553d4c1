//! [`Endian`]: byte order of a trace (from the perf.data magic or the tracing-data endian
//! byte) and bounds-checked integer reads that return `None` instead of panicking.

/// Byte order of the recording machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Endian {
    /// Little endian (x86, arm64, …).
    #[default]
    Little,
    /// Big endian (s390x, some ppc/mips).
    Big,
}

impl Endian {
    /// `N` bytes at `off`, or `None` when out of range.
    #[inline]
    fn array<const N: usize>(bytes: &[u8], off: usize) -> Option<[u8; N]> {
        let end = off.checked_add(N)?;
        let s = bytes.get(off..end)?;
        let mut a = [0u8; N];
        a.copy_from_slice(s);
        Some(a)
    }

    /// u16 at `off`.
    #[inline]
    pub fn u16(self, bytes: &[u8], off: usize) -> Option<u16> {
        let a = Self::array::<2>(bytes, off)?;
        Some(match self {
            Endian::Little => u16::from_le_bytes(a),
            Endian::Big => u16::from_be_bytes(a),
        })
    }

    /// u32 at `off`.
    #[inline]
    pub fn u32(self, bytes: &[u8], off: usize) -> Option<u32> {
        let a = Self::array::<4>(bytes, off)?;
        Some(match self {
            Endian::Little => u32::from_le_bytes(a),
            Endian::Big => u32::from_be_bytes(a),
        })
    }

    /// u64 at `off`.
    #[inline]
    pub fn u64(self, bytes: &[u8], off: usize) -> Option<u64> {
        let a = Self::array::<8>(bytes, off)?;
        Some(match self {
            Endian::Little => u64::from_le_bytes(a),
            Endian::Big => u64::from_be_bytes(a),
        })
    }

    /// An unsigned integer of `size` (1, 2, 4 or 8) bytes at `off`, zero-extended.
    #[inline]
    pub fn uint(self, bytes: &[u8], off: usize, size: u8) -> Option<u64> {
        match size {
            1 => bytes.get(off).map(|&b| u64::from(b)),
            2 => self.u16(bytes, off).map(u64::from),
            4 => self.u32(bytes, off).map(u64::from),
            8 => self.u64(bytes, off),
            _ => None,
        }
    }

    /// A signed integer of `size` (1, 2, 4 or 8) bytes at `off`, sign-extended.
    #[inline]
    pub fn int(self, bytes: &[u8], off: usize, size: u8) -> Option<i64> {
        match size {
            1 => bytes.get(off).map(|&b| i64::from(b as i8)),
            2 => self.u16(bytes, off).map(|v| i64::from(v as i16)),
            4 => self.u32(bytes, off).map(|v| i64::from(v as i32)),
            8 => self.u64(bytes, off).map(|v| v as i64),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_both_orders_and_never_panics_out_of_range() {
        let b = [0x01, 0x02, 0x03, 0x04, 0xff, 0xff, 0xff, 0xff];
        assert_eq!(Endian::Little.u32(&b, 0), Some(0x0403_0201));
        assert_eq!(Endian::Big.u32(&b, 0), Some(0x0102_0304));
        assert_eq!(Endian::Little.int(&b, 4, 4), Some(-1));
        assert_eq!(Endian::Little.uint(&b, 4, 4), Some(0xffff_ffff));
        assert_eq!(Endian::Little.u64(&b, 1), None);
        assert_eq!(Endian::Little.u16(&b, usize::MAX), None);
        assert_eq!(Endian::Little.uint(&b, 0, 3), None);
    }
}
