//! Request classes for "what was dispatched past it": the operation (read, write, flush,
//! discard, other) crossed with the `S` (sync) and `M` (metadata) flags of RWBS.
//!
//! ```text
//! RWBS   class              index = op × 4 + sync × 2 + meta
//! W      async write        1×4 + 0 + 0 = 4
//! WS     sync write         1×4 + 2 + 0 = 6
//! WSM    sync write meta    1×4 + 2 + 1 = 7
//! R      async read         0
//! RA     async read         0   (readahead is async)
//! FN     flush              8 + …  (zero-length flush requests, whatever their flags)
//! ```

use stallscope_model::{BlockOp, Rwbs};

/// Number of distinct classes.
pub const CLASSES: usize = 5 * 4;

/// A request class, as a dense index below [`CLASSES`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Class(u8);

const OP_READ: u8 = 0;
const OP_WRITE: u8 = 1;
const OP_FLUSH: u8 = 2;
const OP_DISCARD: u8 = 3;
const OP_OTHER: u8 = 4;

impl Class {
    /// The class of a request with these flags and length (zero length = flush).
    pub fn of(rwbs: Rwbs, nr_sector: u32) -> Class {
        let op = match rwbs.op {
            _ if nr_sector == 0 && rwbs.op != BlockOp::Discard => OP_FLUSH,
            BlockOp::Read => OP_READ,
            BlockOp::Write => OP_WRITE,
            BlockOp::Flush => OP_FLUSH,
            BlockOp::Discard | BlockOp::SecureErase => OP_DISCARD,
            BlockOp::None => OP_OTHER,
        };
        Class(op * 4 + u8::from(rwbs.sync) * 2 + u8::from(rwbs.meta))
    }

    /// Dense index.
    pub fn index(self) -> usize {
        usize::from(self.0)
    }

    /// The class with dense index `i` (`i < CLASSES`).
    pub fn from_index(i: usize) -> Class {
        Class(u8::try_from(i % CLASSES).unwrap_or(0))
    }

    /// Synchronous (`S`).
    pub fn sync(self) -> bool {
        self.0 & 2 != 0
    }

    /// Metadata (`M`).
    pub fn meta(self) -> bool {
        self.0 & 1 != 0
    }

    /// A read.
    pub fn read(self) -> bool {
        self.0 / 4 == OP_READ
    }

    /// A write.
    pub fn write(self) -> bool {
        self.0 / 4 == OP_WRITE
    }

    /// A (zero-length) flush.
    pub fn flush(self) -> bool {
        self.0 / 4 == OP_FLUSH
    }

    /// `sync write meta`, `async write`, `flush`, `async read`, `sync discard`, …
    pub fn label(self) -> String {
        let op = match self.0 / 4 {
            OP_READ => "read",
            OP_WRITE => "write",
            OP_FLUSH => return "flush".to_string(),
            OP_DISCARD => "discard",
            _ => "other",
        };
        let sync = if self.sync() { "sync" } else { "async" };
        let meta = if self.meta() { " meta" } else { "" };
        format!("{sync} {op}{meta}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(s: &str, nr: u32) -> Class {
        Class::of(Rwbs::parse(s).unwrap_or_default(), nr)
    }

    #[test]
    fn kernel_rwbs_strings_get_their_class() {
        assert_eq!(c("W", 8).label(), "async write");
        assert_eq!(c("WS", 8).label(), "sync write");
        assert_eq!(c("WSM", 2).label(), "sync write meta");
        assert_eq!(c("RA", 8).label(), "async read");
        assert_eq!(c("FN", 0).label(), "flush");
        assert_eq!(c("FWFSM", 0).label(), "flush");
        assert_eq!(c("D", 8).label(), "async discard");
        let ws = c("WSM", 2);
        assert!(ws.sync() && ws.meta() && ws.write() && !ws.read() && !ws.flush());
        for i in 0..CLASSES {
            assert_eq!(Class::from_index(i).index(), i);
        }
    }
}
