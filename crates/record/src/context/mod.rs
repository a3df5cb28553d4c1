//! Collects the [`SystemContext`] stored in every recording: host facts once at start
//! ([`host_facts`]), tasks from `/proc` scans at start, about once a second while recording
//! (new tasks only) and at the end ([`ContextCollector`]). A task is described the first time
//! it is seen; the context keeps the tasks that appear in the trace (the `common_pid` of any
//! event). Traced tasks that exited before any scan saw them are counted, not described
//! (their attributes are unknown, never guessed).

pub mod block;
pub mod cgroup;
pub mod kernel;
pub mod proc_task;

use std::collections::{BTreeMap, HashSet};
use std::fs;
use std::path::Path;

use stallscope_model::{SystemContext, TaskContext, Tid};

use crate::tracefs::DebugfsMount;
use cgroup::CgroupReader;

/// Host-wide facts (no tasks yet).
pub fn host_facts() -> SystemContext {
    let mut ctx = SystemContext {
        // (a process id always fits a kernel tid)
        recorder_pid: i32::try_from(std::process::id()).ok(),
        ..SystemContext::default()
    };
    let un = kernel::uname();
    if let Some(u) = &un {
        ctx.uname = Some(format!(
            "{} {} {} {} {}",
            u.sysname, u.nodename, u.release, u.version, u.machine
        ));
        ctx.kernel_release = Some(u.release.clone());
    }
    let read = |p: &str| fs::read_to_string(p).ok().map(|s| s.trim().to_string());
    ctx.nr_cpus = read("/sys/devices/system/cpu/possible").and_then(|s| kernel::cpu_list_len(&s));
    ctx.cpus_online = read("/sys/devices/system/cpu/online");
    kernel::read_knobs(
        Path::new("/proc/sys/kernel"),
        "sched_",
        &[],
        &mut ctx.sched_knobs,
    );
    let debugfs = DebugfsMount::ensure();
    kernel::read_knobs(
        Path::new("/sys/kernel/debug/sched"),
        "",
        &["debug"],
        &mut ctx.sched_knobs,
    );
    let debug_preempt = read("/sys/kernel/debug/sched/preempt");
    drop(debugfs);
    let release = un.as_ref().map(|u| u.release.as_str()).unwrap_or("");
    let config = kernel::kernel_config(release);
    ctx.hz = config
        .as_deref()
        .and_then(|c| kernel::config_value(c, "CONFIG_HZ"))
        .and_then(|v| v.parse().ok());
    ctx.preemption = kernel::preemption_model(
        debug_preempt.as_deref(),
        config.as_deref(),
        &read("/proc/cmdline").unwrap_or_default(),
        un.as_ref().map(|u| u.version.as_str()).unwrap_or(""),
    );
    ctx.block_devices = block::block_devices(Path::new("/sys/block"));
    ctx
}

/// Reads one task's attributes from `/proc/<tid>`; `None` when it is gone.
pub fn read_task(tid: Tid, cgroups: &mut CgroupReader) -> Option<TaskContext> {
    let dir = Path::new("/proc").join(tid.to_string());
    let stat = proc_task::parse_stat(&fs::read_to_string(dir.join("stat")).ok()?)?;
    let status = fs::read_to_string(dir.join("status")).unwrap_or_default();
    let (lines, _malformed) =
        proc_task::parse_cgroup_file(&fs::read_to_string(dir.join("cgroup")).unwrap_or_default());
    let autogroup = fs::read_to_string(dir.join("autogroup"))
        .ok()
        .and_then(|text| proc_task::parse_autogroup(&text));
    Some(TaskContext {
        pid: tid,
        tgid: proc_task::status_value(&status, "Tgid")
            .and_then(|v| v.parse().ok())
            .unwrap_or(tid),
        comm: stat.comm,
        policy: stat.policy.map(proc_task::policy_name),
        nice: stat.nice,
        priority: stat.priority,
        rt_priority: stat.rt_priority,
        cgroups: cgroups.contexts(&lines),
        cpus_allowed: proc_task::status_value(&status, "Cpus_allowed_list").map(str::to_string),
        autogroup_id: autogroup.map(|(id, _)| id),
        autogroup_nice: autogroup.and_then(|(_, nice)| nice),
    })
}

/// Every task id currently in `/proc` (all threads of all processes).
pub fn list_tids() -> Vec<Tid> {
    let mut out = Vec::new();
    let Ok(procs) = fs::read_dir("/proc") else {
        return out;
    };
    for p in procs.flatten() {
        let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<Tid>().ok()) else {
            continue; // not a process directory
        };
        match fs::read_dir(p.path().join("task")) {
            Ok(tasks) => out.extend(
                tasks
                    .flatten()
                    .filter_map(|t| t.file_name().to_str().and_then(|s| s.parse::<Tid>().ok())),
            ),
            Err(_) => out.push(pid), // exited between the two reads, or no task/ dir
        }
    }
    out
}

/// Accumulates tasks over the recording.
#[derive(Debug, Default)]
pub struct ContextCollector {
    tasks: BTreeMap<Tid, TaskContext>,
    cgroups: CgroupReader,
}

impl ContextCollector {
    /// A collector using this host's cgroup mounts.
    pub fn new() -> ContextCollector {
        ContextCollector {
            cgroups: CgroupReader::new(),
            ..Default::default()
        }
    }

    /// Describes the given tasks unless already described.
    pub fn add(&mut self, tids: impl IntoIterator<Item = Tid>) {
        for tid in tids {
            if tid <= 0 || self.tasks.contains_key(&tid) {
                continue; // idle task (0) has no /proc entry; known tasks keep first values
            }
            if let Some(t) = read_task(tid, &mut self.cgroups) {
                self.tasks.insert(tid, t);
            }
        }
    }

    /// Reads `tid` again and keeps what it reads now (the task may have changed since it was
    /// first described: the recorded command is described right after the fork, before it
    /// sets its affinity and execs); a task that is gone keeps its earlier description.
    pub fn refresh(&mut self, tid: Tid) {
        if tid <= 0 {
            return;
        }
        if let Some(t) = read_task(tid, &mut self.cgroups) {
            self.tasks.insert(tid, t);
        }
    }

    /// Scans `/proc` for tasks not seen yet.
    pub fn scan(&mut self) {
        let tids = list_tids();
        self.add(tids);
    }

    /// Moves the tasks that appear in the trace (`seen`; all when empty) into `ctx` and
    /// returns how many traced tasks (other than the idle task 0) could not be described.
    pub fn finish(self, ctx: &mut SystemContext, seen: &HashSet<Tid>) -> usize {
        let missed = seen
            .iter()
            .filter(|&&p| p > 0 && !self.tasks.contains_key(&p))
            .count();
        ctx.tasks = self
            .tasks
            .into_values()
            .filter(|t| seen.is_empty() || seen.contains(&t.pid))
            .collect();
        missed
    }
}

#[cfg(test)]
mod collector_tests {
    use super::*;

    #[test]
    fn a_refresh_keeps_the_task_as_it_is_now() {
        // `sh` execs `sleep`: described right after the spawn it is `sh`, later `sleep`
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 0.2; exec sleep 2"])
            .spawn()
            .expect("spawn sh");
        let pid = child.id() as Tid;
        let mut c = ContextCollector::new();
        c.add([pid]);
        std::thread::sleep(std::time::Duration::from_millis(600));
        c.add([pid]);
        assert_eq!(c.tasks[&pid].comm, "sh", "add keeps the first description");
        c.refresh(pid);
        assert_eq!(c.tasks[&pid].comm, "sleep", "refresh reads it again");
        let _ = child.kill();
        let _ = child.wait();
        // gone: the last description stays
        c.refresh(pid);
        assert_eq!(c.tasks[&pid].comm, "sleep");
    }
}
