//! [`WorkerPools`]: kernel workqueue activity per work function — which kworkers ran it, how
//! many ran it at once, how long items waited between queueing and execution, the CPU time
//! the executions used and the context switches they caused.
//!
//! ## Input events
//!
//! The workqueue tracepoints arrive as generic events. Binary inputs (perf.data, trace.dat)
//! carry the format's fields; text inputs carry one `payload` string, as the peer printed it:
//!
//! ```text
//! workqueue_queue_work     work=0xffff…  function=0xffffffff81…  workqueue=dio/loop1  req_cpu=256 cpu=1
//!                          payload="work struct=0xffff88817a5e57c0 function=iomap_dio_complete_work workqueue=dio/loop1 req_cpu=256 cpu=1"
//! workqueue_activate_work  work=…  function=…           payload="work struct 0xffff…"  (older kernels: no function)
//! workqueue_execute_start  work=…  function=…           payload="work struct 0xffff888178006fa0: function iomap_dio_complete_work"
//! workqueue_execute_end    work=…  function=…           payload="work struct 0xffff888178006fa0: function iomap_dio_complete_work"
//! ```
//!
//! `function` is a kernel pointer in binary inputs ([`WorkFn::Addr`]; name it with
//! [`symbol_at`] over the file's kallsyms) and a name in text inputs ([`WorkFn::Name`]).
//! Integers may come signed, unsigned or as `0x` text. `workqueue` (the pool owner's name) is
//! only in `workqueue_queue_work`; execution events are tied to it through the work-struct
//! pointer.
//!
//! ## State machine
//!
//! ```text
//!   queue_work(work W, fn F, wq Q) at t   → pending[W] = (t, F, Q); F.queued += 1
//!   activate_work(W) at t                 → pending[W] keeps its queue time (activation
//!                                           without a queue event: pending[W] = (t, …))
//!   execute_start(W, F) by worker K at t  → latency t − pending[W].t (when pending);
//!                                           K executes F: F.executing += 1, K running,
//!                                           F.active += 1; K enters F's worker set
//!   sched_switch prev=K mid-work          → K's on-CPU time since switch-in is F's CPU time;
//!                                           F.switches += 1; prev_state R/R+ → K runnable
//!                                           (preempted), else K sleeping (F.sleeps += 1,
//!                                           F.active −= 1)
//!   sched_waking / sched_wakeup of K      → K runnable (F.active += 1 if it slept)
//!   sched_switch next=K mid-work          → K running from now on
//!   execute_end(W) by K at t              → K's execution ends (CPU time up to t);
//!                                           F.executing −= 1 (F.active −= 1 if not sleeping)
//! ```
//!
//! *Executing at once* counts workers between `execute_start` and `execute_end` of F,
//! sleeping or not (the pool has that many items in flight). *Active at once* counts those
//! of them that are running or runnable (what competes for the CPUs). Peaks keep the time
//! they were first reached.
//!
//! ## Imperfect input (counted in [`WorkerPools::quality`], never silently dropped)
//!
//! * `workqueue_execute_without_end`: a worker starts an item while its previous one never
//!   ended (lost events): the previous one is closed at the new start.
//! * `workqueue_end_without_start`: an end whose start was before the trace (or lost).
//! * `workqueue_open_at_end`: executions still running when the trace ends; their CPU time
//!   and duration count up to the last event.
//! * `workqueue_unparsed`: a workqueue event without a usable work pointer or function.
//!
//! An item executed without a queue event (queued before the trace started) has no latency;
//! [`FunctionStats::executions_without_queue`] counts them. A worker is identified by its
//! pid; a pid reused by a later worker counts once.
//!
//! Memory: one entry per work function, per worker, and per pending work item (an item that
//! is queued and then cancelled stays pending until its work struct is queued again).

use std::collections::BTreeMap;
use std::fmt;

use rustc_hash::FxHashMap;
use stallscope_model::{
    Cpu, DataQuality, Dur, Event, EventKind, FieldValue, GenericEvent, Problem, Tid, Ts,
};

/// A work function: a kernel address (binary inputs) or a name (text inputs, or resolved).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum WorkFn {
    /// Kernel address of the function.
    Addr(u64),
    /// Symbol name.
    Name(String),
}

impl fmt::Display for WorkFn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WorkFn::Addr(a) => write!(f, "{a:#x}"),
            WorkFn::Name(n) => f.write_str(n),
        }
    }
}

/// Queue→execute latencies in power-of-two buckets (bucket `b` holds `[2^b, 2^(b+1))` ns;
/// bucket 0 also holds 0), plus exact count, sum, min and max.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Log2Hist {
    /// Counts per bucket (grown on demand, at most 64).
    pub buckets: Vec<u64>,
    /// Values added.
    pub count: u64,
    /// Sum of the values (saturating).
    pub sum: u64,
    /// Smallest value (0 when empty).
    pub min: u64,
    /// Largest value.
    pub max: u64,
}

impl Log2Hist {
    /// Adds one value.
    pub fn add(&mut self, v: u64) {
        let b = (63 - (v | 1).leading_zeros()) as usize;
        if self.buckets.len() <= b {
            self.buckets.resize(b + 1, 0);
        }
        self.buckets[b] += 1;
        self.min = if self.count == 0 { v } else { self.min.min(v) };
        self.max = self.max.max(v);
        self.count += 1;
        self.sum = self.sum.saturating_add(v);
    }

    /// The upper bound (exclusive, capped at [`Log2Hist::max`]) of the bucket holding the
    /// `q`/1000 quantile: at least that share of the values is below it. 0 when empty.
    pub fn quantile_upper_permille(&self, q: u64) -> u64 {
        if self.count == 0 {
            return 0;
        }
        let rank = (self.count * q.min(1000)).div_ceil(1000).max(1);
        let mut seen = 0;
        for (b, &n) in self.buckets.iter().enumerate() {
            seen += n;
            if seen >= rank {
                return (1u64 << (b + 1).min(63)).min(self.max);
            }
        }
        self.max
    }

    /// Integer mean (0 when empty).
    pub fn mean(&self) -> u64 {
        self.sum.checked_div(self.count).unwrap_or(0)
    }
}

/// What one worker did for one function.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WorkerUse {
    /// Executions started.
    pub executions: u64,
    /// On-CPU time inside them.
    pub cpu_ns: Dur,
}

/// Everything measured for one work function.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FunctionStats {
    /// The function.
    pub function: WorkFn,
    /// Workqueues it was queued on, with queue counts.
    pub workqueues: BTreeMap<String, u64>,
    /// `workqueue_queue_work` events.
    pub queued: u64,
    /// `workqueue_execute_start` events.
    pub executions: u64,
    /// Executions that had no queue (or activate) event before them.
    pub executions_without_queue: u64,
    /// Executions that ended (`workqueue_execute_end` seen).
    pub completed: u64,
    /// Executions still running at the end of the trace.
    pub open_at_end: u64,
    /// Workers (by pid) that executed it.
    pub workers: BTreeMap<Tid, WorkerUse>,
    /// Executions per CPU.
    pub cpus: BTreeMap<Cpu, u64>,
    /// Workers executing it right now.
    pub executing: u32,
    /// Most workers executing it at once, and when that was first reached.
    pub peak_executing: u32,
    /// Time of [`FunctionStats::peak_executing`].
    pub peak_executing_ts: Ts,
    /// Workers executing it and running or runnable right now.
    pub active: u32,
    /// Most workers executing it while running or runnable at once.
    pub peak_active: u32,
    /// Time of [`FunctionStats::peak_active`].
    pub peak_active_ts: Ts,
    /// Queue (or activation) → execute_start latency.
    pub latency: Log2Hist,
    /// Wall time from execute_start to execute_end (or to the trace end), summed.
    pub busy_ns: Dur,
    /// On-CPU time of its workers while executing it.
    pub cpu_ns: Dur,
    /// Switch-outs of its workers in the middle of an execution.
    pub switches: u64,
    /// Of those, the ones where the worker went to sleep (not `R`/`R+`).
    pub sleeps: u64,
    /// First execute_start.
    pub first_ts: Ts,
    /// Last execute_start or execute_end.
    pub last_ts: Ts,
}

impl FunctionStats {
    fn new(function: WorkFn) -> FunctionStats {
        FunctionStats {
            function,
            workqueues: BTreeMap::new(),
            queued: 0,
            executions: 0,
            executions_without_queue: 0,
            completed: 0,
            open_at_end: 0,
            workers: BTreeMap::new(),
            cpus: BTreeMap::new(),
            executing: 0,
            peak_executing: 0,
            peak_executing_ts: 0,
            active: 0,
            peak_active: 0,
            peak_active_ts: 0,
            latency: Log2Hist::default(),
            busy_ns: 0,
            cpu_ns: 0,
            switches: 0,
            sleeps: 0,
            first_ts: 0,
            last_ts: 0,
        }
    }

    /// The workqueue most items were queued on, if any was seen.
    pub fn main_workqueue(&self) -> Option<&str> {
        self.workqueues
            .iter()
            .max_by_key(|(name, n)| (**n, std::cmp::Reverse(name.as_str())))
            .map(|(name, _)| name.as_str())
    }

    fn enter_active(&mut self, ts: Ts) {
        self.active += 1;
        if self.active > self.peak_active {
            self.peak_active = self.active;
            self.peak_active_ts = ts;
        }
    }
}

/// A worker's scheduling state while it executes an item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RunState {
    Running,
    Runnable,
    Sleeping,
}

/// One execution in progress.
#[derive(Clone, Copy, Debug)]
struct Execution {
    func: usize,
    work: u64,
    start: Ts,
    state: RunState,
    /// Switched in (or started) at this time and still on the CPU.
    on_cpu_since: Option<Ts>,
    /// CPU it started on.
    cpu: Cpu,
    /// When the item was queued (or activated), when seen.
    queued: Option<Ts>,
    /// Its workqueue (index into [`WorkerPools::workqueue_names`]), when queued in the trace.
    workqueue: Option<u32>,
    /// On-CPU time so far, switch-outs and sleeps in it.
    cpu_ns: Dur,
    switches: u32,
    sleeps: u32,
}

/// One execution of a work item, as [`WorkerPools::take_executions`] hands it out (kept
/// only after [`WorkerPools::keep_executions`]): the `work_items` table's row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecutionRecord {
    /// The work struct's address.
    pub work: u64,
    /// The work function.
    pub function: WorkFn,
    /// The workqueue it was queued on, when the queue event is in the trace.
    pub workqueue: Option<String>,
    /// The kworker that executed it.
    pub worker: Tid,
    /// CPU of `workqueue_execute_start`.
    pub cpu: Cpu,
    /// Queue (or activation) time, when in the trace.
    pub queued: Option<Ts>,
    /// `workqueue_execute_start`.
    pub start: Ts,
    /// `workqueue_execute_end`, or the time it was closed without one (see `ended`).
    pub end: Ts,
    /// `end` (execute_end seen), `restarted` (the worker started another item first: lost
    /// events) or `open_at_end` (still running when the trace ended; `end` = last event).
    pub ended: &'static str,
    /// On-CPU time of the worker inside it.
    pub cpu_ns: Dur,
    /// Switch-outs of the worker inside it.
    pub switches: u32,
    /// Of those, sleeps (not `R`/`R+`).
    pub sleeps: u32,
}

/// A pending (queued, not yet executing) work item.
#[derive(Clone, Copy, Debug)]
struct Pending {
    ts: Ts,
    func: Option<usize>,
    workqueue: Option<u32>,
}

/// One workqueue event, decoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkEvent {
    /// Which tracepoint.
    pub kind: WorkEventKind,
    /// The work struct's address.
    pub work: u64,
    /// The work function, when the event carries it.
    pub function: Option<WorkFn>,
    /// The workqueue's name (`workqueue_queue_work` only).
    pub workqueue: Option<String>,
}

/// The four workqueue tracepoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkEventKind {
    /// `workqueue_queue_work`.
    Queue,
    /// `workqueue_activate_work`.
    Activate,
    /// `workqueue_execute_start`.
    ExecuteStart,
    /// `workqueue_execute_end`.
    ExecuteEnd,
}

impl WorkEventKind {
    /// The kind of tracepoint `name`, when it is one of the four.
    pub fn from_name(name: &str) -> Option<WorkEventKind> {
        Some(match name {
            "workqueue_queue_work" => WorkEventKind::Queue,
            "workqueue_activate_work" => WorkEventKind::Activate,
            "workqueue_execute_start" => WorkEventKind::ExecuteStart,
            "workqueue_execute_end" => WorkEventKind::ExecuteEnd,
            _ => return None,
        })
    }
}

fn parse_u64(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

fn field_u64(v: &FieldValue) -> Option<u64> {
    match v {
        FieldValue::UInt(u) => Some(*u),
        // Pointers decoded as signed keep their bits.
        FieldValue::Int(i) => Some(*i as u64),
        FieldValue::Str(s) => parse_u64(s),
        FieldValue::Bytes(_) => None,
    }
}

fn field_fn(v: &FieldValue) -> Option<WorkFn> {
    match v {
        FieldValue::Str(s) if s.is_empty() => None,
        FieldValue::Str(s) => Some(match parse_u64(s) {
            Some(a) if s.starts_with("0x") => WorkFn::Addr(a),
            _ => WorkFn::Name(s.clone()),
        }),
        v => field_u64(v).map(WorkFn::Addr),
    }
}

/// Decodes a workqueue generic event (fields or a text `payload`); `None` when `g` is not a
/// workqueue event or lacks a work pointer.
pub fn decode(g: &GenericEvent) -> Option<WorkEvent> {
    let kind = WorkEventKind::from_name(&g.name)?;
    let mut ev = WorkEvent {
        kind,
        work: 0,
        function: None,
        workqueue: None,
    };
    let mut have_work = false;
    for (k, v) in &g.fields {
        match k.as_str() {
            "work" | "work_struct" => {
                if let Some(w) = field_u64(v) {
                    ev.work = w;
                    have_work = true;
                }
            }
            "function" => ev.function = field_fn(v),
            "workqueue" => {
                if let FieldValue::Str(s) = v {
                    ev.workqueue = Some(s.clone());
                }
            }
            "payload" => {
                if let FieldValue::Str(s) = v {
                    have_work |= parse_payload(s, &mut ev);
                }
            }
            _ => {}
        }
    }
    have_work.then_some(ev)
}

/// Parses the printed forms (`work struct=0x… function=F workqueue=Q …` and
/// `work struct 0x…: function F`); true when a work pointer was found.
fn parse_payload(s: &str, ev: &mut WorkEvent) -> bool {
    let Some(rest) = s.trim_start().strip_prefix("work struct") else {
        return false;
    };
    let rest = rest.trim_start_matches(['=', ' ']);
    let mut words = rest.split_whitespace();
    let Some(work) = words
        .next()
        .and_then(|w| parse_u64(w.trim_end_matches(':')))
    else {
        return false;
    };
    ev.work = work;
    while let Some(w) = words.next() {
        let (key, value) = match w.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (w, None),
        };
        let value = match value {
            Some(v) => v,
            None if key == "function" => match words.next() {
                Some(v) => v,
                None => break,
            },
            None => continue, // other bare words carry nothing we use
        };
        match key {
            "function" => ev.function = field_fn(&FieldValue::Str(value.to_string())),
            "workqueue" => ev.workqueue = Some(value.to_string()),
            _ => {}
        }
    }
    true
}

/// The name of the code symbol at exactly `addr` in `/proc/kallsyms`-format text (the first
/// global `T`/`W` symbol there, else the first local `t`/`w` one). Work functions are function
/// entry addresses, so an exact match is what names them.
pub fn symbol_at(kallsyms: &str, addr: u64) -> Option<&str> {
    let mut local = None;
    for line in kallsyms.lines() {
        let mut parts = line.split_whitespace();
        let (Some(a), Some(t), Some(name)) = (parts.next(), parts.next(), parts.next()) else {
            continue; // not a symbol line: nothing to match
        };
        if u64::from_str_radix(a, 16).ok() != Some(addr) {
            continue; // another address
        }
        match t {
            "T" | "W" => return Some(name),
            "t" | "w" if local.is_none() => local = Some(name),
            _ => {}
        }
    }
    local
}

/// Workqueue activity per work function. Feed every event in time order with
/// [`WorkerPools::process`], then call [`WorkerPools::finish`].
#[derive(Debug, Default)]
pub struct WorkerPools {
    funcs: Vec<FunctionStats>,
    index: FxHashMap<WorkFn, usize>,
    running: FxHashMap<Tid, Execution>,
    pending: FxHashMap<u64, Pending>,
    quality: DataQuality,
    last_ts: Ts,
    finished: bool,
    /// Kept executions, when asked for ([`WorkerPools::keep_executions`]).
    executions: Option<Vec<ExecutionRecord>>,
    workqueue_names: Vec<String>,
    workqueue_index: FxHashMap<String, u32>,
}

impl WorkerPools {
    /// Keeps a record of every execution as it ends, for [`WorkerPools::take_executions`].
    pub fn keep_executions(&mut self) {
        self.executions.get_or_insert_with(Vec::new);
    }

    /// The executions ended since the last call (in the order they ended).
    pub fn take_executions(&mut self) -> Vec<ExecutionRecord> {
        self.executions
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    /// Executions kept and not taken yet.
    pub fn executions_kept(&self) -> usize {
        self.executions.as_ref().map_or(0, Vec::len)
    }

    /// Empty.
    pub fn new() -> WorkerPools {
        WorkerPools::default()
    }

    /// Per function, in first-seen order.
    pub fn functions(&self) -> &[FunctionStats] {
        &self.funcs
    }

    /// Data-quality counters (see the module docs).
    pub fn quality(&self) -> &DataQuality {
        &self.quality
    }

    /// The stats of `f`, if it was seen.
    pub fn function(&self, f: &WorkFn) -> Option<&FunctionStats> {
        self.index.get(f).map(|&i| &self.funcs[i])
    }

    /// The function a worker is executing now, if any.
    pub fn executing(&self, worker: Tid) -> Option<&FunctionStats> {
        self.running.get(&worker).map(|x| &self.funcs[x.func])
    }

    fn func_index(&mut self, f: &WorkFn) -> usize {
        if let Some(&i) = self.index.get(f) {
            return i;
        }
        self.funcs.push(FunctionStats::new(f.clone()));
        self.index.insert(f.clone(), self.funcs.len() - 1);
        self.funcs.len() - 1
    }

    /// Feeds one event (any kind; unrelated events are ignored).
    pub fn process(&mut self, ev: &Event) {
        self.last_ts = self.last_ts.max(ev.ts);
        match &ev.kind {
            EventKind::Generic(g) => {
                if WorkEventKind::from_name(&g.name).is_none() {
                    return; // not a workqueue event
                }
                self.process_work(ev, decode(g).as_ref());
            }
            EventKind::Switch(s) => {
                self.switch_out(ev.ts, s.prev.pid, s.prev_state.is_runnable());
                self.switch_in(ev.ts, s.next.pid);
            }
            EventKind::Waking(w) | EventKind::Wakeup(w) | EventKind::WakeupNew(w) => {
                self.woken(w.task.pid);
            }
            _ => {}
        }
    }

    /// Feeds a workqueue event the caller already decoded with [`decode`] (`None`: it did
    /// not decode, counted as `workqueue_unparsed`), so callers that look at the decoded
    /// event too decode it once.
    pub fn process_work(&mut self, ev: &Event, w: Option<&WorkEvent>) {
        self.last_ts = self.last_ts.max(ev.ts);
        match w {
            Some(w) => self.on_work(ev, w),
            None => self.quality.add(Problem::WorkqueueUnparsed, 1, || {
                format!("{} {} {}", ev.ts, ev.cpu, ev.kind.name())
            }),
        }
    }

    fn on_work(&mut self, ev: &Event, w: &WorkEvent) {
        let func = w.function.as_ref().map(|f| self.func_index(f));
        match w.kind {
            WorkEventKind::Queue => {
                if let Some(i) = func {
                    let st = &mut self.funcs[i];
                    st.queued += 1;
                    if let Some(q) = &w.workqueue {
                        match st.workqueues.get_mut(q) {
                            Some(n) => *n += 1,
                            None => {
                                st.workqueues.insert(q.clone(), 1);
                            }
                        }
                    }
                }
                let workqueue = match (&w.workqueue, self.executions.is_some()) {
                    (Some(q), true) => Some(self.workqueue_id(q)),
                    _ => None,
                };
                self.pending.insert(
                    w.work,
                    Pending {
                        ts: ev.ts,
                        func,
                        workqueue,
                    },
                );
            }
            WorkEventKind::Activate => {
                self.pending.entry(w.work).or_insert(Pending {
                    ts: ev.ts,
                    func,
                    workqueue: None,
                });
            }
            WorkEventKind::ExecuteStart => self.start(ev, w.work, func),
            WorkEventKind::ExecuteEnd => self.end(ev, w.work),
        }
    }

    fn workqueue_id(&mut self, name: &str) -> u32 {
        if let Some(&i) = self.workqueue_index.get(name) {
            return i;
        }
        let i = self.workqueue_names.len() as u32;
        self.workqueue_names.push(name.to_string());
        self.workqueue_index.insert(name.to_string(), i);
        i
    }

    fn start(&mut self, ev: &Event, work: u64, func: Option<usize>) {
        let pending = self.pending.remove(&work);
        let Some(func) = func.or(pending.and_then(|p| p.func)) else {
            self.quality.add(Problem::WorkqueueUnparsed, 1, || {
                format!("{} {} execute_start without a function", ev.ts, ev.cpu)
            });
            return;
        };
        if self.running.contains_key(&ev.pid) {
            self.quality
                .add(Problem::WorkqueueExecuteWithoutEnd, 1, || {
                    format!("{} {} worker {}", ev.ts, ev.cpu, ev.pid)
                });
            self.close(ev.pid, ev.ts, "restarted");
        }
        let st = &mut self.funcs[func];
        if st.executions == 0 {
            st.first_ts = ev.ts;
        }
        st.executions += 1;
        st.last_ts = ev.ts;
        match pending {
            Some(p) => st.latency.add(ev.ts.saturating_sub(p.ts)),
            None => st.executions_without_queue += 1,
        }
        st.workers.entry(ev.pid).or_default().executions += 1;
        *st.cpus.entry(ev.cpu).or_insert(0) += 1;
        st.executing += 1;
        if st.executing > st.peak_executing {
            st.peak_executing = st.executing;
            st.peak_executing_ts = ev.ts;
        }
        st.enter_active(ev.ts);
        self.running.insert(
            ev.pid,
            Execution {
                func,
                work,
                start: ev.ts,
                state: RunState::Running,
                on_cpu_since: Some(ev.ts),
                cpu: ev.cpu,
                queued: pending.map(|p| p.ts),
                workqueue: pending.and_then(|p| p.workqueue),
                cpu_ns: 0,
                switches: 0,
                sleeps: 0,
            },
        );
    }

    fn end(&mut self, ev: &Event, work: u64) {
        match self.running.get(&ev.pid) {
            Some(x) if x.work == work => {
                let func = x.func;
                self.close(ev.pid, ev.ts, "end");
                let st = &mut self.funcs[func];
                st.completed += 1;
                st.last_ts = ev.ts;
            }
            _ => self.quality.add(Problem::WorkqueueEndWithoutStart, 1, || {
                format!("{} {} worker {} work {work:#x}", ev.ts, ev.cpu, ev.pid)
            }),
        }
    }

    /// Ends `worker`'s execution at `ts` (`how`: see [`ExecutionRecord::ended`]).
    fn close(&mut self, worker: Tid, ts: Ts, how: &'static str) {
        let Some(x) = self.running.remove(&worker) else {
            return;
        };
        let st = &mut self.funcs[x.func];
        let cpu = x.on_cpu_since.map_or(0, |s| ts.saturating_sub(s));
        if let Some(kept) = &mut self.executions {
            kept.push(ExecutionRecord {
                work: x.work,
                function: st.function.clone(),
                workqueue: x
                    .workqueue
                    .and_then(|i| self.workqueue_names.get(i as usize).cloned()),
                worker,
                cpu: x.cpu,
                queued: x.queued,
                start: x.start,
                end: ts,
                ended: how,
                cpu_ns: x.cpu_ns + cpu,
                switches: x.switches,
                sleeps: x.sleeps,
            });
        }
        st.cpu_ns += cpu;
        st.busy_ns += ts.saturating_sub(x.start);
        st.workers.entry(worker).or_default().cpu_ns += cpu;
        st.executing = st.executing.saturating_sub(1);
        if x.state != RunState::Sleeping {
            st.active = st.active.saturating_sub(1);
        }
    }

    fn switch_out(&mut self, ts: Ts, pid: Tid, runnable: bool) {
        let Some(x) = self.running.get_mut(&pid) else {
            return;
        };
        let st = &mut self.funcs[x.func];
        if let Some(since) = x.on_cpu_since.take() {
            let cpu = ts.saturating_sub(since);
            st.cpu_ns += cpu;
            x.cpu_ns += cpu;
            st.workers.entry(pid).or_default().cpu_ns += cpu;
        }
        st.switches += 1;
        x.switches += 1;
        if runnable {
            x.state = RunState::Runnable;
        } else {
            if x.state != RunState::Sleeping {
                st.active = st.active.saturating_sub(1);
            }
            x.state = RunState::Sleeping;
            st.sleeps += 1;
            x.sleeps += 1;
        }
    }

    fn switch_in(&mut self, ts: Ts, pid: Tid) {
        let Some(x) = self.running.get_mut(&pid) else {
            return;
        };
        if x.state == RunState::Sleeping {
            // Woken without a wakeup event in the trace.
            self.funcs[x.func].enter_active(ts);
        }
        x.state = RunState::Running;
        x.on_cpu_since = Some(ts);
    }

    fn woken(&mut self, pid: Tid) {
        let ts = self.last_ts;
        let Some(x) = self.running.get_mut(&pid) else {
            return;
        };
        if x.state == RunState::Sleeping {
            x.state = RunState::Runnable;
            self.funcs[x.func].enter_active(ts);
        }
    }

    /// Closes executions still running at the last event (counted as
    /// `workqueue_open_at_end`). Idempotent.
    pub fn finish(&mut self) {
        if self.finished {
            return;
        }
        self.finished = true;
        let last = self.last_ts;
        let mut open: Vec<Tid> = self.running.keys().copied().collect();
        open.sort_unstable();
        if !open.is_empty() {
            self.quality
                .add(Problem::WorkqueueOpenAtEnd, open.len() as u64, || {
                    format!("workers {open:?}")
                });
        }
        for w in open {
            if let Some(x) = self.running.get(&w) {
                self.funcs[x.func].open_at_end += 1;
            }
            self.close(w, last, "open_at_end");
        }
    }

    /// Names address functions from `/proc/kallsyms`-format text, in one pass over it
    /// (see [`symbol_names`]). Returns the names it found.
    pub fn name_functions_from_kallsyms(&mut self, kallsyms: &str) -> FxHashMap<u64, String> {
        let addrs = self.funcs.iter().filter_map(|st| match st.function {
            WorkFn::Addr(a) => Some(a),
            WorkFn::Name(_) => None,
        });
        let found = symbol_names(kallsyms, addrs);
        self.name_functions(&|a| found.get(&a).cloned());
        found
    }

    /// Replaces address functions by names where `name_of` knows them (functions that end
    /// up with the same name are merged).
    pub fn name_functions(&mut self, name_of: &dyn Fn(u64) -> Option<String>) {
        for st in &mut self.funcs {
            if let WorkFn::Addr(a) = st.function {
                if let Some(n) = name_of(a) {
                    st.function = WorkFn::Name(n);
                }
            }
        }
        let mut merged: Vec<FunctionStats> = Vec::with_capacity(self.funcs.len());
        let mut index: FxHashMap<WorkFn, usize> = FxHashMap::default();
        let mut remap = Vec::with_capacity(self.funcs.len());
        for st in self.funcs.drain(..) {
            match index.get(&st.function) {
                Some(&i) => {
                    remap.push(i);
                    merge_into(&mut merged[i], st);
                }
                None => {
                    remap.push(merged.len());
                    index.insert(st.function.clone(), merged.len());
                    merged.push(st);
                }
            }
        }
        for x in self.running.values_mut() {
            x.func = remap[x.func];
        }
        for p in self.pending.values_mut() {
            p.func = p.func.map(|f| remap[f]);
        }
        self.funcs = merged;
        self.index = index;
    }
}

/// Adds `b`'s counts to `a` (same function under two identities; peaks stay per identity,
/// so the larger one is kept).
fn merge_into(a: &mut FunctionStats, b: FunctionStats) {
    for (q, n) in b.workqueues {
        *a.workqueues.entry(q).or_insert(0) += n;
    }
    a.queued += b.queued;
    a.executions += b.executions;
    a.executions_without_queue += b.executions_without_queue;
    a.completed += b.completed;
    a.open_at_end += b.open_at_end;
    for (w, u) in b.workers {
        let e = a.workers.entry(w).or_default();
        e.executions += u.executions;
        e.cpu_ns += u.cpu_ns;
    }
    for (c, n) in b.cpus {
        *a.cpus.entry(c).or_insert(0) += n;
    }
    a.executing += b.executing;
    a.active += b.active;
    if b.peak_executing > a.peak_executing {
        a.peak_executing = b.peak_executing;
        a.peak_executing_ts = b.peak_executing_ts;
    }
    if b.peak_active > a.peak_active {
        a.peak_active = b.peak_active;
        a.peak_active_ts = b.peak_active_ts;
    }
    for (i, n) in b.latency.buckets.iter().enumerate() {
        if a.latency.buckets.len() <= i {
            a.latency.buckets.resize(i + 1, 0);
        }
        a.latency.buckets[i] += n;
    }
    if b.latency.count > 0 {
        a.latency.min = if a.latency.count == 0 {
            b.latency.min
        } else {
            a.latency.min.min(b.latency.min)
        };
    }
    a.latency.count += b.latency.count;
    a.latency.sum = a.latency.sum.saturating_add(b.latency.sum);
    a.latency.max = a.latency.max.max(b.latency.max);
    a.busy_ns += b.busy_ns;
    a.cpu_ns += b.cpu_ns;
    a.switches += b.switches;
    a.sleeps += b.sleeps;
    if b.executions > 0 && (a.executions == b.executions || b.first_ts < a.first_ts) {
        a.first_ts = b.first_ts;
    }
    a.last_ts = a.last_ts.max(b.last_ts);
}

/// The names of code symbols at exactly the addresses `addrs`, from `/proc/kallsyms`-format
/// text (`ADDR TYPE NAME [MODULE]`), in one pass over it. Of several names at one address, a
/// global one (`T`/`W`) wins over a local one (`t`/`w`), then the first; data symbols are
/// not names of functions. Addresses without a code symbol are absent from the result.
pub fn symbol_names(
    kallsyms: &str,
    addrs: impl IntoIterator<Item = u64>,
) -> FxHashMap<u64, String> {
    let mut names: FxHashMap<u64, (bool, String)> = addrs
        .into_iter()
        .map(|a| (a, (false, String::new())))
        .collect();
    if names.is_empty() {
        return FxHashMap::default();
    }
    for line in kallsyms.lines() {
        let Some(l) = stallscope_model::kallsyms::parse_line(line) else {
            continue; // not a symbol line: nothing to match
        };
        let Some(slot) = names.get_mut(&l.addr) else {
            continue; // an address none of ours has
        };
        let global = l.is_global();
        if l.is_code() && (slot.1.is_empty() || (global && !slot.0)) {
            *slot = (global, l.name.to_string());
        }
    }
    names
        .into_iter()
        .filter(|(_, (_, n))| !n.is_empty())
        .map(|(a, (_, n))| (a, n))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payload_forms() {
        let g = |name: &str, p: &str| GenericEvent {
            system: None,
            name: name.into(),
            fields: vec![("payload".into(), FieldValue::Str(p.into()))],
        };
        let q = decode(&g(
            "workqueue_queue_work",
            "work struct=0xffff88817a5e57c0 function=iomap_dio_complete_work workqueue=dio/loop1 req_cpu=256 cpu=1",
        ))
        .unwrap();
        assert_eq!(q.work, 0xffff88817a5e57c0);
        assert_eq!(
            q.function,
            Some(WorkFn::Name("iomap_dio_complete_work".into()))
        );
        assert_eq!(q.workqueue.as_deref(), Some("dio/loop1"));
        let s = decode(&g(
            "workqueue_execute_start",
            "work struct 0xffff888178006fa0: function iomap_dio_complete_work",
        ))
        .unwrap();
        assert_eq!(s.kind, WorkEventKind::ExecuteStart);
        assert_eq!(s.work, 0xffff888178006fa0);
        assert_eq!(
            s.function,
            Some(WorkFn::Name("iomap_dio_complete_work".into()))
        );
        let a = decode(&g(
            "workqueue_activate_work",
            "work struct 0xffff888178006fa0",
        ))
        .unwrap();
        assert_eq!(a.function, None);
        assert!(decode(&g("workqueue_execute_end", "garbage")).is_none());
    }

    #[test]
    fn kallsyms_exact_match_prefers_global() {
        let k = "ffffffff81000000 T _text\nffffffff812f3a10 t local_alias\nffffffff812f3a10 T iomap_dio_complete_work\nffffffff812f3b00 t other\tbad\n";
        assert_eq!(
            symbol_at(k, 0xffffffff812f3a10),
            Some("iomap_dio_complete_work")
        );
        assert_eq!(symbol_at(k, 0xffffffff812f3b00), Some("other"));
        assert_eq!(symbol_at(k, 0xffffffff812f3a11), None);
    }

    #[test]
    fn log2_quantiles() {
        let mut h = Log2Hist::default();
        for v in [0, 1, 3, 1000, 1500] {
            h.add(v);
        }
        assert_eq!(h.count, 5);
        assert_eq!(h.min, 0);
        assert_eq!(h.max, 1500);
        // 3 of 5 values are < 4.
        assert_eq!(h.quantile_upper_permille(500), 4);
        assert_eq!(h.quantile_upper_permille(1000), 1500);
    }
}
