//! Host-wide facts: uname, CPUs, scheduler knobs, preemption model, HZ.
//!
//! ```text
//! /sys/devices/system/cpu/possible, online      "0-1"
//! /proc/sys/kernel/sched_*                       one value each (sched_rr_timeslice_ms = 100)
//! /sys/kernel/debug/sched/*                      files only (base_slice_ns, preempt, …);
//!                                                the large per-task `debug` dump is skipped
//! /sys/kernel/debug/sched/preempt                "none voluntary (full) lazy" → full
//! /boot/config-$(uname -r) or /proc/config.gz    CONFIG_HZ=250, CONFIG_PREEMPT_*=y
//! ```

use std::collections::BTreeMap;
use std::ffi::CStr;
use std::fs;
use std::io::Read;
use std::path::Path;

/// `uname(2)` fields.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Uname {
    /// `Linux`.
    pub sysname: String,
    /// Host name.
    pub nodename: String,
    /// Kernel release.
    pub release: String,
    /// Kernel version string (`#1 SMP PREEMPT_DYNAMIC …`).
    pub version: String,
    /// Machine (`x86_64`).
    pub machine: String,
}

/// Calls uname(2).
pub fn uname() -> Option<Uname> {
    // SAFETY: utsname is plain data; zeroed is valid and the kernel fills it.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: valid pointer to a utsname.
    if unsafe { libc::uname(&mut u) } != 0 {
        return None;
    }
    let field = |f: &[libc::c_char]| {
        // SAFETY: the kernel NUL-terminates every utsname field within its array.
        unsafe { CStr::from_ptr(f.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    };
    Some(Uname {
        sysname: field(&u.sysname),
        nodename: field(&u.nodename),
        release: field(&u.release),
        version: field(&u.version),
        machine: field(&u.machine),
    })
}

/// Number of CPUs in a kernel CPU list (`0-3,6` → 5).
pub fn cpu_list_len(list: &str) -> Option<u32> {
    let cpus = stallscope_model::parse_cpu_list(list).ok()?;
    u32::try_from(cpus.len()).ok()
}

/// Reads small files of `dir` whose names start with `prefix` into `out` (key = full path).
/// Unreadable files (write-only, EPERM) are skipped: the context records what was readable.
pub fn read_knobs(dir: &Path, prefix: &str, skip: &[&str], out: &mut BTreeMap<String, String>) {
    let Ok(rd) = fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let path = e.path();
        if !name.starts_with(prefix) || skip.contains(&name.as_str()) || !path.is_file() {
            continue; // not a knob we record
        }
        let mut buf = Vec::new();
        let ok = fs::File::open(&path)
            .and_then(|f| f.take(4096).read_to_end(&mut buf))
            .is_ok();
        if ok {
            out.insert(
                path.to_string_lossy().into_owned(),
                String::from_utf8_lossy(&buf).trim().to_string(),
            );
        }
    }
}

/// The selected entry of a tracefs/debugfs choice list: `none voluntary (full) lazy` → `full`,
/// `[none] mq-deadline` → `none`.
pub fn selected_choice(text: &str) -> Option<String> {
    text.split_whitespace().find_map(|w| {
        let inner = w
            .strip_prefix('(')
            .and_then(|x| x.strip_suffix(')'))
            .or_else(|| w.strip_prefix('[').and_then(|x| x.strip_suffix(']')))?;
        Some(inner.to_string())
    })
}

/// Kernel build configuration text, when available.
pub fn kernel_config(release: &str) -> Option<String> {
    if let Ok(s) = fs::read_to_string(format!("/boot/config-{release}")) {
        return Some(s);
    }
    let gz = fs::File::open("/proc/config.gz").ok()?;
    let mut s = String::new();
    flate2::read::GzDecoder::new(gz)
        .take(16 << 20)
        .read_to_string(&mut s)
        .ok()?;
    Some(s)
}

/// The value of `KEY=value` in a kernel config.
pub fn config_value<'a>(config: &'a str, key: &str) -> Option<&'a str> {
    config.lines().find_map(|l| {
        let (k, v) = l.split_once('=')?;
        (k == key).then_some(v)
    })
}

/// Preemption model, best source first: debugfs `sched/preempt`, kernel config (+ `preempt=`
/// on the command line for dynamic kernels), the version string.
pub fn preemption_model(
    debugfs_preempt: Option<&str>,
    config: Option<&str>,
    cmdline: &str,
    version: &str,
) -> Option<String> {
    if let Some(sel) = debugfs_preempt.and_then(selected_choice) {
        return Some(sel);
    }
    if version.contains("PREEMPT_RT") {
        return Some("rt".into());
    }
    if let Some(cfg) = config {
        let y = |k: &str| config_value(cfg, k) == Some("y");
        if y("CONFIG_PREEMPT_RT") {
            return Some("rt".into());
        }
        if y("CONFIG_PREEMPT_DYNAMIC") {
            if let Some(arg) = cmdline
                .split_whitespace()
                .find_map(|a| a.strip_prefix("preempt="))
            {
                return Some(arg.to_string());
            }
        }
        for (key, name) in [
            ("CONFIG_PREEMPT_LAZY", "lazy"),
            ("CONFIG_PREEMPT", "full"),
            ("CONFIG_PREEMPT_VOLUNTARY", "voluntary"),
            ("CONFIG_PREEMPT_NONE", "none"),
        ] {
            if y(key) {
                return Some(name.into());
            }
        }
    }
    if version.contains("PREEMPT_DYNAMIC") {
        return Some("dynamic (mode unknown)".into());
    }
    if version.contains("PREEMPT ") || version.ends_with("PREEMPT") {
        return Some("full".into());
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(cpu_list_len("0-1\n"), Some(2));
        assert_eq!(cpu_list_len("0-3,6"), Some(5));
        assert_eq!(cpu_list_len("x"), None);
    }

    #[test]
    fn choices() {
        assert_eq!(
            selected_choice("none voluntary (full) lazy\n").as_deref(),
            Some("full")
        );
        // queue/scheduler of vda on this VM.
        assert_eq!(
            selected_choice("none [mq-deadline] kyber bfq \n").as_deref(),
            Some("mq-deadline")
        );
        assert_eq!(selected_choice("none mq-deadline"), None);
    }

    #[test]
    fn preemption() {
        let v = "#1 SMP PREEMPT_DYNAMIC Thu Jan  1 00:00:00 UTC 2026";
        assert_eq!(
            preemption_model(Some("none (voluntary) full"), None, "", v).as_deref(),
            Some("voluntary")
        );
        let cfg = "CONFIG_HZ=250\nCONFIG_PREEMPT_DYNAMIC=y\nCONFIG_PREEMPT_VOLUNTARY=y\n";
        assert_eq!(
            preemption_model(None, Some(cfg), "ro preempt=full", v).as_deref(),
            Some("full")
        );
        assert_eq!(
            preemption_model(None, Some(cfg), "ro", v).as_deref(),
            Some("voluntary")
        );
        assert_eq!(
            preemption_model(None, None, "", v).as_deref(),
            Some("dynamic (mode unknown)")
        );
        assert_eq!(preemption_model(None, None, "", "#1 SMP"), None);
        assert_eq!(config_value(cfg, "CONFIG_HZ"), Some("250"));
    }
}
