//! One-screen text summary of a [`SystemContext`] for `stallscope info`.
//!
//! ```text
//! kernel: Linux vm 6.18.44 #1 SMP PREEMPT_DYNAMIC … x86_64
//! cpus: 2 possible, online 0-1; preemption full; HZ 250
//! sched knobs (7): sched_autogroup_enabled=1 sched_rr_timeslice_ms=100 …
//! tasks described: 143 (2 not SCHED_OTHER, 3 with nice != 0, 1 with restricted affinity)
//!   non-default task: 18 migration/0 SCHED_FIFO rt 99 …
//! cgroups with non-default CPU controls: cpu:/batch shares=256; 0::/web weight=10000 max=50000 100000
//! block: vda mq-deadline nr_requests=256; loop0 none nr_requests=128
//! ```
//! Only deviations from defaults are listed one by one (first 10 of each kind).

use std::collections::BTreeSet;

use stallscope_model::SystemContext;

const MAX_LISTED: usize = 10;

/// Summary lines (no trailing newlines).
pub fn summarize(ctx: &SystemContext) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(u) = &ctx.uname {
        out.push(format!("kernel: {u}"));
    }
    let mut cpu = Vec::new();
    if let Some(n) = ctx.nr_cpus {
        cpu.push(format!("{n} possible"));
    }
    if let Some(on) = &ctx.cpus_online {
        cpu.push(format!("online {on}"));
    }
    let mut line = format!(
        "cpus: {}",
        if cpu.is_empty() {
            "unknown".into()
        } else {
            cpu.join(", ")
        }
    );
    line.push_str(&format!(
        "; preemption {}; HZ {}",
        ctx.preemption.as_deref().unwrap_or("unknown"),
        ctx.hz.map_or("unknown".to_string(), |h| h.to_string())
    ));
    out.push(line);
    if !ctx.sched_knobs.is_empty() {
        let knobs: Vec<String> = ctx
            .sched_knobs
            .iter()
            .filter(|(_, v)| !v.contains('\n') && v.len() <= 40)
            .map(|(k, v)| format!("{}={v}", k.rsplit('/').next().unwrap_or(k)))
            .collect();
        out.push(format!(
            "sched knobs ({}): {}",
            ctx.sched_knobs.len(),
            knobs.join(" ")
        ));
    }
    let non_other: Vec<_> = ctx
        .tasks
        .iter()
        .filter(|t| t.policy.as_deref().is_some_and(|p| p != "SCHED_OTHER"))
        .collect();
    let niced = ctx
        .tasks
        .iter()
        .filter(|t| t.nice.is_some_and(|n| n != 0))
        .count();
    let online = ctx.cpus_online.as_deref();
    let pinned = ctx
        .tasks
        .iter()
        .filter(|t| t.cpus_allowed.is_some() && t.cpus_allowed.as_deref() != online)
        .count();
    if !ctx.tasks.is_empty() {
        out.push(format!(
            "tasks described: {} ({} not SCHED_OTHER, {} with nice != 0, {} with affinity other than the online CPUs)",
            ctx.tasks.len(),
            non_other.len(),
            niced,
            pinned
        ));
        let interesting = ctx.tasks.iter().filter(|t| {
            let kernel_thread_rt = t.policy.as_deref() == Some("SCHED_FIFO") && t.tgid == 2;
            !kernel_thread_rt
                && (t.policy.as_deref().is_some_and(|p| p != "SCHED_OTHER")
                    || t.nice.is_some_and(|n| n != 0))
        });
        for t in interesting.take(MAX_LISTED) {
            out.push(format!(
                "  non-default task: {} {} {} nice {} rt {} cpus {}",
                t.pid,
                t.comm,
                t.policy.as_deref().unwrap_or("?"),
                t.nice.map_or("?".into(), |n| n.to_string()),
                t.rt_priority.map_or("?".into(), |n| n.to_string()),
                t.cpus_allowed.as_deref().unwrap_or("?")
            ));
        }
    }
    let mut groups = BTreeSet::new();
    for c in ctx.tasks.iter().flat_map(|t| &t.cgroups) {
        let weight_default = c.cpu_weight.is_none_or(|w| w == 100);
        let shares_default = c.cpu_shares.is_none_or(|s| s == 1024);
        let max_default = c
            .cpu_max
            .as_deref()
            .is_none_or(|m| m.starts_with("max ") || m.starts_with("-1 "));
        if weight_default && shares_default && max_default {
            continue; // default controls: nothing to explain
        }
        let mut s = format!("{}:{}", c.hierarchy, c.path);
        if let Some(w) = c.cpu_weight {
            s.push_str(&format!(" weight={w}"));
        }
        if let Some(sh) = c.cpu_shares {
            s.push_str(&format!(" shares={sh}"));
        }
        if let Some(m) = &c.cpu_max {
            s.push_str(&format!(" max={m}"));
        }
        groups.insert(s);
    }
    if !groups.is_empty() {
        let n = groups.len();
        let listed: Vec<String> = groups.into_iter().take(MAX_LISTED).collect();
        out.push(format!(
            "cgroups with non-default CPU controls ({n}): {}",
            listed.join("; ")
        ));
    }
    if !ctx.block_devices.is_empty() {
        let devs: Vec<String> = ctx
            .block_devices
            .iter()
            .map(|d| {
                let mut s = format!("{} {}", d.name, d.scheduler.as_deref().unwrap_or("?"));
                if let Some(n) = d.nr_requests {
                    s.push_str(&format!(" nr_requests={n}"));
                }
                if let Some(q) = d.queue_depth {
                    s.push_str(&format!(" queue_depth={q}"));
                }
                s
            })
            .collect();
        out.push(format!("block: {}", devs.join("; ")));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use stallscope_model::{BlockDeviceContext, CgroupContext, TaskContext};

    #[test]
    fn lists_only_deviations() {
        let mut ctx = SystemContext {
            nr_cpus: Some(2),
            cpus_online: Some("0-1".into()),
            hz: Some(250),
            ..Default::default()
        };
        let cg = |w: u64| CgroupContext {
            hierarchy: "0:".into(),
            path: format!("/g{w}"),
            cpu_weight: Some(w),
            cpu_max: Some("max 100000".into()),
            ..Default::default()
        };
        ctx.tasks = vec![
            TaskContext {
                pid: 10,
                tgid: 10,
                comm: "normal".into(),
                policy: Some("SCHED_OTHER".into()),
                nice: Some(0),
                cgroups: vec![cg(100)],
                cpus_allowed: Some("0-1".into()),
                ..Default::default()
            },
            TaskContext {
                pid: 11,
                tgid: 11,
                comm: "hog".into(),
                policy: Some("SCHED_BATCH".into()),
                nice: Some(5),
                cgroups: vec![cg(10000)],
                cpus_allowed: Some("1".into()),
                ..Default::default()
            },
        ];
        ctx.block_devices = vec![BlockDeviceContext {
            name: "vda".into(),
            scheduler: Some("mq-deadline".into()),
            nr_requests: Some(256),
            ..Default::default()
        }];
        let lines = summarize(&ctx);
        let text = lines.join("\n");
        assert!(
            text.contains("cpus: 2 possible, online 0-1; preemption unknown; HZ 250"),
            "{text}"
        );
        assert!(
            text.contains(
                "tasks described: 2 (1 not SCHED_OTHER, 1 with nice != 0, 1 with affinity"
            ),
            "{text}"
        );
        assert!(
            text.contains("non-default task: 11 hog SCHED_BATCH nice 5"),
            "{text}"
        );
        assert!(!text.contains("non-default task: 10"), "{text}");
        assert!(
            text.contains("(1): 0::/g10000 weight=10000 max=max 100000"),
            "{text}"
        );
        assert!(
            text.contains("block: vda mq-deadline nr_requests=256"),
            "{text}"
        );
    }
}
