//! The private tracefs instance `instances/stallscope-<pid>` and its guard.
//!
//! ```text
//! /sys/kernel/tracing/instances/stallscope-4242/
//!     buffer_size_kb  tracing_cpumask  tracing_on  trace_clock
//!     events/<sys>/<event>/{enable,format}
//!     per_cpu/cpuN/{trace_pipe_raw,stats}
//! ```
//! An instance has its own ring buffer, event enables and tracing_on, so nothing global is
//! touched. [`Instance`] removes the directory on drop (normal exit, error, panic unwinding);
//! signals only set a flag (see [`crate::signals`]) so the same drop path runs. `rmdir`
//! fails with `EBUSY` while a reader still holds `trace_pipe_raw` open: drop raises the shared
//! stop flag and retries for a while. A recorder killed with SIGKILL leaves its instance:
//! [`remove_stale`] deletes every `stallscope-<pid>` whose pid no longer exists.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::tracefs::{read_text, write_control};
use crate::RecordError;

/// Name prefix of our instances.
pub const INSTANCE_PREFIX: &str = "stallscope-";

/// A created instance; removed on drop.
#[derive(Debug)]
pub struct Instance {
    /// `…/instances/stallscope-<pid>`.
    pub dir: PathBuf,
    /// Raised on drop so reader threads close their files before `rmdir`.
    pub stop: Arc<AtomicBool>,
    /// Raised by a reader that could not write its spool: the recording stops at once.
    pub failed: Arc<AtomicBool>,
    removed: bool,
}

impl Instance {
    /// Creates `instances/stallscope-<our pid>` under the tracefs `root`.
    pub fn create(root: &Path) -> Result<Instance, RecordError> {
        let dir = root
            .join("instances")
            .join(format!("{INSTANCE_PREFIX}{}", std::process::id()));
        fs::create_dir(&dir)
            .map_err(|e| RecordError::io("creating the tracefs instance", &dir, e))?;
        let inst = Instance {
            dir,
            stop: Arc::new(AtomicBool::new(false)),
            failed: Arc::new(AtomicBool::new(false)),
            removed: false,
        };
        // A fresh instance starts with tracing_on=1 and no events: keep it quiet until
        // everything is configured.
        inst.write("tracing_on", "0")?;
        Ok(inst)
    }

    /// Path of a file inside the instance.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.join(rel)
    }

    /// Writes a control file inside the instance.
    pub fn write(&self, rel: &str, value: &str) -> Result<(), RecordError> {
        write_control(&self.path(rel), value)
    }

    /// Reads a file inside the instance.
    pub fn read(&self, rel: &str) -> Result<String, RecordError> {
        read_text(&self.path(rel))
    }

    /// Stops tracing, tells readers to stop and removes the directory (retrying while busy).
    pub fn remove(&mut self) -> Result<(), RecordError> {
        if self.removed {
            return Ok(());
        }
        let _ = self.write("tracing_on", "0");
        self.stop.store(true, Ordering::SeqCst);
        let deadline = Instant::now() + Duration::from_secs(3);
        loop {
            match fs::remove_dir(&self.dir) {
                Ok(()) => {
                    self.removed = true;
                    return Ok(());
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    self.removed = true;
                    return Ok(());
                }
                Err(e) if Instant::now() < deadline => {
                    let _ = e;
                    std::thread::sleep(Duration::from_millis(20));
                }
                Err(e) => {
                    return Err(RecordError::io(
                        "removing the tracefs instance (remove it with rmdir)",
                        &self.dir,
                        e,
                    ))
                }
            }
        }
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        if let Err(e) = self.remove() {
            eprintln!("stallscope: warning: {e}");
        }
    }
}

/// True when a process with this pid exists (kill(pid, 0) succeeds or is refused).
pub fn pid_alive(pid: i32) -> bool {
    if pid <= 0 {
        return false;
    }
    // SAFETY: signal 0 only checks for existence and permission.
    let rc = unsafe { libc::kill(pid, 0) };
    rc == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// The pid in an instance name `stallscope-<pid>`, if it is one of ours.
pub fn instance_pid(name: &str) -> Option<i32> {
    name.strip_prefix(INSTANCE_PREFIX)?.parse().ok()
}

/// Removes instances left by recorders that no longer run; returns the names removed.
/// Instances of live recorders (other `stallscope record` runs) are left alone.
pub fn remove_stale(root: &Path) -> Vec<String> {
    let mut removed = Vec::new();
    let Ok(entries) = fs::read_dir(root.join("instances")) else {
        return removed;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = instance_pid(&name) else {
            continue; // not ours: other tools' instances are none of our business
        };
        // Our own pid can only be a leftover of an earlier recorder that had the same pid.
        if pid != std::process::id() as i32 && pid_alive(pid) {
            continue; // a live recorder owns it
        }
        let dir = entry.path();
        let _ = write_control(&dir.join("tracing_on"), "0");
        match fs::remove_dir(&dir) {
            Ok(()) => removed.push(name),
            Err(e) => eprintln!(
                "stallscope: warning: cannot remove stale instance {}: {e}",
                dir.display()
            ),
        }
    }
    removed
}

pub use stallscope_model::parse_cpu_list;

/// The `tracing_cpumask` text for a CPU set: 32-bit hex groups, most significant first,
/// comma separated (`0,2` → `5`; CPU 32 → `1,00000000`).
pub fn cpumask_text(cpus: &[u32]) -> String {
    let max = cpus.iter().copied().max().unwrap_or(0);
    let groups = (max / 32 + 1) as usize;
    let mut words = vec![0u32; groups];
    for &c in cpus {
        words[(c / 32) as usize] |= 1 << (c % 32);
    }
    let mut out = String::new();
    for (i, w) in words.iter().enumerate().rev() {
        if i + 1 == groups {
            out.push_str(&format!("{w:x}"));
        } else {
            out.push_str(&format!(",{w:08x}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-1").unwrap(), vec![0, 1]);
        assert_eq!(parse_cpu_list("3,0-1, 1").unwrap(), vec![0, 1, 3]);
        assert!(parse_cpu_list("1-0").is_err());
        assert!(parse_cpu_list("x").is_err());
        assert!(parse_cpu_list("").is_err());
    }

    #[test]
    fn cpumasks() {
        assert_eq!(cpumask_text(&[0, 1]), "3");
        assert_eq!(cpumask_text(&[0, 2]), "5");
        assert_eq!(cpumask_text(&[32]), "1,00000000");
        assert_eq!(cpumask_text(&[0, 33]), "2,00000001");
    }

    #[test]
    fn instance_names() {
        assert_eq!(instance_pid("stallscope-4242"), Some(4242));
        assert_eq!(instance_pid("stallscope-x"), None);
        assert_eq!(instance_pid("other-1"), None);
        assert!(pid_alive(std::process::id() as i32));
        assert!(!pid_alive(0));
    }
}
