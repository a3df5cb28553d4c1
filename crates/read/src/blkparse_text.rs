//! `blkparse` default text (blktrace 1.2.0, formats.md §7.4) and the kernel `blk` tracer's
//! `blk_classic` text → [`BlockEvent`]s.
//!
//! ```text
//! DEV     CPU SEQ      SECS.NSECS    PID [CGROUP] ACT RWBS PAYLOAD
//!   7,0    1        1     0.000000000 17154  Q  WS 0 + 128 [dd]
//!   7,0    1        4     0.000008355 17154  U   N [dd] 1
//!   7,0    1        6     0.000071537    22  C  WS 0 + 128 (   61575) [0]     (-t: elapsed µs)
//!   7,0    0       71     0.183675210 17198  G FWS [dd]                         (zero length)
//!   7,0    0       73     0.184080081    14  C  FN 0 [0]
//!   7,0    0        0     0.201000000    33  m   N bfq33S put_queue: 0x1     (message, seq 0)
//!   7,0    1   678.833100912 17154  Q  WS 0 + 128 [dd]                       (blk_classic: no SEQ)
//! CPU0 (loop0):                                                              summary: events end
//! ```
//!
//! Payloads after `ACT RWBS` are read by [`crate::text_common::block`]. Times are what
//! blkparse prints: ns relative to the first record of the trace (blk_classic: the trace
//! clock). The summary that follows the events (`CPU0 (dev):`, `Total (dev):`,
//! `Throughput`, `Events (dev): N entries`, `Skips`) ends the events: its lines are counted
//! (`blkparse_summary_lines`, info) and not parsed, as are blkparse's `Input file … added`
//! notes when stderr was captured too. `S` (sleep request, not modeled) is counted.
//!
//! Excerpts as people paste them are not always in time order (the request lines grepped
//! first, the I/O scheduler's `m` messages after them): up to [`REORDER_EVENTS`] events are
//! held and handed out in time order (stable: equal times keep their line order), with a
//! note counting the lines that came earlier than a line before them
//! (`blkparse_lines_out_of_order`). A longer input is handed out as read after that.

use stallscope_model::time::{parse_secs_frac, parse_u64};
use stallscope_model::{DataQuality, Event, EventKind, InputFormat, Problem, Rwbs, TraceMeta};

use crate::text_common::block::{blkparse_event, parse_dev};
use crate::text_common::lines::{Line, LineSource};
use crate::text_common::state::TextState;
use crate::{EventReader, Input, ReadError};

/// Events held to be handed out in time order (see the module doc).
pub const REORDER_EVENTS: usize = 1 << 20;

/// Reader of blkparse text.
pub struct BlkparseTextReader {
    lines: LineSource,
    st: TextState,
    in_summary: bool,
    done: bool,
    /// Events held while reordering (`None` once handed on).
    held: Option<Vec<Event>>,
    /// The latest time read, and lines earlier than it.
    latest: u64,
    late_lines: u64,
}

/// Opens `input` (already decompressed) as input number `index`.
pub fn open(input: Input, index: u16) -> Result<BlkparseTextReader, ReadError> {
    let st = TextState::new(&input, InputFormat::BlkparseText, index, Some("block"));
    let lines = LineSource::new(st.path.clone(), input.into_reader());
    Ok(BlkparseTextReader {
        lines,
        st,
        in_summary: false,
        done: false,
        held: Some(Vec::new()),
        latest: 0,
        late_lines: 0,
    })
}

/// One event line, split into its columns.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Columns<'a> {
    dev: &'a [u8],
    cpu: u32,
    ts: u64,
    pid: i32,
    act: &'a [u8],
    rwbs: &'a [u8],
    rest: &'a [u8],
}

/// Next whitespace-separated token of `s` from `*i`, advancing `*i` past it.
fn token<'a>(s: &'a [u8], i: &mut usize) -> Option<&'a [u8]> {
    while *i < s.len() && (s[*i] == b' ' || s[*i] == b'\t') {
        *i += 1;
    }
    let start = *i;
    while *i < s.len() && s[*i] != b' ' && s[*i] != b'\t' {
        *i += 1;
    }
    (start < *i).then(|| &s[start..*i])
}

/// Splits an event line (blkparse default, with or without the sequence column).
pub(crate) fn columns(s: &[u8]) -> Option<Columns<'_>> {
    let mut i = 0;
    let dev = token(s, &mut i)?;
    parse_dev(dev)?;
    let cpu = u32::try_from(parse_u64(token(s, &mut i)?)?).ok()?;
    let third = token(s, &mut i)?;
    let ts_tok = if third.contains(&b'.') {
        third
    } else {
        parse_u64(third)?; // sequence number
        token(s, &mut i)?
    };
    let ts = parse_secs_frac(ts_tok)?;
    let pid = i32::try_from(parse_u64(token(s, &mut i)?)?).ok()?;
    let mut act = token(s, &mut i)?;
    if act.contains(&b',') {
        // cgroup "ino,gen" column
        act = token(s, &mut i)?;
    }
    if act.is_empty() || act.len() > 2 || !act.iter().all(u8::is_ascii_alphabetic) {
        return None;
    }
    let rwbs = token(s, &mut i)?;
    // One space separates RWBS from the payload (messages keep their own spacing).
    let rest = s.get(i + 1..).unwrap_or(&[]);
    Some(Columns {
        dev,
        cpu,
        ts,
        pid,
        act,
        rwbs,
        rest,
    })
}

/// True when `line` starts the summary block (`CPU0 (dev):` or `Total (dev):`).
fn is_summary_start(line: &[u8]) -> bool {
    if let Some(r) = line.strip_prefix(b"CPU") {
        let digits = r.iter().take_while(|b| b.is_ascii_digit()).count();
        return digits > 0 && r[digits..].starts_with(b" (");
    }
    line.starts_with(b"Total (")
}

/// True when the first lines of `head` are blkparse (or blk_classic) event lines.
pub fn sniff(head: &[u8]) -> bool {
    if memchr::memchr(0, head).is_some() {
        return false;
    }
    let mut good = 0;
    for raw in head.split(|&b| b == b'\n').take(50) {
        let line = raw.strip_suffix(b"\r").unwrap_or(raw);
        if line.trim_ascii().is_empty() || line.starts_with(b"#") {
            continue;
        }
        if line.starts_with(b"Input file ") {
            continue;
        }
        if is_summary_start(line) {
            return good > 0;
        }
        if columns(line).is_none() {
            return false;
        }
        good += 1;
        if good >= 3 {
            return true;
        }
    }
    good > 0
}

/// Handles one line: events go to `st.out`, problems to `st.dq`.
fn handle(st: &mut TextState, in_summary: &mut bool, line: &Line<'_>) {
    let text = line.text;
    if *in_summary || is_summary_start(text) {
        *in_summary = true;
        st.note_deferred(Problem::BlkparseSummaryLines, line);
        return;
    }
    if text.trim_ascii().is_empty() || text.starts_with(b"#") {
        return;
    }
    if text.starts_with(b"Input file ") {
        st.note_deferred(Problem::BlkparseInputFileNotes, line);
        return;
    }
    let Some(c) = columns(text) else {
        st.unparsed(line);
        return;
    };
    let (Some(dev), Some(rwbs)) = (
        parse_dev(c.dev),
        std::str::from_utf8(c.rwbs).ok().and_then(Rwbs::parse),
    ) else {
        st.unparsed(line);
        return;
    };
    let rest = if c.act == b"m" {
        c.rest
    } else {
        c.rest.trim_ascii()
    };
    match blkparse_event(c.act, dev, rwbs, rest) {
        Ok(ev) => {
            let span = st.span(line.number);
            st.last_ts = c.ts;
            st.push(Event {
                ts: c.ts,
                cpu: c.cpu,
                pid: c.pid,
                span,
                kind: EventKind::Block(Box::new(ev)),
                callchain: None,
            });
        }
        Err(true) => st.note_deferred(Problem::BlkparseUnmodeledAction, line),
        Err(false) => st.unparsed(line),
    }
}

impl EventReader for BlkparseTextReader {
    fn meta(&self) -> &TraceMeta {
        &self.st.meta
    }

    fn next_event(&mut self) -> Result<Option<Event>, ReadError> {
        let BlkparseTextReader {
            lines,
            st,
            in_summary,
            done,
            held,
            latest,
            late_lines,
        } = self;
        loop {
            if held.is_none() {
                if let Some(ev) = st.out.pop_front() {
                    return Ok(Some(ev));
                }
            }
            if *done {
                return Ok(None);
            }
            match lines.next_line() {
                Ok(Some(line)) => {
                    if st.check_line(&line) {
                        handle(st, in_summary, &line);
                    }
                }
                Ok(None) => {
                    st.finish();
                    *done = true;
                }
                Err(e) => {
                    *done = true;
                    return Err(e);
                }
            }
            if let Some(h) = held {
                for ev in st.out.drain(..) {
                    if ev.ts < *latest {
                        *late_lines += 1;
                    }
                    *latest = (*latest).max(ev.ts);
                    h.push(ev);
                }
                if *done || h.len() >= REORDER_EVENTS {
                    let mut h = held.take().unwrap_or_default();
                    if *late_lines > 0 {
                        h.sort_by_key(|e| e.ts);
                        let n = *late_lines;
                        st.dq
                            .add(Problem::BlkparseLinesOutOfOrder, n, || format!("{n} lines"));
                    }
                    st.out.extend(h);
                }
            }
        }
    }

    fn quality(&self) -> &DataQuality {
        &self.st.dq
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_with_and_without_sequence() {
        let c = columns(b"  7,0    1        1     0.000000000 17154  Q  WS 0 + 128 [dd]").unwrap();
        assert_eq!((c.cpu, c.ts, c.pid), (1, 0, 17154));
        assert_eq!(
            (c.act, c.rwbs, c.rest),
            (&b"Q"[..], &b"WS"[..], &b"0 + 128 [dd]"[..])
        );
        let c = columns(b"  7,0    1   678.833100912 17154  Q  WS 0 + 128 [dd]").unwrap();
        assert_eq!(c.ts, 678_833_100_912);
        let c = columns(b"  7,0    0        0     0.201000000    33  m   N bfq33S  x").unwrap();
        assert_eq!((c.act, c.rest), (&b"m"[..], &b"bfq33S  x"[..]));
        let c = columns(b"  8,0    0        5     0.1 1 1f,0  Q  W 0 + 8 [a]").unwrap();
        assert_eq!(c.act, b"Q");
        assert!(columns(b"CPU0 (loop0):").is_none());
        assert!(columns(b" Reads Queued:           0,        0KiB").is_none());
    }

    #[test]
    fn grepped_request_lines_then_scheduler_messages_come_out_in_time_order() {
        let text =
            "  7,0    0        1     0.100000000  5475  I   W 2732112 + 2560 [kworker/u8:4]\n\
  7,0    1        2     0.900000000    54  D   W 2732112 + 2560 [kworker/1:1H]\n\
  7,0    1        0     0.500000000    54  m   N bfq19413S select_queue: checking new queue\n\
  7,0    1        0     0.899000000    54  m   N bfq11780A bfqq_served 7680 secs\n";
        let input = Input::from_bytes("excerpt.txt", text.as_bytes().to_vec()).unwrap();
        let mut r = open(input, 0).unwrap();
        let mut ts = Vec::new();
        while let Some(ev) = r.next_event().unwrap() {
            ts.push(ev.ts);
        }
        assert_eq!(ts, [100_000_000, 500_000_000, 899_000_000, 900_000_000]);
        assert_eq!(r.quality().count(Problem::BlkparseLinesOutOfOrder), 2);
    }

    #[test]
    fn summary_start() {
        assert!(is_summary_start(b"CPU0 (loop0):"));
        assert!(is_summary_start(b"CPU12 (sda):"));
        assert!(is_summary_start(b"Total (loop0):"));
        assert!(!is_summary_start(b"CPU (x)"));
    }

    #[test]
    fn sniffs_blkparse_not_ftrace() {
        assert!(sniff(
            b"  7,0    1        1     0.000000000 17154  Q  WS 0 + 128 [dd]\n"
        ));
        assert!(sniff(
            b"# tracer: blk\n#\n  7,0    1   678.833100912 17154  Q  WS 0 + 128 [dd]\n"
        ));
        assert!(!sniff(
            b"              dd-17154   [001] d..1.   678.833101:   7,0    Q  WS 0 + 128 [dd]\n"
        ));
        assert!(!sniff(b"cpus=2\n"));
    }
}
