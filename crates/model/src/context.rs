//! [`SystemContext`]: facts about the recording host that no trace event carries — kernel,
//! scheduler knobs, per-task policy / nice / cgroup weights / affinity, per-device I/O
//! scheduler — captured by `stallscope record` and stored in its trace.dat, so detectors can
//! explain *why* (a culprit's cgroup has cpu.weight 10000; the victim's is 100).
//!
//! Every field is optional in spirit: what was not readable at record time is absent (empty
//! map / `None`), never guessed. Serialized as JSON inside the trace file.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::Tid;

/// Host facts captured at record time.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SystemContext {
    /// `uname -a`-like: sysname, nodename, release, version, machine.
    pub uname: Option<String>,
    /// Kernel release alone (`6.18.44-…`).
    pub kernel_release: Option<String>,
    /// Number of possible CPUs.
    pub nr_cpus: Option<u32>,
    /// Online CPU list as the kernel prints it (`0-1`).
    pub cpus_online: Option<String>,
    /// Preemption model (`none`, `voluntary`, `full`, `lazy`, from `/sys/kernel/debug/sched/preempt`
    /// or the kernel version string `PREEMPT_DYNAMIC` / `PREEMPT`).
    pub preemption: Option<String>,
    /// Timer frequency when known.
    pub hz: Option<u32>,
    /// Scheduler knobs: file name → contents (`/proc/sys/kernel/sched_*`, `/sys/kernel/debug/sched/*`).
    pub sched_knobs: BTreeMap<String, String>,
    /// Every task seen during the recording.
    pub tasks: Vec<TaskContext>,
    /// Every block device.
    pub block_devices: Vec<BlockDeviceContext>,
    /// Process id of the recorder that wrote the trace (`stallscope record`): its threads
    /// are the tasks of this thread group, left out of findings by default.
    pub recorder_pid: Option<Tid>,
    /// Set when the recording did not end normally (the recorder was killed and its
    /// guardian wrote the file from what was spooled): what is missing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recording_cut: Option<String>,
}

/// One task's scheduling attributes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskContext {
    /// Task id.
    pub pid: Tid,
    /// Thread-group id.
    pub tgid: Tid,
    /// Name.
    pub comm: String,
    /// Scheduling policy (`SCHED_OTHER`, `SCHED_FIFO`, `SCHED_RR`, `SCHED_BATCH`, `SCHED_IDLE`, `SCHED_DEADLINE`, `SCHED_EXT`).
    pub policy: Option<String>,
    /// Nice value (−20..19).
    pub nice: Option<i32>,
    /// Kernel priority as in `/proc/PID/stat` field 18.
    pub priority: Option<i32>,
    /// RT priority (0 for non-RT).
    pub rt_priority: Option<u32>,
    /// cgroup memberships with their CPU controls.
    pub cgroups: Vec<CgroupContext>,
    /// Allowed CPUs as a list (`0-1`).
    pub cpus_allowed: Option<String>,
    /// The task's autogroup (`/proc/PID/autogroup`, kernels with `CONFIG_SCHED_AUTOGROUP`):
    /// the id of its session's group, 0 for the root group (the init session and kernel
    /// threads print nothing there); `None` when not recorded.
    pub autogroup_id: Option<u64>,
    /// The autogroup's nice value (`/proc/PID/autogroup`'s `nice N`), which sets the
    /// group's weight.
    pub autogroup_nice: Option<i32>,
}

/// One cgroup membership of a task.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CgroupContext {
    /// Hierarchy id and controllers as in `/proc/PID/cgroup` (`0::` for v2, `4:cpu,cpuacct` for v1).
    pub hierarchy: String,
    /// Path inside the hierarchy.
    pub path: String,
    /// cgroup v2 `cpu.weight`.
    pub cpu_weight: Option<u64>,
    /// cgroup v1 `cpu.shares`.
    pub cpu_shares: Option<u64>,
    /// cgroup v2 `cpu.max` (`max 100000`) or v1 `cpu.cfs_quota_us`/`cpu.cfs_period_us` as `QUOTA PERIOD`.
    pub cpu_max: Option<String>,
}

/// One block device's queue settings.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockDeviceContext {
    /// Device name (`loop0`, `nvme0n1`).
    pub name: String,
    /// `MAJ:MIN`.
    pub dev: Option<String>,
    /// Active I/O scheduler (the bracketed entry of `queue/scheduler`).
    pub scheduler: Option<String>,
    /// `queue/nr_requests`.
    pub nr_requests: Option<u64>,
    /// Hardware queue depth when exposed (`device/queue_depth`).
    pub queue_depth: Option<u64>,
}
