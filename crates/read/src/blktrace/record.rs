//! One `struct blk_io_trace` record (version 7): the 48-byte header, its byte order, and
//! its translation into a [`BlockEvent`] (or a notify: process name, timestamp, message).
//!
//! ```text
//! off size field
//!  0  u32  magic     0x65617407 = 0x656174 ("eat") << 8 | version 7
//!  4  u32  sequence  per CPU, from 1 (notes carry 0)
//!  8  u64  time      ns, kernel trace clock
//! 16  u64  sector    512-byte units
//! 24  u32  bytes
//! 28  u32  action    low 16 bits: __BLK_TA_* code (bit 8 = "cgroup id first in the PDU");
//!                    high 16 bits: BLK_TC_* categories (READ 1, WRITE 2, FLUSH 4, SYNC 8,
//!                    QUEUE 16, REQUEUE 32, ISSUE 64, COMPLETE 128, FS 256, PC 512,
//!                    NOTIFY 1024, AHEAD 2048, META 4096, DISCARD 8192, DRV_DATA 16384,
//!                    FUA 32768)
//! 32  u32  pid
//! 36  u32  device    kernel dev_t (major << 20 | minor)
//! 40  u32  cpu
//! 44  u16  error
//! 46  u16  pdu_len   payload bytes that follow the header
//! ```
//!
//! Payloads (after an 8-byte cgroup id when the action has bit 8 set, as 6.18's I/O
//! scheduler messages do — blkparse 1.2.0 does not print those messages, we keep them):
//! unplug depth and split sector are **big-endian** u64; remap is
//! `{__be32 device_from, device_to; __be64 sector_from}`; notify PROCESS = comm,
//! TIMESTAMP = `u32 sec, u32 nsec`, MESSAGE = text. RWBS is rebuilt from the category bits
//! the way blkparse prints it: `F` (FLUSH) first, then `D` (DISCARD) / `W` (WRITE) / `R`
//! (bytes ≠ 0) / `N`, then `F` (FUA), `A` (AHEAD), `S` (SYNC), `M` (META).

use stallscope_model::{BlockAction, BlockDev, BlockEvent, BlockOp, Comm, Rwbs};

/// Header size of `struct blk_io_trace`.
pub const HEADER_LEN: usize = 48;
/// The magic without its version byte.
pub const MAGIC: u32 = 0x6561_7400;
/// The one record version read (`blk_io_trace`).
pub const VERSION: u8 = 7;

/// Category bits (already shifted into the action's high half).
const TC_WRITE: u32 = 1 << 17;
const TC_FLUSH: u32 = 1 << 18;
const TC_SYNC: u32 = 1 << 19;
const TC_PC: u32 = 1 << 25;
const TC_NOTIFY: u32 = 1 << 26;
const TC_AHEAD: u32 = 1 << 27;
const TC_META: u32 = 1 << 28;
const TC_DISCARD: u32 = 1 << 29;
const TC_FUA: u32 = 1 << 31;
/// `__BLK_TA_CGROUP` / `__BLK_TN_CGROUP`: an 8-byte cgroup id starts the PDU.
const CGROUP_BIT: u32 = 1 << 8;

/// Byte order of a file (the recording machine's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Endian {
    /// Little-endian.
    Little,
    /// Big-endian.
    Big,
}

impl Endian {
    /// The byte order whose reading of `word` has the blktrace magic, and the version byte.
    pub fn detect(word: [u8; 4]) -> Option<(Endian, u8)> {
        let le = u32::from_le_bytes(word);
        if le & 0xffff_ff00 == MAGIC {
            return Some((Endian::Little, (le & 0xff) as u8));
        }
        let be = u32::from_be_bytes(word);
        if be & 0xffff_ff00 == MAGIC {
            return Some((Endian::Big, (be & 0xff) as u8));
        }
        None
    }

    fn u16(self, b: &[u8], at: usize) -> u16 {
        let mut a = [0u8; 2];
        a.copy_from_slice(&b[at..at + 2]);
        match self {
            Endian::Little => u16::from_le_bytes(a),
            Endian::Big => u16::from_be_bytes(a),
        }
    }

    fn u32(self, b: &[u8], at: usize) -> u32 {
        let mut a = [0u8; 4];
        a.copy_from_slice(&b[at..at + 4]);
        match self {
            Endian::Little => u32::from_le_bytes(a),
            Endian::Big => u32::from_be_bytes(a),
        }
    }

    fn u64(self, b: &[u8], at: usize) -> u64 {
        let mut a = [0u8; 8];
        a.copy_from_slice(&b[at..at + 8]);
        match self {
            Endian::Little => u64::from_le_bytes(a),
            Endian::Big => u64::from_be_bytes(a),
        }
    }
}

/// The decoded 48-byte header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Magic word as read (version in the low byte).
    pub magic: u32,
    /// Per-CPU sequence number.
    pub sequence: u32,
    /// Time, ns.
    pub time: u64,
    /// Start sector.
    pub sector: u64,
    /// Length in bytes.
    pub bytes: u32,
    /// Action code and category bits.
    pub action: u32,
    /// Context pid.
    pub pid: u32,
    /// Device (kernel dev_t).
    pub device: u32,
    /// CPU.
    pub cpu: u32,
    /// Completion status (errno as u16).
    pub error: u16,
    /// Payload length.
    pub pdu_len: u16,
}

impl Header {
    /// Decodes `b` (at least [`HEADER_LEN`] bytes) in byte order `e`.
    pub fn parse(b: &[u8; HEADER_LEN], e: Endian) -> Header {
        Header {
            magic: e.u32(b, 0),
            sequence: e.u32(b, 4),
            time: e.u64(b, 8),
            sector: e.u64(b, 16),
            bytes: e.u32(b, 24),
            action: e.u32(b, 28),
            pid: e.u32(b, 32),
            device: e.u32(b, 36),
            cpu: e.u32(b, 40),
            error: e.u16(b, 44),
            pdu_len: e.u16(b, 46),
        }
    }

    /// The `__BLK_TA_*` / `__BLK_TN_*` code (cgroup bit removed).
    pub fn code(&self) -> u32 {
        self.action & 0xff
    }

    /// True for notify records (process names, timestamps, messages).
    pub fn is_notify(&self) -> bool {
        self.action & TC_NOTIFY != 0
    }

    /// The payload without its leading cgroup id (when the action says there is one).
    pub fn payload<'a>(&self, pdu: &'a [u8]) -> &'a [u8] {
        if self.action & CGROUP_BIT != 0 {
            pdu.get(8..).unwrap_or(&[])
        } else {
            pdu
        }
    }

    /// RWBS as blkparse prints it (see module docs).
    pub fn rwbs(&self) -> Rwbs {
        let a = self.action;
        Rwbs {
            preflush: a & TC_FLUSH != 0,
            op: if a & TC_DISCARD != 0 {
                BlockOp::Discard
            } else if a & TC_WRITE != 0 {
                BlockOp::Write
            } else if self.bytes != 0 {
                BlockOp::Read
            } else {
                BlockOp::None
            },
            fua: a & TC_FUA != 0,
            readahead: a & TC_AHEAD != 0,
            sync: a & TC_SYNC != 0,
            meta: a & TC_META != 0,
        }
    }
}

/// What one record means.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decoded {
    /// A block event (everything but `comm`, which the reader fills from process notes).
    Event(BlockEvent),
    /// `BLK_TN_PROCESS`: `pid` is named `comm` from now on.
    Process(Comm),
    /// `BLK_TN_TIMESTAMP`: wall clock at the trace start (seconds, nanoseconds).
    Timestamp(u32, u32),
    /// A record stallscope does not turn into an event; the reason is a data-quality key.
    Skip(SkipReason),
}

/// Why a record was not turned into an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SkipReason {
    /// `ABORT`, `DRV_DATA`, `SLEEPRQ`: valid but not modeled (blkparse prints none but S).
    Unmodeled,
    /// A code this reader does not know.
    UnknownAction,
    /// A notify code this reader does not know.
    UnknownNotify,
    /// A payload too short for its action (split, remap, unplug, timestamp).
    ShortPayload,
}

fn be_u64(b: &[u8]) -> Option<u64> {
    let mut a = [0u8; 8];
    a.copy_from_slice(b.get(..8)?);
    Some(u64::from_be_bytes(a))
}

fn be_u32(b: &[u8], at: usize) -> Option<u32> {
    let mut a = [0u8; 4];
    a.copy_from_slice(b.get(at..at + 4)?);
    Some(u32::from_be_bytes(a))
}

/// Text of a C string payload: up to the first NUL, invalid UTF-8 replaced.
pub fn c_text(b: &[u8]) -> String {
    let end = memchr::memchr(0, b).unwrap_or(b.len());
    String::from_utf8_lossy(&b[..end]).into_owned()
}

/// Translates a header and its payload (byte order `e` for the timestamp note).
pub fn decode(h: &Header, pdu: &[u8], e: Endian) -> Decoded {
    let payload = h.payload(pdu);
    if h.is_notify() {
        return match h.code() {
            0 => Decoded::Process(Comm::from_bytes(
                &payload[..memchr::memchr(0, payload).unwrap_or(payload.len())],
            )),
            1 => {
                if payload.len() < 8 {
                    return Decoded::Skip(SkipReason::ShortPayload);
                }
                Decoded::Timestamp(e.u32(payload, 0), e.u32(payload, 4))
            }
            2 => {
                let mut ev = BlockEvent::new(BlockAction::Message);
                ev.dev = Some(BlockDev(h.device));
                ev.message = Some(c_text(payload).into_boxed_str());
                Decoded::Event(ev)
            }
            _ => Decoded::Skip(SkipReason::UnknownNotify),
        };
    }
    let action = match h.code() {
        1 => BlockAction::Queue,
        2 => BlockAction::BackMerge,
        3 => BlockAction::FrontMerge,
        4 => BlockAction::GetRq,
        6 => BlockAction::Requeue,
        7 => BlockAction::Issue,
        8 => BlockAction::Complete,
        9 => BlockAction::Plug,
        10 | 11 => BlockAction::Unplug,
        12 => BlockAction::Insert,
        13 => BlockAction::Split,
        14 => BlockAction::Bounce,
        15 => BlockAction::Remap,
        5 | 16 | 17 => return Decoded::Skip(SkipReason::Unmodeled),
        _ => return Decoded::Skip(SkipReason::UnknownAction),
    };
    let mut ev = BlockEvent::new(action);
    ev.dev = Some(BlockDev(h.device));
    ev.sector = h.sector;
    // PC (SCSI passthrough) requests count bytes, not sectors.
    ev.nr_sector = if h.action & TC_PC != 0 {
        0
    } else {
        h.bytes >> 9
    };
    ev.rwbs = h.rwbs();
    match action {
        BlockAction::Complete => ev.error = Some(i32::from(h.error as i16)),
        BlockAction::Unplug => match be_u64(payload) {
            Some(n) => ev.nr_rq = Some(u32::try_from(n).unwrap_or(u32::MAX)),
            None => return Decoded::Skip(SkipReason::ShortPayload),
        },
        // Like the block_split tracepoint and blkparse text: sector / split point only
        // (the length stays 0 so every input gives the same event).
        BlockAction::Split => match be_u64(payload) {
            Some(s) => {
                ev.related_sector = Some(s);
                ev.nr_sector = 0;
            }
            None => return Decoded::Skip(SkipReason::ShortPayload),
        },
        BlockAction::Remap => {
            let (Some(from), Some(_to), Some(sector)) = (
                be_u32(payload, 0),
                be_u32(payload, 4),
                payload.get(8..).and_then(be_u64),
            ) else {
                return Decoded::Skip(SkipReason::ShortPayload);
            };
            ev.related_dev = Some(BlockDev(from));
            ev.related_sector = Some(sector);
        }
        _ => {}
    }
    Decoded::Event(ev)
}

/// Whether `action` carries a task name in blkparse output (all but C, R, A, m).
pub fn carries_comm(action: BlockAction) -> bool {
    !matches!(
        action,
        BlockAction::Complete | BlockAction::Requeue | BlockAction::Remap | BlockAction::Message
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(action: u32, bytes: u32) -> Header {
        Header {
            magic: MAGIC | 7,
            sequence: 1,
            time: 0,
            sector: 8,
            bytes,
            action,
            pid: 1,
            device: (7 << 20) | 1,
            cpu: 0,
            error: 0,
            pdu_len: 0,
        }
    }

    #[test]
    fn rwbs_from_category_bits_like_blkparse() {
        // Values from the shared samples (formats.md §8) and their blkparse text.
        assert_eq!(header(0x001a_0001, 4096).rwbs().to_letters(), "WS");
        assert_eq!(header(0x0145_0007, 0).rwbs().to_letters(), "FN");
        assert_eq!(header(0x001e_0001, 0).rwbs().to_letters(), "FWS");
        assert_eq!(header(0x0811_0001, 4096).rwbs().to_letters(), "RA");
        assert_eq!(header(0x0011_0009, 0).rwbs().to_letters(), "N");
        assert_eq!(header(0x8002_0001, 4096).rwbs().to_letters(), "WF");
        assert_eq!(header(0x2000_0001, 4096).rwbs().to_letters(), "D");
        assert_eq!(header(0x100a_0001, 4096).rwbs().to_letters(), "WSM");
    }

    #[test]
    fn both_byte_orders_are_detected() {
        assert_eq!(
            Endian::detect(0x6561_7407u32.to_le_bytes()),
            Some((Endian::Little, 7))
        );
        assert_eq!(
            Endian::detect(0x6561_7407u32.to_be_bytes()),
            Some((Endian::Big, 7))
        );
        assert_eq!(Endian::detect(*b"PERF"), None);
    }

    #[test]
    fn payloads_are_big_endian_and_cgroup_ids_skipped() {
        let mut h = header(0x0011_000a, 0);
        let depth = 3u64.to_be_bytes();
        match decode(&h, &depth, Endian::Little) {
            Decoded::Event(ev) => assert_eq!(ev.nr_rq, Some(3)),
            other => panic!("{other:?}"),
        }
        h.action |= CGROUP_BIT;
        let mut pdu = vec![0xee; 8];
        pdu.extend_from_slice(&5u64.to_be_bytes());
        match decode(&h, &pdu, Endian::Little) {
            Decoded::Event(ev) => assert_eq!(ev.nr_rq, Some(5)),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            decode(&h, &[1, 2], Endian::Little),
            Decoded::Skip(SkipReason::ShortPayload)
        );
    }

    #[test]
    fn remap_payload_names_the_original_device() {
        let h = header(0x0002_000f, 4096);
        let mut pdu = Vec::new();
        pdu.extend_from_slice(&((8u32 << 20) | 1).to_be_bytes());
        pdu.extend_from_slice(&((7u32 << 20) | 1).to_be_bytes());
        pdu.extend_from_slice(&2048u64.to_be_bytes());
        match decode(&h, &pdu, Endian::Little) {
            Decoded::Event(ev) => {
                assert_eq!(ev.related_dev, Some(BlockDev::new(8, 1)));
                assert_eq!(ev.related_sector, Some(2048));
                assert_eq!(ev.dev, Some(BlockDev::new(7, 1)));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn completion_error_is_the_negative_errno() {
        let mut h = header(0x0082_0008, 4096);
        h.error = (-5i16) as u16;
        match decode(&h, &[], Endian::Little) {
            Decoded::Event(ev) => assert_eq!(ev.error, Some(-5)),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn notes_decode_to_names_messages_and_skips() {
        let mut h = header(0x0400_0000, 0);
        assert_eq!(
            decode(&h, b"kworker/0:1H\0", Endian::Little),
            Decoded::Process(Comm::new("kworker/0:1H"))
        );
        h.action = 0x0400_0002;
        match decode(&h, b"bfq33S put_queue", Endian::Little) {
            Decoded::Event(ev) => assert_eq!(ev.message.as_deref(), Some("bfq33S put_queue")),
            other => panic!("{other:?}"),
        }
        // Real bfq messages (6.18) carry the cgroup flag and an 8-byte cgroup id first;
        // blkparse 1.2.0 prints none of these, stallscope keeps them.
        h.action = 0x0400_0102;
        let mut pdu = 1u64.to_le_bytes().to_vec();
        pdu.extend_from_slice(b"bfq [bfq_limit_depth] wr_busy 1 sync 1 depth 96");
        match decode(&h, &pdu, Endian::Little) {
            Decoded::Event(ev) => assert_eq!(
                ev.message.as_deref(),
                Some("bfq [bfq_limit_depth] wr_busy 1 sync 1 depth 96")
            ),
            other => panic!("{other:?}"),
        }
        h.action = 0x0400_0009;
        assert_eq!(
            decode(&h, &[], Endian::Little),
            Decoded::Skip(SkipReason::UnknownNotify)
        );
        h.action = 0x0001_0063;
        assert_eq!(
            decode(&h, &[], Endian::Little),
            Decoded::Skip(SkipReason::UnknownAction)
        );
    }
}
