//! Ring-buffer sub-buffer decoding: hand-built pages for every edge case of formats.md §2,
//! and the real pages read from `trace_pipe_raw` on the 6.18 reference VM.

use stallscope_read::ringbuf::{
    parse_page_header, MissedEvents, PageError, PageLayout, PageRecords, Record,
};
use stallscope_read::tracefs_format::{Endian, HeaderPage};

/// Builds one sub-buffer item by item, in either byte order and long size.
struct PageBuilder {
    endian: Endian,
    long_size: u8,
    subbuf: usize,
    ts: u64,
    flags: u32,
    data: Vec<u8>,
    missed_count: Option<u64>,
}

impl PageBuilder {
    fn new(endian: Endian, long_size: u8, subbuf: usize, ts: u64) -> Self {
        PageBuilder {
            endian,
            long_size,
            subbuf,
            ts,
            flags: 0,
            data: Vec::new(),
            missed_count: None,
        }
    }
    fn u32(&self, v: u32) -> [u8; 4] {
        match self.endian {
            Endian::Little => v.to_le_bytes(),
            Endian::Big => v.to_be_bytes(),
        }
    }
    fn header_word(&self, type_len: u32, delta: u32) -> [u8; 4] {
        let w = match self.endian {
            Endian::Little => (delta << 5) | type_len,
            Endian::Big => (type_len << 27) | delta,
        };
        self.u32(w)
    }
    /// A data event with a small payload (type_len = len/4).
    fn event(mut self, delta: u32, payload: &[u8]) -> Self {
        assert!(payload.len().is_multiple_of(4) && payload.len() <= 112 && !payload.is_empty());
        let h = self.header_word(payload.len() as u32 / 4, delta);
        self.data.extend_from_slice(&h);
        self.data.extend_from_slice(payload);
        self
    }
    /// A data event with type_len 0 (length word includes itself).
    fn long_event(mut self, delta: u32, payload: &[u8]) -> Self {
        let h = self.header_word(0, delta);
        let len = self.u32(payload.len() as u32 + 4);
        self.data.extend_from_slice(&h);
        self.data.extend_from_slice(&len);
        self.data.extend_from_slice(payload);
        while !self.data.len().is_multiple_of(4) {
            self.data.push(0);
        }
        self
    }
    fn time_extend(mut self, delta: u64) -> Self {
        let h = self.header_word(30, (delta & 0x07ff_ffff) as u32);
        let a = self.u32((delta >> 27) as u32);
        self.data.extend_from_slice(&h);
        self.data.extend_from_slice(&a);
        self
    }
    fn time_stamp(mut self, abs: u64) -> Self {
        let h = self.header_word(31, (abs & 0x07ff_ffff) as u32);
        let a = self.u32((abs >> 27) as u32);
        self.data.extend_from_slice(&h);
        self.data.extend_from_slice(&a);
        self
    }
    /// A discarded event: padding with a non-zero delta; the kernel's `rb_event_discard`
    /// sets array0 = item length - 4 (everything after the header word, array0 included).
    fn discarded(mut self, delta: u32, payload_len: u32) -> Self {
        let h = self.header_word(29, delta);
        let a = self.u32(payload_len + 4);
        self.data.extend_from_slice(&h);
        self.data.extend_from_slice(&a);
        self.data
            .extend(std::iter::repeat_n(0xee, payload_len as usize));
        self
    }
    /// End-of-page padding (type 29, delta 0) followed by garbage that must be ignored.
    fn end_padding(mut self) -> Self {
        let h = self.header_word(29, 0);
        self.data.extend_from_slice(&h);
        self.data
            .extend_from_slice(&[0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08]);
        self
    }
    fn missed(mut self, count: Option<u64>) -> Self {
        self.flags |= 1 << 31;
        if count.is_some() {
            self.flags |= 1 << 30;
        }
        self.missed_count = count;
        self
    }
    fn build(&self) -> Vec<u8> {
        self.build_with_commit_len(self.data.len())
    }
    fn build_with_commit_len(&self, commit_len: usize) -> Vec<u8> {
        let mut page = Vec::with_capacity(self.subbuf);
        let commit = self.flags | commit_len as u32;
        match self.endian {
            Endian::Little => page.extend_from_slice(&self.ts.to_le_bytes()),
            Endian::Big => page.extend_from_slice(&self.ts.to_be_bytes()),
        }
        if self.long_size == 8 {
            // The kernel's int flags are sign-extended into the 64-bit long.
            let c = i64::from(commit as i32) as u64;
            match self.endian {
                Endian::Little => page.extend_from_slice(&c.to_le_bytes()),
                Endian::Big => page.extend_from_slice(&c.to_be_bytes()),
            }
        } else {
            page.extend_from_slice(&self.u32(commit));
        }
        page.extend_from_slice(&self.data);
        if let Some(n) = self.missed_count {
            if self.long_size == 8 {
                match self.endian {
                    Endian::Little => page.extend_from_slice(&n.to_le_bytes()),
                    Endian::Big => page.extend_from_slice(&n.to_be_bytes()),
                }
            } else {
                page.extend_from_slice(&self.u32(n as u32));
            }
        }
        page.resize(self.subbuf, 0);
        page
    }
    fn layout(&self) -> PageLayout {
        PageLayout::new(self.endian, self.long_size, self.subbuf)
    }
}

fn records(page: &[u8], layout: &PageLayout) -> Vec<(u64, Vec<u8>)> {
    let (_, recs) = PageRecords::new(page, layout).unwrap();
    recs.map(|r| {
        let r: Record<'_> = r.unwrap();
        (r.ts, r.payload.to_vec())
    })
    .collect()
}

const ALL_LAYOUTS: [(Endian, u8); 4] = [
    (Endian::Little, 8),
    (Endian::Little, 4),
    (Endian::Big, 8),
    (Endian::Big, 4),
];

#[test]
fn plain_events_accumulate_deltas_in_every_layout() {
    for (endian, long) in ALL_LAYOUTS {
        let b = PageBuilder::new(endian, long, 4096, 1_000)
            .event(0, &[1, 2, 3, 4])
            .event(7, &[5; 8])
            .event(0x07ff_ffff, &[9; 112]);
        let page = b.build();
        let h = parse_page_header(&page, &b.layout()).unwrap();
        assert_eq!(h.ts, 1_000);
        assert_eq!(h.data_len, 4 + 4 + 4 + 8 + 4 + 112);
        assert_eq!(h.missed, MissedEvents::None);
        let r = records(&page, &b.layout());
        assert_eq!(
            r,
            vec![
                (1_000, vec![1, 2, 3, 4]),
                (1_007, vec![5; 8]),
                (1_007 + 0x07ff_ffff, vec![9; 112]),
            ],
            "{endian:?} long {long}"
        );
    }
}

#[test]
fn type_len_zero_length_word_includes_itself_and_rounds_up() {
    for (endian, long) in ALL_LAYOUTS {
        let payload: Vec<u8> = (0..150u8).collect(); // 150 → padded to 152
        let b = PageBuilder::new(endian, long, 4096, 50)
            .long_event(3, &payload)
            .event(1, &[7; 4]);
        let page = b.build();
        let (_, recs) = PageRecords::new(&page, &b.layout()).unwrap();
        let r: Vec<_> = recs.map(Result::unwrap).collect();
        assert_eq!(r.len(), 2);
        assert_eq!((r[0].ts, r[0].payload), (53, &payload[..]));
        assert_eq!(r[0].offset, b.layout().data_offset);
        assert_eq!((r[1].ts, r[1].payload), (54, &[7u8; 4][..]));
        assert_eq!(r[1].offset, b.layout().data_offset + 8 + 152);
    }
}

#[test]
fn time_extend_adds_array0_shifted_by_27_plus_delta() {
    for (endian, long) in ALL_LAYOUTS {
        let gap = 302_836_370u64; // the gap formats.md §2.2 decoded from a real page
        let b = PageBuilder::new(endian, long, 4096, 10)
            .event(0, &[1; 4])
            .time_extend(gap)
            .event(0, &[2; 4])
            .time_extend(5 << 40)
            .event(4, &[3; 4]);
        let r = records(&b.build(), &b.layout());
        assert_eq!(
            r.iter().map(|x| x.0).collect::<Vec<_>>(),
            vec![10, 10 + gap, 10 + gap + (5 << 40) + 4]
        );
    }
}

#[test]
fn absolute_time_stamp_replaces_the_time_and_keeps_the_top_bits() {
    for (endian, long) in ALL_LAYOUTS {
        let b = PageBuilder::new(endian, long, 4096, 1_000_000)
            .event(5, &[1; 4])
            .time_stamp(123_456_789_012)
            .event(0, &[2; 4])
            .event(10, &[3; 4]);
        let r = records(&b.build(), &b.layout());
        assert_eq!(
            r.iter().map(|x| x.0).collect::<Vec<_>>(),
            vec![1_000_005, 123_456_789_012, 123_456_789_022]
        );
    }
    // With the top 5 bits set (TS_MSB), the absolute 59-bit value inherits them…
    let base = (0x08u64 << 56) | 0x100;
    let b = PageBuilder::new(Endian::Little, 8, 4096, base)
        .time_stamp(0x200)
        .event(0, &[1; 4]);
    assert_eq!(records(&b.build(), &b.layout())[0].0, (0x08 << 56) | 0x200);
    // …and when the low part wrapped below the current time, it carries into bit 59.
    let b = PageBuilder::new(Endian::Little, 8, 4096, base)
        .time_stamp(0x50)
        .event(0, &[1; 4]);
    assert_eq!(
        records(&b.build(), &b.layout())[0].0,
        ((0x08u64 << 56) | 0x50) + (1 << 59)
    );
}

#[test]
fn padding_with_zero_delta_ends_the_page() {
    for (endian, long) in ALL_LAYOUTS {
        let b = PageBuilder::new(endian, long, 4096, 1)
            .event(1, &[1; 4])
            .end_padding();
        let page = b.build();
        let r = records(&page, &b.layout());
        assert_eq!(r, vec![(2, vec![1; 4])]);
    }
}

#[test]
fn discarded_event_is_skipped_by_its_length_without_its_delta() {
    for (endian, long) in ALL_LAYOUTS {
        let b = PageBuilder::new(endian, long, 4096, 100)
            .event(1, &[1; 4])
            .discarded(1000, 36)
            .event(2, &[2; 8]);
        let page = b.build();
        let (_, mut recs) = PageRecords::new(&page, &b.layout()).unwrap();
        let got: Vec<_> = recs.by_ref().map(|r| r.unwrap().ts).collect();
        assert_eq!(got, vec![101, 103]);
        assert_eq!(recs.discarded, 1);
    }
}

#[test]
fn missed_events_flag_with_and_without_stored_count() {
    for (endian, long) in ALL_LAYOUTS {
        let b = PageBuilder::new(endian, long, 4096, 9)
            .event(0, &[1; 4])
            .missed(None);
        let page = b.build();
        let h = parse_page_header(&page, &b.layout()).unwrap();
        assert_eq!((h.missed, h.data_len), (MissedEvents::Unknown, 8));
        assert_eq!(records(&page, &b.layout()).len(), 1);

        let b = PageBuilder::new(endian, long, 4096, 9)
            .event(0, &[1; 4])
            .missed(Some(4242));
        let page = b.build();
        let h = parse_page_header(&page, &b.layout()).unwrap();
        assert_eq!((h.missed, h.data_len), (MissedEvents::Count(4242), 8));
        // The stored count is after the data, not an event.
        assert_eq!(records(&page, &b.layout()), vec![(9, vec![1; 4])]);
    }
}

#[test]
fn sub_buffers_larger_than_4k_are_read_to_their_commit() {
    let mut b = PageBuilder::new(Endian::Little, 8, 16384, 0);
    for i in 0..200u32 {
        b = b.event(1, &[(i % 251) as u8; 64]);
    }
    assert!(b.data.len() > 4096 * 3);
    let page = b.build();
    let r = records(&page, &b.layout());
    assert_eq!(r.len(), 200);
    assert_eq!(r[199], (200, vec![199u8; 64]));
    // The same layout from a header_page text describing a 16 KiB sub-buffer.
    let hp = HeaderPage::parse(
        "\tfield: u64 timestamp;\toffset:0;\tsize:8;\tsigned:0;\n\
         \tfield: local_t commit;\toffset:8;\tsize:8;\tsigned:1;\n\
         \tfield: int overwrite;\toffset:8;\tsize:1;\tsigned:1;\n\
         \tfield: char data;\toffset:16;\tsize:16368;\tsigned:0;\n",
    )
    .unwrap();
    assert_eq!(
        PageLayout::from_header_page(&hp, Endian::Little),
        Some(b.layout())
    );
}

#[test]
fn truncated_and_malformed_pages_are_errors_with_offsets_not_panics() {
    let b = PageBuilder::new(Endian::Little, 8, 4096, 0)
        .event(0, &[1; 8])
        .event(0, &[2; 8]);
    let layout = b.layout();
    let page = b.build();

    // Header cut short.
    assert_eq!(
        parse_page_header(&page[..10], &layout),
        Err(PageError::HeaderTruncated { need: 16, have: 10 })
    );
    // Commit larger than the page.
    let big = b.build_with_commit_len(5000);
    assert!(matches!(
        parse_page_header(&big, &layout),
        Err(PageError::CommitTooLarge {
            data_len: 5000,
            capacity: 4080
        })
    ));
    // A trailing partial page: commit says 24 bytes, only 20 present.
    let short = &page[..16 + 20];
    assert!(matches!(
        parse_page_header(short, &layout),
        Err(PageError::CommitTooLarge { .. })
    ));
    // Commit ends inside the second item: the first event, then one error at offset 28.
    let cut = b.build_with_commit_len(12 + 6);
    let (_, recs) = PageRecords::new(&cut, &layout).unwrap();
    let got: Vec<_> = recs.collect();
    assert_eq!(got.len(), 2);
    assert!(got[0].is_ok());
    assert_eq!(
        got[1],
        Err(PageError::ItemTruncated {
            offset: 28,
            need: 12,
            have: 6
        })
    );
    // type_len 0 with a length word < 4.
    let mut bad = PageBuilder::new(Endian::Little, 8, 4096, 0).long_event(0, &[0; 8]);
    bad.data[4..8].copy_from_slice(&2u32.to_le_bytes());
    let bad_page = bad.build();
    let (_, mut recs) = PageRecords::new(&bad_page, &layout).unwrap();
    assert_eq!(
        recs.next(),
        Some(Err(PageError::BadLength {
            offset: 16,
            array0: 2
        }))
    );
    assert_eq!(recs.next(), None);
    // Discarded event whose length runs past the commit.
    let mut disc = PageBuilder::new(Endian::Little, 8, 4096, 0).discarded(3, 8);
    disc.data[4..8].copy_from_slice(&4000u32.to_le_bytes());
    let p = disc.build();
    let (_, mut recs) = PageRecords::new(&p, &layout).unwrap();
    assert!(matches!(
        recs.next(),
        Some(Err(PageError::ItemTruncated { offset: 16, .. }))
    ));
    // An empty page (commit 0) has no events.
    let empty = PageBuilder::new(Endian::Little, 8, 4096, 77).build();
    assert!(records(&empty, &layout).is_empty());
}

#[test]
fn arbitrary_bytes_never_panic() {
    let layout = PageLayout::new(Endian::Little, 8, 4096);
    let mut seed = 0x1234_5678_9abc_def0u64;
    for _ in 0..2000 {
        let mut page = vec![0u8; 4096];
        for b in page.iter_mut() {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            *b = seed as u8;
        }
        // Keep the commit small enough for the items to be walked.
        page[8..16].copy_from_slice(&(u64::from(seed as u32) & 0xfff).to_le_bytes());
        if let Ok((_, recs)) = PageRecords::new(&page, &layout) {
            for r in recs.flatten() {
                assert!(r.offset + 4 <= page.len());
            }
        }
    }
}

// ---- real pages from per_cpu/cpu0/trace_pipe_raw (6.18, 64-bit, 4 KiB sub-buffers) ----

fn sample(name: &str) -> Vec<u8> {
    let p = format!(
        "{}/../../fixtures/samples/ringbuf/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(p).unwrap()
}

/// The 6.18 layout, from the real `header_page` file.
fn real_layout() -> PageLayout {
    let p = format!(
        "{}/../../fixtures/samples/formats/header_page",
        env!("CARGO_MANIFEST_DIR")
    );
    let hp = HeaderPage::parse(&std::fs::read_to_string(p).unwrap()).unwrap();
    PageLayout::from_header_page(&hp, Endian::Little).unwrap()
}

/// `ID:` of a sample format file.
fn event_id(format: &str) -> u16 {
    let p = format!(
        "{}/../../fixtures/samples/formats/{format}.format",
        env!("CARGO_MANIFEST_DIR")
    );
    let text = std::fs::read_to_string(p).unwrap();
    let line = text.lines().find(|l| l.starts_with("ID:")).unwrap();
    line[3..].trim().parse().unwrap()
}

#[test]
fn real_pages_hold_only_well_formed_sched_records() {
    let layout = real_layout();
    assert_eq!(layout.subbuf_size, 4096);
    let switch = event_id("sched_sched_switch");
    let wakeup = event_id("sched_sched_wakeup");
    let migrate = event_id("sched_sched_migrate_task");
    let data = sample("cpu0_trace_pipe_raw_4k_pages.bin");
    let mut last_ts = 0;
    let mut switches = 0;
    for page in data.chunks(layout.subbuf_size) {
        let (h, recs) = PageRecords::new(page, &layout).unwrap();
        assert_eq!(h.missed, MissedEvents::None);
        assert!(h.ts >= last_ts);
        let mut n = 0;
        for r in recs {
            let r = r.unwrap();
            assert!(r.ts >= last_ts, "time goes backwards at {}", r.offset);
            last_ts = r.ts;
            let id = u16::from_le_bytes([r.payload[0], r.payload[1]]);
            // Payload sizes from formats.md §2.2: sched_switch 64 bytes, sched_wakeup 36.
            match id {
                _ if id == switch => {
                    assert_eq!(r.payload.len(), 64);
                    switches += 1;
                }
                _ if id == wakeup => assert_eq!(r.payload.len(), 36),
                _ if id == migrate => assert!(r.payload.len() >= 28),
                _ => panic!("unexpected event id {id} at {}", r.offset),
            }
            n += 1;
        }
        assert!(n > 0);
    }
    assert!(switches > 100);
}

#[test]
fn real_page_with_time_extend_and_type_len_zero() {
    let layout = real_layout();
    let page = sample("cpu0_time_extend_and_typelen0.bin");
    let print = event_id("ftrace_print");
    let (h, recs) = PageRecords::new(&page, &layout).unwrap();
    let recs: Vec<_> = recs.map(Result::unwrap).collect();
    assert_eq!(recs[0].ts, h.ts);
    // formats.md §2.2: a 148-byte `print` event with type_len 0 and array0 = 152.
    let long = recs.iter().find(|r| r.payload.len() == 148).unwrap();
    assert_eq!(
        u16::from_le_bytes([long.payload[0], long.payload[1]]),
        print
    );
    let hdr = u32::from_le_bytes(page[long.offset..long.offset + 4].try_into().unwrap());
    let array0 = u32::from_le_bytes(page[long.offset + 4..long.offset + 8].try_into().unwrap());
    assert_eq!((hdr & 0x1f, array0), (0, 152));
    // A 0.3 s gap: TIME_EXTEND delta 302836370 ns before a data event with time_delta 0.
    let gaps: Vec<u64> = recs.windows(2).map(|w| w[1].ts - w[0].ts).collect();
    assert!(gaps.contains(&302_836_370), "{gaps:?}");
}

#[test]
fn real_page_with_sign_extended_missed_events_commit() {
    let layout = real_layout();
    let data = sample("cpu0_missed_events_flag.bin");
    let raw_commit = u64::from_le_bytes(data[8..16].try_into().unwrap());
    assert_eq!(raw_commit, 0xffff_ffff_8000_0ff0);
    let h = parse_page_header(&data[..4096], &layout).unwrap();
    assert_eq!((h.missed, h.data_len), (MissedEvents::Unknown, 0xff0));
    let h2 = parse_page_header(&data[4096..8192], &layout).unwrap();
    assert_eq!(h2.missed, MissedEvents::None);
    let switch = event_id("sched_sched_switch");
    for page in data.chunks(4096) {
        let (_, recs) = PageRecords::new(page, &layout).unwrap();
        for r in recs {
            let r = r.unwrap();
            assert_eq!(u16::from_le_bytes([r.payload[0], r.payload[1]]), switch);
        }
    }
}
