//! Names for user-space frames of a perf.data profile, from the recording's binaries
//! (blazesym reads their ELF symbols, debug links and DWARF).
//!
//! A user frame is first named by the file mapped at its address and the offset into that
//! file (`[libc.so.6+0xf8350]`, see [`super::perf_samples`]). This module looks for that file
//! where perf would: perf's build-id cache (`~/.debug/.build-id/ab/cdef…/elf`) when the
//! recording said the file's build id (perf.data `HEADER_BUILD_ID`, or the MMAP2 record),
//! then the file at its recorded path — used only when its own build id is the recorded one
//! (or when the recording said none). Frames whose file is found and whose offset falls in a
//! function are renamed after it; the rest keep their file+offset names, and a data-quality
//! note says which files were not available and why (recorded on another host, a different
//! version installed here, no symbols in the file).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use blazesym::symbolize::source::{Elf, Source};
use blazesym::symbolize::{Input, Symbolized, Symbolizer};
use stallscope_model::{DataQuality, EventKind, Problem, Profile, SymbolId, Tid};

/// A user frame to name: its file, the offset into it, and the build id the recording gave
/// for that mapping, if any.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct UserFrame {
    /// File as the recording host named it.
    pub file: String,
    /// Offset into the file.
    pub offset: u64,
    /// Build id from the MMAP2 record, lowercase hex.
    pub build_id: Option<String>,
}

impl UserFrame {
    /// The frame at `addr` inside mapping `m`, and its name until symbolized:
    /// `[file+0xoffset]`.
    pub fn in_mapping(m: &stallscope_model::Mapping, addr: u64) -> (UserFrame, String) {
        let frame = UserFrame {
            file: m.filename.clone(),
            offset: m.file_offset(addr),
            build_id: m
                .build_id
                .as_ref()
                .map(|b| b.iter().map(|x| format!("{x:02x}")).collect()),
        };
        let name = format!("[{}+{:#x}]", m.short_name(), frame.offset);
        (frame, name)
    }
}

/// Why a file's frames stay unnamed.
enum Missing {
    NotHere,
    OtherVersion { recorded: String, here: String },
}

/// perf's build-id cache directory (`$HOME/.debug`).
fn build_id_cache() -> Option<PathBuf> {
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".debug"))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The files to read `file`'s symbols from, best first (perf's build-id cache copy, then
/// the file itself when it is the recorded build), or why there is none.
fn locate(file: &str, build_id: Option<&str>) -> Result<Vec<PathBuf>, Missing> {
    let mut out = Vec::new();
    if let (Some(id), Some(cache)) = (build_id, build_id_cache()) {
        if id.len() > 2 {
            let cached = cache
                .join(".build-id")
                .join(&id[..2])
                .join(&id[2..])
                .join("elf");
            if cached.is_file() {
                out.push(cached);
            }
        }
    }
    let path = Path::new(file);
    if !path.is_file() {
        return if out.is_empty() {
            Err(Missing::NotHere)
        } else {
            Ok(out)
        };
    }
    if let Some(recorded) = build_id {
        let here = blazesym::helper::read_elf_build_id(&path)
            .ok()
            .flatten()
            .map(|b| hex(&b));
        match here {
            Some(h) if h == recorded => {}
            Some(h) => {
                return Err(Missing::OtherVersion {
                    recorded: recorded.to_string(),
                    here: h,
                })
            }
            None => {
                return Err(Missing::OtherVersion {
                    recorded: recorded.to_string(),
                    here: "none".to_string(),
                })
            }
        }
    }
    out.push(path.to_path_buf());
    Ok(out)
}

/// Whether a mapping name is a real file (not `[vdso]`, `//anon`, `[heap]`, a JIT map).
fn is_file(name: &str) -> bool {
    name.starts_with('/') && !name.starts_with("//") && !name.starts_with("/memfd:")
}

/// Renames the frames of `profile` listed in `frames` (symbol id → frame) after the
/// functions of their binaries where those are available here; `recorded` gives build ids
/// by file (perf.data `HEADER_BUILD_ID`). Notes go to `dq`.
pub fn name_user_frames(
    profile: &mut Profile,
    frames: &HashMap<SymbolId, UserFrame>,
    recorded: &[(String, String)],
    dq: &mut DataQuality,
) {
    let list: Vec<(SymbolId, UserFrame)> = frames.iter().map(|(&k, v)| (k, v.clone())).collect();
    let only: Vec<UserFrame> = list.iter().map(|(_, f)| f.clone()).collect();
    let found = name_frames(&only, recorded, dq);
    let names: HashMap<SymbolId, String> = list
        .iter()
        .zip(found)
        .filter_map(|((id, _), n)| n.map(|n| (*id, n)))
        .collect();
    if !names.is_empty() {
        rename(profile, &names);
    }
}

/// The function names of `frames` (in order; `None` where unknown) from the recording's
/// binaries available here, with the notes of the files that were not.
pub fn name_frames(
    frames: &[UserFrame],
    recorded: &[(String, String)],
    dq: &mut DataQuality,
) -> Vec<Option<String>> {
    let mut out = vec![None; frames.len()];
    let recorded: HashMap<&str, &str> = recorded
        .iter()
        .map(|(f, id)| (f.as_str(), id.as_str()))
        .collect();
    // by file: (index, offset)
    let mut by_file: BTreeMap<&str, Vec<(usize, u64)>> = BTreeMap::new();
    for (i, f) in frames.iter().enumerate() {
        if is_file(&f.file) {
            by_file.entry(&f.file).or_default().push((i, f.offset));
        }
    }
    let symbolizer = Symbolizer::new();
    let mut named_files = Vec::new();
    for (file, list) in by_file {
        let build_id = frames[list[0].0]
            .build_id
            .as_deref()
            .or_else(|| recorded.get(file).copied());
        let paths = match locate(file, build_id) {
            Ok(p) => p,
            Err(why) => {
                let (problem, example) = match why {
                    Missing::NotHere => (
                        Problem::UserSymbolsMissing,
                        format!("{file} ({} frames)", list.len()),
                    ),
                    Missing::OtherVersion { recorded, here } => (
                        Problem::UserSymbolsOtherVersion,
                        format!("{file}: recorded {recorded}, here {here}"),
                    ),
                };
                dq.add(problem, 1, || example);
                continue;
            }
        };
        let offsets: Vec<u64> = list.iter().map(|&(_, o)| o).collect();
        let mut errors = Vec::new();
        let mut found = None;
        for path in &paths {
            let src = Source::Elf(Elf::new(path));
            match symbolizer.symbolize(&src, Input::FileOffset(&offsets)) {
                Ok(f) => {
                    found = Some((path.clone(), f));
                    break;
                }
                Err(e) => errors.push(format!("{}: {e}", path.display())),
            }
        }
        let Some((path, found)) = found else {
            dq.add(Problem::UserSymbolsUnreadable, 1, || errors.join("; "));
            continue;
        };
        let mut any = false;
        for ((i, _), s) in list.iter().zip(found) {
            if let Symbolized::Sym(sym) = s {
                out[*i] = Some(sym.name.to_string());
                any = true;
            }
        }
        if any {
            named_files.push(path.display().to_string());
        } else {
            let (problem, example) = no_symbols_note(file);
            dq.add(problem, 1, || example);
        }
    }
    if !named_files.is_empty() {
        let n = named_files.len();
        dq.add(Problem::UserSymbols, n as u64, || named_files.join(", "));
    }
    out
}

/// Names of user frames by `(task, address)`.
pub type FrameNames = HashMap<(Tid, u64), String>;

/// Names for user addresses of the stacks recorded with a perf.data's scheduler events,
/// `(tid, address)` each: the function from the binary (see [`name_frames`]), else
/// `[FILE+0xOFFSET]` from the file's MMAP records, else nothing. Reads `path` once more
/// for its MMAP / MMAP2 and COMM records (only traces with stacks pay for it).
pub fn perf_user_frame_names(
    path: &str,
    frames: &[(Tid, u64)],
) -> Result<(FrameNames, DataQuality), crate::ReadError> {
    let input = crate::Input::open(path)?;
    let mut reader = crate::perf_data::PerfDataReader::open_with_mappings(input, 0)?;
    let mut spaces = super::address_space::AddressSpaces::default();
    let mut tgid_of: HashMap<Tid, Tid> = HashMap::new();
    let mut batch = Vec::new();
    while crate::EventReader::next_batch(&mut reader, &mut batch)? {
        for ev in &batch {
            match &ev.kind {
                EventKind::Mapping(m) => spaces.add(m),
                EventKind::TaskComm { tgid, tid, .. } if *tgid > 0 => {
                    tgid_of.insert(*tid, *tgid);
                }
                _ => {}
            }
        }
    }
    let recorded = crate::EventReader::meta(&reader).build_ids.clone();
    let mut wanted = Vec::new();
    let mut keys = Vec::new();
    let mut names = HashMap::new();
    for &(tid, addr) in frames {
        let tgid = tgid_of.get(&tid).copied().unwrap_or(tid);
        if let Some(m) = spaces.find(tgid, addr) {
            let (f, name) = UserFrame::in_mapping(m, addr);
            names.insert((tid, addr), name);
            keys.push((tid, addr));
            wanted.push(f);
        }
    }
    let mut dq = DataQuality::default();
    for (key, name) in keys
        .into_iter()
        .zip(name_frames(&wanted, &recorded, &mut dq))
    {
        if let Some(n) = name {
            names.insert(key, n);
        }
    }
    Ok((names, dq))
}

/// The note of a binary without function symbols at the frames' offsets.
fn no_symbols_note(file: &str) -> (Problem, String) {
    (Problem::UserSymbolsNone, file.to_string())
}

/// `profile` with the symbols in `names` renamed (frames that get the same name become one
/// function, as perf report shows them).
fn rename(profile: &mut Profile, names: &HashMap<SymbolId, String>) {
    let old = std::mem::replace(profile, Profile::new(profile.unit.clone()));
    let mut new_id: HashMap<SymbolId, SymbolId> = HashMap::new();
    for (i, sym) in old.symbols.iter().enumerate() {
        let id = i as SymbolId;
        let name = names.get(&id).map_or(&**sym, String::as_str);
        let kernel = old.kernel.get(i).copied().flatten();
        new_id.insert(id, profile.intern(name, kernel));
    }
    profile.stacks = old
        .stacks
        .into_iter()
        .map(|mut s| {
            for f in &mut s.frames {
                *f = new_id.get(f).copied().unwrap_or(*f);
            }
            s
        })
        .collect();
}

#[cfg(test)]
mod tests {
    use super::*;
    use stallscope_model::{WeightUnit, WeightedStack};

    #[inline(never)]
    fn a_function_to_find() -> u64 {
        std::hint::black_box(42)
    }

    /// (file, offset into it) of `addr` in this process, from /proc/self/maps.
    fn file_offset(addr: u64) -> (String, u64) {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
        for line in maps.lines() {
            let mut p = line.split_whitespace();
            let range = p.next().unwrap();
            let _perms = p.next();
            let off = u64::from_str_radix(p.next().unwrap(), 16).unwrap();
            let (_, _, file) = (p.next(), p.next(), p.next());
            let (a, b) = range.split_once('-').unwrap();
            let (a, b) = (
                u64::from_str_radix(a, 16).unwrap(),
                u64::from_str_radix(b, 16).unwrap(),
            );
            if (a..b).contains(&addr) {
                return (file.unwrap_or("").to_string(), addr - a + off);
            }
        }
        panic!("{addr:#x} not mapped")
    }

    #[test]
    fn a_frame_in_a_binary_on_this_host_is_named_after_its_function() {
        assert_eq!(a_function_to_find(), 42);
        let addr = a_function_to_find as *const () as u64;
        let (file, offset) = file_offset(addr);
        let mut p = Profile::new(WeightUnit::Samples);
        let id = p.intern("[test+0x1]", Some(false));
        let other = p.intern("[gone+0x2]", Some(false));
        p.stacks.push(WeightedStack {
            frames: vec![id, other],
            weight: 1,
            ..WeightedStack::default()
        });
        let frames = HashMap::from([
            (
                id,
                UserFrame {
                    file: file.clone(),
                    offset,
                    build_id: None,
                },
            ),
            (
                other,
                UserFrame {
                    file: "/nonexistent/gone".into(),
                    offset: 2,
                    build_id: None,
                },
            ),
        ]);
        let mut dq = DataQuality::default();
        name_user_frames(&mut p, &frames, &[], &mut dq);
        let leaf = p.symbol(p.stacks[0].frames[0]);
        assert!(leaf.contains("a_function_to_find"), "{leaf}");
        assert_eq!(p.symbol(p.stacks[0].frames[1]), "[gone+0x2]");
        assert_eq!(dq.count(Problem::UserSymbols), 1);
        assert_eq!(dq.count(Problem::UserSymbolsMissing), 1);
        // a recorded build id that is not this file's: not used, and said
        let mut p2 = Profile::new(WeightUnit::Samples);
        let id2 = p2.intern("[test+0x1]", Some(false));
        p2.stacks.push(WeightedStack {
            frames: vec![id2],
            weight: 1,
            ..WeightedStack::default()
        });
        let frames2 = HashMap::from([(
            id2,
            UserFrame {
                file,
                offset,
                build_id: Some("00112233445566778899aabbccddeeff00112233".into()),
            },
        )]);
        let mut dq2 = DataQuality::default();
        name_user_frames(&mut p2, &frames2, &[], &mut dq2);
        assert_eq!(p2.symbol(p2.stacks[0].frames[0]), "[test+0x1]");
        assert_eq!(dq2.count(Problem::UserSymbolsOtherVersion), 1);
    }
}
