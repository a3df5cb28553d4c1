//! One reader thread per CPU: whole sub-buffers from `per_cpu/cpuN/trace_pipe_raw` into a
//! per-CPU spool file.
//!
//! ```text
//! loop {
//!     stopping = stop flag          (raised only after tracing_on=0 was written)
//!     read() sub-buffers until EAGAIN, append each verbatim to the spool
//!     if stopping { break }          → this last drain ran after tracing stopped: complete
//!     poll(POLLIN, 100 ms)           (woken at buffer_percent full, or the timeout)
//! }
//! ```
//! Each read returns one sub-buffer (a partially filled one while the writer is active).
//! Empty pages (commit 0, no loss flag) are not stored. The page header's MISSED_EVENTS /
//! MISSED_STORED flags are counted, and the `common_pid` of every event is collected (the
//! tasks the system context must describe); pages are decoded by `stallscope_read::ringbuf`.
//! The spool is an already-unlinked file in the output directory, so it disappears even if the
//! recorder is killed.

use std::collections::HashSet;
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use stallscope_read::ringbuf::{MissedEvents, PageLayout, PageRecords};
use stallscope_read::tracefs_format::Endian;

/// Per-CPU result of a reader thread.
#[derive(Debug)]
pub struct CpuCapture {
    /// CPU number.
    pub cpu: u32,
    /// The spool (positioned anywhere; holds `counts.pages` whole sub-buffers, or, after a
    /// write error, the whole sub-buffers its length holds).
    pub spool: File,
    /// Why the spool could not be written (a full disk): the recording stopped there.
    pub write_error: Option<String>,
    /// What the pages said.
    pub counts: PageCounts,
    /// `common_pid` of every event (0 = idle included).
    pub pids: HashSet<i32>,
}

/// Page counters of one CPU.
#[derive(Clone, Copy, Debug, Default)]
pub struct PageCounts {
    /// Sub-buffers stored.
    pub pages: u64,
    /// Pages carrying the MISSED_EVENTS flag.
    pub missed_pages: u64,
    /// Sum of the stored lost counts (MISSED_STORED).
    pub missed_counted: u64,
    /// Pages with MISSED_EVENTS but no stored count.
    pub missed_unknown_pages: u64,
    /// Pages whose header could not be decoded (stored anyway; trace-cmd decides).
    pub bad_headers: u64,
    /// Pages whose events could not all be decoded while collecting pids (stored anyway).
    pub bad_records: u64,
}

/// The spool file of CPU `cpu` in `dir` (hidden, named by the recorder's pid: the guardian
/// finds it after a SIGKILL; every other exit removes it).
pub fn spool_path(dir: &Path, cpu: u32) -> PathBuf {
    dir.join(format!(
        ".stallscope-spool-{}-cpu{cpu}.tmp",
        std::process::id()
    ))
}

/// Creates the spool file at `path`.
pub fn create_spool(path: &Path) -> io::Result<File> {
    fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(path)
}

/// Reads CPU `cpu`'s `trace_pipe_raw` until `stop` is raised and the buffer is drained, into
/// `spool` (the file and its path). A write error (a full disk) raises `failed` — the
/// recording stops at once — and ends the capture with [`CpuCapture::write_error`] naming the
/// spool and the bytes it holds (what it holds is kept).
pub fn run(
    cpu: u32,
    pipe_path: &Path,
    layout: PageLayout,
    common_pid_offset: usize,
    spool: (File, &Path),
    stop: &Arc<AtomicBool>,
    failed: &AtomicBool,
) -> io::Result<CpuCapture> {
    let (spool, spool_path) = spool;
    let write_error = |e: io::Error| {
        failed.store(true, Ordering::SeqCst);
        let on_disk = fs::metadata(spool_path).map_or(0, |m| m.len());
        format!(
            "writing {}: {e} (it holds {on_disk} bytes of this CPU's data)",
            spool_path.display()
        )
    };
    let mut error: Option<String> = None;
    let mut pipe = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(pipe_path)?;
    let mut out = io::BufWriter::with_capacity(1 << 20, spool);
    let mut counts = PageCounts::default();
    let mut pids = PageTasks {
        pid_offset: common_pid_offset,
        pids: HashSet::new(),
    };
    let mut page = vec![0u8; layout.subbuf_size];
    'reading: loop {
        let stopping = stop.load(Ordering::SeqCst);
        loop {
            match pipe.read(&mut page) {
                Ok(0) => break,
                Ok(n) => {
                    // A short read is padded to a whole sub-buffer to keep the file layout.
                    page[n..].fill(0);
                    if store_page(&page, &layout, &mut counts, &mut pids) {
                        if let Err(e) = out.write_all(&page) {
                            error = Some(write_error(e));
                            break 'reading;
                        }
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if stopping {
            break;
        }
        // caught up with the kernel: what was read goes to the spool before waiting, so a
        // recorder killed now (SIGKILL) leaves it for its guardian
        if let Err(e) = out.flush() {
            error = Some(write_error(e));
            break;
        }
        let mut pfd = libc::pollfd {
            fd: pipe.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd; EINTR (a signal) just ends the wait early.
        unsafe { libc::poll(&mut pfd, 1, 100) };
    }
    let spool = match error {
        None => match out.into_inner() {
            Ok(f) => f,
            Err(e) => {
                let (e, w) = e.into_parts();
                error = Some(write_error(e));
                w.into_parts().0
            }
        },
        // what the buffer still holds cannot be written: the file keeps what it has
        Some(_) => out.into_parts().0,
    };
    Ok(CpuCapture {
        cpu,
        spool,
        write_error: error,
        counts,
        pids: pids.pids,
    })
}

/// Where the `common_pid` of each event is, and the pids seen.
#[derive(Debug, Default)]
pub struct PageTasks {
    /// Offset of `common_pid` (an i32) in every record (4 on all known kernels; from the
    /// format files).
    pub pid_offset: usize,
    /// Pids seen.
    pub pids: HashSet<i32>,
}

/// Counts the page's loss flags and collects its pids; false for an empty page without loss
/// (not worth storing).
pub fn store_page(
    page: &[u8],
    layout: &PageLayout,
    cap: &mut PageCounts,
    tasks: &mut PageTasks,
) -> bool {
    let (header, records) = match PageRecords::new(page, layout) {
        Ok(x) => x,
        Err(_) => {
            cap.bad_headers += 1;
            cap.pages += 1;
            return true;
        }
    };
    match header.missed {
        MissedEvents::None => {
            if header.data_len == 0 {
                return false;
            }
        }
        MissedEvents::Count(n) => {
            cap.missed_pages += 1;
            cap.missed_counted += n;
        }
        MissedEvents::Unknown => {
            cap.missed_pages += 1;
            cap.missed_unknown_pages += 1;
        }
    }
    cap.pages += 1;
    let at = tasks.pid_offset;
    let mut last = None;
    for rec in records {
        match rec {
            Ok(r) => {
                let Some(pid) = r
                    .payload
                    .get(at..at + 4)
                    .and_then(|b| b.try_into().ok())
                    .map(|b: [u8; 4]| match layout.endian {
                        Endian::Little => i32::from_le_bytes(b),
                        Endian::Big => i32::from_be_bytes(b),
                    })
                else {
                    cap.bad_records += 1;
                    break;
                };
                if last != Some(pid) {
                    tasks.pids.insert(pid);
                    last = Some(pid);
                }
            }
            Err(_) => {
                cap.bad_records += 1;
                break;
            }
        }
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout() -> PageLayout {
        PageLayout::new(Endian::Little, 8, 4096)
    }

    #[test]
    fn counts_the_missed_events_flag_of_a_real_page() {
        // Three sub-buffers read from per_cpu/cpu0/trace_pipe_raw on the 6.18 VM; the first
        // has commit 0xffffffff80000ff0 (MISSED_EVENTS without a stored count).
        let bytes = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fixtures/samples/ringbuf/cpu0_missed_events_flag.bin"
        ))
        .unwrap();
        let mut c = PageCounts::default();
        let mut t = PageTasks {
            pid_offset: 4,
            ..Default::default()
        };
        for page in bytes.chunks(4096) {
            assert!(store_page(page, &layout(), &mut c, &mut t));
        }
        assert_eq!(c.bad_records, 0);
        assert!(t.pids.contains(&0), "no idle task in {:?}", t.pids);
        assert_eq!(c.pages, 3);
        assert_eq!(c.missed_pages, 1);
        assert_eq!(c.missed_unknown_pages, 1);
        assert_eq!(c.missed_counted, 0);
        assert_eq!(c.bad_headers, 0);
    }

    #[test]
    fn stored_counts_and_empty_pages() {
        let mut c = PageCounts::default();
        let mut t = PageTasks::default();
        let mut page = vec![0u8; 4096];
        // Empty page without loss: not worth storing.
        assert!(!store_page(&page, &layout(), &mut c, &mut t));
        // 8 data bytes, MISSED_EVENTS | MISSED_STORED sign-extended, count 5 after the data.
        page[8..16].copy_from_slice(&0xffff_ffff_c000_0008u64.to_le_bytes());
        page[24..32].copy_from_slice(&5u64.to_le_bytes());
        assert!(store_page(&page, &layout(), &mut c, &mut t));
        // A commit larger than the page: stored anyway (trace-cmd decides), counted as bad.
        page[8..16].copy_from_slice(&0x0000_0000_0000_2000u64.to_le_bytes());
        assert!(store_page(&page, &layout(), &mut c, &mut t));
        assert_eq!(
            (c.pages, c.missed_pages, c.missed_counted, c.bad_headers),
            (2, 1, 5, 1)
        );
    }
}
