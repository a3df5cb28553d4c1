//! `perf_event_attr` (the fields stallscope needs) and the per-attr sample layout.
//!
//! ```text
//! off  field                      off  field
//! 0    u32 type (2 = tracepoint)   32   u64 read_format
//! 4    u32 size (64 … 136)         40   u64 flag bits (18 sample_id_all, 25 use_clockid)
//! 8    u64 config (tracepoint id)  92   s32 clockid (attr size ≥ 96)
//! 24   u64 sample_type
//! ```
//!
//! SAMPLE records carry, in this order, each field present iff its `sample_type` bit is set:
//! `IDENTIFIER(1<<16) IP(1) TID(2: u32 pid, u32 tid) TIME(4) ADDR(8) ID(64) STREAM_ID(512)
//! CPU(128: u32 cpu, u32 res) PERIOD(256) READ(16) CALLCHAIN(32: u64 nr, nr × u64)
//! RAW(1024: u32 size, data)` — stallscope stops after RAW. Non-sample kernel records end
//! with a `sample_id` trailer when `sample_id_all` is set:
//! `TID TIME ID STREAM_ID CPU IDENTIFIER` (each 8 bytes, iff its bit is set).

use crate::tracefs_format::Endian;

/// `sample_type` bits.
pub mod bits {
    /// Instruction pointer.
    pub const IP: u64 = 1 << 0;
    /// pid, tid.
    pub const TID: u64 = 1 << 1;
    /// Timestamp.
    pub const TIME: u64 = 1 << 2;
    /// Data address.
    pub const ADDR: u64 = 1 << 3;
    /// Counter values.
    pub const READ: u64 = 1 << 4;
    /// Call chain.
    pub const CALLCHAIN: u64 = 1 << 5;
    /// Sample id.
    pub const ID: u64 = 1 << 6;
    /// cpu, res.
    pub const CPU: u64 = 1 << 7;
    /// Period.
    pub const PERIOD: u64 = 1 << 8;
    /// Stream id.
    pub const STREAM_ID: u64 = 1 << 9;
    /// Raw tracepoint record.
    pub const RAW: u64 = 1 << 10;
    /// Sample id at a fixed position.
    pub const IDENTIFIER: u64 = 1 << 16;
}

/// `read_format` bits.
mod read_bits {
    pub const TOTAL_TIME_ENABLED: u64 = 1 << 0;
    pub const TOTAL_TIME_RUNNING: u64 = 1 << 1;
    pub const ID: u64 = 1 << 2;
    pub const GROUP: u64 = 1 << 3;
    pub const LOST: u64 = 1 << 4;
}

/// `PERF_TYPE_TRACEPOINT`.
pub const TYPE_TRACEPOINT: u32 = 2;
const TYPE_HARDWARE: u32 = 0;
const TYPE_SOFTWARE: u32 = 1;
/// Software event `dummy` (side-band only).
const SW_DUMMY: u64 = 9;

/// One event attribute with its sample ids and name.
#[derive(Clone, Debug, Default)]
pub struct Attr {
    /// `type`.
    pub kind: u32,
    /// `config` (tracepoint id for tracepoints).
    pub config: u64,
    /// `sample_type`.
    pub sample_type: u64,
    /// `read_format`.
    pub read_format: u64,
    /// Flag bits word.
    pub flags: u64,
    /// `clockid` when `use_clockid`.
    pub clockid: Option<i32>,
    /// Sample ids of this attr.
    pub ids: Vec<u64>,
    /// Name (`sched:sched_switch`, `cpu-clock:pppH`), from EVENT_DESC / EVENT_UPDATE / the
    /// tracepoint format.
    pub name: Option<String>,
}

impl Attr {
    /// Parses a `perf_event_attr` of `bytes.len()` bytes (short attrs are zero-extended).
    pub fn parse(bytes: &[u8], e: Endian) -> Attr {
        let u64_at = |o: usize| e.u64(bytes, o).unwrap_or(0);
        let flags = u64_at(40);
        let use_clockid = flags & (1 << 25) != 0;
        Attr {
            kind: e.u32(bytes, 0).unwrap_or(0),
            config: u64_at(8),
            sample_type: u64_at(24),
            read_format: u64_at(32),
            flags,
            clockid: if use_clockid {
                e.u32(bytes, 92).map(|v| v as i32)
            } else {
                None
            },
            ids: Vec::new(),
            name: None,
        }
    }

    /// `sample_id_all`: non-sample records carry a sample_id trailer.
    pub fn sample_id_all(&self) -> bool {
        self.flags & (1 << 18) != 0
    }

    /// True for perf's side-band `dummy` event.
    pub fn is_dummy(&self) -> bool {
        self.kind == TYPE_SOFTWARE && self.config == SW_DUMMY
    }

    /// Name when no EVENT_DESC / EVENT_UPDATE / format named it.
    pub fn default_name(&self) -> String {
        const HW: [&str; 10] = [
            "cycles",
            "instructions",
            "cache-references",
            "cache-misses",
            "branches",
            "branch-misses",
            "bus-cycles",
            "stalled-cycles-frontend",
            "stalled-cycles-backend",
            "ref-cycles",
        ];
        const SW: [&str; 12] = [
            "cpu-clock",
            "task-clock",
            "page-faults",
            "context-switches",
            "cpu-migrations",
            "minor-faults",
            "major-faults",
            "alignment-faults",
            "emulation-faults",
            "dummy",
            "bpf-output",
            "cgroup-switches",
        ];
        let table: &[&str] = match self.kind {
            TYPE_HARDWARE => &HW,
            TYPE_SOFTWARE => &SW,
            _ => &[],
        };
        match usize::try_from(self.config).ok().and_then(|i| table.get(i)) {
            Some(n) => (*n).to_string(),
            None => format!("event-type{}-config{:#x}", self.kind, self.config),
        }
    }
}

/// Where things are in this attr's records, computed once.
#[derive(Clone, Copy, Debug, Default)]
pub struct Layout {
    /// `sample_type`.
    pub sample_type: u64,
    /// `read_format`.
    pub read_format: u64,
    /// Offset of TIME in a SAMPLE record (all fields before it are fixed-size).
    pub sample_time_off: Option<usize>,
    /// Bytes of the sample_id trailer on non-sample records (0 without sample_id_all).
    pub trailer_len: usize,
    /// Offsets inside the trailer.
    pub trailer_tid: Option<usize>,
    /// TIME inside the trailer.
    pub trailer_time: Option<usize>,
    /// CPU inside the trailer.
    pub trailer_cpu: Option<usize>,
    /// Offsets of the SAMPLE fields when every field before RAW has a fixed size (no READ,
    /// no CALLCHAIN): [`parse_sample`] then reads them directly.
    pub fixed: Option<FixedSample>,
}

/// Offsets inside a SAMPLE record whose fields up to RAW are all fixed-size.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FixedSample {
    /// IP.
    pub ip: Option<usize>,
    /// TID (pid, tid as two u32).
    pub tid: Option<usize>,
    /// TIME.
    pub time: Option<usize>,
    /// CPU (u32 cpu, u32 reserved).
    pub cpu: Option<usize>,
    /// PERIOD.
    pub period: Option<usize>,
    /// The u32 size in front of the RAW data.
    pub raw: Option<usize>,
}

impl FixedSample {
    /// The offsets for `sample_type`, `None` when a variable-size field comes before RAW.
    fn of(st: u64) -> Option<FixedSample> {
        if st & (bits::READ | bits::CALLCHAIN) != 0 {
            return None;
        }
        let mut f = FixedSample::default();
        let mut off = 8;
        let mut take = |bit: u64, slot: Option<&mut Option<usize>>| {
            if st & bit != 0 {
                if let Some(s) = slot {
                    *s = Some(off);
                }
                off += 8;
            }
        };
        take(bits::IDENTIFIER, None);
        take(bits::IP, Some(&mut f.ip));
        take(bits::TID, Some(&mut f.tid));
        take(bits::TIME, Some(&mut f.time));
        take(bits::ADDR, None);
        take(bits::ID, None);
        take(bits::STREAM_ID, None);
        take(bits::CPU, Some(&mut f.cpu));
        take(bits::PERIOD, Some(&mut f.period));
        if st & bits::RAW != 0 {
            f.raw = Some(off);
        }
        Some(f)
    }
}

impl Layout {
    /// The layout of `attr`.
    pub fn of(attr: &Attr) -> Layout {
        let st = attr.sample_type;
        let has = |b: u64| st & b != 0;
        let before_time = [bits::IDENTIFIER, bits::IP, bits::TID]
            .iter()
            .filter(|&&b| has(b))
            .count();
        let mut l = Layout {
            sample_type: st,
            read_format: attr.read_format,
            sample_time_off: has(bits::TIME).then_some(8 + 8 * before_time),
            fixed: FixedSample::of(st),
            ..Layout::default()
        };
        if attr.sample_id_all() {
            let mut off = 0;
            for (bit, slot) in [
                (bits::TID, &mut l.trailer_tid),
                (bits::TIME, &mut l.trailer_time),
                (bits::ID, &mut None),
                (bits::STREAM_ID, &mut None),
                (bits::CPU, &mut l.trailer_cpu),
                (bits::IDENTIFIER, &mut None),
            ] {
                if has(bit) {
                    *slot = Some(off);
                    off += 8;
                }
            }
            l.trailer_len = off;
        }
        l
    }
}

/// Which attr a record belongs to: where the sample id sits and the id → attr maps (a
/// dense table when the ids are compact, as perf numbers them, and a hash map otherwise).
#[derive(Clone, Debug, Default)]
pub struct AttrIds {
    attrs: usize,
    /// Where the sample id is (the first attr's layout).
    pub pos: IdPos,
    by_id: rustc_hash::FxHashMap<u64, u16>,
    /// `dense[id - base]` = attr index (u16::MAX: none), when the ids are compact.
    dense: Vec<u16>,
    base: u64,
}

impl AttrIds {
    /// The maps of `attrs`, and whether the attrs disagree on where the sample id is (the
    /// first attr's layout is used then).
    pub fn of(attrs: &[Attr]) -> (AttrIds, bool) {
        let pos = attrs.first().map(IdPos::of).unwrap_or_default();
        let ambiguous = attrs.iter().any(|a| IdPos::of(a) != pos);
        let mut by_id = rustc_hash::FxHashMap::default();
        for (i, a) in attrs.iter().enumerate() {
            for &id in &a.ids {
                by_id.insert(id, i as u16);
            }
        }
        let lo = by_id.keys().copied().min().unwrap_or(0);
        let hi = by_id.keys().copied().max().unwrap_or(0);
        let mut dense = Vec::new();
        if hi - lo < 1 << 16 {
            dense.resize((hi - lo + 1) as usize, u16::MAX);
            for (&id, &a) in &by_id {
                dense[(id - lo) as usize] = a;
            }
        }
        let ids = AttrIds {
            attrs: attrs.len(),
            pos,
            by_id,
            dense,
            base: lo,
        };
        (ids, ambiguous)
    }

    /// The attr index of a record (`None`: an id no attr has, or no attrs).
    #[inline]
    pub fn attr_of(&self, rec: &[u8], is_sample: bool, endian: Endian) -> Option<u16> {
        match self.attrs {
            0 => None,
            1 => Some(0),
            _ => {
                let pos = if is_sample {
                    self.pos.in_sample
                } else {
                    self.pos.from_end.and_then(|d| rec.len().checked_sub(d))
                };
                match pos {
                    // perf-synthesized records (COMM/FORK/MMAP of existing tasks) have id 0.
                    Some(p) => match endian.u64(rec, p)? {
                        0 => Some(0),
                        id => match id
                            .checked_sub(self.base)
                            .and_then(|i| self.dense.get(usize::try_from(i).ok()?))
                        {
                            Some(&a) if a != u16::MAX => Some(a),
                            _ => self.by_id.get(&id).copied(),
                        },
                    },
                    // No id in the records: perf then uses the first attr.
                    None => Some(0),
                }
            }
        }
    }
}

/// Where the sample id sits, shared by all attrs of a file (perf requires that).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IdPos {
    /// Offset of the id in SAMPLE records.
    pub in_sample: Option<usize>,
    /// Distance of the id from the end of non-sample records.
    pub from_end: Option<usize>,
}

impl IdPos {
    /// From one attr's sample_type.
    pub fn of(attr: &Attr) -> IdPos {
        let st = attr.sample_type;
        let has = |b: u64| st & b != 0;
        let in_sample = if has(bits::IDENTIFIER) {
            Some(8)
        } else if has(bits::ID) {
            Some(
                8 + 8 * [bits::IP, bits::TID, bits::TIME, bits::ADDR]
                    .iter()
                    .filter(|&&b| has(b))
                    .count(),
            )
        } else {
            None
        };
        let from_end = if !attr.sample_id_all() {
            None
        } else if has(bits::IDENTIFIER) {
            Some(8)
        } else if has(bits::ID) {
            Some(
                8 * (1 + [bits::STREAM_ID, bits::CPU]
                    .iter()
                    .filter(|&&b| has(b))
                    .count()),
            )
        } else {
            None
        };
        IdPos {
            in_sample,
            from_end,
        }
    }
}

/// The fields of one SAMPLE record that stallscope uses.
#[derive(Clone, Copy, Debug, Default)]
pub struct Sample<'a> {
    /// Instruction pointer.
    pub ip: Option<u64>,
    /// Process id.
    pub pid: Option<i32>,
    /// Thread id.
    pub tid: Option<i32>,
    /// Time.
    pub time: Option<u64>,
    /// CPU.
    pub cpu: Option<u32>,
    /// Period.
    pub period: Option<u64>,
    /// Call chain entries (`nr` × u64, raw bytes).
    pub callchain: Option<&'a [u8]>,
    /// RAW tracepoint record (`size` bytes, may include alignment padding).
    pub raw: Option<&'a [u8]>,
}

/// Parses a SAMPLE record (header included) with `layout`; `None` when it is too short.
/// Always inlined (also [`parse_fixed_sample`]): a returned `Sample` read back from the
/// stack with wider loads than it was stored with stalls on store forwarding.
#[inline(always)]
pub fn parse_sample<'a>(rec: &'a [u8], l: &Layout, e: Endian) -> Option<Sample<'a>> {
    match &l.fixed {
        Some(f) => parse_fixed_sample(rec, f, e),
        None => parse_any_sample(rec, l, e),
    }
}

/// [`parse_sample`] with precomputed offsets.
#[inline(always)]
fn parse_fixed_sample<'a>(rec: &'a [u8], f: &FixedSample, e: Endian) -> Option<Sample<'a>> {
    let u64_at = |o: Option<usize>| match o {
        Some(o) => e.u64(rec, o).map(Some),
        None => Some(None),
    };
    let u32_at = |o: Option<usize>| match o {
        Some(o) => e.u32(rec, o).map(Some),
        None => Some(None),
    };
    let raw = match f.raw {
        Some(o) => {
            let size = e.u32(rec, o)? as usize;
            Some(rec.get(o + 4..(o + 4).checked_add(size)?)?)
        }
        None => None,
    };
    Some(Sample {
        ip: u64_at(f.ip)?,
        pid: u32_at(f.tid)?.map(|v| v as i32),
        tid: u32_at(f.tid.map(|o| o + 4))?.map(|v| v as i32),
        time: u64_at(f.time)?,
        cpu: u32_at(f.cpu)?,
        period: u64_at(f.period)?,
        callchain: None,
        raw,
    })
}

/// [`parse_sample`] walking the sample_type bits.
fn parse_any_sample<'a>(rec: &'a [u8], l: &Layout, e: Endian) -> Option<Sample<'a>> {
    let st = l.sample_type;
    let mut s = Sample::default();
    let mut off = 8;
    let next_u64 = |off: &mut usize| -> Option<u64> {
        let v = e.u64(rec, *off)?;
        *off += 8;
        Some(v)
    };
    if st & bits::IDENTIFIER != 0 {
        next_u64(&mut off)?;
    }
    if st & bits::IP != 0 {
        s.ip = Some(next_u64(&mut off)?);
    }
    if st & bits::TID != 0 {
        s.pid = Some(e.u32(rec, off)? as i32);
        s.tid = Some(e.u32(rec, off + 4)? as i32);
        off += 8;
    }
    if st & bits::TIME != 0 {
        s.time = Some(next_u64(&mut off)?);
    }
    for b in [bits::ADDR, bits::ID, bits::STREAM_ID] {
        if st & b != 0 {
            next_u64(&mut off)?;
        }
    }
    if st & bits::CPU != 0 {
        s.cpu = Some(e.u32(rec, off)?);
        off += 8;
    }
    if st & bits::PERIOD != 0 {
        s.period = Some(next_u64(&mut off)?);
    }
    if st & bits::READ != 0 {
        off = off.checked_add(read_size(rec, off, l.read_format, e)?)?;
    }
    if st & bits::CALLCHAIN != 0 {
        let nr = next_u64(&mut off)?;
        let len = usize::try_from(nr).ok()?.checked_mul(8)?;
        s.callchain = Some(rec.get(off..off.checked_add(len)?)?);
        off += len;
    }
    if st & bits::RAW != 0 {
        let size = e.u32(rec, off)? as usize;
        off += 4;
        s.raw = Some(rec.get(off..off.checked_add(size)?)?);
    }
    Some(s)
}

/// Bytes of a READ block at `off`.
fn read_size(rec: &[u8], off: usize, rf: u64, e: Endian) -> Option<usize> {
    let n = |b: u64| usize::from(rf & b != 0);
    let times = n(read_bits::TOTAL_TIME_ENABLED) + n(read_bits::TOTAL_TIME_RUNNING);
    let per_value = 1 + n(read_bits::ID) + n(read_bits::LOST);
    if rf & read_bits::GROUP != 0 {
        let nr = usize::try_from(e.u64(rec, off)?).ok()?;
        nr.checked_mul(per_value)?
            .checked_add(1 + times)?
            .checked_mul(8)
    } else {
        Some(8 * (per_value + times))
    }
}

/// The sample_id trailer of a non-sample record: (tid, time, cpu).
pub fn parse_trailer(rec: &[u8], l: &Layout, e: Endian) -> (Option<i32>, Option<u64>, Option<u32>) {
    if l.trailer_len == 0 || rec.len() < 8 + l.trailer_len {
        return (None, None, None);
    }
    let base = rec.len() - l.trailer_len;
    (
        l.trailer_tid
            .and_then(|o| e.u32(rec, base + o + 4))
            .map(|v| v as i32),
        l.trailer_time.and_then(|o| e.u64(rec, base + o)),
        l.trailer_cpu.and_then(|o| e.u32(rec, base + o)),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sched_attr() -> Attr {
        // perf sched record: IDENTIFIER|IP|TID|TIME|CPU|PERIOD|RAW, sample_id_all.
        Attr {
            kind: 2,
            sample_type: 0x10587,
            flags: 1 << 18,
            ..Attr::default()
        }
    }

    #[test]
    fn layout_of_perf_sched_record_attrs() {
        let a = sched_attr();
        let l = Layout::of(&a);
        assert_eq!(l.sample_time_off, Some(32));
        assert_eq!(
            (l.trailer_len, l.trailer_tid, l.trailer_time, l.trailer_cpu),
            (32, Some(0), Some(8), Some(16))
        );
        assert_eq!(
            IdPos::of(&a),
            IdPos {
                in_sample: Some(8),
                from_end: Some(8)
            }
        );
        let b = Attr {
            sample_type: bits::IP | bits::TID | bits::TIME | bits::ID | bits::CPU,
            ..sched_attr()
        };
        assert_eq!(
            IdPos::of(&b),
            IdPos {
                in_sample: Some(32),
                from_end: Some(16)
            }
        );
    }

    #[test]
    fn parses_a_sample_and_rejects_short_or_lying_ones() {
        let a = sched_attr();
        let l = Layout::of(&a);
        let mut rec = vec![0u8; 8];
        for v in [7u64, 0xffff_ffff_8100_0000, (5u64 << 32) | 4, 1000, 1, 1] {
            rec.extend_from_slice(&v.to_le_bytes());
        }
        rec.extend_from_slice(&4u32.to_le_bytes());
        rec.extend_from_slice(b"abcd");
        let s = parse_sample(&rec, &l, Endian::Little).unwrap();
        assert_eq!(
            (s.pid, s.tid, s.time, s.cpu, s.period),
            (Some(4), Some(5), Some(1000), Some(1), Some(1))
        );
        assert_eq!(s.raw, Some(&b"abcd"[..]));
        assert!(parse_sample(&rec[..rec.len() - 1], &l, Endian::Little).is_none());
        let mut lying = rec.clone();
        let at = rec.len() - 8;
        lying[at..at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(parse_sample(&lying, &l, Endian::Little).is_none());
        // The precomputed offsets and the bit walk agree on every prefix of the record.
        assert!(l.fixed.is_some());
        let walk = Layout { fixed: None, ..l };
        for n in 0..=rec.len() {
            let (a, b) = (
                parse_sample(&rec[..n], &l, Endian::Little),
                parse_sample(&rec[..n], &walk, Endian::Little),
            );
            assert_eq!(format!("{a:?}"), format!("{b:?}"), "prefix {n}");
        }
        let cc = Layout {
            sample_type: bits::CALLCHAIN,
            ..Layout::default()
        };
        let mut r2 = vec![0u8; 8];
        r2.extend_from_slice(&u64::MAX.to_le_bytes());
        assert!(parse_sample(&r2, &cc, Endian::Little).is_none());
    }
}
