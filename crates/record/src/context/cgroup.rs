//! cgroup CPU controls of a task's cgroups, v1 and v2.
//!
//! ```text
//! /proc/self/mountinfo   32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
//!                        (root, mount point … " - " fstype source super-options)
//! v2  <cgroup2 mount>/<path>/cpu.weight  (100)     cpu.max ("max 100000")
//! v1  <cpu mount>/<path>/cpu.shares      (1024)    cpu.cfs_quota_us + cpu.cfs_period_us
//!                                                  → cpu_max "QUOTA PERIOD" ("-1 100000")
//! ```
//! Only hierarchies with CPU controls are kept: the v2 unified one (when cgroup2 is mounted)
//! and v1 hierarchies whose controllers include `cpu`.

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};

use stallscope_model::CgroupContext;

use super::proc_task::CgroupLine;

/// One cgroup filesystem mount.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CgroupMount {
    /// Mount point.
    pub mount_point: PathBuf,
    /// Root of the mount inside the hierarchy (`/` normally).
    pub root: String,
    /// True for cgroup2.
    pub unified: bool,
    /// v1 controllers (from the super options; `name=systemd` kept as is).
    pub controllers: Vec<String>,
}

/// Parses cgroup / cgroup2 mounts out of `/proc/self/mountinfo`.
pub fn parse_mountinfo(text: &str) -> Vec<CgroupMount> {
    let mut out = Vec::new();
    for line in text.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue; // not a mount line
        };
        let l: Vec<&str> = left.split(' ').collect();
        let r: Vec<&str> = right.split(' ').collect();
        let (Some(root), Some(mp), Some(fstype)) = (l.get(3), l.get(4), r.first()) else {
            continue; // malformed line: no cgroup information to take
        };
        let unified = *fstype == "cgroup2";
        if !unified && *fstype != "cgroup" {
            continue;
        }
        let controllers = r
            .get(2)
            .map(|opts| {
                opts.split(',')
                    .filter(|o| !matches!(*o, "rw" | "ro") && !o.starts_with("xattr"))
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        out.push(CgroupMount {
            mount_point: PathBuf::from(unescape_octal(mp)),
            root: unescape_octal(root),
            unified,
            controllers: if unified { Vec::new() } else { controllers },
        });
    }
    out
}

/// mountinfo escapes space, tab, newline and backslash as `\040`-style octal.
fn unescape_octal(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..i + 4].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            let v = (b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0');
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Reads cgroup CPU controls, caching per (hierarchy, path).
#[derive(Debug, Default)]
pub struct CgroupReader {
    mounts: Vec<CgroupMount>,
    cache: HashMap<(String, String), CgroupContext>,
}

impl CgroupReader {
    /// Reads the mount table of this process.
    pub fn new() -> CgroupReader {
        CgroupReader::with_mounts(parse_mountinfo(
            &fs::read_to_string("/proc/self/mountinfo").unwrap_or_default(),
        ))
    }

    /// With a given mount table.
    pub fn with_mounts(mounts: Vec<CgroupMount>) -> CgroupReader {
        CgroupReader {
            mounts,
            cache: HashMap::new(),
        }
    }

    fn mount_for(&self, line: &CgroupLine) -> Option<&CgroupMount> {
        if line.is_unified() {
            return self.mounts.iter().find(|m| m.unified);
        }
        self.mounts
            .iter()
            .find(|m| !m.unified && line.controllers.iter().all(|c| m.controllers.contains(c)))
    }

    /// The kept memberships of one task with their controls.
    pub fn contexts(&mut self, lines: &[CgroupLine]) -> Vec<CgroupContext> {
        let mut out = Vec::new();
        for line in lines {
            let keep = line.is_unified() || line.controllers.iter().any(|c| c == "cpu");
            if !keep {
                continue; // no CPU controls in this hierarchy (memory, pids, …)
            }
            let key = (line.hierarchy.clone(), line.path.clone());
            if let Some(c) = self.cache.get(&key) {
                out.push(c.clone());
                continue;
            }
            let Some(mount) = self.mount_for(line).cloned() else {
                continue; // hierarchy not mounted (e.g. `0::/` on a v1-only host)
            };
            let rel = line
                .path
                .strip_prefix(mount.root.trim_end_matches('/'))
                .unwrap_or(&line.path)
                .trim_start_matches('/');
            let dir = mount.mount_point.join(rel);
            let ctx = read_controls(&dir, &line.hierarchy, &line.path, mount.unified);
            self.cache.insert(key, ctx.clone());
            out.push(ctx);
        }
        out
    }
}

fn read_trimmed(path: &Path) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

/// Reads the control files of one cgroup directory.
pub fn read_controls(dir: &Path, hierarchy: &str, path: &str, unified: bool) -> CgroupContext {
    let num = |f: &str| read_trimmed(&dir.join(f)).and_then(|s| s.parse().ok());
    if unified {
        CgroupContext {
            hierarchy: hierarchy.to_string(),
            path: path.to_string(),
            cpu_weight: num("cpu.weight"),
            cpu_shares: None,
            cpu_max: read_trimmed(&dir.join("cpu.max")),
        }
    } else {
        let quota = read_trimmed(&dir.join("cpu.cfs_quota_us"));
        let period = read_trimmed(&dir.join("cpu.cfs_period_us"));
        CgroupContext {
            hierarchy: hierarchy.to_string(),
            path: path.to_string(),
            cpu_weight: None,
            cpu_shares: num("cpu.shares"),
            cpu_max: match (quota, period) {
                (Some(q), Some(p)) => Some(format!("{q} {p}")),
                _ => None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mountinfo_of_this_vm() {
        // Lines from /proc/self/mountinfo of the 6.18 VM, plus a cgroup2 line of a v2 host.
        let text = "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n\
                    32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n\
                    33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n\
                    40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd\n\
                    29 23 0:26 / /sys/fs/cgroup/unified\\040x rw - cgroup2 cgroup2 rw,nsdelegate\n";
        let m = parse_mountinfo(text);
        assert_eq!(m.len(), 4);
        assert_eq!(m[0].mount_point, PathBuf::from("/sys/fs/cgroup/cpu"));
        assert_eq!(m[0].controllers, vec!["cpu"]);
        assert_eq!(m[2].controllers, vec!["name=systemd"]);
        assert!(m[3].unified);
        assert_eq!(m[3].mount_point, PathBuf::from("/sys/fs/cgroup/unified x"));
    }

    #[test]
    fn controls_from_a_fake_hierarchy() {
        let base = std::env::temp_dir().join(format!("stallscope-cg-{}", std::process::id()));
        let v1 = base.join("v1/grp");
        let v2 = base.join("v2/grp");
        fs::create_dir_all(&v1).unwrap();
        fs::create_dir_all(&v2).unwrap();
        fs::write(v1.join("cpu.shares"), "2048\n").unwrap();
        fs::write(v1.join("cpu.cfs_quota_us"), "-1\n").unwrap();
        fs::write(v1.join("cpu.cfs_period_us"), "100000\n").unwrap();
        fs::write(v2.join("cpu.weight"), "10000\n").unwrap();
        fs::write(v2.join("cpu.max"), "max 100000\n").unwrap();
        let mut r = CgroupReader::with_mounts(vec![
            CgroupMount {
                mount_point: base.join("v1"),
                root: "/".into(),
                unified: false,
                controllers: vec!["cpu".into(), "cpuacct".into()],
            },
            CgroupMount {
                mount_point: base.join("v2"),
                root: "/".into(),
                unified: true,
                controllers: vec![],
            },
        ]);
        let (lines, _) = super::super::proc_task::parse_cgroup_file(
            "5:memory:/grp\n4:cpu,cpuacct:/grp\n0::/grp\n",
        );
        let c = r.contexts(&lines);
        assert_eq!(c.len(), 2);
        assert_eq!(c[0].cpu_shares, Some(2048));
        assert_eq!(c[0].cpu_max.as_deref(), Some("-1 100000"));
        assert_eq!(c[1].cpu_weight, Some(10000));
        assert_eq!(c[1].cpu_max.as_deref(), Some("max 100000"));
        fs::remove_dir_all(&base).unwrap();
    }
}
