//! CPU profiles, normalized: weighted call stacks, whatever the input (perf.data samples
//! with callchains, `perf script` text, folded stacks, `perf report` call-graph text).
//!
//! A [`Profile`] is a list of [`WeightedStack`]s over one interned symbol table. A stack's
//! frames are **leaf first** (the sampled function at index 0, its callers after it), like
//! perf callchains; folded input (root first, `;`-separated) is reversed on reading.
//! Weights are integers: sample counts, or the sum of sample periods when the reader knows
//! them ([`WeightUnit`]). Differential folded lines (`stack COUNT_A COUNT_B`) keep the second
//! count in [`WeightedStack::weight_new`].
//!
//! ```text
//! folded:   swapper;secondary_startup_64;cpu_startup_entry;do_idle 120
//! stack:    frames = [do_idle, cpu_startup_entry, secondary_startup_64, swapper], weight = 120
//! ```
//!
//! "Self" weight of a function = weight of the stacks whose leaf it is; "total" (perf's
//! *children*) weight = weight of the stacks it appears in at least once (recursion counted
//! once per stack).

use std::collections::HashMap;

use crate::{Comm, Cpu, Span, Tid, Ts};

/// Index of a symbol in [`Profile::symbols`].
pub type SymbolId = u32;

/// What a stack's weight counts.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub enum WeightUnit {
    /// Number of samples.
    #[default]
    Samples,
    /// Sum of sample periods of the named event (`cycles`, `cpu-clock` ns, …).
    Period(String),
    /// Percent of the total in hundredths of a percent (from `perf report` text, which
    /// prints only percentages).
    BasisPoints,
}

/// One call stack with its weight.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct WeightedStack {
    /// Frames, leaf first.
    pub frames: Vec<SymbolId>,
    /// Weight (see [`Profile::unit`]).
    pub weight: u64,
    /// Second count of a differential folded line.
    pub weight_new: Option<u64>,
    /// Task name, when the input says.
    pub comm: Option<Comm>,
    /// Task id, when the input says.
    pub pid: Option<Tid>,
    /// CPU, when the input says.
    pub cpu: Option<Cpu>,
    /// Sample time, when the input says (one sample per stack then).
    pub ts: Option<Ts>,
    /// Where it came from.
    pub span: Span,
}

/// A normalized profile.
#[derive(Clone, Debug, Default)]
pub struct Profile {
    /// Interned symbol names (`osq_lock`, `[unknown]`, `0xffffffff81234567` when
    /// unsymbolized). Kernel and user symbols share the table.
    pub symbols: Vec<Box<str>>,
    /// Whether each symbol is a kernel symbol, when known (same index as `symbols`).
    pub kernel: Vec<Option<bool>>,
    /// The stacks, in input order.
    pub stacks: Vec<WeightedStack>,
    /// What weights count.
    pub unit: WeightUnit,
    index: HashMap<Box<str>, SymbolId>,
}

impl Profile {
    /// An empty profile.
    pub fn new(unit: WeightUnit) -> Profile {
        Profile {
            unit,
            ..Profile::default()
        }
    }

    /// The id of `name`, adding it when new. `kernel`, when given, is recorded for a new
    /// symbol (and fills in an unknown one).
    pub fn intern(&mut self, name: &str, kernel: Option<bool>) -> SymbolId {
        if let Some(&id) = self.index.get(name) {
            if let Some(slot) = self.kernel.get_mut(id as usize) {
                if slot.is_none() {
                    *slot = kernel;
                }
            }
            return id;
        }
        let id = self.symbols.len() as SymbolId;
        self.symbols.push(name.into());
        self.kernel.push(kernel);
        self.index.insert(name.into(), id);
        id
    }

    /// The id of `name`, if present.
    pub fn lookup(&self, name: &str) -> Option<SymbolId> {
        self.index.get(name).copied()
    }

    /// The name of symbol `id` (`"?"` for an id out of range).
    pub fn symbol(&self, id: SymbolId) -> &str {
        self.symbols.get(id as usize).map_or("?", |s| s)
    }

    /// Sum of all stack weights.
    pub fn total_weight(&self) -> u64 {
        self.stacks
            .iter()
            .fold(0u64, |a, s| a.saturating_add(s.weight))
    }

    /// Self weight per symbol (weight of the stacks it is the leaf of), indexed by id.
    pub fn self_weights(&self) -> Vec<u64> {
        let mut w = vec![0u64; self.symbols.len()];
        for s in &self.stacks {
            if let Some(&leaf) = s.frames.first() {
                if let Some(slot) = w.get_mut(leaf as usize) {
                    *slot = slot.saturating_add(s.weight);
                }
            }
        }
        w
    }

    /// Total ("children") weight per symbol: weight of the stacks it appears in, counted
    /// once per stack even when recursive. Indexed by id.
    pub fn total_weights(&self) -> Vec<u64> {
        let mut w = vec![0u64; self.symbols.len()];
        let mut seen_in: Vec<usize> = vec![usize::MAX; self.symbols.len()];
        for (i, s) in self.stacks.iter().enumerate() {
            for &f in &s.frames {
                let f = f as usize;
                if f < w.len() && seen_in[f] != i {
                    seen_in[f] = i;
                    w[f] = w[f].saturating_add(s.weight);
                }
            }
        }
        w
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stack(p: &mut Profile, leaf_first: &[&str], weight: u64) {
        let frames = leaf_first.iter().map(|n| p.intern(n, None)).collect();
        p.stacks.push(WeightedStack {
            frames,
            weight,
            ..WeightedStack::default()
        });
    }

    #[test]
    fn self_and_total_weights() {
        let mut p = Profile::new(WeightUnit::Samples);
        stack(
            &mut p,
            &["osq_lock", "rwsem_optimistic_spin", "down_write"],
            30,
        );
        stack(&mut p, &["down_write", "do_unlinkat"], 5);
        stack(&mut p, &["f", "f", "main"], 7);
        let s = p.self_weights();
        let t = p.total_weights();
        let id = |n: &str| p.lookup(n).map(|i| i as usize).unwrap_or(usize::MAX);
        assert_eq!(s[id("osq_lock")], 30);
        assert_eq!(s[id("down_write")], 5);
        assert_eq!(t[id("down_write")], 35);
        assert_eq!(t[id("f")], 7, "recursion counted once per stack");
        assert_eq!(p.total_weight(), 42);
        assert_eq!(p.symbol(999), "?");
    }
}
