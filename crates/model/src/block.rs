//! Block-layer events, normalized across blktrace binary files, `blkparse` text and the
//! `block:*` tracepoints (perf.data, trace.dat, ftrace text).
//!
//! One [`BlockEvent`] is one blktrace action / block tracepoint. The vocabulary follows
//! blktrace's action letters, which map one to one onto tracepoints:
//!
//! | letter | [`BlockAction`] | tracepoint |
//! |---|---|---|
//! | `Q` | `Queue` | `block_bio_queue` |
//! | `G` | `GetRq` | `block_getrq` |
//! | `I` | `Insert` | `block_rq_insert` |
//! | `D` | `Issue` | `block_rq_issue` |
//! | `C` | `Complete` | `block_rq_complete` (`block_bio_complete` for bio-based devices) |
//! | `M` | `BackMerge` | `block_bio_backmerge` |
//! | `F` | `FrontMerge` | `block_bio_frontmerge` |
//! | `R` | `Requeue` | `block_rq_requeue` |
//! | `X` | `Split` | `block_split` |
//! | `A` | `Remap` | `block_rq_remap` / `block_bio_remap` |
//! | `P` | `Plug` | `block_plug` |
//! | `U` | `Unplug` | `block_unplug` |
//! | `B` | `Bounce` | `block_bio_bounce` |
//! | `m` | `Message` | (blktrace notify / I/O-scheduler `blk_add_trace_msg`) |
//!
//! `dump` lines of block events use the tracepoint name and these fields, in this order,
//! omitting the ones the input does not carry:
//!
//! ```text
//! 1000 0 812 block_rq_issue dev=7,0 sector=2048 nr_sector=8 bytes=4096 rwbs=WS comm=fio
//! 2000 0 0 block_rq_complete dev=7,0 sector=2048 nr_sector=8 rwbs=WS error=0
//! 3000 1 900 block_bio_backmerge dev=7,0 sector=2056 nr_sector=8 rwbs=W comm=dd
//! 4000 1 900 block_split dev=7,0 sector=0 nr_sector=256 rwbs=W new_sector=128 comm=dd
//! 5000 1 900 block_unplug nr_rq=3 comm=dd
//! 6000 0 33 block_message dev=7,0 message="bfq33S put_queue: 0x1"
//! ```
//!
//! Devices are kept in the kernel's internal `dev_t` encoding (major in the top 12 bits,
//! minor in the low 20: `MKDEV(ma, mi) = ma << 20 | mi`), which is what both the block
//! tracepoints and `struct blk_io_trace` carry; [`BlockDev`] prints it as `major,minor`.

use serde::{Deserialize, Serialize};
use std::fmt;

use crate::Comm;

/// A block device in the kernel's internal `dev_t` encoding (`major << 20 | minor`).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize,
)]
pub struct BlockDev(pub u32);

impl BlockDev {
    /// From major and minor numbers.
    pub fn new(major: u32, minor: u32) -> BlockDev {
        BlockDev((major << 20) | (minor & 0xf_ffff))
    }
    /// Major number.
    pub fn major(self) -> u32 {
        self.0 >> 20
    }
    /// Minor number.
    pub fn minor(self) -> u32 {
        self.0 & 0xf_ffff
    }
}

impl fmt::Display for BlockDev {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{},{}", self.major(), self.minor())
    }
}

/// What happened to a bio or request (blktrace action letter in parentheses).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum BlockAction {
    /// `Q`: a bio entered the block layer.
    Queue,
    /// `G`: a request was allocated for it.
    GetRq,
    /// `I`: a request was inserted into the I/O scheduler / queue.
    Insert,
    /// `D`: a request was issued (dispatched) to the driver.
    Issue,
    /// `C`: a request (or part of it) completed.
    Complete,
    /// `M`: a bio was merged at the back of an existing request.
    BackMerge,
    /// `F`: a bio was merged at the front of an existing request.
    FrontMerge,
    /// `R`: a request was put back on the queue.
    Requeue,
    /// `X`: a bio was split; `related_sector` is where the new part starts.
    Split,
    /// `A`: a bio or request was remapped from another device (`related_dev`/`related_sector`).
    Remap,
    /// `P`: the queue was plugged.
    Plug,
    /// `U`: the queue was unplugged (`nr_rq` requests).
    Unplug,
    /// `B`: a bio was bounced.
    Bounce,
    /// `m`: a text message (I/O schedulers' `blk_add_trace_msg`, blktrace notes).
    Message,
}

impl BlockAction {
    /// The blktrace action letter.
    pub fn letter(self) -> char {
        match self {
            BlockAction::Queue => 'Q',
            BlockAction::GetRq => 'G',
            BlockAction::Insert => 'I',
            BlockAction::Issue => 'D',
            BlockAction::Complete => 'C',
            BlockAction::BackMerge => 'M',
            BlockAction::FrontMerge => 'F',
            BlockAction::Requeue => 'R',
            BlockAction::Split => 'X',
            BlockAction::Remap => 'A',
            BlockAction::Plug => 'P',
            BlockAction::Unplug => 'U',
            BlockAction::Bounce => 'B',
            BlockAction::Message => 'm',
        }
    }

    /// The action for a blktrace letter.
    pub fn from_letter(c: char) -> Option<BlockAction> {
        Some(match c {
            'Q' => BlockAction::Queue,
            'G' => BlockAction::GetRq,
            'I' => BlockAction::Insert,
            'D' => BlockAction::Issue,
            'C' => BlockAction::Complete,
            'M' => BlockAction::BackMerge,
            'F' => BlockAction::FrontMerge,
            'R' => BlockAction::Requeue,
            'X' => BlockAction::Split,
            'A' => BlockAction::Remap,
            'P' => BlockAction::Plug,
            'U' => BlockAction::Unplug,
            'B' => BlockAction::Bounce,
            'm' => BlockAction::Message,
            _ => return None,
        })
    }

    /// The tracepoint name used for this action in `dump` output.
    pub fn tracepoint(self) -> &'static str {
        match self {
            BlockAction::Queue => "block_bio_queue",
            BlockAction::GetRq => "block_getrq",
            BlockAction::Insert => "block_rq_insert",
            BlockAction::Issue => "block_rq_issue",
            BlockAction::Complete => "block_rq_complete",
            BlockAction::BackMerge => "block_bio_backmerge",
            BlockAction::FrontMerge => "block_bio_frontmerge",
            BlockAction::Requeue => "block_rq_requeue",
            BlockAction::Split => "block_split",
            BlockAction::Remap => "block_rq_remap",
            BlockAction::Plug => "block_plug",
            BlockAction::Unplug => "block_unplug",
            BlockAction::Bounce => "block_bio_bounce",
            BlockAction::Message => "block_message",
        }
    }

    /// The action for a tracepoint name (`block_bio_complete` and `block_bio_remap` map to
    /// `Complete` and `Remap`; `block_unplug_timer`/`block_unplug_io` to `Unplug`).
    pub fn from_tracepoint(name: &str) -> Option<BlockAction> {
        Some(match name {
            "block_bio_queue" => BlockAction::Queue,
            "block_getrq" => BlockAction::GetRq,
            "block_rq_insert" => BlockAction::Insert,
            "block_rq_issue" => BlockAction::Issue,
            "block_rq_complete" | "block_bio_complete" => BlockAction::Complete,
            "block_bio_backmerge" => BlockAction::BackMerge,
            "block_bio_frontmerge" => BlockAction::FrontMerge,
            "block_rq_requeue" => BlockAction::Requeue,
            "block_split" => BlockAction::Split,
            "block_rq_remap" | "block_bio_remap" => BlockAction::Remap,
            "block_plug" => BlockAction::Plug,
            "block_unplug" | "block_unplug_timer" | "block_unplug_io" => BlockAction::Unplug,
            "block_bio_bounce" => BlockAction::Bounce,
            "block_message" => BlockAction::Message,
            _ => return None,
        })
    }
}

/// The operation of a request, first letter(s) of RWBS.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize,
)]
pub enum BlockOp {
    /// `R`.
    Read,
    /// `W`.
    Write,
    /// `D`.
    Discard,
    /// `DE`: secure erase.
    SecureErase,
    /// `F` as the operation: a flush request.
    Flush,
    /// `N`, or nothing: no data operation.
    #[default]
    None,
}

/// Decoded RWBS string (kernel `blk_fill_rwbs`): an optional leading `F` (preflush), the
/// operation (`R`, `W`, `D`, `DE`, `F` flush, `N`), then flags `F` (FUA), `A` (readahead),
/// `S` (sync), `M` (metadata). Examples: `WS`, `FWFS`, `RA`, `WM`, `N`, `FF`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
pub struct Rwbs {
    /// Operation.
    pub op: BlockOp,
    /// Leading `F`: a cache flush before the data (REQ_PREFLUSH).
    pub preflush: bool,
    /// `F` after the operation: forced unit access.
    pub fua: bool,
    /// `A`: readahead.
    pub readahead: bool,
    /// `S`: synchronous.
    pub sync: bool,
    /// `M`: metadata.
    pub meta: bool,
}

impl Rwbs {
    /// Parses an RWBS string; `None` when it holds letters the kernel does not print.
    pub fn parse(s: &str) -> Option<Rwbs> {
        let b = s.as_bytes();
        let mut i = 0;
        let mut r = Rwbs::default();
        // A leading F is PREFLUSH only when an operation letter follows it; "F" alone (or
        // followed by flags only) is the flush operation.
        if b.len() >= 2 && b[0] == b'F' && matches!(b[1], b'R' | b'W' | b'D' | b'N' | b'F') {
            r.preflush = true;
            i = 1;
        }
        r.op = match b.get(i) {
            Some(b'R') => BlockOp::Read,
            Some(b'W') => BlockOp::Write,
            Some(b'D') if b.get(i + 1) == Some(&b'E') => {
                i += 1;
                BlockOp::SecureErase
            }
            Some(b'D') => BlockOp::Discard,
            Some(b'F') => BlockOp::Flush,
            Some(b'N') => BlockOp::None,
            None => return if b.is_empty() { Some(r) } else { None },
            Some(_) => return None,
        };
        i += 1;
        for &c in &b[i..] {
            match c {
                b'F' if !r.fua => r.fua = true,
                b'A' => r.readahead = true,
                b'S' => r.sync = true,
                b'M' => r.meta = true,
                _ => return None,
            }
        }
        Some(r)
    }

    /// The RWBS string again (canonical letter order).
    pub fn to_letters(self) -> String {
        let mut s = String::with_capacity(6);
        if self.preflush {
            s.push('F');
        }
        s.push_str(match self.op {
            BlockOp::Read => "R",
            BlockOp::Write => "W",
            BlockOp::Discard => "D",
            BlockOp::SecureErase => "DE",
            BlockOp::Flush => "F",
            BlockOp::None => "N",
        });
        for (on, c) in [
            (self.fua, 'F'),
            (self.readahead, 'A'),
            (self.sync, 'S'),
            (self.meta, 'M'),
        ] {
            if on {
                s.push(c);
            }
        }
        s
    }
}

/// One block-layer event. `Event::pid` is the context task; `comm` is the name the event
/// itself carries (tracepoint `comm` field, blktrace process note), when any.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockEvent {
    /// What happened.
    pub action: BlockAction,
    /// Device (`None` for plug/unplug tracepoints, which carry none).
    pub dev: Option<BlockDev>,
    /// Start sector (512-byte units).
    pub sector: u64,
    /// Length in sectors.
    pub nr_sector: u32,
    /// Length in bytes, when the input carries it separately (`block_rq_issue`,
    /// `block_rq_insert`, blktrace's `bytes`).
    pub bytes: Option<u32>,
    /// Operation and flags.
    pub rwbs: Rwbs,
    /// Completion status (`C` only; 0 = success).
    pub error: Option<i32>,
    /// Split: where the new part starts; remap: the original sector.
    pub related_sector: Option<u64>,
    /// Remap: the original device.
    pub related_dev: Option<BlockDev>,
    /// Unplug: number of requests.
    pub nr_rq: Option<u32>,
    /// Task name the event carries.
    pub comm: Option<Comm>,
    /// Message text (`m`).
    pub message: Option<Box<str>>,
}

impl BlockEvent {
    /// An event with only the action set (all else empty / zero).
    pub fn new(action: BlockAction) -> BlockEvent {
        BlockEvent {
            action,
            dev: None,
            sector: 0,
            nr_sector: 0,
            bytes: None,
            rwbs: Rwbs::default(),
            error: None,
            related_sector: None,
            related_dev: None,
            nr_rq: None,
            comm: None,
            message: None,
        }
    }

    /// The end sector (exclusive).
    pub fn end_sector(&self) -> u64 {
        self.sector.saturating_add(u64::from(self.nr_sector))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rwbs_round_trips_kernel_strings() {
        for s in [
            "WS", "FWFS", "RA", "WM", "N", "F", "FF", "R", "D", "DE", "WSM", "RM",
        ] {
            let r = Rwbs::parse(s).unwrap_or_else(|| panic!("{s}"));
            assert_eq!(r.to_letters(), s, "{s}");
        }
        let r = Rwbs::parse("FWFSM").unwrap_or_default();
        assert!(r.preflush && r.fua && r.sync && r.meta && r.op == BlockOp::Write);
        assert_eq!(Rwbs::parse("F").map(|r| r.op), Some(BlockOp::Flush));
        // blk-flush's flush request is REQ_OP_FLUSH | REQ_PREFLUSH, printed "FF".
        assert_eq!(
            Rwbs::parse("FF").map(|r| (r.preflush, r.op, r.fua)),
            Some((true, BlockOp::Flush, false))
        );
        assert_eq!(Rwbs::parse("WX"), None);
        assert_eq!(Rwbs::parse("Q"), None);
    }

    #[test]
    fn dev_encoding_matches_kernel_mkdev() {
        let d = BlockDev::new(7, 3);
        assert_eq!(d.0, (7 << 20) | 3);
        assert_eq!((d.major(), d.minor()), (7, 3));
        assert_eq!(d.to_string(), "7,3");
    }

    #[test]
    fn letters_and_tracepoints_map_both_ways() {
        for c in "QGIDCMFRXAPUBm".chars() {
            let a = BlockAction::from_letter(c).unwrap_or_else(|| panic!("{c}"));
            assert_eq!(a.letter(), c);
            assert_eq!(BlockAction::from_tracepoint(a.tracepoint()), Some(a));
        }
        assert_eq!(BlockAction::from_letter('Z'), None);
    }
}
