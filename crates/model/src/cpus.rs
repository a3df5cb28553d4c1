//! CPU lists as the kernel and perf print them (`0-3,6`), and which CPUs a recording covers.
//!
//! One parser for every list: `--cpus`/`--cpu` options, `/proc/PID/status` affinity,
//! `cpus_online`, perf's `-C` argument.

use crate::Cpu;

/// Parses a CPU list (`0-3,6`, spaces allowed around the parts) into sorted, deduplicated
/// CPU numbers. Errors on an empty list, a non-number, a reversed range or a range of more
/// than 65 536 CPUs (corrupt input, not a machine).
pub fn parse_cpu_list(list: &str) -> Result<Vec<Cpu>, String> {
    let mut cpus = Vec::new();
    for part in list
        .trim()
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        let parse = |s: &str| {
            s.trim()
                .parse::<Cpu>()
                .map_err(|_| format!("bad CPU number {s:?} in CPU list {list:?}"))
        };
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b) = (parse(a)?, parse(b)?);
                if a > b || b - a > 65536 {
                    return Err(format!("bad CPU range {part:?} in CPU list {list:?}"));
                }
                cpus.extend(a..=b);
            }
            None => cpus.push(parse(part)?),
        }
    }
    if cpus.is_empty() {
        return Err(format!("empty CPU list {list:?}"));
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// The CPUs a recording holds events of: every CPU, or only some (perf's `-C`, `stallscope
/// record --cpus`, a trace.dat whose buffer of a CPU is empty). A task on a CPU outside it
/// is in no known state: the trace cannot show it waiting, running or idle there.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum CpuCoverage {
    /// Every CPU (or nothing says otherwise).
    #[default]
    All,
    /// These CPUs only (sorted, deduplicated).
    Only(Vec<Cpu>),
}

impl CpuCoverage {
    /// Whether events of `cpu` are recorded.
    #[inline]
    pub fn covers(&self, cpu: Cpu) -> bool {
        match self {
            CpuCoverage::All => true,
            CpuCoverage::Only(cpus) => cpus.binary_search(&cpu).is_ok(),
        }
    }

    /// The coverage of several inputs merged into one timeline: a CPU is covered when any
    /// input covers it.
    pub fn union<'a>(coverages: impl IntoIterator<Item = &'a CpuCoverage>) -> CpuCoverage {
        let mut cpus = Vec::new();
        let mut any = false;
        for c in coverages {
            any = true;
            match c {
                CpuCoverage::All => return CpuCoverage::All,
                CpuCoverage::Only(v) => cpus.extend_from_slice(v),
            }
        }
        if !any {
            return CpuCoverage::All;
        }
        cpus.sort_unstable();
        cpus.dedup();
        CpuCoverage::Only(cpus)
    }

    /// The covered CPUs as a kernel CPU list (`0-3,6`); `None` for every CPU.
    pub fn list_text(&self) -> Option<String> {
        let CpuCoverage::Only(cpus) = self else {
            return None;
        };
        let mut parts: Vec<String> = Vec::new();
        let mut k = 0;
        while k < cpus.len() {
            let start = cpus[k];
            let mut end = start;
            while k + 1 < cpus.len() && cpus[k + 1] == end + 1 {
                k += 1;
                end = cpus[k];
            }
            parts.push(match start == end {
                true => start.to_string(),
                false => format!("{start}-{end}"),
            });
            k += 1;
        }
        Some(parts.join(","))
    }
}

/// Short options of `perf record` that take a value (`-e EVENT`, `-esched:*`): what the
/// command-line walk of [`PerfRecordOptions`] takes with them.
const PERF_SHORT_WITH_VALUE: &str = "eFoptcmCGurDjk";
/// Long options of `perf record` that take their value in the next word when written
/// without `=`.
const PERF_LONG_WITH_VALUE: &[&str] = &[
    "--event",
    "--freq",
    "--output",
    "--pid",
    "--tid",
    "--count",
    "--mmap-pages",
    "--cpu",
    "--cgroup",
    "--uid",
    "--realtime",
    "--delay",
    "--branch-filter",
    "--clockid",
    "--call-graph",
    "--filter",
    "--affinity",
    "--max-size",
    "--switch-output-event",
];

/// A perf command line's own options (`perf [SUBCOMMAND] record OPTIONS [--] [WORKLOAD]`), as
/// perf's option parser reads them: the walk starts after `record` and stops at the workload
/// (`--` or the first word that is neither an option nor an option's value), so `perf sched
/// record stress-ng --cpu 4` has no `--cpu`. Each option comes with its value: `-C 1`, `-C1`,
/// `--cpu=1` and `--cpu 1` alike; bundled short flags (`-ag`) are split, and a short option
/// taking a value takes the rest of its word (`-esched:*`).
struct PerfRecordOptions<'a> {
    /// `perf record` itself (the word before `record` is perf), not `perf sched record` and
    /// the like, which add their own options.
    plain: bool,
    /// `(name, value)`: `-C` or `--cpu` as written, the value when it takes one.
    options: Vec<(String, Option<&'a str>)>,
    /// A workload command follows the options.
    workload: bool,
}

impl<'a> PerfRecordOptions<'a> {
    fn of(cmdline: &'a str) -> PerfRecordOptions<'a> {
        let words: Vec<&str> = cmdline.split_whitespace().collect();
        let at = words.iter().position(|&w| w == "record");
        let plain = at.is_some_and(|k| {
            k > 0
                && words[k - 1]
                    .rsplit('/')
                    .next()
                    .is_some_and(|w| w.starts_with("perf"))
        });
        let mut out = PerfRecordOptions {
            plain,
            options: Vec::new(),
            workload: false,
        };
        let mut rest = words[at.map_or(0, |k| k + 1)..].iter().copied();
        while let Some(w) = rest.next() {
            if w == "--" {
                out.workload = rest.next().is_some();
                break;
            }
            if !w.starts_with('-') || w == "-" {
                out.workload = true;
                break;
            }
            if let Some(long) = w.strip_prefix("--") {
                let (name, value) = match long.split_once('=') {
                    Some((n, v)) => (format!("--{n}"), Some(v)),
                    None if PERF_LONG_WITH_VALUE.contains(&w) => (w.to_string(), rest.next()),
                    None => (w.to_string(), None),
                };
                out.options.push((name, value));
                continue;
            }
            // short options, possibly bundled (`-ag`); one taking a value takes the rest of
            // its word or the next word
            for (i, c) in w.char_indices().skip(1) {
                let name = format!("-{c}");
                if !PERF_SHORT_WITH_VALUE.contains(c) {
                    out.options.push((name, None));
                    continue;
                }
                let attached = &w[i + c.len_utf8()..];
                let value = match attached.is_empty() {
                    true => rest.next(),
                    false => Some(attached),
                };
                out.options.push((name, value));
                break;
            }
        }
        out
    }

    fn has(&self, names: &[&str]) -> bool {
        self.options
            .iter()
            .any(|(n, _)| names.contains(&n.as_str()))
    }

    fn value(&self, names: &[&str]) -> Option<&'a str> {
        self.options
            .iter()
            .find(|(n, _)| names.contains(&n.as_str()))
            .and_then(|(_, v)| *v)
    }
}

/// The CPU list of a perf command line's `-C`/`--cpu` option (`perf record -C 1 …`,
/// `perf sched record -C 0-3 …`, `--cpu=2`, `-C1`), when it has one; perf's options only
/// ([`PerfRecordOptions`]), so `perf sched record stress-ng --cpu 4` covers every CPU.
pub fn perf_cmdline_cpus(cmdline: &str) -> Option<Vec<Cpu>> {
    PerfRecordOptions::of(cmdline)
        .value(&["-C", "--cpu"])
        .and_then(|list| parse_cpu_list(list).ok())
}

/// Which tasks a recording holds the events of: every task, or only those of a per-task
/// recording — `perf record -- COMMAND` (or `-p`/`-t`/`-u`) without `-a` or `-C`: perf counts
/// an event only while one of its target tasks is current, so a switch *to* another task, or
/// from idle, is not recorded, nor anything that task does. The other tasks appear only as
/// the subjects of the recorded tasks' records (woken, switched in).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum TaskCoverage {
    /// Every task (a system-wide or per-CPU recording, or nothing says otherwise).
    #[default]
    All,
    /// Only the recorded command's tasks (and their children) or perf's target tasks: the
    /// tasks whose context records show.
    Targets,
}

/// Whether a perf command line made a per-task recording ([`TaskCoverage::Targets`]): plain
/// `perf record` (not `perf sched record` and the like, which record every CPU) with a
/// workload or `-p`/`--pid`, `-t`/`--tid`, `-u`/`--uid`, and without `-a`/`--all-cpus` or
/// `-C`/`--cpu` ([`PerfRecordOptions`]). `perf record` with neither records every CPU.
pub fn perf_cmdline_task_coverage(cmdline: &str) -> TaskCoverage {
    let o = PerfRecordOptions::of(cmdline);
    let targets = o.workload || o.has(&["-p", "--pid", "-t", "--tid", "-u", "--uid"]);
    match o.plain && targets && !o.has(&["-a", "--all-cpus", "-C", "--cpu"]) {
        true => TaskCoverage::Targets,
        false => TaskCoverage::All,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_task_perf_recordings_are_told_from_system_wide_ones() {
        let c = perf_cmdline_task_coverage;
        let t = TaskCoverage::Targets;
        let all = TaskCoverage::All;
        // the way issue #31's sched:* benchmark file was recorded
        assert_eq!(
            c("/usr/bin/perf record -e sched:* -o f.tmp -- perf bench sched pipe -l 1000000"),
            t
        );
        assert_eq!(c("perf record -g ./a.out"), t);
        assert_eq!(c("perf record -e sched:sched_switch -p 1234"), t);
        assert_eq!(c("perf record --pid=1234 -g"), t);
        assert_eq!(c("perf record -p1234"), t);
        assert_eq!(c("perf record -e sched:* -a -- sleep 1"), all);
        assert_eq!(c("perf record -ag -- sleep 1"), all);
        assert_eq!(c("perf record -C 1 -e sched:* sleep 2"), all);
        assert_eq!(c("perf record -C1 sleep 2"), all);
        assert_eq!(c("perf record --all-cpus -- sleep 1"), all);
        // no workload and no target: perf records every CPU
        assert_eq!(c("perf record -e sched:*"), all);
        // perf sched record passes -a itself
        assert_eq!(c("perf sched record -- sleep 1"), all);
        assert_eq!(c("perf sched record stress-ng --cpu 4"), all);
        // an option's value is not the workload
        assert_eq!(c("perf record -e sched:* -o out -a"), all);
        assert_eq!(c("trace-cmd record -e sched sleep 1"), all);
    }

    #[test]
    fn lists_parse_sorted_and_deduplicated() {
        assert_eq!(parse_cpu_list("0-3,6"), Ok(vec![0, 1, 2, 3, 6]));
        assert_eq!(parse_cpu_list(" 6, 1-2 ,2"), Ok(vec![1, 2, 6]));
        assert!(parse_cpu_list("").is_err());
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("x").is_err());
        assert!(parse_cpu_list("0-4000000000").is_err());
    }

    #[test]
    fn coverage_covers_unions_and_prints() {
        let one = CpuCoverage::Only(vec![1]);
        assert!(one.covers(1) && !one.covers(0));
        assert!(CpuCoverage::All.covers(7));
        let both = CpuCoverage::union([&one, &CpuCoverage::Only(vec![0, 3])]);
        assert_eq!(both, CpuCoverage::Only(vec![0, 1, 3]));
        assert_eq!(both.list_text().as_deref(), Some("0-1,3"));
        assert_eq!(
            CpuCoverage::union([&one, &CpuCoverage::All]),
            CpuCoverage::All
        );
        assert_eq!(CpuCoverage::union([]), CpuCoverage::All);
    }

    #[test]
    fn perf_command_lines_name_their_cpus() {
        let c = |s| perf_cmdline_cpus(s);
        assert_eq!(c("perf record -C 1 -e sched:* -a"), Some(vec![1]));
        assert_eq!(
            c("perf sched record --cpu=0-1,3 sleep 1"),
            Some(vec![0, 1, 3])
        );
        assert_eq!(c("perf record -C2 -g"), Some(vec![2]));
        assert_eq!(c("perf record -a -- taskset -C 1 x"), None);
        assert_eq!(c("perf sched record stress-ng --cpu 4"), None);
        assert_eq!(
            c("/usr/bin/perf record -e sched:* -o f -C 1 sleep 1"),
            Some(vec![1])
        );
        assert_eq!(c("perf record -e -C -a"), None); // -C is -e's value
        assert_eq!(c("perf record -a -g"), None);
    }
}
