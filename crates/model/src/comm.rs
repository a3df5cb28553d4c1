//! [`Comm`]: a task name stored inline (no allocation per event).
//!
//! The kernel limits `comm` to 15 bytes plus NUL (`TASK_COMM_LEN`), but text tools print
//! names such as `<...>`, `<idle>` or perf's `kworker/11:68+d`, and 6.18 made some `comm`
//! fields `__data_loc` strings. Up to [`Comm::CAPACITY`] bytes are kept; longer names are
//! truncated at a UTF-8 boundary and [`Comm::was_truncated`] says so.

use std::fmt;

/// A task name, at most [`Comm::CAPACITY`] bytes, stored inline. `Copy`, cheap to compare.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Comm {
    len: u8,
    truncated: bool,
    bytes: [u8; Comm::CAPACITY],
}

impl Comm {
    /// Bytes kept inline.
    pub const CAPACITY: usize = 30;

    /// The empty name.
    pub const EMPTY: Comm = Comm {
        len: 0,
        truncated: false,
        bytes: [0; Comm::CAPACITY],
    };

    /// From raw bytes as found in a trace: stops at the first NUL; invalid UTF-8 is replaced
    /// lossily (`\u{fffd}`), which only happens on corrupt input.
    pub fn from_bytes(raw: &[u8]) -> Comm {
        let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
        let raw = &raw[..end];
        match std::str::from_utf8(raw) {
            Ok(s) => Comm::new(s),
            Err(_) => Comm::new(&String::from_utf8_lossy(raw)),
        }
    }

    /// From a string; truncated to [`Comm::CAPACITY`] bytes at a char boundary.
    pub fn new(s: &str) -> Comm {
        let mut c = Comm::EMPTY;
        let mut n = s.len().min(Comm::CAPACITY);
        while !s.is_char_boundary(n) {
            n -= 1;
        }
        c.bytes[..n].copy_from_slice(&s.as_bytes()[..n]);
        c.len = n as u8;
        c.truncated = n < s.len();
        c
    }

    /// The name.
    pub fn as_str(&self) -> &str {
        // INVARIANT: bytes[..len] is always a valid UTF-8 prefix (built from &str at a
        // char boundary).
        std::str::from_utf8(&self.bytes[..self.len as usize]).unwrap_or("")
    }

    /// True when the source name was longer than [`Comm::CAPACITY`].
    pub fn was_truncated(&self) -> bool {
        self.truncated
    }

    /// True for the empty name.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Default for Comm {
    fn default() -> Self {
        Comm::EMPTY
    }
}

impl fmt::Display for Comm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

impl fmt::Debug for Comm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", self.as_str())
    }
}

/// The name as a string in human-readable formats (JSON); binary ones (an analysis' own
/// spill) keep whether it was truncated too.
impl serde::Serialize for Comm {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match s.is_human_readable() {
            true => s.serialize_str(self.as_str()),
            false => serde::Serialize::serialize(&(self.truncated, self.as_str()), s),
        }
    }
}

impl<'de> serde::Deserialize<'de> for Comm {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Comm, D::Error> {
        if d.is_human_readable() {
            let s: std::borrow::Cow<'de, str> = serde::Deserialize::deserialize(d)?;
            return Ok(Comm::new(&s));
        }
        let (truncated, s): (bool, std::borrow::Cow<'de, str>) =
            serde::Deserialize::deserialize(d)?;
        let mut c = Comm::new(&s);
        c.truncated |= truncated;
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_odd_names_verbatim() {
        for n in [
            "CPU 0/KVM",
            "a:b [x] 1.5",
            "<...>",
            "kworker/11:68+d",
            "io worker-1",
        ] {
            assert_eq!(Comm::new(n).as_str(), n);
        }
    }

    #[test]
    fn stops_at_nul_and_truncates_on_char_boundary() {
        assert_eq!(Comm::from_bytes(b"perf\0\0garbage").as_str(), "perf");
        let long = "é".repeat(20); // 40 bytes
        let c = Comm::new(&long);
        assert!(c.was_truncated());
        assert_eq!(c.as_str().len(), 30);
    }
}
