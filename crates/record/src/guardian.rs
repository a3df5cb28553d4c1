//! The guardian: a process forked before tracing starts that outlives a recorder killed with
//! SIGKILL (no handler, no unwinding: nothing of the recorder itself can run).
//!
//! ```text
//! recorder ──pipe (write end, close-on-exec)──▶ guardian (blocked in read)
//!   done: its own cleanup ran, writes one byte → the guardian exits, touching nothing
//!   dies (any way): the kernel closes the write end → EOF → the guardian
//!         1. writes 0 to the instance's tracing_on, removes the instance (retrying EBUSY)
//!         2. writes the output trace.dat from the per-CPU spool files the recorder left
//!            (whole sub-buffers only; the readers flush their spool each time they catch up
//!            with the kernel, so what is lost is what they had read since), with
//!            `recording_cut` in its system context, which the reader reports as data
//!            quality
//!         3. removes the spool files and exits
//! ```
//! The guardian ignores SIGINT, SIGTERM and SIGHUP (Ctrl-C reaches the whole process group;
//! the recorder stops cleanly on those and then releases the guardian). Its stdin and stdout
//! are /dev/null so that it holds no pipe of whoever runs the recorder; stderr stays, for one
//! line saying what it rescued.
//!
//! [`Guardian::start`] must be called while the recorder has one thread (before the reader
//! threads): the child is a copy of the process and uses the ordinary library.

use std::fs::{self, File};
use std::io::{self, Write};
use std::os::fd::{FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::tracedat_writer::{self as writer, TraceDatHeader};

/// What the guardian writes when the recorder dies.
pub struct Rescue {
    /// The output trace.dat.
    pub output: PathBuf,
    /// The spool file of each recorded CPU.
    pub spools: Vec<(u32, PathBuf)>,
    /// Every CPU of the machine, in order (CPUs not recorded get an empty stream).
    pub all_cpus: Vec<u32>,
    /// Sub-buffer size.
    pub subbuf_size: u64,
    /// The trace.dat header (formats, options, a system context that says the recording
    /// was cut).
    pub header: TraceDatHeader,
    /// tracefs root (the kernel's saved_cmdlines are read from it at rescue time).
    pub tracefs_root: PathBuf,
}

/// The running guardian; releases it on drop (the recorder cleaned up itself).
pub struct Guardian {
    pid: libc::pid_t,
    write_end: Option<OwnedFd>,
}

impl Guardian {
    /// Forks the guardian of the instance `instance_dir`. Refused (an error, the caller goes
    /// on without a guardian) when the process has more than one thread: a forked copy of a
    /// multi-threaded process may find a lock held by a thread it does not have.
    pub fn start(instance_dir: &Path, rescue: Rescue) -> io::Result<Guardian> {
        let threads = threads_of_this_process();
        if threads != Some(1) {
            return Err(io::Error::other(format!(
                "the process has {} threads (a guardian is forked from a single-threaded one)",
                threads.map_or("an unknown number of".to_string(), |n| n.to_string())
            )));
        }
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: a two-int array for pipe2.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fork in a single-threaded process (the caller's contract); the child never
        // returns (it ends with _exit).
        match unsafe { libc::fork() } {
            -1 => {
                let e = io::Error::last_os_error();
                // SAFETY: the two fds pipe2 opened.
                unsafe {
                    libc::close(fds[0]);
                    libc::close(fds[1]);
                }
                Err(e)
            }
            0 => {
                // SAFETY: the write end is the parent's; closing our copy lets EOF happen.
                unsafe { libc::close(fds[1]) };
                guard(fds[0], instance_dir, &rescue);
                // SAFETY: end the child without running the parent's destructors or atexit.
                unsafe { libc::_exit(0) }
            }
            pid => {
                // SAFETY: the read end is the child's.
                unsafe { libc::close(fds[0]) };
                Ok(Guardian {
                    pid,
                    // SAFETY: fds[1] is an open fd that nothing else owns.
                    write_end: Some(unsafe { OwnedFd::from_raw_fd(fds[1]) }),
                })
            }
        }
    }
}

impl Drop for Guardian {
    fn drop(&mut self) {
        if let Some(fd) = self.write_end.take() {
            let mut f = File::from(fd);
            // "done": the guardian leaves everything as it is
            let _ = f.write_all(b"d");
        }
        // SAFETY: waits for our own child.
        unsafe { libc::waitpid(self.pid, std::ptr::null_mut(), 0) };
    }
}

/// `Threads:` of /proc/self/status.
fn threads_of_this_process() -> Option<u64> {
    let status = fs::read_to_string("/proc/self/status").ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
}

/// The child: waits for the recorder, and cleans up after it when it died.
fn guard(read_fd: libc::c_int, instance_dir: &Path, rescue: &Rescue) {
    // SAFETY: plain signal dispositions and fd redirections in our own process.
    unsafe {
        for s in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGPIPE] {
            libc::signal(s, libc::SIG_IGN);
        }
        let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
        if null >= 0 {
            libc::dup2(null, 0);
            libc::dup2(null, 1);
            libc::close(null);
        }
    }
    let mut byte = 0u8;
    let died = loop {
        // SAFETY: one byte into a local.
        let n = unsafe { libc::read(read_fd, (&mut byte as *mut u8).cast(), 1) };
        match n {
            0 => break true,
            1 => break false,
            _ if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted => continue,
            _ => break true,
        }
    };
    if !died {
        return;
    }
    let stopped = stop_instance(instance_dir);
    let rescued = rescue.write();
    for (_, p) in &rescue.spools {
        let _ = fs::remove_file(p);
    }
    let said = match (&rescued, stopped) {
        (Ok(None), _) => return, // nothing recorded yet
        (Ok(Some(bytes)), true) => format!(
            "the recorder died: tracing stopped, instance removed, {bytes} bytes of CPU data written to {} (marked as cut)",
            rescue.output.display()
        ),
        (Ok(Some(bytes)), false) => format!(
            "the recorder died: {bytes} bytes of CPU data written to {} (marked as cut); the instance {} could not be removed",
            rescue.output.display(),
            instance_dir.display()
        ),
        (Err(e), _) => format!(
            "the recorder died: tracing stopped; its recording could not be written to {}: {e}",
            rescue.output.display()
        ),
    };
    eprintln!("stallscope record (guardian): {said}");
}

/// Tracing off and the instance removed (retried while the dead recorder's files close).
fn stop_instance(dir: &Path) -> bool {
    let _ = fs::write(dir.join("tracing_on"), "0");
    let start = Instant::now();
    loop {
        match fs::remove_dir(dir) {
            Ok(()) => return true,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return true,
            Err(_) if start.elapsed() < Duration::from_secs(2) => {
                std::thread::sleep(Duration::from_millis(20))
            }
            Err(_) => return false,
        }
    }
}

impl Rescue {
    /// Writes the output from the spools; `None` when there are none (the recorder had
    /// finished, or had not started reading). Returns the bytes of CPU data written.
    fn write(&self) -> io::Result<Option<u64>> {
        let mut spools: Vec<(u32, File, u64)> = Vec::new();
        for (cpu, path) in &self.spools {
            let Ok(f) = File::open(path) else { continue };
            let len = f.metadata()?.len();
            // whole sub-buffers only (the last one may have been cut by the kill)
            let len = len - len % self.subbuf_size.max(1);
            spools.push((*cpu, f, len));
        }
        if spools.is_empty() {
            return Ok(None);
        }
        let mut header = self.header.clone();
        if let Ok(c) = fs::read(self.tracefs_root.join("saved_cmdlines")) {
            header.saved_cmdlines = c;
        }
        let out = File::create(&self.output)?;
        writer::write_from_spools(out, &header, &mut spools, &self.all_cpus).map(Some)
    }
}
