//! Per-task attributes from `/proc/<tid>/{stat,status,cgroup}`.
//!
//! ```text
//! stat    1234 (kworker/0:1 (x)) S 2 0 0 … 18:priority 19:nice … 40:rt_priority 41:policy
//!         (fields numbered from 1; the comm may contain spaces and parentheses, so fields are
//!          counted after the LAST ')')
//! status  Tgid:\t1234            Cpus_allowed_list:\t0-1
//! cgroup  4:cpu,cpuacct:/user.slice       (v1: id:controllers:path)
//!         0::/system.slice/foo.service    (v2: id 0, empty controllers)
//! ```

/// Fields taken from `/proc/<tid>/stat`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StatFields {
    /// Task id (field 1).
    pub tid: i32,
    /// Name between the parentheses (field 2).
    pub comm: String,
    /// Kernel priority (field 18).
    pub priority: Option<i32>,
    /// Nice (field 19).
    pub nice: Option<i32>,
    /// RT priority (field 40).
    pub rt_priority: Option<u32>,
    /// Policy number (field 41).
    pub policy: Option<u32>,
}

/// Parses one `/proc/<tid>/stat` line; `None` when it has no `(comm)`.
pub fn parse_stat(line: &str) -> Option<StatFields> {
    let open = line.find('(')?;
    let close = line.rfind(')')?;
    if close < open {
        return None;
    }
    let tid = line[..open].trim().parse().ok()?;
    let comm = line[open + 1..close].to_string();
    // rest[0] is field 3 (state).
    let rest: Vec<&str> = line[close + 1..].split_whitespace().collect();
    let field = |n: usize| rest.get(n - 3).copied();
    Some(StatFields {
        tid,
        comm,
        priority: field(18).and_then(|s| s.parse().ok()),
        nice: field(19).and_then(|s| s.parse().ok()),
        rt_priority: field(40).and_then(|s| s.parse().ok()),
        policy: field(41).and_then(|s| s.parse().ok()),
    })
}

/// `SCHED_*` name of a policy number (`include/uapi/linux/sched.h`).
pub fn policy_name(policy: u32) -> String {
    match policy {
        0 => "SCHED_OTHER".into(),
        1 => "SCHED_FIFO".into(),
        2 => "SCHED_RR".into(),
        3 => "SCHED_BATCH".into(),
        5 => "SCHED_IDLE".into(),
        6 => "SCHED_DEADLINE".into(),
        7 => "SCHED_EXT".into(),
        n => format!("policy {n}"),
    }
}

/// `/proc/PID/autogroup` (`/autogroup-197 nice 0`): the autogroup id and nice; an empty
/// file is the root group (id 0, the init session and kernel threads); `None` when the text
/// is neither.
pub fn parse_autogroup(text: &str) -> Option<(u64, Option<i32>)> {
    let text = text.trim();
    if text.is_empty() {
        return Some((0, None));
    }
    let (group, rest) = text.split_once(' ')?;
    let id = group.strip_prefix("/autogroup-")?.parse().ok()?;
    let nice = rest
        .trim()
        .strip_prefix("nice ")
        .and_then(|n| n.trim().parse().ok());
    Some((id, nice))
}

/// The value of a `Key:\tvalue` line of `/proc/<tid>/status`.
pub fn status_value<'a>(status: &'a str, key: &str) -> Option<&'a str> {
    status.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k == key).then(|| v.trim())
    })
}

/// One line of `/proc/<tid>/cgroup`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CgroupLine {
    /// `4:cpu,cpuacct` or `0:` as written (id and controllers).
    pub hierarchy: String,
    /// Controllers (empty for v2).
    pub controllers: Vec<String>,
    /// Path inside the hierarchy.
    pub path: String,
}

impl CgroupLine {
    /// True for the v2 unified hierarchy line (`0::/path`).
    pub fn is_unified(&self) -> bool {
        self.hierarchy == "0:" && self.controllers.is_empty()
    }
}

/// Parses `/proc/<tid>/cgroup`; malformed lines are returned in the second vector.
pub fn parse_cgroup_file(text: &str) -> (Vec<CgroupLine>, Vec<String>) {
    let mut good = Vec::new();
    let mut bad = Vec::new();
    for line in text.lines().filter(|l| !l.is_empty()) {
        let mut it = line.splitn(3, ':');
        match (it.next(), it.next(), it.next()) {
            (Some(id), Some(ctl), Some(path)) => good.push(CgroupLine {
                hierarchy: format!("{id}:{ctl}"),
                controllers: ctl
                    .split(',')
                    .filter(|c| !c.is_empty())
                    .map(str::to_string)
                    .collect(),
                path: path.to_string(),
            }),
            _ => bad.push(line.to_string()),
        }
    }
    (good, bad)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn autogroup_files() {
        assert_eq!(
            parse_autogroup("/autogroup-197 nice 0\n"),
            Some((197, Some(0)))
        );
        assert_eq!(parse_autogroup("/autogroup-5 nice -3"), Some((5, Some(-3))));
        assert_eq!(parse_autogroup(""), Some((0, None)));
        assert_eq!(parse_autogroup("garbage"), None);
    }

    #[test]
    fn stat_with_parentheses_in_comm() {
        // A real /proc/<pid>/stat line of this VM (kworker/R-rcu_gp, nice -20), with its comm
        // changed to contain ") (" to check the last-')' rule.
        let line = "4 (kworker/R-rcu_gp) (x)) I 2 0 0 0 -1 69238880 0 0 0 0 0 0 0 0 0 -20 1 0 23 \
                    0 0 18446744073709551615 0 0 0 0 0 0 0 2147483647 0 1 0 0 17 0 0 0 0 0 0 0 \
                    0 0 0 0 0 0 0";
        let s = parse_stat(line).unwrap();
        assert_eq!(s.tid, 4);
        assert_eq!(s.comm, "kworker/R-rcu_gp) (x)");
        assert_eq!(s.priority, Some(0));
        assert_eq!(s.nice, Some(-20));
        assert_eq!(s.rt_priority, Some(0));
        assert_eq!(s.policy, Some(0));
        assert!(parse_stat("garbage").is_none());
    }

    #[test]
    fn stat_of_an_rt_task() {
        // migration/0 on this 6.18 VM: SCHED_FIFO, rt_priority 99, priority -100.
        let line = "18 (migration/0) S 2 0 0 0 -1 69238848 0 0 0 0 0 8 0 0 -100 0 1 0 23 0 0 \
                    18446744073709551615 0 0 0 0 0 0 0 2147483647 0 1 0 0 17 0 99 1 0 0 0 0 0 0 \
                    0 0 0 0 0";
        let s = parse_stat(line).unwrap();
        assert_eq!(s.priority, Some(-100));
        assert_eq!(s.nice, Some(0));
        assert_eq!(s.rt_priority, Some(99));
        assert_eq!(s.policy, Some(1));
        assert_eq!(policy_name(1), "SCHED_FIFO");
    }

    #[test]
    fn status_and_cgroup() {
        let status = "Name:\tbash\nTgid:\t812\nPid:\t815\nCpus_allowed_list:\t0-1\n";
        assert_eq!(status_value(status, "Tgid"), Some("812"));
        assert_eq!(status_value(status, "Cpus_allowed_list"), Some("0-1"));
        assert_eq!(status_value(status, "Nope"), None);
        // /proc/self/cgroup of this VM (cgroup v1 + an empty v2 line), plus a bad line.
        let (good, bad) = parse_cgroup_file("4:memory:/process_api/ca9d\n1:cpu:/\n0::/\nbad\n");
        assert_eq!(good.len(), 3);
        assert_eq!(good[1].controllers, vec!["cpu"]);
        assert_eq!(good[1].hierarchy, "1:cpu");
        assert!(good[2].is_unified());
        assert_eq!(bad, vec!["bad"]);
    }
}
