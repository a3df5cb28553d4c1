//! `COMPRESSED2` (83) records, which newer perf writes instead of `COMPRESSED` (81): the
//! zstd fixture rewritten with type-83 records (`{header, u64 data_size, data, padding}`)
//! must give exactly the events of the original.

use std::path::Path;

use stallscope_read::perf_data::PerfDataReader;
use stallscope_read::{EventReader, Input};

fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}

/// Rewrites every COMPRESSED record of a file-mode perf.data as COMPRESSED2.
fn to_compressed2(orig: &[u8]) -> (Vec<u8>, usize) {
    let (data_off, data_size) = (u64_at(orig, 40) as usize, u64_at(orig, 48) as usize);
    let mut data = Vec::new();
    let mut converted = 0;
    let mut p = data_off;
    while p < data_off + data_size {
        let size = u16::from_le_bytes([orig[p + 6], orig[p + 7]]) as usize;
        let rec = &orig[p..p + size];
        if u32::from_le_bytes(rec[0..4].try_into().unwrap()) == 81 {
            let payload = &rec[8..];
            let total = (16 + payload.len()).div_ceil(8) * 8;
            data.extend_from_slice(&83u32.to_le_bytes());
            data.extend_from_slice(&rec[4..6]);
            data.extend_from_slice(&(total as u16).to_le_bytes());
            data.extend_from_slice(&(payload.len() as u64).to_le_bytes());
            data.extend_from_slice(payload);
            data.resize(data.len() + total - 16 - payload.len(), 0);
            converted += 1;
        } else {
            data.extend_from_slice(rec);
        }
        p += size;
    }
    // Header with the new data size, the data, then the feature table with shifted offsets.
    let delta = data.len() as i64 - data_size as i64;
    let mut out = orig[..data_off].to_vec();
    out[48..56].copy_from_slice(&(data.len() as u64).to_le_bytes());
    out.extend_from_slice(&data);
    let nfeat: u32 = (0..4).map(|i| u64_at(orig, 72 + 8 * i).count_ones()).sum();
    let table = data_off + data_size;
    for i in 0..nfeat as usize {
        let off = u64_at(orig, table + 16 * i) as i64 + delta;
        out.extend_from_slice(&(off as u64).to_le_bytes());
        out.extend_from_slice(&orig[table + 16 * i + 8..table + 16 * i + 16]);
    }
    out.extend_from_slice(&orig[table + 16 * nfeat as usize..]);
    (out, converted)
}

fn dump(bytes: Vec<u8>) -> Vec<String> {
    let mut r = PerfDataReader::open(Input::from_bytes("z.data", bytes).unwrap(), 0).unwrap();
    let mut lines = Vec::new();
    while let Some(e) = r.next_event().unwrap() {
        lines.push(e.dump_line());
    }
    assert!(r.quality().is_empty(), "{:?}", r.quality());
    lines
}

#[test]
fn compressed2_records_decode_like_compressed_ones() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/perf_sched_zstd.data");
    let orig = std::fs::read(path).unwrap();
    let (conv, n) = to_compressed2(&orig);
    assert!(n >= 3, "{n} compressed records");
    let a = dump(orig);
    let b = dump(conv);
    assert!(a.len() > 1000);
    assert_eq!(a, b);
}
