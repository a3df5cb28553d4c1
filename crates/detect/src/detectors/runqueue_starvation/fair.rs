//! The fair-share model of `runqueue-starvation`: what a waiting task was entitled to, and
//! why it did not get it.
//!
//! **Entitlement.** Each CPU keeps a fair-share clock (the virtual time of an ideal fair
//! scheduler, GPS): while the CPU's runnable set (the running task and every task queued
//! there) has total effective weight `W`, the clock advances by `dt / W`. A task of weight `w`
//! queued on that CPU from `a` to `b` was *owed* `w × (V(b) − V(a))` ns of CPU time: what
//! fair sharing of that set would have given it. A fair-class scheduler (CFS, EEVDF) keeps
//! a queued task's lag — owed minus received — within about one slice, so a task that waits
//! while owed several slices was treated unfairly *by those weights*; one that waits long
//! while owed little was sharing too little CPU with too many tasks (saturation).
//!
//! Three clocks run side by side, one per weighting of the same set: *equal* (every fair
//! task 1024), *nice* (the nice weights alone) and *effective* (nice and cgroup weights).
//! Their owed amounts say what the weights did: a victim owed far more under equal weights
//! than under nice weights lost its CPU to nice; one owed far more under nice than under
//! effective weights lost it to cgroup weights; one owed little under effective weights
//! shared a saturated CPU fairly; one owed much under effective weights was treated
//! unfairly by every weight the trace knows.
//!
//! **Weights.** Effective weight = the nice weight of the task's kernel priority
//! (`sched_prio_to_weight`) × its cgroup factor: the product, over the cgroups of its recorded
//! path with a CPU weight, of `weight / 1024` (v1 `cpu.shares` as is, v2 `cpu.weight` `w` as
//! `1024·w/100`). That is the task's static hierarchical share when it is the one runnable
//! member of its groups on the CPU (the usual case for a hog in its own group); siblings of
//! one group split the group's weight, which this static model does not see. Real-time and
//! deadline tasks are outside the fair class: while one runs the clock stands still (no
//! fair task is owed anything), and a wait mostly spent behind one is a higher-class wait.
//!
//! **Autogroup.** With `sched_autogroup_enabled` (recorded in the context) every session is a
//! task group of its own under the root group, weighted by its autogroup nice (1024 at nice
//! 0), for the tasks whose CPU cgroup is the root one (`kernel/sched/autogroup.c`); the init
//! session and kernel threads stay in the root group. The effective weighting then is two
//! levels: the CPU's root clock advances by `dt / W` where `W` sums the root-level tasks'
//! weights and the weight of each autogroup with tasks in the set, and each such group has
//! a clock of its own advancing by `dV × G / W_g` (`G` its weight, `W_g` the nice weights of
//! its tasks in the set): a grouped task of nice weight `w` is owed `w × ΔV_g`. Four equal
//! tasks of one session beside one task of another on a CPU get an eighth each and the
//! lone task half — what the kernel gives them, not starvation. A group's weight is split
//! over the CPUs it has runnable tasks on, in proportion (the kernel's `calc_group_shares`,
//! here with the runnable nice weights in place of PELT's averages, updated when a CPU's
//! set changes): a session busy on another CPU weighs less on this one.
//!
//! **Slice.** The fair bound is `fair_lag_slices` × the effective slice: the larger of the
//! EEVDF base slice and the tick. The base slice is the recorded `base_slice_ns` knob, else
//! the kernel's default rule, 0.75 ms × (1 + log2(min(CPUs, 8))); the tick is 1 s / `HZ`
//! when recorded, else 4 ms (HZ=250): a running task's expired slice is noticed at a tick.

use stallscope_model::{SystemContext, Ts};

use super::super::sched::{nice_of_prio, weight_of_nice};

/// Fixed-point shift of the fair-share clock (`dt << SHIFT / W`).
const SHIFT: u32 = 16;

/// The nice weight of the default priority (nice 0).
pub const NICE_0: u64 = 1024;

/// Amounts in the three weightings: equal, nice, effective (see the module docs).
pub type Trio = [u64; 3];

/// Index of the equal weighting in a [`Trio`].
pub const EQUAL: usize = 0;
/// Index of the nice weighting in a [`Trio`].
pub const NICE: usize = 1;
/// Index of the effective (nice × cgroup) weighting in a [`Trio`].
pub const EFFECTIVE: usize = 2;

/// A task's place in the fair-share model.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// Fair class (CFS / EEVDF) with its nice weight and effective weight (≥ 1).
    Fair {
        /// Nice weight.
        nice: u64,
        /// Nice weight × cgroup factor.
        effective: u64,
    },
    /// Real-time or deadline (kernel priority below 100): outside the fair share.
    Rt(i32),
}

impl Class {
    /// The class of a task of kernel priority `prio` (−1: unknown, taken as nice 0) whose
    /// cgroup factor is `factor_x1024` (1024 = no cgroup weight).
    pub fn of(prio: i32, factor_x1024: u64) -> Class {
        if (0..100).contains(&prio) {
            return Class::Rt(prio);
        }
        let nice_w = nice_of_prio(prio)
            .and_then(weight_of_nice)
            .unwrap_or(NICE_0);
        Class::Fair {
            nice: nice_w,
            effective: (nice_w.saturating_mul(factor_x1024) / 1024).max(1),
        }
    }

    /// Weights in the fair set, per weighting (0 for real-time).
    #[inline]
    pub fn weights(self) -> Trio {
        match self {
            Class::Fair { nice, effective } => [NICE_0, nice, effective],
            Class::Rt(_) => [0; 3],
        }
    }
}

/// A CPU's fair-share clock. Lazy: a change of the set is kept pending until a later time
/// shows it was not undone at the same instant (a switch moves one task out of the queue and
/// another in: the total is usually the same again), and the clock is only advanced when
/// the total really changes; readings are taken as [`Reading`]s whose value is computed only
/// when a wait turns out to matter.
#[derive(Clone, Copy, Debug, Default)]
pub struct FairClock {
    /// The clock's value at `last`, and the set in effect since then.
    at: Reading,
    /// A change at a time not yet passed: (time, total, a real-time task runs).
    pending: Option<(Ts, Trio, bool)>,
}

/// The clock's value at `last` and the set in effect from then on: the value at any later
/// time before the next change is [`Reading::value_at`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reading {
    last: Ts,
    v: Trio,
    /// Total weight of the runnable fair set, per weighting.
    total: Trio,
    /// A real-time task runs: the clock stands still.
    rt_running: bool,
}

impl Reading {
    /// The clock's value at `ts` (at or after `last`, before the next change).
    pub fn value_at(&self, ts: Ts) -> Trio {
        let mut v = self.v;
        if self.rt_running {
            return v;
        }
        let scaled = ts.saturating_sub(self.last).min(1 << 46) << SHIFT;
        if scaled == 0 {
            return v;
        }
        let mut done = (0, 0); // (total, increment) of the last division: weightings agree
        for (value, &total) in v.iter_mut().zip(&self.total) {
            if total == 0 {
                continue;
            }
            if done.0 != total {
                done = (total, scaled / total);
            }
            *value = value.wrapping_add(done.1);
        }
        v
    }
}

impl FairClock {
    /// The set becomes `total` (`rt_running`: a real-time task runs) at `ts`.
    #[inline]
    pub fn set(&mut self, ts: Ts, total: Trio, rt_running: bool) {
        if let Some((at, t, rt)) = self.pending {
            if at < ts {
                self.apply(at, t, rt);
            }
        }
        self.pending = Some((ts, total, rt_running));
    }

    /// Applies the change at `ts` (the set in effect until then is `self.at`'s).
    #[inline]
    fn apply(&mut self, ts: Ts, total: Trio, rt_running: bool) {
        if (total, rt_running) == (self.at.total, self.at.rt_running) {
            return; // the same set: the clock runs on at the same rate
        }
        let v = self.at.value_at(ts.max(self.at.last));
        self.at = Reading {
            last: ts.max(self.at.last),
            v,
            total,
            rt_running,
        };
    }

    /// A reading valid at `ts` (changes pending from earlier times are applied; one at `ts`
    /// itself only starts after it).
    #[inline]
    pub fn reading(&mut self, ts: Ts) -> Reading {
        if let Some((at, t, rt)) = self.pending {
            if at < ts {
                self.apply(at, t, rt);
                self.pending = None;
            }
        }
        self.at
    }
}

/// Ns of CPU a task of weights `w` was owed between two readings of one clock, per
/// weighting.
pub fn owed(w: Trio, from: Trio, to: Trio) -> Trio {
    [
        owed_one(w[0], from[0], to[0]),
        owed_one(w[1], from[1], to[1]),
        owed_one(w[2], from[2], to[2]),
    ]
}

/// Ns of CPU a task of weight `w` was owed between two values of one clock. A clock only
/// runs forward and never gets near wrapping (10⁴ s at weight 1 is under 2⁶⁰): a `to`
/// behind `from` is a reading of another clock, not a time owed — nothing is taken from it
/// (it once gave entitlements of 2⁵⁸ ns).
#[inline]
pub fn owed_one(w: u64, from: u64, to: u64) -> u64 {
    let dv = to.wrapping_sub(from);
    if dv >= 1 << 62 {
        return 0;
    }
    u64::try_from((u128::from(w) * u128::from(dv)) >> SHIFT).unwrap_or(u64::MAX)
}

/// The autogroups of one CPU's runnable set, each with its clock (module docs: Autogroup).
#[derive(Clone, Debug, Default)]
pub struct GroupClocks {
    groups: Vec<GroupClock>,
}

/// One autogroup's clock on one CPU.
#[derive(Clone, Copy, Debug)]
struct GroupClock {
    id: u64,
    /// The group's weight (its autogroup nice's).
    weight: u64,
    /// Nice weights of its tasks in the set (0: none there).
    members: u64,
    /// The clock's value when the root clock read `root_at`.
    v: u64,
    root_at: u64,
}

impl GroupClock {
    /// The clock's value when the root clock reads `root_now`. A reading behind `root_at`
    /// (the set changed at a time before the latest one seen: a repaired run's start) adds
    /// nothing: a clock never runs back.
    fn value(&self, root_now: u64) -> u64 {
        if self.members == 0 || root_now <= self.root_at {
            return self.v;
        }
        let d = u128::from(root_now - self.root_at);
        let inc = d * u128::from(self.weight) / u128::from(self.members);
        self.v.wrapping_add(inc as u64)
    }
}

impl GroupClocks {
    /// Nice weights of group `id`'s tasks in the set (0 when none).
    pub fn members_of(&self, id: u64) -> u64 {
        self.groups
            .iter()
            .find(|g| g.id == id)
            .map_or(0, |g| g.members)
    }

    /// The set's grouped tasks are now `members` (each `(group id, the group's weight on
    /// this CPU, the task's nice weight)`), at root clock value `root_now`: each group's
    /// clock is advanced at its old rate and runs at its new one from here. Returns the sum
    /// of the weights of the groups in the set (their part of the root level's total).
    pub fn update(&mut self, root_now: u64, members: &[(u64, u64, u64)]) -> u64 {
        for &(id, _, _) in members {
            if !self.groups.iter().any(|g| g.id == id) {
                self.groups.push(GroupClock {
                    id,
                    weight: 1,
                    members: 0,
                    v: 0,
                    root_at: root_now,
                });
            }
        }
        let mut present = 0u64;
        for g in &mut self.groups {
            let mut now = 0u64;
            let mut weight = g.weight;
            for m in members.iter().filter(|m| m.0 == g.id) {
                now = now.saturating_add(m.2);
                weight = m.1.max(1);
            }
            if (now, weight) != (g.members, g.weight) {
                g.v = g.value(root_now);
                g.root_at = g.root_at.max(root_now);
                g.members = now;
                g.weight = weight;
            }
            if now > 0 {
                present = present.saturating_add(g.weight);
            }
        }
        if self.groups.len() > 16 {
            self.groups.retain(|g| g.members > 0);
        }
        present
    }

    /// `(group id, nice weights of its tasks in the set)` of every group kept.
    pub fn loads(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.groups.iter().map(|g| (g.id, g.members))
    }

    /// Group `id`'s clock value when the root clock reads `root_now` (0 for a group not in
    /// the set: only its members read it).
    pub fn value(&self, id: u64, root_now: u64) -> u64 {
        self.groups
            .iter()
            .find(|g| g.id == id)
            .map_or(0, |g| g.value(root_now))
    }
}

/// `a − b` per weighting (saturating).
pub fn sub(a: Trio, b: Trio) -> Trio {
    [
        a[0].saturating_sub(b[0]),
        a[1].saturating_sub(b[1]),
        a[2].saturating_sub(b[2]),
    ]
}

/// `a + b` per weighting.
pub fn add(a: Trio, b: Trio) -> Trio {
    [
        a[0].saturating_add(b[0]),
        a[1].saturating_add(b[1]),
        a[2].saturating_add(b[2]),
    ]
}

/// The cgroup factor (×1024) of a task from its recorded cgroups: the product of
/// `weight / 1024` over its CPU-controlled cgroups with a weight (v1 `cpu.shares`, v2
/// `cpu.weight` scaled to shares). The recorded path is the task's own group; its ancestors'
/// weights are not recorded, so a nested group counts with its own weight only.
pub fn cgroup_factor(cgroups: &[stallscope_model::CgroupContext]) -> Option<u64> {
    let mut f: u64 = 1024;
    let mut any = false;
    for cg in cgroups {
        if cg.path == "/" || cg.path.is_empty() {
            continue; // the root group has no weight of its own
        }
        let shares = match (cg.cpu_shares, cg.cpu_weight) {
            (Some(s), _) => s,
            (None, Some(w)) => w.saturating_mul(1024) / 100,
            (None, None) => continue,
        };
        any = true;
        f = f.saturating_mul(shares.max(2)) / 1024;
    }
    any.then_some(f.max(1))
}

/// Whether a task's recorded CPU cgroup is the root group (autogroup applies to those
/// tasks only): its v1 `cpu` hierarchy's path, or its v2 path, is `/`; no CPU cgroup
/// recorded counts as the root.
pub fn in_root_cpu_group(cgroups: &[stallscope_model::CgroupContext]) -> bool {
    let cpu_group = cgroups.iter().find(|cg| {
        cg.hierarchy.starts_with("0::")
            || cg
                .hierarchy
                .split(':')
                .nth(1)
                .is_some_and(|c| c.split(',').any(|c| c == "cpu"))
    });
    cpu_group.is_none_or(|cg| cg.path == "/" || cg.path.is_empty())
}

/// A task's recorded cgroup weight, as `path cpu.shares N` / `path cpu.weight N`, if any.
pub fn cgroup_text(cgroups: &[stallscope_model::CgroupContext]) -> Option<String> {
    cgroups
        .iter()
        .find_map(|cg| match (cg.cpu_shares, cg.cpu_weight) {
            (Some(s), _) => Some(format!("{} (cpu.shares {s})", cg.path)),
            (None, Some(w)) => Some(format!("{} (cpu.weight {w})", cg.path)),
            (None, None) => None,
        })
}

/// A task's recorded CFS bandwidth limit (`QUOTA PERIOD` in µs), with its cgroup path,
/// when one is set (v1 quota not −1, v2 `cpu.max` not `max`).
pub fn quota_of(cgroups: &[stallscope_model::CgroupContext]) -> Option<(String, u64, u64)> {
    cgroups.iter().find_map(|cg| {
        let m = cg.cpu_max.as_deref()?;
        let mut it = m.split_whitespace();
        let q = it.next()?.parse::<i64>().ok().filter(|q| *q > 0)?;
        let p = it.next()?.parse::<u64>().ok()?;
        Some((cg.path.clone(), q as u64, p))
    })
}

/// The effective slice (ns) and where it came from, from recorded context or the kernel's
/// default rule for `nr_cpus` CPUs (see the module docs).
pub fn effective_slice(system: Option<&SystemContext>, nr_cpus: u32) -> (u64, String) {
    let knob = system.and_then(|s| {
        s.sched_knobs
            .iter()
            .find(|(k, _)| k.ends_with("base_slice_ns"))
            .and_then(|(_, v)| v.trim().parse::<u64>().ok())
    });
    let (base, base_from) = match knob {
        Some(b) => (b, "recorded base_slice_ns"),
        None => {
            let n = nr_cpus.clamp(1, 8);
            (750_000 * u64::from(1 + n.ilog2()), "default base slice")
        }
    };
    let (tick, tick_from) = match system.and_then(|s| s.hz).filter(|h| *h > 0) {
        Some(hz) => (1_000_000_000 / u64::from(hz), "recorded HZ"),
        None => (4_000_000, "tick assumed at HZ=250"),
    };
    if base >= tick {
        (
            base,
            format!("{base_from} {}", super::super::fmt::dur(base)),
        )
    } else {
        (
            tick,
            format!(
                "tick {} ({tick_from}; {base_from} {})",
                super::super::fmt::dur(tick),
                super::super::fmt::dur(base)
            ),
        )
    }
}

/// The cause concluded for a flagged wait (the JSON `cause.kind` is [`CauseKind::id`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CauseKind {
    /// Real-time or deadline tasks ran most of the wait.
    HigherClass,
    /// The tasks that ran had a far larger nice weight.
    NiceWeight,
    /// Equal nice, but the recorded cgroup weights give the tasks that ran a far larger share.
    CgroupWeight,
    /// Autogroup fairness explains the wait: sessions share the CPU as groups, so a task of
    /// a session with many runnable tasks gets less than one alone in its session.
    Autogroup,
    /// The victim's cgroup has a CFS bandwidth limit (recorded quota), or a real-time victim
    /// waited behind fair tasks (RT bandwidth control: the fair server, RT throttling).
    Throttled,
    /// Interrupt and softirq handlers took at least half of the wait on the victim's CPU
    /// (irq / softirq events recorded).
    InterruptTime,
    /// The victim's recorded affinity kept it on its busy CPU while CPUs it may not use
    /// idled for at least half of the wait.
    Affinity,
    /// Equal effective weights, and the victim was owed more than fair sharing allows.
    NotExplainedByWeights,
    /// Equal nice weights, owed more than fair sharing allows, and no cgroup context recorded.
    ContextNotRecorded,
    /// The CPU idled for most of the wait, or others ran for less than half of it.
    MissingEvents,
    /// Fair sharing of a saturated CPU explains the wait: no per-task finding
    /// (`cpu-saturation` reports it).
    FairShare,
}

impl CauseKind {
    /// Stable id.
    pub fn id(self) -> &'static str {
        match self {
            CauseKind::HigherClass => "higher_class",
            CauseKind::NiceWeight => "nice_weight",
            CauseKind::CgroupWeight => "cgroup_weight",
            CauseKind::Autogroup => "autogroup",
            CauseKind::Throttled => "throttled",
            CauseKind::InterruptTime => "interrupt_time",
            CauseKind::Affinity => "affinity",
            CauseKind::NotExplainedByWeights => "not_explained_by_weights",
            CauseKind::ContextNotRecorded => "context_not_recorded",
            CauseKind::MissingEvents => "missing_events",
            CauseKind::FairShare => "fair_share",
        }
    }
}

/// What the cause of one wait is decided from.
#[derive(Clone, Copy, Debug, Default)]
pub struct WaitFacts {
    /// Length of the wait.
    pub waited: u64,
    /// CPU time the victim was owed during it ([`owed`]), per weighting.
    pub owed: Trio,
    /// The fair bound on `owed` (`fair_lag_slices` × the effective slice).
    pub bound: u64,
    /// What `owed` must reach for a wait no weight explains to be unfair (`unfair_factor` ×
    /// `bound`): clearly more than fair sharing's lag.
    pub unfair: u64,
    /// The victim's nice weight and effective weight (0, 0 for a real-time victim).
    pub victim_nice_w: u64,
    /// See `victim_nice_w`.
    pub victim_eff_w: u64,
    /// The victim's real-time priority, when it is real-time.
    pub victim_rt: Option<i32>,
    /// Time other tasks ran during the wait, all / real-time or deadline tasks of a higher
    /// class than the victim.
    pub ran_ns: u64,
    /// See `ran_ns`.
    pub higher_class_ns: u64,
    /// One task ran at least half of the wait.
    pub majority: bool,
    /// Idle time of the CPU during the wait.
    pub idle_ns: u64,
    /// Recorded switches to idle on the victim's CPU well into the wait (the kernel picks a
    /// queued task before idle: the victim was not queued there, or was throttled).
    pub idle_picks: u64,
    /// The victim's cgroup has a recorded bandwidth limit.
    pub quota: bool,
    /// The trace carries system context with cgroups.
    pub context: bool,
    /// How many times larger a weight must be to explain a wait.
    pub weight_ratio: u64,
    /// Time the victim's CPU spent in interrupt and softirq handlers during the wait.
    pub irq_ns: u64,
    /// The victim's affinity is recorded and leaves out some CPUs.
    pub pinned: bool,
    /// Idle time, summed over the CPUs the victim may not use, during the wait.
    pub other_idle_ns: u64,
    /// The effective weighting has autogroup levels for the victim or the tasks that ran.
    pub autogroup: bool,
}

/// The cause of a flagged wait (see the module docs and `explain runqueue-starvation`).
///
/// A CPU that chose idle while the victim was queued on it contradicts the wait (the kernel
/// picks a queued task before idle): the model lost the task — its migration or its run is
/// not recorded — or a quota throttled it. Such a wait gets no cause that blames what ran
/// (`missing_events`, or `throttled` with a recorded quota); one that fair sharing explains
/// stays unreported.
pub fn decide(f: &WaitFacts) -> CauseKind {
    let cause = decide_from_what_ran(f);
    match cause {
        CauseKind::FairShare | CauseKind::MissingEvents | CauseKind::Throttled => cause,
        _ if f.idle_picks > 0 && f.quota => CauseKind::Throttled,
        _ if f.idle_picks > 0 => CauseKind::MissingEvents,
        _ => cause,
    }
}

/// [`decide`] from what ran and idled during the wait and the weights.
fn decide_from_what_ran(f: &WaitFacts) -> CauseKind {
    if f.higher_class_ns.saturating_mul(2) >= f.waited && f.higher_class_ns > 0 {
        return CauseKind::HigherClass;
    }
    if f.irq_ns > 0 && f.irq_ns.saturating_mul(2) >= f.waited {
        // handlers run in whatever task's context was current: they look like its run time
        return CauseKind::InterruptTime;
    }
    if f.victim_rt.is_some() {
        // a real-time task behind fair tasks: RT bandwidth control (fair server, throttling)
        return CauseKind::Throttled;
    }
    let idle_heavy =
        f.idle_ns.saturating_mul(2) > f.waited || f.ran_ns.saturating_mul(2) < f.waited;
    if f.quota && (idle_heavy || f.owed[EFFECTIVE] >= f.bound) {
        return CauseKind::Throttled;
    }
    if idle_heavy {
        return CauseKind::MissingEvents;
    }

    // the weights explain the wait when they cut what the victim was owed by `weight_ratio`
    let r = f.weight_ratio.max(1);
    let nice_factor = f.owed[EQUAL] / f.owed[NICE].max(1);
    let cgroup_factor = f.owed[NICE] / f.owed[EFFECTIVE].max(1);
    if nice_factor >= r || cgroup_factor >= r {
        return match (cgroup_factor > nice_factor, f.autogroup) {
            (false, _) => CauseKind::NiceWeight,
            (true, false) => CauseKind::CgroupWeight,
            // sessions' groups: a cause only of what nice weights alone would call unfair
            // (a busy session's tasks wait their group's turn: sharing, not starvation)
            (true, true) if f.owed[NICE] >= f.unfair => CauseKind::Autogroup,
            (true, true) => CauseKind::FairShare,
        };
    }
    if f.autogroup && f.owed[EFFECTIVE] < f.unfair && f.owed[NICE] >= f.unfair {
        // unfair by nice weights alone, fair once sessions share the CPU as groups
        return CauseKind::Autogroup;
    }
    if f.pinned && f.other_idle_ns.saturating_mul(2) >= f.waited {
        // CPUs it may not use idled: the balancer could have moved it but for its affinity
        return CauseKind::Affinity;
    }
    if f.owed[EFFECTIVE] < f.unfair.max(f.bound) {
        return CauseKind::FairShare;
    }
    if f.context {
        CauseKind::NotExplainedByWeights
    } else {
        CauseKind::ContextNotRecorded
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stallscope_model::CgroupContext;

    #[test]
    fn clock_gives_each_task_its_weighted_share() {
        // two equal tasks for 10 ms, then the victim alone for 2 ms
        let mut c = FairClock::default();
        let w = Class::of(120, 1024).weights();
        c.set(0, add(w, w), false);
        let a = c.reading(0).value_at(0);
        // a change undone at the same instant changes nothing
        c.set(4_000_000, add(add(w, w), w), false);
        c.set(4_000_000, add(w, w), false);
        let r = c.reading(10_000_000);
        assert_eq!(owed(w, a, r.value_at(10_000_000)), [5_000_000; 3]);
        c.set(10_000_000, w, false);
        let r = c.reading(12_000_000);
        assert_eq!(owed(w, a, r.value_at(12_000_000)), [7_000_000; 3]);
        // a nice −20 hog beside a nice-0 victim: 1024 / 89785 of 100 ms under nice weights,
        // half of it under equal weights
        let mut c = FairClock::default();
        c.set(0, add(w, Class::of(100, 1024).weights()), false);
        let a = c.reading(0).value_at(0);
        let o = owed(w, a, c.reading(100_000_000).value_at(100_000_000));
        assert_eq!(o[EQUAL], 50_000_000);
        assert!((1_140_000..=1_141_000).contains(&o[NICE]), "{o:?}");
        assert_eq!(o[NICE], o[EFFECTIVE]);
        // a real-time runner stops the clock
        let mut c = FairClock::default();
        c.set(0, w, true);
        let a = c.reading(0).value_at(0);
        assert_eq!(
            owed(w, a, c.reading(50_000_000).value_at(50_000_000)),
            [0; 3]
        );
    }

    #[test]
    fn group_clocks_never_run_back() {
        let mut g = GroupClocks::default();
        g.update(1000, &[(7, 1024, 1024)]);
        g.update(2000, &[(7, 1024, 2048)]); // advanced 1000 at 1024/1024
        assert_eq!(g.value(7, 2000), 1000);
        // a change dated before the latest reading (a repaired run's start)
        g.update(1500, &[(7, 1024, 1024)]);
        assert_eq!(g.value(7, 1500), 1000);
        assert_eq!(g.value(7, 2500), 1500);
    }

    #[test]
    fn a_clock_reading_behind_the_start_owes_nothing() {
        assert_eq!(owed_one(1024, 100 << SHIFT, 40 << SHIFT), 0);
        assert_eq!(owed_one(1024, 40 << SHIFT, 100 << SHIFT), 60 * 1024);
    }

    #[test]
    fn classes_and_weights() {
        assert_eq!(Class::of(120, 1024).weights(), [1024, 1024, 1024]);
        assert_eq!(Class::of(100, 1024).weights(), [1024, 88761, 88761]);
        assert_eq!(Class::of(-1, 1024).weights(), [1024; 3]);
        assert_eq!(Class::of(98, 1024), Class::Rt(98));
        assert_eq!(Class::of(120, 262144).weights(), [1024, 1024, 262144]);
        assert_eq!(Class::Rt(5).weights(), [0; 3]);
    }

    #[test]
    fn cgroup_factors_from_v1_and_v2() {
        let v1 = |p: &str, s| CgroupContext {
            hierarchy: "4:cpu,cpuacct".into(),
            path: p.into(),
            cpu_shares: Some(s),
            ..Default::default()
        };
        assert_eq!(cgroup_factor(&[v1("/bigw", 262144)]), Some(262144));
        assert_eq!(cgroup_factor(&[v1("/", 1024)]), None);
        let v2 = CgroupContext {
            hierarchy: "0::".into(),
            path: "/a".into(),
            cpu_weight: Some(10000),
            ..Default::default()
        };
        assert_eq!(cgroup_factor(&[v2]), Some(102400));
        let q = CgroupContext {
            path: "/q".into(),
            cpu_max: Some("20000 100000".into()),
            ..Default::default()
        };
        assert_eq!(quota_of(&[q]), Some(("/q".into(), 20000, 100000)));
        let unlimited = CgroupContext {
            path: "/q".into(),
            cpu_max: Some("-1 100000".into()),
            ..Default::default()
        };
        assert_eq!(quota_of(&[unlimited]), None);
    }

    #[test]
    fn causes() {
        let base = WaitFacts {
            waited: 100_000_000,
            owed: [50_000_000; 3],
            bound: 12_000_000,
            unfair: 24_000_000,
            victim_nice_w: 1024,
            victim_eff_w: 1024,
            ran_ns: 100_000_000,
            majority: true,
            weight_ratio: 2,
            ..Default::default()
        };
        assert_eq!(decide(&base), CauseKind::ContextNotRecorded);
        let ctx = WaitFacts {
            context: true,
            ..base
        };
        assert_eq!(decide(&ctx), CauseKind::NotExplainedByWeights);
        let fair = WaitFacts {
            owed: [11_000_000; 3],
            ..base
        };
        assert_eq!(decide(&fair), CauseKind::FairShare);
        // over the bound by a hair (a saturated CPU's slices and ticks): not clearly unfair
        let hair = WaitFacts {
            owed: [12_347_000; 3],
            ..base
        };
        assert_eq!(decide(&hair), CauseKind::FairShare);
        // autogroup: unfair by nice weights alone, fair by the sessions' group weights
        let ag = WaitFacts {
            owed: [30_000_000, 30_000_000, 20_000_000],
            autogroup: true,
            context: true,
            ..base
        };
        assert_eq!(decide(&ag), CauseKind::Autogroup);
        assert_eq!(
            decide(&WaitFacts {
                autogroup: false,
                ..ag
            }),
            CauseKind::FairShare
        );
        // a busy session's task waiting its group's turn, fair by nice weights too: sharing
        let busy_session = WaitFacts {
            owed: [6_000_000, 6_000_000, 2_000_000],
            autogroup: true,
            context: true,
            ..base
        };
        assert_eq!(decide(&busy_session), CauseKind::FairShare);
        let starved_session = WaitFacts {
            owed: [60_000_000, 60_000_000, 20_000_000],
            ..busy_session
        };
        assert_eq!(decide(&starved_session), CauseKind::Autogroup);
        let nice = WaitFacts {
            owed: [50_000_000, 1_000_000, 1_000_000],
            ..base
        };
        assert_eq!(decide(&nice), CauseKind::NiceWeight);
        let cg = WaitFacts {
            owed: [50_000_000, 50_000_000, 400_000],
            context: true,
            ..base
        };
        assert_eq!(decide(&cg), CauseKind::CgroupWeight);
        // weights that cut the entitlement by less than weight_ratio explain nothing
        let mild = WaitFacts {
            owed: [50_000_000, 30_000_000, 30_000_000],
            ..base
        };
        assert_eq!(decide(&mild), CauseKind::ContextNotRecorded);
        let rt = WaitFacts {
            higher_class_ns: 60_000_000,
            ..base
        };
        assert_eq!(decide(&rt), CauseKind::HigherClass);
        let idle = WaitFacts {
            idle_ns: 60_000_000,
            ran_ns: 40_000_000,
            ..base
        };
        assert_eq!(decide(&idle), CauseKind::MissingEvents);
        let q = WaitFacts {
            quota: true,
            ..idle
        };
        assert_eq!(decide(&q), CauseKind::Throttled);
        // the CPU chose idle while the victim was queued: however little it idled and however
        // much others ran, the wait is not the victim being passed over
        let idle_pick = WaitFacts {
            idle_picks: 1,
            ..mild
        };
        assert_eq!(decide(&idle_pick), CauseKind::MissingEvents);
        let throttled_pick = WaitFacts {
            quota: true,
            ..idle_pick
        };
        assert_eq!(decide(&throttled_pick), CauseKind::Throttled);
        // a wait fair sharing explains is no finding, idle picks or not (they only take the
        // blame away from what ran)
        let fair_pick = WaitFacts {
            owed: [5_000_000, 5_000_000, 5_000_000],
            idle_picks: 3,
            ..base
        };
        assert_eq!(decide(&fair_pick), CauseKind::FairShare);
    }

    #[test]
    fn slice_rule() {
        // 2 CPUs: 0.75 ms × 2 = 1.5 ms, below a 4 ms tick
        assert_eq!(effective_slice(None, 2).0, 4_000_000);
        let mut s = SystemContext {
            hz: Some(1000),
            ..Default::default()
        };
        assert_eq!(effective_slice(Some(&s), 2).0, 1_500_000);
        assert_eq!(effective_slice(Some(&s), 64).0, 3_000_000);
        s.sched_knobs
            .insert("base_slice_ns".into(), "5000000".into());
        assert_eq!(effective_slice(Some(&s), 2).0, 5_000_000);
    }
}
