//! Synthetic profiles: attribution, merging, spin/sleep split, per-CPU and over-time shares.

use stallscope_model::{Comm, Finding, FindingSeverity, Profile, WeightUnit, WeightedStack};

use super::{basis_points, find, PARAMS};
use crate::Params;

const SPIN_UNLINK: &[&str] = &[
    "rwsem_spin_on_owner",
    "rwsem_down_write_slowpath",
    "down_write",
    "do_unlinkat",
    "__x64_sys_unlink",
];
const SPIN_OPEN: &[&str] = &[
    "osq_lock",
    "rwsem_down_write_slowpath",
    "down_write",
    "path_openat",
    "do_filp_open",
];
const SLEEP_UNLINK: &[&str] = &[
    "finish_task_switch.isra.0",
    "__schedule",
    "schedule",
    "rwsem_down_write_slowpath",
    "down_write",
    "do_unlinkat",
];
const WORK: &[&str] = &["memcpy", "vfs_write", "ksys_write"];

struct P(Profile);

impl P {
    fn new() -> P {
        P(Profile::new(WeightUnit::Samples))
    }
    /// `n` one-sample stacks of `frames` by task `pid` on `cpu`, at `ts0`, `ts0 + step`, …
    fn add(&mut self, frames: &[&str], n: u64, pid: i32, cpu: u32, ts0: Option<u64>) -> &mut P {
        for k in 0..n {
            let frames = frames
                .iter()
                .map(|f| self.0.intern(f, Some(true)))
                .collect();
            self.0.stacks.push(WeightedStack {
                frames,
                weight: 1,
                comm: Some(Comm::new(if pid == 0 { "swapper" } else { "worker" })),
                pid: Some(pid),
                cpu: Some(cpu),
                ts: ts0.map(|t| t + k * 1_000_000),
                ..WeightedStack::default()
            });
        }
        self
    }
    /// One stack of weight `w` (folded-like: no task, CPU or time).
    fn folded(&mut self, frames: &[&str], w: u64) -> &mut P {
        let frames = frames.iter().map(|f| self.0.intern(f, None)).collect();
        self.0.stacks.push(WeightedStack {
            frames,
            weight: w,
            ..WeightedStack::default()
        });
        self
    }
}

fn run(p: &P, sets: &[(&str, &str)]) -> Vec<Finding> {
    let mut params = Params::defaults(&PARAMS);
    for (k, v) in sets {
        params.set(&PARAMS, k, v).unwrap();
    }
    find(&p.0, &params, &["t.folded".to_string()])
}

#[test]
fn attributes_to_the_nearest_non_lock_caller() {
    let mut p = P::new();
    p.folded(SPIN_UNLINK, 30).folded(WORK, 70);
    let f = run(&p, &[]);
    assert_eq!(f.len(), 1, "{f:#?}");
    let f = &f[0];
    assert!(
        f.title
            .starts_with("down_write from do_unlinkat, a directory inode's i_rwsem"),
        "{}",
        f.title
    );
    assert!(f.title.contains("30.00% of all CPU samples"), "{}", f.title);
    assert!(
        f.title.contains("spinning (rwsem_spin_on_owner)"),
        "{}",
        f.title
    );
    assert_eq!(f.measures["share_bp"], 3000);
    assert_eq!(f.measures["caller_do_unlinkat_bp"], 3000);
    assert_eq!(f.measures["self_rwsem_spin_on_owner_bp"], 3000);
    assert_eq!(f.measures["samples"], 30);
    assert_eq!(f.measures["total_samples"], 100);
    assert_eq!(f.severity, FindingSeverity::High, "30% ≥ 25%");
    assert!(f.title.ends_with("tasks not recorded"), "{}", f.title);
    assert_eq!(f.evidence.len(), 1);
    assert_eq!(f.evidence[0].source, "t.folded:0x0");
    assert!(f.evidence[0]
        .text
        .starts_with("rwsem_spin_on_owner ← rwsem_down_write_slowpath"));
}

#[test]
fn same_lock_callers_merge_and_others_stay_apart() {
    let mut p = P::new();
    p.folded(SPIN_UNLINK, 200)
        .folded(SPIN_OPEN, 150)
        // the XFS inode lock: also down_write, another lock
        .folded(
            &[
                "rwsem_spin_on_owner",
                "rwsem_down_write_slowpath",
                "down_write",
                "xfs_ilock",
                "xfs_create",
            ],
            100,
        )
        // spinlocks of two unknown callers: one path each
        .folded(&["_raw_spin_lock", "new_inode", "shmem_get_inode"], 60)
        .folded(
            &[
                "__pv_queued_spin_lock_slowpath",
                "_raw_spin_lock",
                "evict",
                "do_unlinkat",
            ],
            50,
        )
        .folded(WORK, 440);
    let f = run(&p, &[]);
    let titles: Vec<&str> = f.iter().map(|f| f.title.as_str()).collect();
    assert_eq!(f.len(), 4, "{titles:#?}");
    assert!(
        titles[0].starts_with(
            "down_write from do_unlinkat and path_openat, a directory inode's i_rwsem"
        ),
        "{}",
        titles[0]
    );
    assert_eq!(f[0].measures["share_bp"], 3500);
    assert_eq!(f[0].measures["caller_do_unlinkat_bp"], 2000);
    assert_eq!(f[0].measures["caller_path_openat_bp"], 1500);
    assert_eq!(f[0].measures["self_osq_lock_bp"], 1500);
    assert!(
        titles[1].starts_with("down_write from xfs_ilock, an XFS inode lock"),
        "{}",
        titles[1]
    );
    assert!(
        titles[2].starts_with("_raw_spin_lock from new_inode:"),
        "{}",
        titles[2]
    );
    assert!(titles[2].contains("this spinlock"), "{}", titles[2]);
    assert!(
        titles[3].starts_with("_raw_spin_lock from evict:"),
        "{}",
        titles[3]
    );
    assert_eq!(f[3].measures["self___pv_queued_spin_lock_slowpath_bp"], 500);
    assert_eq!(f[0].measures["all_locks_share_bp"], 5600);
}

#[test]
fn spin_and_sleep_are_split() {
    let mut p = P::new();
    p.folded(SPIN_UNLINK, 30)
        .folded(SLEEP_UNLINK, 10)
        .folded(
            &["rwsem_down_write_slowpath", "down_write", "do_unlinkat"],
            4,
        )
        .folded(
            &[
                "_raw_spin_unlock_irqrestore",
                "try_to_wake_up",
                "wake_up_q",
                "rwsem_wake.isra.0",
                "up_write",
                "do_unlinkat",
            ],
            6,
        )
        .folded(WORK, 50);
    let f = run(&p, &[]);
    assert_eq!(f.len(), 1, "{f:#?}");
    let m = &f[0].measures;
    assert_eq!(m["spin_bp"], 3000);
    assert_eq!(m["sleep_bp"], 1000);
    assert_eq!(m["slowpath_bp"], 400);
    assert_eq!(m["release_bp"], 600);
    assert_eq!(m["share_bp"], 5000);
    assert!(
        f[0].title
            .starts_with("down_write and up_write from do_unlinkat"),
        "{}",
        f[0].title
    );
    assert!(f[0].title.contains("30.00% spinning (rwsem_spin_on_owner), 4.00% in the slowpath, 10.00% going to sleep, 6.00% waking waiters"), "{}", f[0].title);
    assert_eq!(f[0].severity, FindingSeverity::High);
}

#[test]
fn per_cpu_shares_and_tasks() {
    let mut p = P::new();
    p.add(SPIN_UNLINK, 40, 101, 0, None)
        .add(WORK, 10, 101, 0, None)
        .add(WORK, 40, 102, 1, None)
        .add(
            &["pv_native_safe_halt", "default_idle", "do_idle"],
            10,
            0,
            1,
            None,
        );
    let f = run(&p, &[]);
    assert_eq!(f.len(), 1, "{f:#?}");
    let f = &f[0];
    assert_eq!(f.cpus, vec![0]);
    assert_eq!(f.measures["cpu0_share_bp"], 8000);
    assert!(!f.measures.contains_key("cpu1_share_bp"));
    assert_eq!(f.measures["share_bp"], 4000);
    assert_eq!(f.tasks.len(), 1);
    assert_eq!(f.tasks[0].pid, 101);
    assert!(
        f.title
            .ends_with("1 task (worker), 80.00% of their samples"),
        "{}",
        f.title
    );
    assert_eq!(f.tasks[0].role, "waiter");
    assert_eq!(f.tasks[0].measures["own_samples_share_bp"], 8000);
    assert_eq!(f.measures["tasks_share_bp"], 8000);
}

#[test]
fn interrupts_and_fast_paths_are_not_lock_waiting() {
    let mut p = P::new();
    p.folded(
        &[
            "handle_irq_event",
            "__sysvec_apic_timer_interrupt",
            "asm_sysvec_apic_timer_interrupt",
            "osq_lock",
            "rwsem_down_write_slowpath",
            "down_write",
            "do_unlinkat",
        ],
        40,
    )
    .folded(&["down_write", "do_unlinkat"], 30)
    .folded(&["memcpy", "_raw_spin_lock", "foo"], 30);
    assert!(run(&p, &[]).is_empty());
}

#[test]
fn lock_samples_without_a_caller_form_no_path() {
    let mut p = P::new();
    // perf report text prunes callers: only the leaf remains
    p.folded(&["_raw_spin_lock"], 50)
        .folded(SPIN_UNLINK, 40)
        .folded(WORK, 10);
    let f = run(&p, &[]);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert!(f[0].title.starts_with("down_write from do_unlinkat"));
    assert_eq!(f[0].measures["all_locks_share_bp"], 9000);
}

#[test]
fn small_shares_are_not_reported_and_thresholds_apply() {
    let mut p = P::new();
    p.folded(SPIN_UNLINK, 25).folded(WORK, 975);
    assert!(run(&p, &[]).is_empty(), "2.5% < 3%");
    let f = run(&p, &[("min_share_permille", "20")]);
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].severity, FindingSeverity::Low);
    assert!(run(&p, &[("min_share_permille", "20"), ("min_samples", "26")]).is_empty());
}

#[test]
fn a_large_share_of_the_waiters_own_samples_is_reported_on_a_busy_machine() {
    let mut p = P::new();
    // the waiters get 100 samples, 25 of them on the lock; other work takes 1900
    p.add(SPIN_UNLINK, 25, 101, 0, None)
        .add(WORK, 75, 101, 0, None)
        .add(WORK, 1900, 200, 1, None);
    let f = run(&p, &[]);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0].measures["share_bp"], 125);
    assert_eq!(f[0].measures["tasks_share_bp"], 2500);
    assert_eq!(f[0].severity, FindingSeverity::Low);
    assert!(run(&p, &[("min_task_share_permille", "300")]).is_empty());
}

#[test]
fn a_burst_over_time_raises_severity() {
    let mut p = P::new();
    // 1 s of work, then 100 ms where the lock takes 90 %: 4 % overall
    p.add(WORK, 900, 101, 0, Some(0))
        .add(SPIN_UNLINK, 45, 101, 0, Some(1_000_000_000))
        .add(WORK, 5, 101, 0, Some(1_045_000_000));
    let f = run(&p, &[]);
    assert_eq!(f.len(), 1, "{f:#?}");
    let f = &f[0];
    assert_eq!(
        f.measures["share_bp"],
        i64::try_from(basis_points(45, 950)).unwrap()
    );
    assert_eq!(f.measures["peak_share_bp"], 9000);
    assert_eq!(f.measures["peak_start_ns"], 1_000_000_000);
    assert_eq!(f.severity, FindingSeverity::Medium);
    assert_eq!(f.window.start_ns, 1_000_000_000);
    assert_eq!(f.window.end_ns, 1_044_000_000);
}

#[test]
fn absurd_weights_do_not_overflow() {
    let mut p = P::new();
    p.folded(SPIN_UNLINK, u64::MAX)
        .folded(SPIN_UNLINK, u64::MAX)
        .folded(SPIN_OPEN, u64::MAX)
        .folded(WORK, u64::MAX);
    let f = run(&p, &[]);
    assert_eq!(f.len(), 1, "{f:#?}");
    assert_eq!(f[0].measures["share_bp"], 10_000, "saturated totals");
}

#[test]
fn basis_points_round_half_up() {
    assert_eq!(basis_points(1, 3), 3333);
    assert_eq!(basis_points(2, 3), 6667);
    assert_eq!(basis_points(1, 0), 0);
    assert_eq!(basis_points(u64::MAX, u64::MAX), 10_000);
}

/// An off-CPU profile as the facade builds it: one stack per blocked switch-out, weighing
/// the nanoseconds until the task's next switch-in.
fn off_cpu(rows: &[(&[&str], u64, i32, u64)]) -> Profile {
    let mut p = Profile::new(WeightUnit::Period(super::OFF_CPU_EVENT.into()));
    for (frames, ns, pid, ts) in rows {
        let frames = frames.iter().map(|f| p.intern(f, Some(true))).collect();
        p.stacks.push(WeightedStack {
            frames,
            weight: *ns,
            comm: Some(Comm::new("worker")),
            pid: Some(*pid),
            ts: Some(*ts),
            ..WeightedStack::default()
        });
    }
    p
}

const BLOCK_UNLINK: &[&str] = &[
    "__schedule",
    "schedule",
    "schedule_preempt_disabled",
    "rwsem_down_write_slowpath",
    "down_write",
    "do_unlinkat",
];
const BLOCK_IO: &[&str] = &["__schedule", "schedule", "io_schedule", "folio_wait_bit"];

#[test]
fn off_cpu_stacks_sum_per_path_and_set_severity() {
    const MS: u64 = 1_000_000;
    // two tasks over 100 ms: 150 ms blocked on the directory lock, 40 ms on I/O
    let p = off_cpu(&[
        (BLOCK_UNLINK, 60 * MS, 1, 0),
        (BLOCK_UNLINK, 90 * MS, 2, 100 * MS),
        (BLOCK_IO, 40 * MS, 1, 50 * MS),
    ]);
    let by = super::blocked::blocked_by_path(&p, &["t.data".to_string()]);
    assert_eq!(by.len(), 1, "I/O waits are not a lock: {by:#?}");
    let (name, b) = by.iter().next().unwrap();
    assert_eq!(b.ns, 150 * MS);
    assert_eq!(b.sleeps, 2);
    assert_eq!(b.max_ns, 90 * MS);
    assert_eq!(b.tasks.len(), 2);
    assert_eq!(b.entries, vec!["down_write".to_string()]);
    assert!(name.1.contains("i_rwsem"), "{name:?}");
    let params = Params::defaults(&PARAMS);
    // 150 ms of 2 tasks × 100 ms between the first and last switch-out: 75 % → high
    let f = super::blocked_finding(name, b, &params);
    assert_eq!(f.measures["blocked_share_bp"], 7500);
    assert_eq!(f.severity, FindingSeverity::High);
    assert!(
        f.title
            .starts_with("down_write on a directory inode's i_rwsem"),
        "{}",
        f.title
    );
    assert!(f
        .title
        .contains("blocked 150.000 ms (75.00% of their time) in 2 sleeps"));
    // added to a CPU finding of the same path: title, measures, the higher severity
    let mut cpu = P::new();
    cpu.folded(SPIN_UNLINK, 40).folded(WORK, 960);
    let mut g = run(
        &cpu,
        &[
            ("min_share_permille", "30"),
            ("min_task_share_permille", "0"),
        ],
    );
    assert_eq!(g.len(), 1);
    assert_eq!(g[0].severity, FindingSeverity::Low);
    super::add_blocked(&mut g[0], b, &params);
    assert_eq!(g[0].severity, FindingSeverity::High);
    assert_eq!(g[0].measures["blocked_ns"], 150_000_000);
    assert!(
        g[0].title.contains("; off CPU: 2 tasks blocked 150.000 ms"),
        "{}",
        g[0].title
    );
}
