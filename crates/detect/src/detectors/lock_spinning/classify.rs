//! Which kernel functions are lock waiting, by name.
//!
//! A name is looked at without its compiler suffix (`rwsem_wake.isra.0` → `rwsem_wake`,
//! `finish_task_switch.isra.0` → `finish_task_switch`). Classes:
//!
//! ```text
//! Spin      busy-waiting:  osq_lock, osq_unlock, rwsem_spin_on_owner, rwsem_optimistic_spin,
//!                          mutex_spin_on_owner, mutex_optimistic_spin, rt_mutex_spin_on_owner,
//!                          native_queued_spin_lock_slowpath, __pv_queued_spin_lock_slowpath,
//!                          queued_spin_lock_slowpath, queued_read_lock_slowpath,
//!                          queued_write_lock_slowpath
//! SpinSelf  a spinlock's entry, counted only as the sampled (leaf) function: _raw_spin_lock*,
//!           _raw_read_lock*, _raw_write_lock* (the test-and-set and its cache-line transfer)
//! Slowpath  blocking locks' wait paths: rwsem_down_*_slowpath, __down*, __mutex_lock*,
//!           mutex_lock*_slowpath, __ww_mutex_lock*, rt_mutex_slowlock*, __rt_mutex_slowlock*,
//!           __percpu_down_read, percpu_rwsem_wait
//! Release   waking the waiters on release: rwsem_wake, rwsem_mark_wake, __up,
//!           __mutex_unlock_slowpath, rt_mutex_slowunlock
//! Entry     the lock API callers call: down_write*, down_read*, down, down_interruptible, …,
//!           mutex_lock*, up_write, up_read, up, mutex_unlock, percpu_down_*, rt_mutex_lock*,
//!           do_raw_spin_lock, and _raw_spin_lock* when not the leaf
//! ```
//!
//! [`Family`] says which kind of lock an entry takes (rwsem, mutex, semaphore, spinlock,
//! rwlock); scheduler functions ([`is_scheduler`]) under a slowpath mean the task is going to
//! sleep; interrupt entry frames ([`is_interrupt_boundary`]) end the search for a lock frame
//! (the frames below them are the interrupt's work, not the interrupted wait).

/// What a function does with a lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockClass {
    /// Busy-waiting.
    Spin,
    /// A spinlock entry whose own (self) samples count as spinning.
    SpinSelf,
    /// A sleeping lock's wait path.
    Slowpath,
    /// Waking waiters on release.
    Release,
    /// A lock API entry point.
    Entry,
}

/// The kind of lock an entry point takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Family {
    /// `struct rw_semaphore` (`down_write`, `down_read`, `up_write`, …).
    Rwsem,
    /// `struct mutex`.
    Mutex,
    /// `struct semaphore` (`down`, `up`).
    Semaphore,
    /// `spinlock_t` / `raw_spinlock_t`.
    Spinlock,
    /// `rwlock_t`.
    Rwlock,
    /// Per-CPU rwsem.
    PercpuRwsem,
    /// RT mutex.
    RtMutex,
    /// Not known from the names.
    Other,
}

impl Family {
    /// Short name for titles.
    pub fn name(self) -> &'static str {
        match self {
            Family::Rwsem => "rwsem",
            Family::Mutex => "mutex",
            Family::Semaphore => "semaphore",
            Family::Spinlock => "spinlock",
            Family::Rwlock => "rwlock",
            Family::PercpuRwsem => "percpu rwsem",
            Family::RtMutex => "rt_mutex",
            Family::Other => "lock",
        }
    }
}

/// `name` without a `.isra.0` / `.constprop.0` / `.part.0` / `.cold` suffix.
pub fn base_name(name: &str) -> &str {
    match name.find('.') {
        Some(i) if i > 0 => &name[..i],
        _ => name,
    }
}

const SPIN: &[&str] = &[
    "osq_lock",
    "osq_unlock",
    "rwsem_spin_on_owner",
    "rwsem_optimistic_spin",
    "mutex_spin_on_owner",
    "mutex_optimistic_spin",
    "rt_mutex_spin_on_owner",
    "native_queued_spin_lock_slowpath",
    "__pv_queued_spin_lock_slowpath",
    "queued_spin_lock_slowpath",
    "queued_read_lock_slowpath",
    "queued_write_lock_slowpath",
];

const RELEASE: &[&str] = &[
    "rwsem_wake",
    "rwsem_mark_wake",
    "__up",
    "__mutex_unlock_slowpath",
    "rt_mutex_slowunlock",
];

const ENTRY: &[&str] = &[
    "down",
    "down_interruptible",
    "down_killable",
    "down_timeout",
    "up",
    "mutex_lock",
    "mutex_lock_interruptible",
    "mutex_lock_killable",
    "mutex_lock_nested",
    "mutex_lock_io",
    "mutex_unlock",
    "up_write",
    "up_read",
    "percpu_down_write",
    "percpu_down_read",
    "percpu_up_write",
    "do_raw_spin_lock",
];

/// The class of function `name`, if it is a lock function.
pub fn classify(name: &str) -> Option<LockClass> {
    let n = base_name(name);
    if SPIN.contains(&n) {
        return Some(LockClass::Spin);
    }
    if n.starts_with("_raw_spin_lock")
        || n.starts_with("_raw_read_lock")
        || n.starts_with("_raw_write_lock")
    {
        return Some(LockClass::SpinSelf);
    }
    if (n.starts_with("rwsem_down_") && n.ends_with("_slowpath"))
        || n.starts_with("__down")
        || n.starts_with("__mutex_lock")
        || (n.starts_with("mutex_lock") && n.ends_with("_slowpath"))
        || n.starts_with("__ww_mutex_lock")
        || n.starts_with("rt_mutex_slowlock")
        || n.starts_with("__rt_mutex_slowlock")
        || n == "__percpu_down_read"
        || n == "percpu_rwsem_wait"
    {
        return Some(LockClass::Slowpath);
    }
    if RELEASE.contains(&n) {
        return Some(LockClass::Release);
    }
    if ENTRY.contains(&n)
        || n.starts_with("down_write")
        || n.starts_with("down_read")
        || n.starts_with("rt_mutex_lock")
    {
        return Some(LockClass::Entry);
    }
    None
}

/// The lock family of an entry or wait function.
pub fn family(name: &str) -> Family {
    let n = base_name(name);
    if n.starts_with("percpu_") || n.starts_with("__percpu_") {
        Family::PercpuRwsem
    } else if matches!(
        n,
        "down"
            | "down_interruptible"
            | "down_killable"
            | "down_timeout"
            | "down_trylock"
            | "up"
            | "__up"
            | "__down"
            | "__down_common"
            | "__down_interruptible"
            | "__down_killable"
            | "__down_timeout"
    ) {
        Family::Semaphore
    } else if n.starts_with("down_")
        || n.starts_with("up_")
        || n.starts_with("rwsem_")
        || n.starts_with("__down_")
        || n.starts_with("__up_")
    {
        Family::Rwsem
    } else if n.contains("rt_mutex") {
        Family::RtMutex
    } else if n.contains("mutex") {
        Family::Mutex
    } else if n.starts_with("_raw_read_lock")
        || n.starts_with("_raw_write_lock")
        || n.starts_with("queued_read_lock")
        || n.starts_with("queued_write_lock")
    {
        Family::Rwlock
    } else if n.contains("spin_lock") {
        Family::Spinlock
    } else {
        Family::Other
    }
}

/// Scheduler functions: under a slowpath they mean the waiter is going to sleep (or
/// coming back from it).
pub fn is_scheduler(name: &str) -> bool {
    matches!(
        base_name(name),
        "schedule"
            | "__schedule"
            | "schedule_preempt_disabled"
            | "schedule_timeout"
            | "io_schedule"
            | "schedule_hrtimeout_range"
            | "finish_task_switch"
            | "context_switch"
            | "__switch_to"
            | "__switch_to_asm"
    )
}

/// Interrupt and exception entry frames (`asm_sysvec_apic_timer_interrupt`,
/// `sysvec_reschedule_ipi`, `irq_exit_rcu`, `__do_softirq`, …).
pub fn is_interrupt_boundary(name: &str) -> bool {
    let n = base_name(name);
    n.starts_with("asm_")
        || n.starts_with("sysvec_")
        || n.starts_with("__sysvec_")
        || n.starts_with("irq_exit")
        || n == "__do_softirq"
        || n == "handle_softirqs"
        || n == "common_interrupt"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_and_families() {
        assert_eq!(classify("osq_lock"), Some(LockClass::Spin));
        assert_eq!(
            classify("__pv_queued_spin_lock_slowpath"),
            Some(LockClass::Spin)
        );
        assert_eq!(
            classify("_raw_spin_lock_irqsave"),
            Some(LockClass::SpinSelf)
        );
        assert_eq!(classify("_raw_spin_unlock_irqrestore"), None);
        assert_eq!(classify("_raw_spin_trylock"), None);
        assert_eq!(
            classify("rwsem_down_write_slowpath"),
            Some(LockClass::Slowpath)
        );
        assert_eq!(classify("__down_common"), Some(LockClass::Slowpath));
        assert_eq!(classify("rwsem_wake.isra.0"), Some(LockClass::Release));
        assert_eq!(classify("down_write_killable"), Some(LockClass::Entry));
        assert_eq!(classify("do_unlinkat"), None);
        assert_eq!(classify("downgrade_write"), None);
        assert_eq!(family("down_write"), Family::Rwsem);
        assert_eq!(family("rwsem_down_read_slowpath"), Family::Rwsem);
        assert_eq!(family("down"), Family::Semaphore);
        assert_eq!(family("__down_common"), Family::Semaphore);
        assert_eq!(family("down_interruptible"), Family::Semaphore);
        assert_eq!(family("down_read_killable"), Family::Rwsem);
        assert_eq!(family("mutex_lock"), Family::Mutex);
        assert_eq!(family("_raw_spin_lock"), Family::Spinlock);
        assert_eq!(family("_raw_read_lock_bh"), Family::Rwlock);
        assert!(is_scheduler("finish_task_switch.isra.0"));
        assert!(is_interrupt_boundary("asm_sysvec_apic_timer_interrupt"));
    }
}
