//! Block-layer payload text → [`BlockEvent`]: the `block:*` tracepoint print formats (ftrace,
//! trace-cmd report and perf script text) and the blkparse / kernel `blk` tracer payloads
//! that follow `ACT RWBS` (used by [`crate::blkparse_text`]).
//!
//! Tracepoint payloads (kernel 6.18 `include/trace/events/block.h`; older kernels lack
//! the ioprio `be,0,4` column and some the `(cmd)`):
//!
//! ```text
//! block_rq_insert/issue/merge  7,0 WS 4096 () 2048 + 8 be,0,4 [fio]   dev rwbs bytes (cmd) sector + n ioprio [comm]
//! block_rq_complete/requeue    7,0 WS () 2048 + 8 be,0,4 [0]          … [error]
//! block_bio_queue/getrq/…merge 7,0 WS 2048 + 8 [fio]
//! block_bio_complete           7,0 WS 2048 + 8 [0]
//! block_split                  7,0 W 2048 / 2056 [dd]                 sector / new_sector
//! block_bio_remap/rq_remap     7,0 W 2048 + 8 <- (7,1) 0 [1]          … <- (old dev) old_sector [nr_bios]
//! block_plug                   [dd]
//! block_unplug                 [dd] 1                                 [comm] nr_rq
//! ```
//!
//! blkparse payloads (formats.md §7.4): `SECTOR + NSECT [(elapsed)] [COMM]`, zero-length
//! `[COMM]`; completions/requeues `SECTOR + NSECT [ERROR]` or `SECTOR [ERROR]`; PC requests
//! `BYTES (CDB) [COMM]` / `(CDB) [ERROR]`; `[COMM] DEPTH` (unplug); `SECTOR / NEW [COMM]`
//! (split); `SECTOR + NSECT <- (MAJ,MIN) OLD` (remap).
//!
//! Both are read by one lexer ([`lex`]) into numbers, `+`, `/`, `<-`, `(…)` groups, words
//! and one final `[…]` group (from the first `[` to the last `]`, so a comm may hold spaces
//! or brackets), then interpreted by position: a number right before `(…)` is a byte
//! count, `N + M` is sector and length, `N / M` sector and split point, `<- (a,b) N` the
//! remap origin, a number after `[…]` the unplug depth. Parenthesized elapsed times, `(cmd)`
//! texts and ioprio words carry nothing the model keeps.

use stallscope_model::time::parse_u64;
use stallscope_model::{BlockAction, BlockDev, BlockEvent, Comm, Rwbs};

/// One lexical item of a block payload.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Item<'a> {
    Num(u64),
    Plus,
    Slash,
    Arrow,
    Paren(&'a [u8]),
    Bracket(&'a [u8]),
    Word(&'a [u8]),
}

/// Splits `s` into items; `None` on an unbalanced `(` or `[`.
fn lex(s: &[u8]) -> Option<Vec<Item<'_>>> {
    let mut out = Vec::with_capacity(8);
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        match c {
            b' ' | b'\t' => i += 1,
            b'+' => {
                out.push(Item::Plus);
                i += 1;
            }
            b'/' => {
                out.push(Item::Slash);
                i += 1;
            }
            b'(' => {
                let close = i + memchr::memchr(b')', &s[i..])?;
                out.push(Item::Paren(&s[i + 1..close]));
                i = close + 1;
            }
            b'[' => {
                let close = memchr::memrchr(b']', s).filter(|&c| c > i)?;
                out.push(Item::Bracket(&s[i + 1..close]));
                i = close + 1;
            }
            _ => {
                let end = s[i..]
                    .iter()
                    .position(|&b| b == b' ' || b == b'\t')
                    .map_or(s.len(), |p| i + p);
                let w = &s[i..end];
                out.push(if w == b"<-" {
                    Item::Arrow
                } else if let Some(n) = parse_u64(w) {
                    Item::Num(n)
                } else {
                    Item::Word(w)
                });
                i = end;
            }
        }
    }
    Some(out)
}

/// What a payload says, before it is tied to an action.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Fields<'a> {
    bytes: Option<u32>,
    sector: Option<u64>,
    nr_sector: Option<u32>,
    split_at: Option<u64>,
    remap_from: Option<(BlockDev, u64)>,
    bracket: Option<&'a [u8]>,
    after_bracket: Option<u64>,
}

/// `MAJ,MIN` → device.
pub(crate) fn parse_dev(s: &[u8]) -> Option<BlockDev> {
    let comma = memchr::memchr(b',', s)?;
    let major = u32::try_from(parse_u64(s[..comma].trim_ascii())?).ok()?;
    let minor = u32::try_from(parse_u64(s[comma + 1..].trim_ascii())?).ok()?;
    if major >= 1 << 12 || minor >= 1 << 20 {
        return None;
    }
    Some(BlockDev::new(major, minor))
}

/// Reads lexed items; `bytes_before_paren`: a number right before `(…)` is a byte count
/// (request inserts/issues, blkparse PC requests), not a sector (zero-length completions
/// with blkparse's `-t` elapsed time: `0 (  61575) [0]`).
fn interpret<'a>(items: &[Item<'a>], bytes_before_paren: bool) -> Option<Fields<'a>> {
    let mut f = Fields::default();
    let mut i = 0;
    while i < items.len() {
        match (items[i], items.get(i + 1), items.get(i + 2)) {
            (Item::Num(n), Some(Item::Paren(_)), _)
                if bytes_before_paren && f.sector.is_none() && f.bytes.is_none() =>
            {
                f.bytes = Some(u32::try_from(n).ok()?);
                i += 2;
            }
            (Item::Num(s), Some(Item::Plus), Some(Item::Num(n))) if f.sector.is_none() => {
                f.sector = Some(s);
                f.nr_sector = Some(u32::try_from(*n).ok()?);
                i += 3;
            }
            (Item::Num(s), Some(Item::Slash), Some(Item::Num(n))) if f.sector.is_none() => {
                f.sector = Some(s);
                f.split_at = Some(*n);
                i += 3;
            }
            (Item::Arrow, Some(Item::Paren(d)), Some(Item::Num(n))) => {
                f.remap_from = Some((parse_dev(d)?, *n));
                i += 3;
            }
            (Item::Num(n), ..) if f.bracket.is_some() => {
                f.after_bracket = Some(n);
                i += 1;
            }
            (Item::Num(s), ..) if f.sector.is_none() && f.remap_from.is_none() => {
                f.sector = Some(s);
                i += 1;
            }
            // rq_remap's trailing nr_bios.
            (Item::Num(_), ..) if f.remap_from.is_some() => i += 1,
            (Item::Bracket(b), ..) if f.bracket.is_none() => {
                f.bracket = Some(b);
                i += 1;
            }
            (Item::Paren(_) | Item::Word(_), ..) => i += 1,
            _ => return None,
        }
    }
    Some(f)
}

/// `[0]` / `[-5]` / blkparse's unsigned `[65531]` → errno (negative on failure).
fn parse_error(b: &[u8]) -> Option<i32> {
    let b = b.trim_ascii();
    let (neg, digits) = match b.strip_prefix(b"-") {
        Some(d) => (true, d),
        None => (false, b),
    };
    let v = i64::try_from(parse_u64(digits)?).ok()?;
    let v = if neg { -v } else { v };
    // blkparse prints the kernel's u16 error field as unsigned.
    let v = if (32768..=65535).contains(&v) {
        v - 65536
    } else {
        v
    };
    i32::try_from(v).ok()
}

/// The comm inside `[…]`; blkparse prints `(null)` for a pid it has no name for.
fn parse_comm(b: &[u8]) -> Option<Comm> {
    if b == b"(null)" {
        None
    } else {
        Some(Comm::from_bytes(b))
    }
}

/// Builds the event for `action` from lexed payload fields. `error_in_bracket` tells
/// whether `[…]` holds the error (completions, requeues) rather than a comm.
fn build(
    action: BlockAction,
    dev: Option<BlockDev>,
    rwbs: Rwbs,
    f: &Fields<'_>,
    error_in_bracket: bool,
) -> Option<BlockEvent> {
    let mut ev = BlockEvent::new(action);
    ev.dev = dev;
    ev.rwbs = rwbs;
    ev.sector = f.sector.unwrap_or(0);
    ev.nr_sector = f.nr_sector.unwrap_or(0);
    ev.bytes = f.bytes;
    match action {
        BlockAction::Split => ev.related_sector = Some(f.split_at?),
        BlockAction::Remap => {
            let (d, s) = f.remap_from?;
            ev.related_dev = Some(d);
            ev.related_sector = Some(s);
        }
        BlockAction::Unplug => ev.nr_rq = Some(u32::try_from(f.after_bracket?).ok()?),
        _ => {}
    }
    match (f.bracket, error_in_bracket) {
        (Some(b), true) => {
            let e = parse_error(b)?;
            // The model keeps the status of completions only.
            if action == BlockAction::Complete {
                ev.error = Some(e);
            }
        }
        (Some(b), false) => ev.comm = parse_comm(b),
        (None, _) => {}
    }
    Some(ev)
}

/// A blkparse / kernel `blk` tracer payload for action letter(s) `act` (`Q`, `UT`, …).
/// `Err(true)` when the action is valid but not modeled (`S` sleep-request), `Err(false)`
/// when the payload does not parse.
pub(crate) fn blkparse_event(
    act: &[u8],
    dev: BlockDev,
    rwbs: Rwbs,
    rest: &[u8],
) -> Result<BlockEvent, bool> {
    let action = match act {
        b"UT" => BlockAction::Unplug,
        b"S" => return Err(true),
        [c] => BlockAction::from_letter(char::from(*c)).ok_or(false)?,
        _ => return Err(false),
    };
    if action == BlockAction::Message {
        let mut ev = BlockEvent::new(action);
        ev.dev = Some(dev);
        ev.message = Some(String::from_utf8_lossy(rest).into_owned().into_boxed_str());
        return Ok(ev);
    }
    let with_error = matches!(action, BlockAction::Complete | BlockAction::Requeue);
    let items = lex(rest).ok_or(false)?;
    let f = interpret(&items, !with_error).ok_or(false)?;
    let needs_bracket = !matches!(action, BlockAction::Remap);
    if needs_bracket && f.bracket.is_none() {
        return Err(false);
    }
    build(action, Some(dev), rwbs, &f, with_error).ok_or(false)
}

/// Decodes a `block_*` tracepoint payload; `None` when `name` is not a block event the
/// model knows or the payload matches no known layout (see [`is_block_tracepoint`]).
pub(crate) fn tracepoint_event(name: &[u8], payload: &[u8]) -> Option<BlockEvent> {
    let name = std::str::from_utf8(name).ok()?;
    let action = BlockAction::from_tracepoint(name)?;
    let p = payload.trim_ascii();
    let (dev, rwbs, rest) = match action {
        BlockAction::Plug | BlockAction::Unplug => (None, Rwbs::default(), p),
        _ => {
            let sp = memchr::memchr(b' ', p)?;
            let dev = parse_dev(&p[..sp])?;
            let rest = p[sp + 1..].trim_ascii_start();
            let sp2 = memchr::memchr(b' ', rest).unwrap_or(rest.len());
            let rwbs = Rwbs::parse(std::str::from_utf8(&rest[..sp2]).ok()?)?;
            (Some(dev), rwbs, &rest[sp2..])
        }
    };
    let with_error = matches!(
        name,
        "block_rq_complete" | "block_rq_requeue" | "block_bio_complete" | "block_rq_error"
    );
    let items = lex(rest)?;
    let f = interpret(&items, !with_error)?;
    let ev = build(action, dev, rwbs, &f, with_error)?;
    if !matches!(
        action,
        BlockAction::Plug | BlockAction::Unplug | BlockAction::Remap
    ) && f.sector.is_none()
    {
        return None;
    }
    Some(ev)
}

/// The payload of a kernel `blk` tracer line in ftrace's default text, after the context
/// columns: `  7,0    Q  WS 0 + 128 [dd]` (`"%3d,%-3d %2s %3s "` + the blkparse payload).
/// `None` when it is not one (the caller counts the line); `S` and unknown actions too.
pub(crate) fn blk_tracer_event(rest: &[u8]) -> Option<BlockEvent> {
    let mut it = rest.split(|&b| b == b' ').filter(|t| !t.is_empty());
    let dev = parse_dev(it.next()?)?;
    let act = it.next()?;
    let rwbs_tok = it.next()?;
    let rwbs = Rwbs::parse(std::str::from_utf8(rwbs_tok).ok()?)?;
    // The payload starts one space after the RWBS token.
    let at = rwbs_tok.as_ptr() as usize - rest.as_ptr() as usize + rwbs_tok.len() + 1;
    let payload = rest.get(at..).unwrap_or(&[]);
    let payload = if act == b"m" {
        payload
    } else {
        payload.trim_ascii()
    };
    blkparse_event(act, dev, rwbs, payload).ok()
}

/// True for the tracepoint names [`tracepoint_event`] decodes.
pub(crate) fn is_block_tracepoint(name: &[u8]) -> bool {
    std::str::from_utf8(name)
        .ok()
        .and_then(BlockAction::from_tracepoint)
        .is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(name: &str, payload: &str) -> BlockEvent {
        tracepoint_event(name.as_bytes(), payload.as_bytes())
            .unwrap_or_else(|| panic!("{name}: {payload}"))
    }

    #[test]
    fn request_tracepoints_with_and_without_ioprio() {
        let ev = tp("block_rq_issue", "7,0 WS 4096 () 2048 + 8 be,0,4 [fio]");
        assert_eq!(ev.dev, Some(BlockDev::new(7, 0)));
        assert_eq!((ev.sector, ev.nr_sector, ev.bytes), (2048, 8, Some(4096)));
        assert_eq!(ev.rwbs.to_letters(), "WS");
        assert_eq!(ev.comm.map(|c| c.as_str().to_string()), Some("fio".into()));
        let ev = tp(
            "block_rq_insert",
            "254,0 WS 65536 () 12871496 + 128 [python3]",
        );
        assert_eq!(
            (ev.sector, ev.nr_sector, ev.bytes),
            (12871496, 128, Some(65536))
        );
        let ev = tp("block_rq_complete", "7,0 WS () 2048 + 8 be,0,4 [0]");
        assert_eq!((ev.error, ev.comm), (Some(0), None));
        let ev = tp("block_rq_complete", "7,0 FF () 0 + 0 none,0,0 [-5]");
        assert_eq!((ev.error, ev.rwbs.to_letters().as_str()), (Some(-5), "FF"));
        let ev = tp("block_rq_requeue", "7,0 W () 8 + 8 [0]");
        assert_eq!((ev.action, ev.error), (BlockAction::Requeue, None));
    }

    #[test]
    fn bio_split_remap_plug_unplug() {
        let ev = tp("block_bio_queue", "7,0 WS 2048 + 8 [fio]");
        assert_eq!((ev.sector, ev.nr_sector, ev.bytes), (2048, 8, None));
        let ev = tp("block_bio_backmerge", "7,0 W 2056 + 8 [kworker/u8:2 x]");
        assert_eq!(
            ev.comm.map(|c| c.as_str().to_string()),
            Some("kworker/u8:2 x".into())
        );
        let ev = tp("block_split", "7,0 W 0 / 128 [dd]");
        assert_eq!((ev.sector, ev.related_sector), (0, Some(128)));
        let ev = tp("block_bio_remap", "7,0 W 2048 + 8 <- (7,1) 0");
        assert_eq!(ev.related_dev, Some(BlockDev::new(7, 1)));
        assert_eq!(ev.related_sector, Some(0));
        let ev = tp("block_rq_remap", "8,0 W 2048 + 8 <- (8,1) 16 1");
        assert_eq!(ev.related_sector, Some(16));
        let ev = tp("block_plug", "[dd]");
        assert_eq!(
            (ev.dev, ev.comm.map(|c| c.as_str().to_string())),
            (None, Some("dd".into()))
        );
        let ev = tp("block_unplug", "[dd] 3");
        assert_eq!(ev.nr_rq, Some(3));
        let ev = tp("block_bio_complete", "7,0 R 8 + 8 [0]");
        assert_eq!(ev.error, Some(0));
    }

    #[test]
    fn malformed_tracepoints_are_rejected() {
        assert!(tracepoint_event(b"block_rq_issue", b"7,0 WS").is_none());
        assert!(tracepoint_event(b"block_rq_issue", b"x,0 WS () 1 + 8 [a]").is_none());
        assert!(tracepoint_event(b"block_rq_issue", b"7,0 QQ () 1 + 8 [a]").is_none());
        assert!(tracepoint_event(b"block_unplug", b"[dd]").is_none());
        assert!(tracepoint_event(b"block_touch_buffer", b"7,0 sector=1 size=4096").is_none());
    }

    #[test]
    fn kernel_blk_tracer_payloads() {
        let ev = blk_tracer_event(b"  7,0    Q  WS 0 + 128 [dd]").unwrap();
        assert_eq!(
            (ev.action, ev.sector, ev.nr_sector),
            (BlockAction::Queue, 0, 128)
        );
        let ev = blk_tracer_event(b"  7,0    U   N [dd] 1").unwrap();
        assert_eq!(ev.nr_rq, Some(1));
        let ev = blk_tracer_event(b"  7,0    C  FN 0 [0]").unwrap();
        assert_eq!(ev.error, Some(0));
        assert!(blk_tracer_event(b"sched_switch: prev_comm=a").is_none());
    }

    #[test]
    fn blkparse_payloads() {
        let dev = BlockDev::new(7, 0);
        let ws = Rwbs::parse("WS").unwrap();
        let ev = blkparse_event(b"Q", dev, ws, b"0 + 128 [dd]").unwrap();
        assert_eq!((ev.sector, ev.nr_sector), (0, 128));
        let ev = blkparse_event(b"C", dev, ws, b"0 + 128 (   61575) [0]").unwrap();
        assert_eq!((ev.nr_sector, ev.error), (128, Some(0)));
        let ev = blkparse_event(b"C", dev, ws, b"0 [65531]").unwrap();
        assert_eq!((ev.nr_sector, ev.error), (0, Some(-5)));
        let ev = blkparse_event(b"C", dev, ws, b"16 (   61575) [65531]").unwrap();
        assert_eq!((ev.sector, ev.bytes), (16, None));
        assert_eq!((ev.nr_sector, ev.error), (0, Some(-5)));
        let ev = blkparse_event(b"D", dev, ws, b"0 + 128 (10272031851422987135) [dd]").unwrap();
        assert_eq!(ev.comm.map(|c| c.as_str().to_string()), Some("dd".into()));
        let ev = blkparse_event(b"G", dev, ws, b"[dd]").unwrap();
        assert_eq!((ev.sector, ev.nr_sector), (0, 0));
        let ev = blkparse_event(b"UT", dev, Rwbs::default(), b"[kworker/0:1H] 4").unwrap();
        assert_eq!(ev.nr_rq, Some(4));
        let ev = blkparse_event(b"X", dev, ws, b"0 / 128 [dd]").unwrap();
        assert_eq!(ev.related_sector, Some(128));
        let ev = blkparse_event(b"A", dev, ws, b"2048 + 8 <- (7,1) 0").unwrap();
        assert_eq!(ev.related_dev, Some(BlockDev::new(7, 1)));
        let ev = blkparse_event(b"Q", dev, ws, b"0 + 8 [(null)]").unwrap();
        assert_eq!(ev.comm, None);
        let ev = blkparse_event(b"m", dev, Rwbs::default(), b"bfq33S put_queue: 0x1").unwrap();
        assert_eq!(ev.message.as_deref(), Some("bfq33S put_queue: 0x1"));
        assert_eq!(blkparse_event(b"S", dev, ws, b"0 + 8 [dd]"), Err(true));
        assert_eq!(blkparse_event(b"Z", dev, ws, b"0 + 8 [dd]"), Err(false));
        assert_eq!(blkparse_event(b"Q", dev, ws, b"0 + 8 dd"), Err(false));
        assert_eq!(blkparse_event(b"Q", dev, ws, b"0 + 8 [dd"), Err(false));
    }
}
