//! Finding tracefs (and debugfs) and reading / writing its small control files.
//!
//! tracefs is normally mounted at `/sys/kernel/tracing` (legacy: `/sys/kernel/debug/tracing`).
//! A fresh machine may not have it mounted: [`Tracefs::locate`] mounts it
//! (`mount -t tracefs nodev /sys/kernel/tracing`) and the returned [`Tracefs`] unmounts it on
//! drop only when it was mounted here. [`DebugfsMount`] does the same for `/sys/kernel/debug`
//! (used only for the optional `sched/*` knobs of the system context).

use std::ffi::CString;
use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use crate::RecordError;

/// Where tracefs is mounted on current kernels.
pub const TRACEFS_DIR: &str = "/sys/kernel/tracing";
/// Where debugfs is mounted.
pub const DEBUGFS_DIR: &str = "/sys/kernel/debug";

/// A usable tracefs root; unmounts on drop when it was mounted by us.
#[derive(Debug)]
pub struct Tracefs {
    /// The tracefs root (contains `instances/`, `events/`).
    pub root: PathBuf,
    mounted_here: bool,
}

impl Tracefs {
    /// Finds tracefs, mounting it at [`TRACEFS_DIR`] when it is not mounted.
    pub fn locate() -> Result<Tracefs, RecordError> {
        for dir in [TRACEFS_DIR, "/sys/kernel/debug/tracing"] {
            if Path::new(dir).join("instances").is_dir() {
                return Ok(Tracefs {
                    root: PathBuf::from(dir),
                    mounted_here: false,
                });
            }
        }
        match mount("nodev", TRACEFS_DIR, "tracefs") {
            Ok(()) if Path::new(TRACEFS_DIR).join("instances").is_dir() => Ok(Tracefs {
                root: PathBuf::from(TRACEFS_DIR),
                mounted_here: true,
            }),
            Ok(()) => {
                let _ = unmount(TRACEFS_DIR);
                Err(RecordError::NoTracefs(format!(
                    "tracefs mounted at {TRACEFS_DIR} has no instances/ directory \
                     (kernel without CONFIG_TRACING instances?)"
                )))
            }
            Err(e) => Err(RecordError::NoTracefs(format!(
                "tracefs is not mounted and `mount -t tracefs nodev {TRACEFS_DIR}` failed: {e} \
                 (kernel without CONFIG_FTRACE / CONFIG_TRACING, or not allowed)"
            ))),
        }
    }

    /// True when this process mounted it.
    pub fn mounted_here(&self) -> bool {
        self.mounted_here
    }
}

impl Drop for Tracefs {
    fn drop(&mut self) {
        if self.mounted_here {
            if let Err(e) = unmount(&self.root.to_string_lossy()) {
                eprintln!(
                    "stallscope: warning: cannot unmount tracefs we mounted at {}: {e}",
                    self.root.display()
                );
            }
        }
    }
}

/// debugfs mounted for the duration of context collection, unmounted on drop if we mounted it.
#[derive(Debug)]
pub struct DebugfsMount {
    mounted_here: bool,
}

impl DebugfsMount {
    /// Mounts debugfs when `sched/` is not visible under [`DEBUGFS_DIR`]; failures are silent
    /// (the knobs are optional).
    pub fn ensure() -> DebugfsMount {
        let probe = Path::new(DEBUGFS_DIR).join("sched");
        if probe.exists() || is_mountpoint(DEBUGFS_DIR) {
            return DebugfsMount {
                mounted_here: false,
            };
        }
        let mounted_here = mount("debugfs", DEBUGFS_DIR, "debugfs").is_ok();
        DebugfsMount { mounted_here }
    }
}

impl Drop for DebugfsMount {
    fn drop(&mut self) {
        if self.mounted_here {
            let _ = unmount(DEBUGFS_DIR);
        }
    }
}

/// True when `dir` is listed as a mount point in `/proc/self/mounts`.
fn is_mountpoint(dir: &str) -> bool {
    fs::read_to_string("/proc/self/mounts")
        .unwrap_or_default()
        .lines()
        .any(|l| l.split(' ').nth(1) == Some(dir))
}

fn mount(source: &str, target: &str, fstype: &str) -> io::Result<()> {
    let c = |s: &str| CString::new(s).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e));
    let (src, tgt, ty) = (c(source)?, c(target)?, c(fstype)?);
    // SAFETY: all pointers are valid NUL-terminated strings for the duration of the call;
    // data may be NULL for these filesystems.
    let rc = unsafe { libc::mount(src.as_ptr(), tgt.as_ptr(), ty.as_ptr(), 0, std::ptr::null()) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn unmount(target: &str) -> io::Result<()> {
    let tgt = CString::new(target).map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
    // SAFETY: valid NUL-terminated path.
    let rc = unsafe { libc::umount(tgt.as_ptr()) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Writes `value` to a tracefs control file in one `write()` (tracefs parses per write).
pub fn write_control(path: &Path, value: &str) -> Result<(), RecordError> {
    let mut f = fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .map_err(|e| RecordError::io("opening tracefs file for writing", path, e))?;
    f.write_all(value.as_bytes())
        .map_err(|e| RecordError::io(format!("writing {value:?} to tracefs file"), path, e))
}

/// Reads a tracefs file as text (see [`read_bytes`]).
pub fn read_text(path: &Path) -> Result<String, RecordError> {
    Ok(String::from_utf8_lossy(&read_bytes(path)?).into_owned())
}

/// Reads a tracefs file as bytes with large reads. Some tracefs files (`events/header_page`,
/// `header_event`) answer only the first `read()` and return EOF for any later offset, so the
/// usual small probe read of `fs::read` (files report size 0) would truncate them.
pub fn read_bytes(path: &Path) -> Result<Vec<u8>, RecordError> {
    let mut f =
        fs::File::open(path).map_err(|e| RecordError::io("opening tracefs file", path, e))?;
    let mut out = Vec::new();
    let mut buf = vec![0u8; 1 << 16];
    loop {
        match f.read(&mut buf) {
            Ok(0) => return Ok(out),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(RecordError::io("reading tracefs file", path, e)),
        }
    }
}
