//! Parsing many format files at once: a trace.dat of a kernel with every event system
//! holds thousands (2305 on a 6.18 kernel, 2 MB of text), and parsing them is most of the
//! work of opening the file, so they are parsed on up to [`MAX_THREADS`] threads.
//!
//! ```text
//! blob walk     [(system, bytes), (system, bytes), …]   offsets and sizes checked first
//! parse         thread 1: formats 0..k   thread 2: formats k..n   (split by bytes)
//! result        one Result per format, in the blob's order, whatever the split
//! ```
//! The outcome does not depend on the number of threads (a unit test compares them), so
//! the events, the `bad_formats` notes and their order are those of a sequential parse.

use std::borrow::Cow;
use std::sync::OnceLock;

use super::format_file::{EventFormat, Field};

/// Most threads used to parse one batch.
pub const MAX_THREADS: usize = 4;

/// Fewest formats per thread worth a thread of its own.
const MIN_FORMATS_PER_THREAD: usize = 150;

/// One format file's text as stored, and its system.
#[derive(Clone, Copy, Debug)]
pub struct RawFormat<'a> {
    /// Subsystem (`sched`, `ftrace`).
    pub system: &'a str,
    /// The file's bytes (UTF-8 expected; anything else is read lossily).
    pub text: &'a [u8],
}

/// A parsed format, or `(system, "first line: why")` for one that did not parse.
pub type Parsed = Result<EventFormat, (String, String)>;

/// Parses `raw` on as many threads as the cores and the batch's size make worthwhile.
pub fn parse_all(raw: &[RawFormat<'_>]) -> Vec<Parsed> {
    parse_on(raw, default_threads(raw.len()))
}

/// Parses `raw` on `threads` threads (1: the caller's only); the result is the same
/// whatever `threads` is.
pub fn parse_on(raw: &[RawFormat<'_>], threads: usize) -> Vec<Parsed> {
    map_in_parts(raw, threads, |r| r.text.len(), parse_chunk)
}

/// `map(items)` computed on up to `threads` threads (the caller's one included), each
/// given a consecutive part of `items` of about the same total `weight`; the parts'
/// results are concatenated in order, so the outcome is `map(items)` whatever the split
/// when `map` works item by item.
pub(crate) fn map_in_parts<T: Sync, R: Send>(
    items: &[T],
    threads: usize,
    weight: impl Fn(&T) -> usize,
    map: impl Fn(&[T]) -> Vec<R> + Sync,
) -> Vec<R> {
    let parts = split_by_weight(items, threads.max(1), weight);
    if parts.len() <= 1 {
        return map(items);
    }
    let map = &map;
    std::thread::scope(|s| {
        let spawned: Vec<_> = parts[1..]
            .iter()
            .map(|&part| {
                let handle = std::thread::Builder::new()
                    .name("stallscope-formats".into())
                    .spawn_scoped(s, move || map(part));
                (part, handle)
            })
            .collect();
        let mut out = map(parts[0]);
        out.reserve(items.len().saturating_sub(out.len()));
        for (part, handle) in spawned {
            match handle {
                Ok(h) => match h.join() {
                    Ok(mapped) => out.extend(mapped),
                    Err(panic) => std::panic::resume_unwind(panic),
                },
                // No thread to be had: map that part here.
                Err(_) => out.extend(map(part)),
            }
        }
        out
    })
}

/// Threads for a batch of `n` formats: the available cores, at most [`MAX_THREADS`], and
/// none beyond one per [`MIN_FORMATS_PER_THREAD`] formats.
pub(crate) fn default_threads(n: usize) -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    let cores = *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |c| c.get()));
    cores
        .min(MAX_THREADS)
        .min(n / MIN_FORMATS_PER_THREAD)
        .max(1)
}

/// Up to `parts` consecutive, non-empty slices of `items` of about the same weight each.
fn split_by_weight<T>(items: &[T], parts: usize, weight: impl Fn(&T) -> usize) -> Vec<&[T]> {
    let total: usize = items.iter().map(&weight).sum();
    let per_part = total.div_ceil(parts).max(1);
    let mut out = Vec::with_capacity(parts);
    let mut start = 0;
    let mut sum = 0;
    for (i, item) in items.iter().enumerate() {
        sum += weight(item);
        if sum >= per_part && out.len() + 1 < parts {
            out.push(&items[start..=i]);
            start = i + 1;
            sum = 0;
        }
    }
    if start < items.len() {
        out.push(&items[start..]);
    }
    out
}

fn parse_chunk(raw: &[RawFormat<'_>]) -> Vec<Parsed> {
    let mut scratch: Vec<Field> = Vec::new();
    raw.iter().map(|r| parse_one(r, &mut scratch)).collect()
}

fn parse_one(r: &RawFormat<'_>, scratch: &mut Vec<Field>) -> Parsed {
    let text = match std::str::from_utf8(r.text) {
        Ok(t) => Cow::Borrowed(t),
        Err(_) => String::from_utf8_lossy(r.text),
    };
    EventFormat::parse_with(r.system, &text, scratch).map_err(|e| {
        let name = text.lines().next().unwrap_or("").trim();
        (r.system.to_string(), format!("{name}: {e}"))
    })
}

/// The format files stored in the v6 trace.dat fixture (18 ftrace ones and 2305 in 101 systems, of a 6.18 kernel), as
/// `(system, bytes)`, for the tests of the parsers.
#[cfg(test)]
pub(crate) fn fixture_formats() -> Vec<(String, Vec<u8>)> {
    use super::tracing_data::BlobCursor;
    use super::Endian;
    use std::io::Read;
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/tracedat/sched_v6.dat.xz"
    );
    let mut bytes = Vec::new();
    crate::Input::open(path)
        .expect("fixture")
        .into_reader()
        .read_to_end(&mut bytes)
        .expect("fixture bytes");
    let mut c = BlobCursor::new(&bytes, 0, Endian::Little);
    c.take(10, "magic").unwrap();
    c.cstr("version").unwrap();
    c.take(6, "endian, long size, page size").unwrap();
    for tag in [&b"header_page\0"[..], b"header_event\0"] {
        c.expect(tag, "tag").unwrap();
        c.sized_bytes_u64("header").unwrap();
    }
    let mut out = Vec::new();
    for _ in 0..c.u32("ftrace formats").unwrap() {
        let text = c.sized_bytes_u64("ftrace format").unwrap();
        out.push(("ftrace".to_string(), text.to_vec()));
    }
    for _ in 0..c.u32("systems").unwrap() {
        let system = c.cstr("system").unwrap();
        for _ in 0..c.u32("formats").unwrap() {
            let text = c.sized_bytes_u64("format").unwrap();
            out.push((system.clone(), text.to_vec()));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fixture's formats with broken ones (no ID, a bad offset, invalid UTF-8) spread
    /// through, so that failures land in different threads' parts.
    /// The owned `(system, text)` pairs as the parser's input.
    fn borrowed(owned: &[(String, Vec<u8>)]) -> Vec<RawFormat<'_>> {
        owned
            .iter()
            .map(|(system, text)| RawFormat {
                system,
                text: text.as_slice(),
            })
            .collect()
    }

    fn with_broken(formats: &[(String, Vec<u8>)]) -> Vec<(String, Vec<u8>)> {
        let mut v = formats.to_vec();
        let broken: [&[u8]; 3] = [
            b"name: no_id\nformat:\n",
            b"name: bad_offset\nID: 9\nformat:\n\tfield:int x;\toffset:zz;\tsize:4;\n",
            b"name: latin1_\xe9\nID: 10\nformat:\n\tfield:int x;\toffset:0;\tsize:4;\n",
        ];
        for (i, at) in [0, v.len() / 3, v.len() / 2, v.len() - 7, v.len()]
            .into_iter()
            .enumerate()
        {
            v.insert(at, ("broken".to_string(), broken[i % 3].to_vec()));
        }
        v
    }

    #[test]
    fn any_number_of_threads_gives_the_sequential_result() {
        let owned = with_broken(&fixture_formats());
        let raw = borrowed(&owned);
        // A sequential parse the way the blob reader did it before batches.
        let expected: Vec<Parsed> = owned
            .iter()
            .map(|(system, bytes)| {
                let text = String::from_utf8_lossy(bytes).into_owned();
                EventFormat::parse(system, &text).map_err(|e| {
                    let name = text.lines().next().unwrap_or("").trim().to_string();
                    (system.clone(), format!("{name}: {e}"))
                })
            })
            .collect();
        assert_eq!(expected.len(), 18 + 2305 + 5);
        // Two without an ID, two with a bad offset; the Latin-1 name is read lossily.
        assert_eq!(expected.iter().filter(|p| p.is_err()).count(), 4);
        assert!(expected
            .iter()
            .flatten()
            .any(|f| f.name == "latin1_\u{fffd}" && f.id == 10));
        let switch = expected
            .iter()
            .flatten()
            .find(|f| f.system == "sched" && f.name == "sched_switch")
            .expect("sched_switch in the fixture");
        assert_eq!(switch.fields.len(), 7);
        for threads in [1, 2, 3, 4, 7] {
            assert_eq!(parse_on(&raw, threads), expected, "{threads} threads");
        }
        assert_eq!(parse_all(&raw), expected);
        assert!(parse_on(&[], 4).is_empty());
    }

    #[test]
    fn splits_cover_the_batch_in_order() {
        let texts: Vec<Vec<u8>> = (0..10).map(|i| vec![b'x'; 1 + i * 37 % 11]).collect();
        let raw: Vec<RawFormat<'_>> = texts
            .iter()
            .map(|t| RawFormat {
                system: "s",
                text: t,
            })
            .collect();
        for parts in 1..=12 {
            let split = split_by_weight(&raw, parts, |r| r.text.len());
            assert!(split.len() <= parts.min(raw.len()) && !split.is_empty());
            assert!(split.iter().all(|s| !s.is_empty()));
            let joined: Vec<*const u8> = split
                .iter()
                .flat_map(|s| s.iter().map(|r| r.text.as_ptr()))
                .collect();
            let all: Vec<*const u8> = raw.iter().map(|r| r.text.as_ptr()).collect();
            assert_eq!(joined, all, "{parts} parts");
            let doubled = map_in_parts(
                &raw,
                parts,
                |r| r.text.len(),
                |part| part.iter().map(|r| 2 * r.text.len()).collect(),
            );
            let expected: Vec<usize> = raw.iter().map(|r| 2 * r.text.len()).collect();
            assert_eq!(doubled, expected, "{parts} parts");
        }
    }

    /// Parse time of the fixture's formats on 1 and 2 threads, and with the reference
    /// parser: `cargo test --release -p stallscope-read --lib parse_time -- --ignored
    /// --nocapture`.
    #[test]
    #[ignore]
    fn parse_time() {
        let owned = fixture_formats();
        let raw = borrowed(&owned);
        let time = |f: &dyn Fn()| {
            let mut t: Vec<std::time::Duration> = (0..40)
                .map(|_| {
                    let t0 = std::time::Instant::now();
                    f();
                    t0.elapsed()
                })
                .collect();
            t.sort();
            (t[0], t[20])
        };
        let reference = time(&|| {
            for (system, bytes) in &owned {
                let text = String::from_utf8_lossy(bytes).into_owned();
                let _ = super::super::format_file_reference::parse_event_format(system, &text);
            }
        });
        let one = time(&|| drop(parse_on(&raw, 1)));
        let two = time(&|| drop(parse_on(&raw, 2)));
        eprintln!("reference {reference:?}  1 thread {one:?}  2 threads {two:?} (min, median)");
    }
}
