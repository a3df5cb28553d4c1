//! [`StackTable`]: the stacks recorded with scheduler events (perf `-g` callchains, a
//! trace.dat's `ftrace:kernel_stack` / `user_stack` records attached to the event before
//! them), kept by event source so that a finding's evidence can show where its events
//! happened, and [`Symbolizer`]: kernel frame names from `/proc/kallsyms` text.
//!
//! Only events that carry a stack cost anything: the stacks are interned (a trace with a
//! stack on every switch repeats a few hundred distinct ones), and each event adds one map
//! entry from its span to the stack.

use rustc_hash::FxHashMap;
use stallscope_model::{Event, EventKind, Span, SymbolAliases, Tid};

/// perf's callchain context markers are the values at or above this (`PERF_CONTEXT_MAX`).
const CONTEXT_MAX: u64 = -4095i64 as u64;
/// Kernel frames follow.
const CONTEXT_KERNEL: u64 = -128i64 as u64;

/// Lowest kernel address of 64-bit kernels (frames without a context marker).
const KERNEL_ADDR_MIN: u64 = 0xffff_8000_0000_0000;

/// Frames shown per stack.
pub const FRAMES_SHOWN: usize = 8;

/// Interned stacks by event source.
#[derive(Debug, Default)]
pub struct StackTable {
    /// Event source → (stack id, the event's task).
    by_span: FxHashMap<Span, (u32, Tid)>,
    stacks: Vec<Box<[u64]>>,
    index: FxHashMap<Box<[u64]>, u32>,
}

impl StackTable {
    /// Keeps the stack of `ev` (scheduler events only: stack events themselves and samples
    /// are not evidence of scheduling).
    #[inline]
    pub fn record(&mut self, ev: &Event) {
        let Some(chain) = ev.callchain.as_deref() else {
            return;
        };
        if matches!(ev.kind, EventKind::Generic(_)) {
            return;
        }
        self.record_chain(ev.span, ev.pid, chain);
    }

    #[cold]
    fn record_chain(&mut self, span: Span, pid: Tid, chain: &[u64]) {
        let id = match self.index.get(chain) {
            Some(&id) => id,
            None => {
                let id = self.stacks.len() as u32;
                self.stacks.push(chain.into());
                self.index.insert(chain.into(), id);
                id
            }
        };
        self.by_span.insert(span, (id, pid));
    }

    /// The stack recorded with the event at `span`, and the event's task.
    pub fn get(&self, span: Span) -> Option<(&[u64], Tid)> {
        let &(id, pid) = self.by_span.get(&span)?;
        self.stacks.get(id as usize).map(|s| (&**s, pid))
    }

    /// Every distinct `(task, user address)` of the stacks, to name them in one go.
    pub fn user_frames(&self) -> Vec<(Tid, u64)> {
        let mut out: Vec<(Tid, u64)> = Vec::new();
        for &(id, pid) in self.by_span.values() {
            let Some(s) = self.stacks.get(id as usize) else {
                continue;
            };
            let mut marked: Option<bool> = None;
            for &a in s.iter() {
                if a >= CONTEXT_MAX {
                    marked = Some(a == CONTEXT_KERNEL);
                } else if !marked.unwrap_or(a >= KERNEL_ADDR_MIN) {
                    out.push((pid, a));
                }
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Whether any stack was recorded.
    pub fn is_empty(&self) -> bool {
        self.by_span.is_empty()
    }

    /// Every distinct kernel address in the stacks (to name them in one pass).
    pub fn kernel_addresses(&self) -> Vec<u64> {
        let mut out = Vec::new();
        for s in &self.stacks {
            let mut marked: Option<bool> = None;
            for &a in s.iter() {
                if a >= CONTEXT_MAX {
                    marked = Some(a == CONTEXT_KERNEL);
                } else if marked.unwrap_or(a >= KERNEL_ADDR_MIN) {
                    out.push(a);
                }
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }
}

/// Kernel code symbols from `/proc/kallsyms` text, for naming the frames of a stack: the
/// symbol at or below an address (the function a return address is in).
#[derive(Debug, Default)]
pub struct Symbolizer {
    /// (start, name), sorted by start.
    symbols: Vec<(u64, String)>,
    /// Names of user frames by (task, address), from the recording's binaries.
    user: FxHashMap<(Tid, u64), String>,
}

impl Symbolizer {
    /// The code symbols of `kallsyms` text (`ADDR TYPE NAME [MODULE]`), one per address as
    /// `aliases` says; an all-zero table (read without privileges) names nothing.
    pub fn from_kallsyms(text: &str, aliases: SymbolAliases) -> Symbolizer {
        let mut symbols: Vec<(u64, String)> = text
            .lines()
            .filter_map(stallscope_model::kallsyms::parse_line)
            .filter(|l| l.is_code() && l.addr != 0)
            .map(|l| (l.addr, l.name.to_string()))
            .collect();
        // stable: equal addresses keep the file's order
        symbols.sort_by_key(|s| s.0);
        match aliases {
            SymbolAliases::FirstListed => symbols.dedup_by_key(|s| s.0),
            SymbolAliases::LastListed => {
                symbols.reverse();
                symbols.dedup_by_key(|s| s.0);
                symbols.reverse();
            }
        }
        Symbolizer {
            symbols,
            user: FxHashMap::default(),
        }
    }

    /// Adds names of user frames by (task, address).
    pub fn set_user_names(&mut self, names: impl IntoIterator<Item = ((Tid, u64), String)>) {
        self.user.extend(names);
    }

    /// The function `addr` is in, when the table covers it.
    pub fn name(&self, addr: u64) -> Option<&str> {
        let i = self.symbols.partition_point(|s| s.0 <= addr);
        let (start, name) = self.symbols.get(i.checked_sub(1)?)?;
        // a frame far past the last symbol of a region is not in it (module gaps)
        (addr - start < 1 << 24).then_some(name.as_str())
    }

    /// The frames of `chain` (recorded with an event of task `pid`) as names, leaf first,
    /// markers dropped, at most [`FRAMES_SHOWN`]: kernel frames named when the table knows
    /// them, user frames when their binaries named them, the rest `0x…`.
    /// The tracing code that took the stack (`trace_event_raw_event_*`, `__traceiter_*`,
    /// `perf_trace_*`) is left off its top.
    pub fn frames(&self, chain: &[u64], pid: Tid) -> Vec<String> {
        // before any context marker (text callchains have none), by the address
        let mut marked: Option<bool> = None;
        let mut out: Vec<String> = Vec::new();
        for &a in chain {
            if a >= CONTEXT_MAX {
                marked = Some(a == CONTEXT_KERNEL);
                continue;
            }
            let kernel = marked.unwrap_or(a >= KERNEL_ADDR_MIN);
            if out.len() == FRAMES_SHOWN {
                break;
            }
            let name = match (kernel, self.name(a)) {
                (true, Some(n)) => n.to_string(),
                (false, _) => match self.user.get(&(pid, a)) {
                    Some(n) => n.clone(),
                    None => format!("{a:#x}"),
                },
                _ => format!("{a:#x}"),
            };
            if out.is_empty() && is_tracing(&name) {
                continue;
            }
            out.push(name);
        }
        out
    }
}

/// The tracing code that records an event (and its stack).
pub fn is_tracing(name: &str) -> bool {
    name.starts_with("trace_event_raw_event_")
        || name.starts_with("__traceiter_")
        || name.starts_with("perf_trace_")
        || name.starts_with("__bpf_trace_")
}

/// Frames that only say how the stack was taken or the switch happened (tracing and
/// scheduler internals), skipped when saying where an event happened.
pub fn is_mechanism(name: &str) -> bool {
    let n = name.split('.').next().unwrap_or(name);
    n.starts_with("trace_event_raw_event_")
        || n.starts_with("__traceiter_")
        || n.starts_with("perf_trace_")
        || n.starts_with("trace_")
        || matches!(
            n,
            "__schedule"
                | "schedule"
                | "preempt_schedule_common"
                | "__cond_resched_stub"
                | "ttwu_do_activate"
                | "try_to_wake_up"
                | "wake_up_process"
                | "__wake_up_common"
                | "__wake_up_common_lock"
                | "__wake_up_sync_key"
                | "__wake_up_sync"
                | "__wake_up"
                | "default_wake_function"
                | "autoremove_wake_function"
                | "stack_trace_save"
                | "ftrace_trace_stack"
                | "__ftrace_trace_stack"
        )
}

#[cfg(test)]
mod tests {
    use super::*;
    use stallscope_model::{Comm, PrevState, SpanPos, Switch, TaskRef};

    #[test]
    fn stacks_are_interned_by_span_and_named_from_kallsyms() {
        let t = |pid| TaskRef {
            comm: Comm::new("t"),
            pid,
            prio: 120,
        };
        let mut table = StackTable::default();
        let chain: Box<[u64]> =
            vec![CONTEXT_KERNEL, 0xffff_0000_0000_1010, 0xffff_0000_0000_2004].into();
        for off in [1u64, 2] {
            table.record(&Event {
                ts: off,
                cpu: 0,
                pid: 1,
                span: Span::new(0, SpanPos::Byte(off)),
                kind: EventKind::Switch(Switch {
                    prev: t(1),
                    prev_state: PrevState::parse("D").unwrap(),
                    next: t(2),
                }),
                callchain: Some(chain.clone()),
            });
        }
        assert_eq!(table.stacks.len(), 1, "interned");
        assert_eq!(
            table.get(Span::new(0, SpanPos::Byte(2))),
            Some((&*chain, 1))
        );
        assert!(table.get(Span::new(0, SpanPos::Byte(3))).is_none());
        let k = Symbolizer::from_kallsyms(
            "ffff000000001000 T io_schedule\nffff000000002000 t do_sys_open\n0 T zero\n",
            SymbolAliases::LastListed,
        );
        assert_eq!(k.frames(&chain, 1), ["io_schedule", "do_sys_open"]);
        assert_eq!(table.kernel_addresses().len(), 2);
        assert!(is_mechanism("trace_event_raw_event_sched_switch"));
        assert!(!is_mechanism("io_schedule"));
    }

    /// Two symbols at one address (the lock section's start marker listed after the first
    /// function in it, as in a real kernel's kallsyms): trace-cmd names frames there by the
    /// first listed, perf by the last (issue #29: 11 937 frames of a real trace.dat named
    /// `__lock_text_start` where `trace-cmd report` prints `_raw_spin_unlock_irqrestore`).
    #[test]
    fn aliases_are_named_as_the_inputs_peer_names_them() {
        let text = "ffffffffa95ad1b0 T poll_idle\n\
                    ffffffffa95ad270 T _raw_spin_unlock_irqrestore\n\
                    ffffffffa95ad270 T __lock_text_start\n\
                    ffffffffa95ad2a0 T _raw_read_trylock\n";
        let at = 0xffff_ffff_a95a_d295;
        let trace_cmd = Symbolizer::from_kallsyms(text, SymbolAliases::FirstListed);
        assert_eq!(trace_cmd.name(at), Some("_raw_spin_unlock_irqrestore"));
        let perf = Symbolizer::from_kallsyms(text, SymbolAliases::LastListed);
        assert_eq!(perf.name(at), Some("__lock_text_start"));
        assert_eq!(perf.name(0xffff_ffff_a95a_d1c0), Some("poll_idle"));
        assert_eq!(
            stallscope_model::InputFormat::TraceDat.symbol_aliases(),
            SymbolAliases::FirstListed
        );
        assert_eq!(
            stallscope_model::InputFormat::PerfData.symbol_aliases(),
            SymbolAliases::LastListed
        );
    }
}
