//! Event payloads as the text tools print them, turned into [`EventKind`]s.
//!
//! Scheduler events are decoded natively from the kernel's `print fmt` text (ftrace,
//! `perf script`, `trace-cmd report -N`), from trace-cmd's raw form (`-R`: numeric
//! `prev_state`, `parent_comm=` in forks) and from trace-cmd's plugin forms:
//!
//! ```text
//! sched_switch       prev_comm=C prev_pid=N prev_prio=N prev_state=S ==> next_comm=C next_pid=N next_prio=N
//!                    prev_comm=C prev_pid=N prev_prio=N prev_state=1 next_comm=C …      (-R)
//!                    C:N [PRIO] STATE ==> C:N [PRIO]                                     (plugin)
//! sched_waking,      comm=C pid=N prio=N [success=N] target_cpu=NNN
//! sched_wakeup(_new) C:N [PRIO] [success=N] CPU:NNN                                      (plugin)
//! sched_migrate_task comm=C pid=N prio=N orig_cpu=N dest_cpu=N
//! sched_process_fork comm=C pid=N child_comm=C child_pid=N       (-R: parent_comm=, parent_pid=)
//! sched_process_exit comm=C pid=N prio=N [group_dead=B]
//! sched_process_exec filename=F pid=N old_pid=N
//! sched_stat_runtime comm=C pid=N runtime=N [ns] [vruntime=N [ns]]
//! ```
//!
//! A string value (comm, filename) ends where the *next known key* of that event begins
//! (`prev_comm=CPU 0/KVM prev_pid=…`), never at the first space; plugin `COMM:PID` is split
//! at the last `:` (`a:b [x] 1.5:12666 [120]`). Integer fields are read by key, so extra
//! keys of other kernel versions (`success=`, `group_dead=`) are ignored.
//!
//! Block events (`block_rq_issue`, `block_bio_queue`, … in the `block` system or with no
//! system given) are decoded natively by [`super::block`]; a block payload that matches no
//! known layout is kept generic and reported like a scheduler mismatch.
//!
//! Every other event, and a scheduler event whose payload does not match (reported by the
//! caller), becomes [`EventKind::Generic`]: `key=value` pairs in print order, each value a
//! string running to the next ` key=` token; a payload that does not start with `key=` is
//! kept whole as one `payload` field.

use memchr::{memchr_iter, memrchr};
use stallscope_model::{
    Comm, EventKind, FieldValue, GenericEvent, Migrate, StatRuntime, Switch, TaskRef, Wakeup,
};

use super::context::{parse_i64, parse_pid};
use super::prev_state::{decode_plugin_letters, decode_printed};
use crate::tracefs_format::PrevStateTable;
use stallscope_model::time::parse_u64;

/// How a payload was understood.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum PayloadForm {
    /// A scheduler event in kernel or raw form.
    Native,
    /// trace-cmd's `sched_switch` plugin form (prev_state letters remapped, `+` lost).
    PluginSwitch,
    /// trace-cmd's `sched_wakeup` / `sched_wakeup_new` plugin form.
    PluginWakeup,
    /// Not a scheduler event the model knows: kept generic.
    Generic,
    /// A scheduler event whose payload did not match any known form: kept generic.
    SchedMismatch,
}

/// Decodes one event. `system` is the perf `sys:` prefix when the text has one; native
/// decoding only applies to the `sched` system (or when the text gives no system).
/// `states` decodes numeric and trace-cmd plugin `prev_state`s.
pub(crate) fn event_kind(
    system: Option<&[u8]>,
    name: &[u8],
    payload: &[u8],
    states: &PrevStateTable,
) -> (EventKind, PayloadForm) {
    if system.is_none_or(|s| s == b"sched") {
        match sched_event(name, payload, states) {
            Sched::Decoded(kind, form) => return (kind, form),
            Sched::Mismatch => return (generic(system, name, payload), PayloadForm::SchedMismatch),
            Sched::NotModeled => {}
        }
    }
    if system.is_none_or(|s| s == b"block") && super::block::is_block_tracepoint(name) {
        return match super::block::tracepoint_event(name, payload) {
            Some(ev) => (EventKind::Block(Box::new(ev)), PayloadForm::Native),
            // Counted like a scheduler payload that matched no layout (kept generic).
            None => (generic(system, name, payload), PayloadForm::SchedMismatch),
        };
    }
    (generic(system, name, payload), PayloadForm::Generic)
}

/// Result of trying the native scheduler decoders.
enum Sched {
    /// A modeled event, decoded.
    Decoded(EventKind, PayloadForm),
    /// A modeled event whose payload matched no known layout.
    Mismatch,
    /// Not an event the model has a native kind for.
    NotModeled,
}

fn sched_event(name: &[u8], p: &[u8], states: &PrevStateTable) -> Sched {
    let decoded =
        |k: Option<EventKind>, form| k.map_or(Sched::Mismatch, |k| Sched::Decoded(k, form));
    let native = |k: Option<EventKind>| decoded(k, PayloadForm::Native);
    match name {
        b"sched_switch" => {
            if p.starts_with(b"prev_comm=") {
                native(kernel_switch(p, states).map(EventKind::Switch))
            } else {
                decoded(
                    plugin_switch(p, states).map(EventKind::Switch),
                    PayloadForm::PluginSwitch,
                )
            }
        }
        b"sched_waking" => native(wakeup(p).map(EventKind::Waking)),
        b"sched_wakeup" | b"sched_wakeup_new" => {
            let wrap = if name == b"sched_wakeup" {
                EventKind::Wakeup
            } else {
                EventKind::WakeupNew
            };
            if p.starts_with(b"comm=") {
                native(wakeup(p).map(wrap))
            } else {
                decoded(plugin_wakeup(p).map(wrap), PayloadForm::PluginWakeup)
            }
        }
        b"sched_migrate_task" => native(migrate(p).map(EventKind::Migrate)),
        b"sched_process_fork" => native(fork(p)),
        b"sched_process_exit" => {
            native(task_with_named_ints(p, [b"", b"", b""]).map(|(t, _)| EventKind::Exit(t)))
        }
        b"sched_process_exec" => native(exec(p)),
        b"sched_stat_runtime" => native(stat_runtime(p).map(EventKind::StatRuntime)),
        _ => Sched::NotModeled,
    }
}

/// Index of the space that starts `key` (which begins with a space, e.g. `b" prev_pid="`).
fn find_key(hay: &[u8], key: &[u8]) -> Option<usize> {
    memchr_iter(b' ', hay).find(|&i| hay[i..].starts_with(key))
}

/// Space-separated `key=value` tokens of integer fields. `==>` and `[ns]` are skipped;
/// any other token without `=` is a mismatch.
fn int_fields(s: &[u8], mut f: impl FnMut(&[u8], &[u8]) -> Option<()>) -> Option<()> {
    for tok in s.split(|&b| b == b' ').filter(|t| !t.is_empty()) {
        if tok == b"==>" || tok == b"[ns]" {
            continue;
        }
        let eq = memchr::memchr(b'=', tok)?;
        f(&tok[..eq], &tok[eq + 1..])?;
    }
    Some(())
}

fn prio(v: &[u8]) -> Option<i32> {
    i32::try_from(parse_i64(v)?).ok()
}

fn cpu(v: &[u8]) -> Option<u32> {
    u32::try_from(parse_u64(v)?).ok()
}

fn kernel_switch(p: &[u8], states: &PrevStateTable) -> Option<Switch> {
    let p = p.strip_prefix(b"prev_comm=")?;
    let at = find_key(p, b" prev_pid=")?;
    let (prev_comm, rest) = (&p[..at], &p[at + 1..]);
    let nc = find_key(rest, b" next_comm=")?;
    let (mid, next) = (&rest[..nc], &rest[nc + b" next_comm=".len()..]);
    let at = find_key(next, b" next_pid=")?;
    let (next_comm, tail) = (&next[..at], &next[at + 1..]);
    let mut prev = TaskRef {
        comm: Comm::from_bytes(prev_comm),
        pid: -1,
        prio: -1,
    };
    let mut next = TaskRef {
        comm: Comm::from_bytes(next_comm),
        pid: -1,
        prio: -1,
    };
    let mut state = None;
    int_fields(mid, |k, v| {
        match k {
            b"prev_pid" => prev.pid = parse_pid(v)?,
            b"prev_prio" => prev.prio = prio(v)?,
            b"prev_state" => state = Some(decode_printed(v, states)?),
            _ => {}
        }
        Some(())
    })?;
    int_fields(tail, |k, v| {
        match k {
            b"next_pid" => next.pid = parse_pid(v)?,
            b"next_prio" => next.prio = prio(v)?,
            _ => {}
        }
        Some(())
    })?;
    if prev.pid < 0 || next.pid < 0 {
        return None;
    }
    Some(Switch {
        prev,
        prev_state: state?,
        next,
    })
}

/// Plugin `COMM:PID [PRIO]` (prio optional), split at the last `:`.
fn plugin_task(s: &[u8]) -> Option<TaskRef> {
    let (head, prio_v) = match s.strip_suffix(b"]") {
        Some(inner) => {
            let open = memrchr(b'[', inner)?;
            let head = inner[..open].strip_suffix(b" ")?;
            (head, prio(&inner[open + 1..])?)
        }
        None => (s, -1),
    };
    let colon = memrchr(b':', head)?;
    Some(TaskRef {
        comm: Comm::from_bytes(&head[..colon]),
        pid: parse_pid(&head[colon + 1..])?,
        prio: prio_v,
    })
}

fn plugin_switch(p: &[u8], states: &PrevStateTable) -> Option<Switch> {
    const ARROW: &[u8] = b" ==> ";
    for at in memchr_iter(b' ', p).filter(|&i| p[i..].starts_with(ARROW)) {
        let (left, right) = (&p[..at], &p[at + ARROW.len()..]);
        let Some(sp) = memrchr(b' ', left) else {
            continue;
        };
        let (Some(prev), Some(state), Some(next)) = (
            plugin_task(&left[..sp]),
            decode_plugin_letters(&left[sp + 1..], states),
            plugin_task(right),
        ) else {
            continue;
        };
        return Some(Switch {
            prev,
            prev_state: state,
            next,
        });
    }
    None
}

fn plugin_wakeup(p: &[u8]) -> Option<Wakeup> {
    let mut s = p;
    let mut target_cpu = None;
    if let Some(sp) = memrchr(b' ', s) {
        if let Some(c) = s[sp + 1..].strip_prefix(b"CPU:") {
            target_cpu = Some(cpu(c)?);
            s = &s[..sp];
        }
    }
    if let Some(sp) = memrchr(b' ', s) {
        if s[sp + 1..].starts_with(b"success=") {
            s = &s[..sp];
        }
    }
    Some(Wakeup {
        task: plugin_task(s)?,
        target_cpu,
    })
}

/// `comm=C pid=N` followed by integer fields; returns the task and the remaining text.
fn comm_pid_prefix<'a>(p: &'a [u8], comm_key: &[u8], pid_key: &[u8]) -> Option<(Comm, &'a [u8])> {
    let p = p.strip_prefix(comm_key)?;
    let at = find_key(p, pid_key)?;
    Some((Comm::from_bytes(&p[..at]), &p[at + 1..]))
}

/// `comm=C pid=N prio=N …` → the task and the values of up to three other integer fields
/// named by `keys` (empty = unused); other keys are ignored.
fn task_with_named_ints(p: &[u8], keys: [&[u8]; 3]) -> Option<(TaskRef, [Option<u64>; 3])> {
    let (comm, rest) = comm_pid_prefix(p, b"comm=", b" pid=")?;
    let mut task = TaskRef {
        comm,
        pid: -1,
        prio: -1,
    };
    let mut vals = [None; 3];
    int_fields(rest, |k, v| {
        match k {
            b"pid" => task.pid = parse_pid(v)?,
            b"prio" => task.prio = prio(v)?,
            _ => {
                if let Some(i) = keys.iter().position(|key| !key.is_empty() && *key == k) {
                    vals[i] = Some(parse_u64(v)?);
                }
            }
        }
        Some(())
    })?;
    (task.pid >= 0).then_some((task, vals))
}

fn wakeup(p: &[u8]) -> Option<Wakeup> {
    let (task, [target, _, _]) = task_with_named_ints(p, [b"target_cpu", b"", b""])?;
    let target_cpu = match target {
        Some(c) => Some(u32::try_from(c).ok()?),
        None => None,
    };
    Some(Wakeup { task, target_cpu })
}

fn migrate(p: &[u8]) -> Option<Migrate> {
    let (task, [orig, dest, _]) = task_with_named_ints(p, [b"orig_cpu", b"dest_cpu", b""])?;
    Some(Migrate {
        task,
        orig_cpu: u32::try_from(orig?).ok()?,
        dest_cpu: u32::try_from(dest?).ok()?,
    })
}

fn stat_runtime(p: &[u8]) -> Option<StatRuntime> {
    let (task, [runtime, vruntime, _]) = task_with_named_ints(p, [b"runtime", b"vruntime", b""])?;
    Some(StatRuntime {
        task,
        runtime: runtime?,
        vruntime,
    })
}

fn fork(p: &[u8]) -> Option<EventKind> {
    let (parent_comm, rest) = match comm_pid_prefix(p, b"comm=", b" pid=") {
        Some(x) => x,
        None => comm_pid_prefix(p, b"parent_comm=", b" parent_pid=")?,
    };
    let cc = find_key(rest, b" child_comm=")?;
    let (mid, child) = (&rest[..cc], &rest[cc + b" child_comm=".len()..]);
    let at = find_key(child, b" child_pid=")?;
    let (child_comm, tail) = (Comm::from_bytes(&child[..at]), &child[at + 1..]);
    let (mut parent_pid, mut child_pid) = (-1, -1);
    int_fields(mid, |k, v| {
        if k == b"pid" || k == b"parent_pid" {
            parent_pid = parse_pid(v)?;
        }
        Some(())
    })?;
    int_fields(tail, |k, v| {
        if k == b"child_pid" {
            child_pid = parse_pid(v)?;
        }
        Some(())
    })?;
    (parent_pid >= 0 && child_pid >= 0).then_some(EventKind::Fork {
        parent_comm,
        parent_pid,
        child_comm,
        child_pid,
    })
}

fn exec(p: &[u8]) -> Option<EventKind> {
    let p = p.strip_prefix(b"filename=")?;
    let at = find_key(p, b" pid=")?;
    let filename = String::from_utf8_lossy(&p[..at]).into_owned();
    let (mut pid, mut old_pid) = (-1, -1);
    int_fields(&p[at + 1..], |k, v| {
        match k {
            b"pid" => pid = parse_pid(v)?,
            b"old_pid" => old_pid = parse_pid(v)?,
            _ => {}
        }
        Some(())
    })?;
    (pid >= 0 && old_pid >= 0).then_some(EventKind::Exec {
        filename,
        pid,
        old_pid,
    })
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A generic event: `key=value` fields, or the whole payload as `payload`.
pub(crate) fn generic(system: Option<&[u8]>, name: &[u8], payload: &[u8]) -> EventKind {
    EventKind::Generic(Box::new(GenericEvent {
        system: system.map(lossy),
        name: lossy(name),
        fields: fields(payload),
    }))
}

fn is_key_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'.'
}

/// Splits `k1=v1 k2=v with spaces k3=v3` at each ` key=`; see module docs.
pub(crate) fn fields(payload: &[u8]) -> Vec<(String, FieldValue)> {
    let payload = payload.trim_ascii();
    // (key start, '=' index) of every key token.
    let mut keys: Vec<(usize, usize)> = Vec::new();
    for eq in memchr_iter(b'=', payload) {
        let start = payload[..eq]
            .iter()
            .rposition(|&b| !is_key_byte(b))
            .map_or(0, |p| p + 1);
        let first_ok = payload
            .get(start)
            .is_some_and(|&b| b.is_ascii_alphabetic() || b == b'_');
        if start < eq && first_ok && (start == 0 || payload[start - 1] == b' ') {
            keys.push((start, eq));
        }
    }
    if keys.first().is_none_or(|&(s, _)| s != 0) {
        return if payload.is_empty() {
            Vec::new()
        } else {
            vec![("payload".to_string(), FieldValue::Str(lossy(payload)))]
        };
    }
    let mut out = Vec::with_capacity(keys.len());
    for (i, &(start, eq)) in keys.iter().enumerate() {
        let end = keys.get(i + 1).map_or(payload.len(), |&(next, _)| next);
        let value = payload[eq + 1..end].trim_ascii_end();
        out.push((lossy(&payload[start..eq]), FieldValue::Str(lossy(value))));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use stallscope_model::{Event, Span};

    fn dump(name: &str, payload: &str) -> (String, PayloadForm) {
        let states = PrevStateTable::for_kernel_release(None);
        let (kind, form) = event_kind(None, name.as_bytes(), payload.as_bytes(), &states);
        let e = Event {
            ts: 0,
            cpu: 0,
            pid: 0,
            span: Span::default(),
            kind,
            callchain: None,
        };
        (e.dump_line(), form)
    }

    #[test]
    fn kernel_switch_with_spaces_in_comm_and_r_plus() {
        let (d, f) = dump(
            "sched_switch",
            "prev_comm=CPU 0/KVM prev_pid=13689 prev_prio=120 prev_state=R+ ==> next_comm=a:b [x] 1.5 next_pid=8457 next_prio=120",
        );
        assert_eq!(f, PayloadForm::Native);
        assert_eq!(
            d,
            "0 0 0 sched_switch prev_comm=\"CPU 0/KVM\" prev_pid=13689 prev_prio=120 prev_state=R+ next_comm=\"a:b [x] 1.5\" next_pid=8457 next_prio=120"
        );
    }

    #[test]
    fn raw_and_plugin_switch_forms() {
        let (d, _) = dump(
            "sched_switch",
            "prev_comm=bash prev_pid=12624 prev_prio=120 prev_state=32 next_comm=swapper/0 next_pid=0 next_prio=120",
        );
        assert!(d.contains("prev_state=Z next_comm=swapper/0"), "{d}");
        let (d, f) = dump(
            "sched_switch",
            "a:b [x] 1.5:12666 [120] R ==> rcu_preempt:15 [120]",
        );
        assert_eq!(f, PayloadForm::PluginSwitch);
        assert_eq!(
            d,
            "0 0 0 sched_switch prev_comm=\"a:b [x] 1.5\" prev_pid=12666 prev_prio=120 prev_state=R next_comm=rcu_preempt next_pid=15 next_prio=120"
        );
        let (d, _) = dump(
            "sched_switch",
            "rcu_preempt:15 [120] W ==> CPU 0/KVM:12664 [120]",
        );
        assert!(
            d.contains("prev_state=I next_comm=\"CPU 0/KVM\" next_pid=12664"),
            "{d}"
        );
    }

    #[test]
    fn wakeups_kernel_and_plugin() {
        let (d, f) = dump(
            "sched_wakeup",
            "comm=memfd:sealed-91 pid=2695 prio=120 target_cpu=001",
        );
        assert_eq!(
            (d.as_str(), f),
            (
                "0 0 0 sched_wakeup comm=memfd:sealed-91 pid=2695 prio=120 target_cpu=1",
                PayloadForm::Native
            )
        );
        let (d, f) = dump("sched_wakeup_new", "python3:12623 [120] CPU:001");
        assert_eq!(
            (d.as_str(), f),
            (
                "0 0 0 sched_wakeup_new comm=python3 pid=12623 prio=120 target_cpu=1",
                PayloadForm::PluginWakeup
            )
        );
        let (d, _) = dump(
            "sched_wakeup",
            "comm=x pid=5 prio=98 success=1 target_cpu=002",
        );
        assert_eq!(d, "0 0 0 sched_wakeup comm=x pid=5 prio=98 target_cpu=2");
        let (d, _) = dump("sched_wakeup", "old:1 [120] success=1 CPU:003");
        assert_eq!(d, "0 0 0 sched_wakeup comm=old pid=1 prio=120 target_cpu=3");
    }

    #[test]
    fn other_sched_events() {
        let (d, _) = dump(
            "sched_migrate_task",
            "comm=bash pid=8414 prio=120 orig_cpu=1 dest_cpu=0",
        );
        assert_eq!(
            d,
            "0 0 0 sched_migrate_task comm=bash pid=8414 prio=120 orig_cpu=1 dest_cpu=0"
        );
        let (d, _) = dump(
            "sched_process_fork",
            "comm=bash pid=8399 child_comm=bash child_pid=8414",
        );
        assert_eq!(d, "0 0 0 sched_process_fork parent_comm=bash parent_pid=8399 child_comm=bash child_pid=8414");
        let (d2, _) = dump(
            "sched_process_fork",
            "parent_comm=bash parent_pid=8399 child_comm=bash child_pid=8414",
        );
        assert_eq!(d, d2);
        let (d, _) = dump(
            "sched_process_exit",
            "comm=bash pid=12624 prio=120 group_dead=true",
        );
        assert_eq!(d, "0 0 0 sched_process_exit comm=bash pid=12624 prio=120");
        let (d, _) = dump(
            "sched_process_exec",
            "filename=/usr/bin/bash pid=8414 old_pid=8414",
        );
        assert_eq!(
            d,
            "0 0 0 sched_process_exec filename=/usr/bin/bash pid=8414 old_pid=8414"
        );
        let (d, _) = dump(
            "sched_stat_runtime",
            "comm=perf pid=13978 runtime=38939 [ns]",
        );
        assert_eq!(
            d,
            "0 0 0 sched_stat_runtime comm=perf pid=13978 runtime=38939"
        );
        let (d, _) = dump(
            "sched_stat_runtime",
            "comm=x y pid=1 runtime=5 [ns] vruntime=77 [ns]",
        );
        assert_eq!(
            d,
            "0 0 0 sched_stat_runtime comm=\"x y\" pid=1 runtime=5 vruntime=77"
        );
    }

    #[test]
    fn mismatching_sched_payload_stays_generic() {
        let (d, f) = dump("sched_switch", "garbage here");
        assert_eq!(
            (d.as_str(), f),
            (
                "0 0 0 sched_switch payload=\"garbage here\"",
                PayloadForm::SchedMismatch
            )
        );
        let (_, f) = dump("sched_switch", "prev_comm=a prev_pid=x prev_prio=1 prev_state=S ==> next_comm=b next_pid=2 next_prio=1");
        assert_eq!(f, PayloadForm::SchedMismatch);
    }

    #[test]
    fn generic_fields() {
        let f = fields(b"dev=266338304 sector=12591360 rwbs=RA comm=python3 cmd=");
        let kv: Vec<(String, String)> = f
            .into_iter()
            .map(|(k, v)| match v {
                FieldValue::Str(s) => (k, s),
                other => (k, format!("{other:?}")),
            })
            .collect();
        assert_eq!(kv[0], ("dev".into(), "266338304".into()));
        assert_eq!(kv[3], ("comm".into(), "python3".into()));
        assert_eq!(kv[4], ("cmd".into(), "".into()));
        let f = fields(b"254,0 RA 4096 () 12591360 + 8 0x2,0,4 [python3]");
        assert_eq!(
            f,
            vec![(
                "payload".to_string(),
                FieldValue::Str("254,0 RA 4096 () 12591360 + 8 0x2,0,4 [python3]".into())
            )]
        );
        let f = fields(b"comm=CPU 0/KVM pid=5 x=a=b");
        assert_eq!(
            f[0],
            ("comm".to_string(), FieldValue::Str("CPU 0/KVM".into()))
        );
        assert_eq!(f[2], ("x".to_string(), FieldValue::Str("a=b".into())));
        assert!(fields(b"").is_empty());
    }

    #[test]
    fn perf_system_only_sched_is_native() {
        let states = PrevStateTable::for_kernel_release(None);
        let switch = b"prev_comm=a prev_pid=1 prev_prio=1 prev_state=S ==> next_comm=b next_pid=2 next_prio=1";
        let (k, f) = event_kind(Some(b"sched"), b"sched_switch", switch, &states);
        assert_eq!((k.name(), f), ("sched_switch", PayloadForm::Native));
        let (k, f) = event_kind(Some(b"foo"), b"sched_switch", b"x=1", &states);
        assert_eq!((k.name(), f), ("sched_switch", PayloadForm::Generic));
    }
}
