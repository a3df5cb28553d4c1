//! v7 with zlib compression. The trace-cmd 3.1.6 build on the reference VM cannot write
//! zlib ("Compression algorithm zlib is not supported"), so the zlib file is derived from
//! the zstd fixture: the header's algorithm name `zstd` becomes `zlib` (same length), and
//! every compressed block — metadata sections and each CPU's chunk list — is re-compressed
//! with zlib and appended at the end of the file, with the option that locates it (section
//! offset, BUFFER CPU offset and size) patched. The result must read exactly like the zstd
//! original, whose events the oracle test checks against `trace-cmd report`.

use std::io::Write;

use stallscope_read::tracedat::TraceDatReader;
use stallscope_read::{EventReader, Input};

fn u16_at(b: &[u8], o: usize) -> u16 {
    u16::from_le_bytes(b[o..o + 2].try_into().unwrap())
}
fn u32_at(b: &[u8], o: usize) -> u32 {
    u32::from_le_bytes(b[o..o + 4].try_into().unwrap())
}
fn u64_at(b: &[u8], o: usize) -> u64 {
    u64::from_le_bytes(b[o..o + 8].try_into().unwrap())
}

fn zlib(raw: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(raw).unwrap();
    e.finish().unwrap()
}

/// The block `u32 csize, u32 size, data` at `at`, re-compressed with zlib (same framing),
/// and the length of the original block.
fn recompress(f: &[u8], at: usize) -> (Vec<u8>, usize) {
    let csize = u32_at(f, at) as usize;
    let size = u32_at(f, at + 4) as usize;
    let raw = zstd::bulk::decompress(&f[at + 8..at + 8 + csize], size).unwrap();
    let z = zlib(&raw);
    let mut block = (z.len() as u32).to_le_bytes().to_vec();
    block.extend_from_slice(&(size as u32).to_le_bytes());
    block.extend_from_slice(&z);
    (block, 8 + csize)
}

fn zstd_to_zlib(mut f: Vec<u8>) -> Vec<u8> {
    assert_eq!(&f[18..23], b"zstd\0");
    f[18..22].copy_from_slice(b"zlib");
    let mut p = 18;
    for _ in 0..2 {
        p += f[p..].iter().position(|&b| b == 0).unwrap() + 1;
    }
    // (file offset of the u64 option data pointing at a section)
    let mut section_refs = Vec::new();
    // (file offset of a BUFFER CPU entry's u64 offset; the u64 size follows)
    let mut cpu_refs = Vec::new();
    let mut section = u64_at(&f, p) as usize;
    while section != 0 {
        assert_eq!(
            u16_at(&f, section + 2) & 1,
            0,
            "OPTIONS sections are not compressed"
        );
        let mut o = section + 16;
        loop {
            let id = u16_at(&f, o);
            let size = u32_at(&f, o + 2) as usize;
            let data = o + 6;
            match id {
                0 => {
                    section = u64_at(&f, data) as usize;
                    break;
                }
                16..=21 => section_refs.push(data),
                3 => {
                    // u64 offset, name\0, clock\0, u32 page size, u32 n, n × (u32, u64, u64)
                    let mut q = data + 8;
                    for _ in 0..2 {
                        q += f[q..].iter().position(|&b| b == 0).unwrap() + 1;
                    }
                    let n = u32_at(&f, q + 4) as usize;
                    for i in 0..n {
                        cpu_refs.push(q + 8 + 20 * i + 4);
                    }
                }
                _ => {}
            }
            o = data + size;
        }
    }
    assert!(section_refs.len() >= 5 && !cpu_refs.is_empty());
    // Compressed metadata sections move to the end of the file, re-compressed.
    for r in section_refs {
        let s = u64_at(&f, r) as usize;
        if u16_at(&f, s + 2) & 1 == 0 {
            continue; // stored uncompressed: nothing to convert
        }
        let (block, _) = recompress(&f, s + 16);
        let new_at = f.len() as u64;
        let mut header = f[s..s + 8].to_vec(); // id, flags, description
        header.extend_from_slice(&(block.len() as u64).to_le_bytes());
        f.extend_from_slice(&header);
        f.extend_from_slice(&block);
        f[r..r + 8].copy_from_slice(&new_at.to_le_bytes());
    }
    // Each CPU's chunk list moves too; its entry gets the new offset and size.
    for r in cpu_refs {
        let (off, size) = (u64_at(&f, r) as usize, u64_at(&f, r + 8));
        if size == 0 {
            continue; // an empty CPU has no chunk list
        }
        let chunks = u32_at(&f, off);
        let mut area = chunks.to_le_bytes().to_vec();
        let mut at = off + 4;
        for _ in 0..chunks {
            let (block, old_len) = recompress(&f, at);
            area.extend_from_slice(&block);
            at += old_len;
        }
        let new_at = f.len() as u64;
        let new_size = (area.len() - 4) as u64; // the size excludes the chunk count
        f.extend_from_slice(&area);
        f[r..r + 8].copy_from_slice(&new_at.to_le_bytes());
        f[r + 8..r + 16].copy_from_slice(&new_size.to_le_bytes());
    }
    f
}

fn dump(bytes: Vec<u8>) -> (Vec<String>, Option<String>) {
    let input = Input::from_bytes("z.dat", bytes).unwrap();
    let mut r = TraceDatReader::open(input, 0).unwrap();
    let mut lines = Vec::new();
    while let Some(e) = r.next_event().unwrap() {
        lines.push(e.dump_line());
    }
    (lines, r.meta().compression.clone())
}

#[test]
fn zlib_v7_reads_like_the_zstd_original() {
    let p = format!(
        "{}/../../fixtures/tracedat/sched_v7_zstd.dat",
        env!("CARGO_MANIFEST_DIR")
    );
    let zstd_file = std::fs::read(p).unwrap();
    let zlib_file = zstd_to_zlib(zstd_file.clone());
    assert_ne!(zlib_file, zstd_file);
    let (a, ca) = dump(zstd_file);
    let (b, cb) = dump(zlib_file);
    assert!(a.len() > 1000);
    assert_eq!(a, b);
    assert!(ca.unwrap().starts_with("zstd"));
    assert!(cb.unwrap().starts_with("zlib"));
}
