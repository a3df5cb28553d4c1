//! [`BlockDecoder`]: `block:*` tracepoint records (perf.data, trace.dat) → [`BlockEvent`],
//! every field found by NAME in the event's format file (offsets differ across kernels:
//! 6.18 added `ioprio`, older kernels lack `cmd` or `bytes`).
//!
//! | tracepoint | fields used (optional in brackets) |
//! |---|---|
//! | `block_rq_insert`, `block_rq_issue`, `block_rq_merge` | dev sector nr_sector [bytes] rwbs [comm] |
//! | `block_rq_complete`, `block_bio_complete` | dev sector nr_sector rwbs [error] |
//! | `block_rq_requeue` | dev sector nr_sector rwbs |
//! | `block_bio_queue`, `block_getrq`, `block_bio_backmerge`, `block_bio_frontmerge`, `block_bio_bounce` | dev sector nr_sector rwbs [comm] |
//! | `block_split` | dev sector new_sector rwbs [comm] |
//! | `block_bio_remap`, `block_rq_remap` | dev sector nr_sector rwbs old_dev old_sector |
//! | `block_plug` | [comm] |
//! | `block_unplug` | nr_rq [comm] |
//!
//! `dev` and `old_dev` are kernel `dev_t` (major << 20 | minor). `rwbs` is a `char[]`
//! decoded by [`Rwbs::parse`]; letters newer kernels add (`U` atomic, zoned `Z…` ops) are
//! dropped rather than failing the record (the operation becomes `N` for zoned ops). A
//! required field missing from the format makes the event fall back to generic decoding
//! (the caller reports why).

use stallscope_model::{BlockAction, BlockDev, BlockEvent, Comm, EventKind, Rwbs};

use super::access::{IntAccessor, StrAccessor};
use super::endian::Endian;
use super::format_file::EventFormat;

/// Field accessors of one block tracepoint, resolved once per event id.
#[derive(Clone, Debug)]
pub struct BlockDecoder {
    action: BlockAction,
    dev: Option<IntAccessor>,
    sector: Option<IntAccessor>,
    nr_sector: Option<IntAccessor>,
    bytes: Option<IntAccessor>,
    rwbs: Option<StrAccessor>,
    comm: Option<StrAccessor>,
    error: Option<IntAccessor>,
    new_sector: Option<IntAccessor>,
    old_dev: Option<IntAccessor>,
    old_sector: Option<IntAccessor>,
    nr_rq: Option<IntAccessor>,
}

/// Decodes an rwbs string, keeping the letters the model knows when there are others.
pub fn lenient_rwbs(s: &[u8]) -> Rwbs {
    let end = memchr::memchr(0, s).unwrap_or(s.len());
    let text = String::from_utf8_lossy(&s[..end]);
    if let Some(r) = Rwbs::parse(&text) {
        return r;
    }
    let known: String = text.chars().filter(|c| "RWDFNASME".contains(*c)).collect();
    Rwbs::parse(&known).unwrap_or_default()
}

impl BlockDecoder {
    /// The decoder for `format` when it is a block tracepoint the model knows: `None` for
    /// other events, `Some(Err(why))` when a required field is missing.
    pub fn new(format: &EventFormat, endian: Endian) -> Option<Result<BlockDecoder, String>> {
        if format.system != "block" && !format.system.is_empty() {
            return None;
        }
        let action = BlockAction::from_tracepoint(&format.name)?;
        let int = |name: &str| format.field(name).and_then(|f| IntAccessor::new(f, endian));
        let string = |name: &str| format.field(name).and_then(|f| StrAccessor::new(f, endian));
        let with_error = matches!(
            format.name.as_str(),
            "block_rq_complete" | "block_bio_complete"
        );
        let d = BlockDecoder {
            action,
            dev: int("dev"),
            sector: int("sector"),
            nr_sector: int("nr_sector"),
            bytes: int("bytes"),
            rwbs: string("rwbs"),
            comm: if with_error { None } else { string("comm") },
            error: if with_error { int("error") } else { None },
            new_sector: int("new_sector"),
            old_dev: int("old_dev"),
            old_sector: int("old_sector"),
            nr_rq: int("nr_rq"),
        };
        let mut required: Vec<(&str, bool)> = Vec::new();
        match action {
            BlockAction::Plug => {}
            BlockAction::Unplug => required.push(("nr_rq", d.nr_rq.is_some())),
            _ => {
                required.push(("dev", d.dev.is_some()));
                required.push(("sector", d.sector.is_some()));
                required.push(("rwbs", d.rwbs.is_some()));
                match action {
                    BlockAction::Split => required.push(("new_sector", d.new_sector.is_some())),
                    BlockAction::Remap => {
                        required.push(("nr_sector", d.nr_sector.is_some()));
                        required.push(("old_dev", d.old_dev.is_some()));
                        required.push(("old_sector", d.old_sector.is_some()));
                    }
                    _ => required.push(("nr_sector", d.nr_sector.is_some())),
                }
            }
        }
        if let Some((missing, _)) = required.iter().find(|(_, ok)| !ok) {
            return Some(Err(format!(
                "{} has no usable field `{missing}`",
                format.full_name()
            )));
        }
        Some(Ok(d))
    }

    /// Decodes one record (starting at `common_type`); `None` when it is too short.
    pub fn decode(&self, rec: &[u8]) -> Option<EventKind> {
        let mut ev = BlockEvent::new(self.action);
        if let Some(a) = self.dev {
            ev.dev = Some(BlockDev(a.get_u64(rec)? as u32));
        }
        if let Some(a) = self.sector {
            ev.sector = a.get_u64(rec)?;
        }
        if self.action != BlockAction::Split {
            if let Some(a) = self.nr_sector {
                ev.nr_sector = a.get_u64(rec)? as u32;
            }
        }
        if let Some(a) = self.bytes {
            ev.bytes = Some(a.get_u64(rec)? as u32);
        }
        if let Some(a) = self.rwbs {
            ev.rwbs = lenient_rwbs(a.bytes(rec)?);
        }
        if let Some(a) = self.comm {
            ev.comm = Some(Comm::from_bytes(a.bytes(rec)?));
        }
        if let Some(a) = self.error {
            ev.error = Some(a.get_i64(rec)? as i32);
        }
        match self.action {
            BlockAction::Split => ev.related_sector = Some(self.new_sector?.get_u64(rec)?),
            BlockAction::Remap => {
                ev.related_dev = Some(BlockDev(self.old_dev?.get_u64(rec)? as u32));
                ev.related_sector = Some(self.old_sector?.get_u64(rec)?);
            }
            BlockAction::Unplug => ev.nr_rq = Some(self.nr_rq?.get_u64(rec)? as u32),
            _ => {}
        }
        Some(EventKind::Block(Box::new(ev)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn format(file: &str) -> EventFormat {
        let p = format!(
            "{}/../../fixtures/samples/formats/{file}",
            env!("CARGO_MANIFEST_DIR")
        );
        EventFormat::parse("block", &std::fs::read_to_string(p).unwrap()).unwrap()
    }

    /// A record laid out from the format itself (values put at the format's offsets).
    fn record(f: &EventFormat, vals: &[(&str, &[u8])]) -> Vec<u8> {
        let mut rec = vec![0u8; 128];
        for (name, bytes) in vals {
            let fld = f.field(name).unwrap();
            let off = fld.offset as usize;
            rec[off..off + bytes.len()].copy_from_slice(bytes);
        }
        rec
    }

    #[test]
    fn rq_issue_fields_by_name() {
        let f = format("block_block_rq_issue.format");
        let d = BlockDecoder::new(&f, Endian::Little).unwrap().unwrap();
        let dev = ((7u32 << 20) | 2).to_le_bytes();
        let rec = record(
            &f,
            &[
                ("dev", &dev),
                ("sector", &2048u64.to_le_bytes()),
                ("nr_sector", &8u32.to_le_bytes()),
                ("bytes", &4096u32.to_le_bytes()),
                ("rwbs", b"WS\0"),
                ("comm", b"fio\0"),
            ],
        );
        let EventKind::Block(ev) = d.decode(&rec).unwrap() else {
            panic!()
        };
        assert_eq!(ev.dev, Some(BlockDev::new(7, 2)));
        assert_eq!((ev.sector, ev.nr_sector, ev.bytes), (2048, 8, Some(4096)));
        assert_eq!(ev.rwbs.to_letters(), "WS");
        assert_eq!(ev.comm, Some(Comm::new("fio")));
        assert!(d.decode(&rec[..30]).is_none());
    }

    #[test]
    fn rq_complete_has_error_and_no_comm() {
        let f = format("block_block_rq_complete.format");
        let d = BlockDecoder::new(&f, Endian::Little).unwrap().unwrap();
        let rec = record(
            &f,
            &[
                ("sector", &8u64.to_le_bytes()),
                ("error", &(-5i32).to_le_bytes()),
                ("rwbs", b"FWFSU\0"),
            ],
        );
        let EventKind::Block(ev) = d.decode(&rec).unwrap() else {
            panic!()
        };
        assert_eq!((ev.error, ev.comm), (Some(-5), None));
        assert_eq!(ev.rwbs.to_letters(), "FWFS");
    }

    #[test]
    fn non_block_events_and_missing_fields() {
        let mut f = format("block_block_bio_queue.format");
        assert!(BlockDecoder::new(&f, Endian::Little).unwrap().is_ok());
        f.fields.retain(|x| x.name != "sector");
        assert!(BlockDecoder::new(&f, Endian::Little).unwrap().is_err());
        f.name = "block_touch_buffer".into();
        assert!(BlockDecoder::new(&f, Endian::Little).is_none());
    }
}
