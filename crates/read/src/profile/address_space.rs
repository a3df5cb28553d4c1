//! [`AddressSpaces`]: the executable mappings of each process, from perf's MMAP / MMAP2
//! records, to find which file (and where in it) a user address is.
//!
//! A new mapping replaces the part of older ones it overlaps; they keep what lies before
//! and after it (perf's `maps__fixup_overlaps`), so `ld.so`'s large reservation stays
//! valid around the libraries mapped inside it.

use std::collections::HashMap;

use stallscope_model::{Mapping, Tid};

/// Mappings per process (thread-group id), newest last.
#[derive(Debug, Default)]
pub struct AddressSpaces {
    maps: HashMap<Tid, Vec<Mapping>>,
}

impl AddressSpaces {
    /// Adds `m` to its process (a fork record: the new process starts with a copy of its
    /// parent's mappings, as perf's `maps__clone`).
    pub fn add(&mut self, m: &Mapping) {
        if let Some(parent) = m.forked_from {
            let copy = self.maps.get(&parent).cloned().unwrap_or_default();
            self.maps.insert(m.tgid, copy);
            return;
        }
        let list = self.maps.entry(m.tgid).or_default();
        let (start, end) = (m.start, m.start.saturating_add(m.len));
        let mut kept = Vec::with_capacity(list.len() + 2);
        for old in list.drain(..) {
            let old_end = old.start.saturating_add(old.len);
            if old_end <= start || old.start >= end {
                kept.push(old);
                continue;
            }
            if old.start < start {
                kept.push(Mapping {
                    len: start - old.start,
                    ..old.clone()
                });
            }
            if old_end > end {
                kept.push(Mapping {
                    start: end,
                    len: old_end - end,
                    pgoff: old.pgoff.wrapping_add(end - old.start),
                    ..old
                });
            }
        }
        kept.push(m.clone());
        *list = kept;
    }

    /// The mapping of process `tgid` covering `addr`.
    pub fn find(&self, tgid: Tid, addr: u64) -> Option<&Mapping> {
        self.maps
            .get(&tgid)
            .and_then(|m| m.iter().rev().find(|m| m.contains(addr)))
    }
}
