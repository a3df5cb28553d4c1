//! Attribution of one sampled stack to a lock path.
//!
//! Frames are leaf first. From the leaf upward, the first lock *wait* frame (a spin, slowpath
//! or release function — or a `_raw_spin_lock*` entry as the leaf itself) makes the sample a
//! lock sample; the frames below it are part of that wait (a vCPU halting in `kvm_wait`, the
//! scheduler putting the waiter to sleep). The search stops without a lock at an interrupt
//! entry frame (the frames below are the interrupt's work) and at a lock API entry without
//! a wait frame below it (an uncontended fast path). Above the wait frame, lock frames
//! continue (slowpaths, entries) up to the outermost one, the **entry** (`down_write`); the
//! frame above it is the **caller** (`do_unlinkat`), the nearest frame that is not lock code.
//!
//! ```text
//! [rwsem_spin_on_owner, rwsem_down_write_slowpath, down_write, do_unlinkat, __x64_sys_unlink]
//!  wait frame ─┘        lock frames ───────────────── entry ─┘  caller ─┘
//!  kind: Spin
//! [finish_task_switch, __schedule, schedule, rwsem_down_write_slowpath, down_write, path_openat]
//!  scheduler frames below the wait frame → kind: Sleep
//! ```
//!
//! The kind: **Sleep** when a scheduler frame lies below the nearest wait frame; **Release**
//! when that frame is a release function (`rwsem_wake`: waking waiters); **Spin** when the
//! lock frames contain a spin function or the leaf is a `_raw_spin_lock*`; otherwise
//! **Slowpath** (the slowpath's own code: counter updates, wait-list handling, and on kernels
//! where `rwsem_optimistic_spin` is inlined, part of the spinning).

use stallscope_model::{Profile, SymbolId};

use super::classify::{classify, family, is_interrupt_boundary, is_scheduler, Family, LockClass};

/// How a lock sample spends its time.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WaitKind {
    /// Busy-waiting for the lock.
    Spin,
    /// Other code of a sleeping lock's slowpath.
    Slowpath,
    /// Going to sleep or waking up (scheduler code under the slowpath).
    Sleep,
    /// Waking waiters while releasing.
    Release,
}

impl WaitKind {
    /// Every kind, in report order.
    pub const ALL: [WaitKind; 4] = [
        WaitKind::Spin,
        WaitKind::Slowpath,
        WaitKind::Sleep,
        WaitKind::Release,
    ];

    /// Measure-name prefix and words.
    pub fn name(self) -> &'static str {
        match self {
            WaitKind::Spin => "spin",
            WaitKind::Slowpath => "slowpath",
            WaitKind::Sleep => "sleep",
            WaitKind::Release => "release",
        }
    }
}

/// Per symbol id: the classification of its name (computed once per profile).
pub struct SymbolClasses {
    class: Vec<Option<LockClass>>,
    scheduler: Vec<bool>,
    boundary: Vec<bool>,
}

impl SymbolClasses {
    /// Classifies every symbol of `p`.
    pub fn new(p: &Profile) -> SymbolClasses {
        SymbolClasses {
            class: p.symbols.iter().map(|s| classify(s)).collect(),
            scheduler: p.symbols.iter().map(|s| is_scheduler(s)).collect(),
            boundary: p.symbols.iter().map(|s| is_interrupt_boundary(s)).collect(),
        }
    }

    fn class(&self, id: SymbolId) -> Option<LockClass> {
        self.class.get(id as usize).copied().flatten()
    }

    /// Whether symbol `id` is any lock function.
    pub fn is_lock(&self, id: SymbolId) -> bool {
        self.class(id).is_some()
    }

    fn flag(v: &[bool], id: SymbolId) -> bool {
        v.get(id as usize).copied().unwrap_or(false)
    }
}

/// Where a lock sample waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attribution {
    /// Spin, slowpath, sleep or release.
    pub kind: WaitKind,
    /// The kind of lock (from the entry's name, else the wait frame's).
    pub family: Family,
    /// The nearest wait frame (the leaf for `_raw_spin_lock*` self time).
    pub wait_fn: SymbolId,
    /// The outermost lock frame (`down_write`).
    pub entry: SymbolId,
    /// The nearest non-lock caller above the entry (`do_unlinkat`), when the stack has one.
    pub caller: Option<SymbolId>,
}

/// The lock path of a stack (`frames` leaf first), or `None` when it is not lock waiting.
pub fn attribute(classes: &SymbolClasses, p: &Profile, frames: &[SymbolId]) -> Option<Attribution> {
    let mut wait_at = None;
    for (i, &f) in frames.iter().enumerate() {
        if SymbolClasses::flag(&classes.boundary, f) {
            return None;
        }
        match classes.class(f) {
            Some(LockClass::Spin | LockClass::Slowpath | LockClass::Release) => {
                wait_at = Some(i);
                break;
            }
            Some(LockClass::SpinSelf) if i == 0 => {
                wait_at = Some(0);
                break;
            }
            Some(LockClass::SpinSelf | LockClass::Entry) => return None,
            None => {}
        }
    }
    let k = wait_at?;
    let mut j = k + 1;
    while let Some(&f) = frames.get(j) {
        if classes.class(f).is_none() {
            break;
        }
        j += 1;
    }
    // INVARIANT: j > k and frames[k] exists, so j - 1 indexes a frame.
    let entry = frames[j - 1];
    let wait_fn = frames[k];
    let caller = frames
        .get(j)
        .copied()
        .filter(|&c| !SymbolClasses::flag(&classes.boundary, c));
    let sleeping = frames[..k]
        .iter()
        .any(|&f| SymbolClasses::flag(&classes.scheduler, f));
    let spinning = frames[..j]
        .iter()
        .any(|&f| classes.class(f) == Some(LockClass::Spin))
        || (k == 0 && classes.class(wait_fn) == Some(LockClass::SpinSelf));
    let kind = if sleeping {
        WaitKind::Sleep
    } else if spinning {
        WaitKind::Spin
    } else if classes.class(wait_fn) == Some(LockClass::Release) {
        WaitKind::Release
    } else {
        WaitKind::Slowpath
    };
    let mut fam = family(p.symbol(entry));
    if fam == Family::Other {
        fam = family(p.symbol(wait_fn));
    }
    Some(Attribution {
        kind,
        family: fam,
        wait_fn,
        entry,
        caller,
    })
}

/// What lock a (family, caller) pair most likely takes, for callers whose lock is well known.
/// The answer is a guess from names: the profile does not carry lock addresses.
pub fn known_lock(fam: Family, caller: &str) -> Option<&'static str> {
    let c = super::classify::base_name(caller);
    match fam {
        Family::Rwsem => {
            if matches!(
                c,
                "do_unlinkat"
                    | "path_openat"
                    | "open_last_lookups"
                    | "lookup_open"
                    | "filename_create"
                    | "do_rmdir"
                    | "do_mkdirat"
                    | "do_mknodat"
                    | "do_symlinkat"
                    | "do_linkat"
                    | "lock_rename"
                    | "lock_two_directories"
                    | "do_renameat2"
                    | "__lookup_slow"
                    | "lookup_slow"
                    | "iterate_dir"
                    | "vfs_rmdir"
                    | "vfs_unlink"
            ) {
                Some("a directory inode's i_rwsem (inode_lock)")
            } else if matches!(
                c,
                "lock_mm_and_find_vma"
                    | "do_user_addr_fault"
                    | "vm_mmap_pgoff"
                    | "__vm_munmap"
                    | "do_mprotect_pkey"
                    | "__do_sys_brk"
                    | "do_madvise"
                    | "exit_mmap"
                    | "mmap_read_lock"
                    | "mmap_write_lock_killable"
            ) {
                Some("a process's mmap_lock")
            } else if c.starts_with("xfs_ilock") {
                Some("an XFS inode lock (xfs_ilock)")
            } else {
                None
            }
        }
        Family::Semaphore if c == "xfs_buf_lock" => Some("an XFS buffer lock (xfs_buf_lock)"),
        _ => None,
    }
}
