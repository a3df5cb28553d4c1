//! `perf report --stdio` text (with or without call graphs) → [`Profile`] in basis points.
//!
//! ```text
//! # Samples: 781  of event 'cpu-clock:pppH'
//! # Children      Self  Command      Shared Object         Symbol          column titles
//! # ........  ........  ...........  ....................  ..............  ruler: one dot run per column
//! #
//!     49.81%    49.30%  CPU 0/KVM    burn                  [.] leaf_compute        entry
//!             |
//!             |--49.30%--start_thread                                             branch (siblings follow)
//!             |          worker                                                    chain continuation
//!             |          leaf_compute
//!             |
//!              --0.51%--leaf_compute                                               last branch
//!                        asm_sysvec_apic_timer_interrupt
//!
//!     49.30%  CPU 0/KVM    burn                  [.] leaf_compute        --no-children: one percent column
//!             |
//!             ---leaf_compute                                                      chain start (`---`)
//!                worker
//! 385 start_thread;worker;leaf_compute                                             -g folded,0,caller,count
//! ```
//!
//! Columns are cut at the ruler's dot runs (values contain spaces: `CPU 0/KVM`); the last
//! column runs to the end of the line. Percent columns: `Overhead` (no-children), or
//! `Children` and `Self`. The symbol column's `[k]` marks kernel symbols, `[.]` user ones.
//!
//! Graph lines are read as a tree: a frame's text column identifies its chain; a branch
//! (`|--P%--` / ` --P%--`) hangs under the chain whose `|` column is just left of its
//! dashes; a continuation line continues the chain at its column. Without a `---` line the
//! entry itself is the implicit root. Every path from the root to a node with no
//! continuation gets the node's weight minus what its branches carry (perf's `graph` mode
//! percentages are of the total).
//!
//! Stacks (weights in [`WeightUnit::BasisPoints`], 49.30% = 4930):
//! - no-children view: every entry's `Overhead` is self weight; its graph paths become its
//!   stacks (callee-first paths as printed, caller-first ones (`-g caller`) reversed, paths
//!   that omit the entry symbol (`--sort sym`) get it prepended); what the branches do not
//!   cover (pruned) becomes a stack of the path so far; an entry without graph is a
//!   one-frame stack.
//! - children view: only `Self` is self weight; the graph paths *ending* at the entry symbol
//!   are its callers (taken while they fit in `Self`); the rest of `Self` is a one-frame stack.
//!   The Children column, summed per symbol, is kept as [`super::ProfileRead::reported_totals`]
//!   (stacks rebuilt from pruned graphs cannot reproduce it).
//! - one children-view entry alone (an excerpt pasted into a mail: `-   62.46%   0.00%  …
//!   [k] iomap_dio_complete_work` and its graph, in the TUI's or the `--stdio` form): the
//!   samples through the entry are all the input knows, so every path of its graph becomes a
//!   stack (callee paths start at the entry, caller paths end at it), weighing what its last
//!   line's percentage leaves to it; a line without percentage (a single callee) carries its
//!   parent's weight, a chain at the root the entry's Children column
//!   (`perf_report_one_entry`). Weights stay basis points of perf's whole profile.
//! - `-g folded` lines (`COUNT frame;…`, caller first) give exact stacks: the unit is then
//!   samples, and entries without such lines get `pct × # Samples`.
//!
//! Only the first event's section is read when the report has several (`-e a -e b`); the
//! others are counted (`perf_report_other_event`). `# Samples: 2K` (perf abbreviates above
//! 1000) scales to 2000 for the folded-mode estimate. `# os release :` (`--header`) gives the
//! kernel release.
//!
//! Lossy input (counted in `perf_report_pruned`): perf drops branches below its threshold
//! (`-g graph,0.5` by default) and entries below `--percent-limit`, and rounds to 2
//! decimals; ask for `perf script` or `-g folded,0,caller,count` for exact stacks.
//! `--sort` keys other than `comm`, `dso`, `sym` are ignored (comm goes to the stack).

use stallscope_model::{
    Comm, DataQuality, Problem, Profile, Span, SpanPos, WeightUnit, WeightedStack,
};

use super::{read_text, ProfileFormat, ProfileRead};
use crate::{Input, ReadError};

/// One column cut from the ruler: byte range of the title/values.
#[derive(Clone, Debug)]
struct Column {
    title: String,
    start: usize,
    end: Option<usize>,
}

/// Dot runs of a `# ....  ....` ruler line → (start, end) byte ranges.
fn ruler_ranges(line: &str) -> Vec<(usize, usize)> {
    let b = line.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'.' {
            let s = i;
            while i < b.len() && b[i] == b'.' {
                i += 1;
            }
            out.push((s, i));
        } else {
            i += 1;
        }
    }
    out
}

fn cut(line: &str, start: usize, end: Option<usize>) -> &str {
    let len = line.len();
    let s = start.min(len);
    let e = end.map_or(len, |e| e.min(len)).max(s);
    line.get(s..e).unwrap_or("").trim()
}

/// `49.30%` → 4930 basis points.
fn parse_bp(text: &str) -> Option<u64> {
    let t = text.trim().strip_suffix('%')?;
    let (int, frac) = t.split_once('.').unwrap_or((t, ""));
    if int.is_empty() || !int.bytes().all(|b| b.is_ascii_digit()) || frac.len() > 2 {
        return None;
    }
    if !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let i: u64 = int.parse().ok()?;
    let f: u64 = if frac.is_empty() {
        0
    } else {
        frac.parse().ok()?
    };
    let f = if frac.len() == 1 { f * 10 } else { f };
    i.checked_mul(100)?.checked_add(f)
}

/// A node of one entry's call-graph tree.
#[derive(Debug)]
struct Node {
    name: String,
    parent: Option<usize>,
    /// Weight (bp) of the samples through this node: its branch percentage, else its
    /// parent's, else the entry's (computed once, so deep chains stay linear).
    weight: u64,
    /// Has a chain continuation child.
    continued: bool,
    /// Sum of its branch children's pct.
    branch_sum: u64,
}

/// One entry being read.
#[derive(Debug)]
struct Entry {
    line: u64,
    self_bp: u64,
    /// The Children column (children view only).
    children_bp: Option<u64>,
    symbol: String,
    kernel: Option<bool>,
    comm: Option<String>,
    nodes: Vec<Node>,
    /// Text column → last node of the chain at that column.
    tails: Vec<(usize, usize)>,
    /// `-g folded` stacks: (count, frames caller first).
    folded: Vec<(u64, Vec<String>)>,
    /// `-g flat`: the percentage line just read, waiting for its first frame.
    pending_flat_root: Option<usize>,
    /// The TUI's saved form: (sign column, last node of the chain started there), innermost
    /// last, and the implicit root of percentage branches.
    tui_stack: Vec<(usize, usize)>,
    tui_root: Option<usize>,
    /// Whether this entry's graph is in the TUI's form.
    tui: bool,
}

impl Entry {
    /// An entry read from line `line`: its (Self or Overhead, Children) percentages, symbol
    /// and kernel mark, comm, and whether its graph is in the TUI's form.
    fn new(
        line: u64,
        (self_bp, children_bp): (u64, Option<u64>),
        symbol: &str,
        kernel: Option<bool>,
        comm: Option<String>,
        tui: bool,
    ) -> Entry {
        Entry {
            line,
            self_bp,
            children_bp,
            symbol: symbol.to_string(),
            kernel,
            comm,
            nodes: Vec::new(),
            tails: Vec::new(),
            folded: Vec::new(),
            pending_flat_root: None,
            tui_stack: Vec::new(),
            tui_root: None,
            tui,
        }
    }

    fn tail_at(&self, col: usize) -> Option<usize> {
        self.tails
            .iter()
            .rev()
            .find(|(c, _)| *c == col)
            .map(|&(_, n)| n)
    }

    fn set_tail(&mut self, col: usize, node: usize) {
        self.tails.retain(|(c, _)| *c < col);
        self.tails.push((col, node));
    }

    /// A graph line of the TUI's saved form (`perf report` TUI, `P`):
    ///
    /// ```text
    /// -   49.81%    49.30%  burn  [.] leaf_compute      entry: fold sign, then the columns
    ///    - 49.30% start_thread                          branch: sign, percentage, frame
    ///         worker                                    chain continuation (no sign)
    ///         leaf_compute
    ///    + 0.51% leaf_compute                           folded branch (its children hidden)
    ///      - entry_SYSCALL_64                           the only child: sign, no percentage
    ///        0.67% fdget_pos                            a leaf branch (sign ' ')
    /// ```
    ///
    /// A line with a percentage starts a branch under the chain whose sign column is left
    /// of its own; a line without one continues the innermost chain at or left of its
    /// column. `None` when the line is not in this form (then the `--stdio` grammar
    /// applies).
    fn tui_line(&mut self, line: &str) -> Option<bool> {
        let b = line.as_bytes();
        let first = b.iter().position(|&c| c != b' ')?;
        let signed = matches!(b[first], b'-' | b'+') && b.get(first + 1) == Some(&b' ');
        let (sign_col, content) = if signed {
            (first, line[first + 2..].trim_start())
        } else {
            (first.saturating_sub(2), &line[first..])
        };
        // `NN.NN% name`
        let branch = content.split_once(' ').and_then(|(p, name)| {
            let name = name.trim();
            (p.ends_with('%') && !name.is_empty())
                .then(|| parse_bp(p).map(|bp| (bp, name)))
                .flatten()
        });
        if !(signed || self.tui || branch.is_some()) {
            return None;
        }
        // stdio glyphs are never TUI lines
        if content.starts_with('|') || content.starts_with("--") {
            return None;
        }
        self.tui = true;
        match branch {
            Some((pct, name)) => {
                while self.tui_stack.last().is_some_and(|&(c, _)| c >= sign_col) {
                    self.tui_stack.pop();
                }
                let parent = match self.tui_stack.last() {
                    Some(&(_, n)) => n,
                    None => match self.tui_root {
                        Some(r) => r,
                        None => {
                            let r = self.push_node("", None, Some(self.self_bp));
                            self.tui_root = Some(r);
                            r
                        }
                    },
                };
                let node = self.push_node(name, Some(parent), Some(pct));
                if let Some(p) = self.nodes.get_mut(parent) {
                    p.branch_sum = p.branch_sum.saturating_add(pct);
                }
                self.tui_stack.push((sign_col, node));
            }
            None => {
                let name = content.trim();
                while self.tui_stack.last().is_some_and(|&(c, _)| c > sign_col) {
                    self.tui_stack.pop();
                }
                match self.tui_stack.last_mut() {
                    Some(top) => {
                        let parent = top.1;
                        let node = self.push_node(name, Some(parent), None);
                        if let Some(p) = self.nodes.get_mut(parent) {
                            p.continued = true;
                        }
                        if let Some(top) = self.tui_stack.last_mut() {
                            top.1 = node;
                        }
                    }
                    None => {
                        // the chain at the root (callers in the children view, or the
                        // entry's only path)
                        let parent = self.tui_root;
                        let node = self.push_node(name, parent, None);
                        if let Some(p) = parent.and_then(|p| self.nodes.get_mut(p)) {
                            p.continued = true;
                        }
                        self.tui_stack.push((sign_col, node));
                    }
                }
            }
        }
        Some(true)
    }

    /// Adds a graph line; false when it does not fit the grammar.
    fn graph_line(&mut self, line: &str) -> bool {
        if let Some(ok) = self.tui_line(line) {
            return ok;
        }
        let b = line.as_bytes();
        // Position of the first non-space, non-'|' character.
        let Some(first) = b.iter().position(|&c| c != b' ' && c != b'|') else {
            return true; // only glyphs: a spacer line
        };
        let rest = &line[first..];
        if let Some(name) = rest.strip_prefix("---") {
            // Chain start at the root.
            let col = first + 3;
            let node = self.push_node(name.trim_end(), None, None);
            self.set_tail(col, node);
            return true;
        }
        if let Some(after) = rest.strip_prefix("--") {
            let Some(end) = after.find("%--") else {
                return false;
            };
            let Some(pct) = parse_bp(&after[..=end]) else {
                return false;
            };
            let name = &after[end + 3..];
            // perf aligns the branch's continuation lines as if the percentage had at least
            // six characters (`49.94%`): `--0.51%--name` continues one column right of name.
            let col = first + 2 + (end + 1).max(6) + 2;
            // Parent chain: the '|' just left of the dashes (`|--`), or the column left of
            // ` --`.
            let parent_col = first.saturating_sub(1);
            let parent = self
                .tail_at(parent_col)
                .or_else(|| self.ensure_root(parent_col));
            let node = self.push_node(name.trim_end(), parent, Some(pct));
            if let Some(p) = parent.and_then(|p| self.nodes.get_mut(p)) {
                p.branch_sum = p.branch_sum.saturating_add(pct);
            }
            self.set_tail(col, node);
            return true;
        }
        if let Some(pct) = parse_bp(rest.trim_end()) {
            // `-g flat`: a percentage alone starts a chain printed below it.
            let node = self.push_node("", None, Some(pct));
            self.pending_flat_root = Some(node);
            return true;
        }
        // Continuation of the chain at this column (or the first frame of a flat chain).
        let parent = match (self.tail_at(first), self.pending_flat_root.take()) {
            (_, Some(root)) => root,
            (Some(t), None) => t,
            (None, None) => match self
                .tail_at(first.saturating_sub(1))
                .or_else(|| self.tail_at(first + 1))
            {
                Some(t) => t,
                None => return false,
            },
        };
        if let Some(p) = self.nodes.get_mut(parent) {
            p.continued = true;
        }
        let node = self.push_node(rest.trim_end(), Some(parent), None);
        self.set_tail(first, node);
        true
    }

    /// Branches before any `---`: the entry is the implicit root at `col`.
    fn ensure_root(&mut self, col: usize) -> Option<usize> {
        if !self.nodes.is_empty() {
            return None;
        }
        let node = self.push_node("", None, Some(self.root_weight()));
        self.set_tail(col, node);
        Some(node)
    }

    /// What a chain at the root carries when it prints no percentage: the entry's whole
    /// weight (its Children column in the children view, where the callee paths start at
    /// the entry; its Overhead otherwise).
    fn root_weight(&self) -> u64 {
        self.children_bp.unwrap_or(self.self_bp)
    }

    fn push_node(&mut self, name: &str, parent: Option<usize>, pct: Option<u64>) -> usize {
        let inherited = parent
            .and_then(|p| self.nodes.get(p))
            .map_or(self.root_weight(), |p| p.weight);
        self.nodes.push(Node {
            name: name.to_string(),
            parent,
            weight: pct.unwrap_or(inherited),
            continued: false,
            branch_sum: 0,
        });
        self.nodes.len() - 1
    }

    /// Root-to-node frame names (the implicit root's empty name left out).
    fn path(&self, mut n: usize) -> Vec<String> {
        let mut out = Vec::new();
        while let Some(node) = self.nodes.get(n) {
            if !node.name.is_empty() {
                out.push(node.name.clone());
            }
            match node.parent {
                Some(p) => n = p,
                None => break,
            }
        }
        out.reverse();
        out
    }

    /// (path root→end, weight) for every end of a chain, pruned remainders included.
    fn paths(&self) -> (Vec<(Vec<String>, u64)>, u64) {
        let mut out = Vec::new();
        let mut pruned = 0;
        for (i, node) in self.nodes.iter().enumerate() {
            if node.continued {
                continue;
            }
            let rest = node.weight.saturating_sub(node.branch_sum);
            if node.branch_sum > 0 {
                pruned += u64::from(rest > 0);
            }
            if rest > 0 {
                out.push((self.path(i), rest));
            }
        }
        (out, pruned)
    }
}

/// Parser state.
struct ReportParser<'a> {
    path: &'a str,
    profile: Profile,
    quality: DataQuality,
    columns: Vec<Column>,
    titles: Option<String>,
    children_view: bool,
    samples: Option<u64>,
    event: Option<String>,
    release: Option<String>,
    entries: Vec<Entry>,
}

impl ReportParser<'_> {
    fn col(&self, title: &str) -> Option<&Column> {
        self.columns.iter().find(|c| c.title == title)
    }

    fn entry(&mut self, line_no: u64, line: &str) -> Option<Entry> {
        let pct_col = if self.children_view {
            "Self"
        } else {
            "Overhead"
        };
        let c = self.col(pct_col)?;
        let self_bp = parse_bp(cut(line, c.start, c.end))?;
        let children_bp = match self.col("Children") {
            Some(c) => Some(parse_bp(cut(line, c.start, c.end))?),
            None => None,
        };
        let sym_col = self.col("Symbol")?;
        let sym_text = cut(line, sym_col.start, sym_col.end);
        let (kernel, symbol) = match sym_text.get(..4) {
            Some("[k] ") => (Some(true), &sym_text[4..]),
            Some("[.] ") => (Some(false), &sym_text[4..]),
            Some("[g] ") | Some("[u] ") | Some("[H] ") => (None, &sym_text[4..]),
            _ => (None, sym_text),
        };
        if symbol.is_empty() {
            return None;
        }
        let comm = self
            .col("Command")
            .map(|c| cut(line, c.start, c.end).to_string())
            .filter(|s| !s.is_empty());
        Some(Entry::new(
            line_no,
            (self_bp, children_bp),
            symbol.trim(),
            kernel,
            comm,
            false,
        ))
    }

    /// An entry line read without a ruler (pasted without the `#` header, or the TUI's
    /// saved form, which starts with a fold sign): `[-|+] P% [P%] [COMMAND  [DSO]]  [x] SYMBOL`
    /// — one percentage (Overhead) or two (Children, Self), columns apart by two or more
    /// spaces, the symbol after its `[k]`/`[.]` mark. The comm is the first column when
    /// there are two before the symbol (the default `comm,dso,sym` sort).
    fn entry_without_ruler(&mut self, line_no: u64, line: &str) -> Option<Entry> {
        let mut rest = line;
        // the TUI's fold sign: its graph lines follow in the TUI's form
        let tui = line.starts_with(['-', '+']);
        if let Some(r) = rest.strip_prefix(['-', '+']) {
            rest = r;
        }
        let rest = rest.trim_start();
        let (p1, after) = rest.split_once(' ')?;
        let first = parse_bp(p1)?;
        let after = after.trim_start();
        let (second, after) = match after.split_once(' ') {
            Some((p2, a)) if p2.ends_with('%') => (Some(parse_bp(p2)?), a.trim_start()),
            _ => (None, after),
        };
        let mark = ["[k] ", "[.] ", "[g] ", "[u] ", "[H] "]
            .iter()
            .filter_map(|m| after.find(m).map(|i| (i, *m)))
            .min()?;
        let (at, m) = mark;
        let symbol = after[at + 4..].trim();
        if symbol.is_empty() {
            return None;
        }
        let kernel = match m {
            "[k] " => Some(true),
            "[.] " => Some(false),
            _ => None,
        };
        let columns: Vec<&str> = after[..at]
            .split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect();
        let comm = (columns.len() >= 2).then(|| columns[0].to_string());
        // two percentages: Children then Self (what `# Children  Self` titles say, when
        // present)
        let (self_bp, children_bp) = match second {
            Some(s) => {
                self.children_view = true;
                (s, Some(first))
            }
            None => (first, None),
        };
        Some(Entry::new(
            line_no,
            (self_bp, children_bp),
            symbol,
            kernel,
            comm,
            tui,
        ))
    }

    fn push_stack(&mut self, e: &Entry, leaf_first: &[String], weight: u64) {
        if weight == 0 {
            return;
        }
        let frames = leaf_first
            .iter()
            .map(|f| {
                let k = (f == &e.symbol).then_some(e.kernel).flatten();
                self.profile.intern(f, k)
            })
            .collect();
        self.profile.stacks.push(WeightedStack {
            frames,
            weight,
            weight_new: None,
            comm: e.comm.as_deref().map(Comm::new),
            span: Span::new(0, SpanPos::Line(e.line)),
            ..WeightedStack::default()
        });
    }

    /// One `--children` entry read alone (see the module doc): every path of its graph is a
    /// stack, caller first as the children view prints it; the entry closes paths that
    /// stop above it and is the whole stack of an empty one.
    fn finish_excerpt_entry(&mut self, e: &Entry) {
        let (paths, pruned) = e.paths();
        if pruned > 0 {
            let path = self.path;
            self.quality.add(Problem::PerfReportPruned, pruned, || {
                format!("{path}:{}", e.line)
            });
        }
        let mut left = e.root_weight();
        for (p, w) in &paths {
            let w = (*w).min(left);
            let mut leaf_first: Vec<String> = p.iter().rev().cloned().collect();
            if !p.contains(&e.symbol) {
                leaf_first.push(e.symbol.clone());
            }
            self.push_stack(e, &leaf_first, w);
            left -= w;
        }
        self.push_stack(e, std::slice::from_ref(&e.symbol), left);
    }

    fn finish_entry(&mut self, e: Entry, folded_mode: bool) {
        let path = self.path;
        if folded_mode {
            if e.folded.is_empty() {
                let w = self.samples.map_or(0, |n| (n * e.self_bp + 5000) / 10000);
                self.quality.add(Problem::PerfReportApproximate, 1, || {
                    format!("{path}:{}", e.line)
                });
                self.push_stack(&e, std::slice::from_ref(&e.symbol), w);
            }
            for (count, frames) in &e.folded {
                let leaf_first: Vec<String> = frames.iter().rev().cloned().collect();
                self.push_stack(&e, &leaf_first, *count);
            }
            return;
        }
        let (paths, pruned) = e.paths();
        if pruned > 0 {
            self.quality.add(Problem::PerfReportPruned, pruned, || {
                format!("{path}:{}", e.line)
            });
        }
        let mut left = e.self_bp;
        if self.children_view {
            for (p, w) in &paths {
                if p.last() != Some(&e.symbol) || *w > left {
                    continue; // callee-side paths carry children weight, not self
                }
                let leaf_first: Vec<String> = p.iter().rev().cloned().collect();
                self.push_stack(&e, &leaf_first, *w);
                left -= w;
            }
            self.push_stack(&e, std::slice::from_ref(&e.symbol), left);
            return;
        }
        for (p, w) in &paths {
            let w = (*w).min(left);
            let leaf_first: Vec<String> = if p.first() == Some(&e.symbol) {
                p.clone()
            } else if p.last() == Some(&e.symbol) {
                p.iter().rev().cloned().collect()
            } else {
                std::iter::once(e.symbol.clone())
                    .chain(p.iter().cloned())
                    .collect()
            };
            self.push_stack(&e, &leaf_first, w);
            left -= w;
        }
        self.push_stack(&e, std::slice::from_ref(&e.symbol), left);
    }
}

/// Parses `perf report --stdio` text read from `path`.
pub fn parse(path: &str, text: &str) -> Result<ProfileRead, ReadError> {
    let mut p = ReportParser {
        path,
        profile: Profile::new(WeightUnit::BasisPoints),
        quality: DataQuality::default(),
        columns: Vec::new(),
        titles: None,
        children_view: false,
        samples: None,
        event: None,
        release: None,
        entries: Vec::new(),
    };
    let mut current: Option<Entry> = None;
    let mut first_line: Option<(u64, String)> = None;
    let mut folded_mode = false;
    let mut other_section = false;
    for (i, raw) in text.lines().enumerate() {
        let line_no = i as u64 + 1;
        let line = raw.strip_suffix('\r').unwrap_or(raw);
        if line.trim().is_empty() {
            continue;
        }
        if first_line.is_none() {
            first_line = Some((line_no, line.chars().take(80).collect()));
        }
        if other_section && !line.starts_with("# Samples:") {
            continue; // inside an ignored event's section (counted at its start)
        }
        if let Some(h) = line.strip_prefix('#') {
            if let Some(rest) = h.trim_start().strip_prefix("Samples:") {
                let rest = rest.trim_start();
                let event = rest.split('\'').nth(1).map(str::to_string);
                if current.is_some() || !p.entries.is_empty() {
                    // A second event's section (`perf record -e a -e b`): one event is
                    // profiled, like the other readers.
                    let ev = event.unwrap_or_default();
                    p.quality.add(Problem::PerfReportOtherEvent, 1, || {
                        format!("{path}:{line_no}: {ev}")
                    });
                    other_section = true;
                    continue;
                }
                // `781` or, above 1000, perf's abbreviation `2K` / `3M`.
                let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
                let scale = match rest[digits.len()..].chars().next() {
                    Some('K') => 1_000,
                    Some('M') => 1_000_000,
                    _ => 1,
                };
                p.samples = digits.parse::<u64>().ok().map(|n| n * scale);
                p.event = event;
            } else if let Some(r) = h.trim_start().strip_prefix("os release :") {
                p.release = Some(r.trim().to_string());
            } else if h.trim_start().starts_with("Overhead")
                || h.trim_start().starts_with("Children")
            {
                p.titles = Some(line.to_string());
            } else if h.trim_start().starts_with('.') {
                if let Some(titles) = &p.titles {
                    let ranges = ruler_ranges(line);
                    let n = ranges.len();
                    p.columns = ranges
                        .iter()
                        .enumerate()
                        .map(|(k, &(s, e))| Column {
                            title: cut(titles, s, if k + 1 == n { None } else { Some(e) })
                                .to_string(),
                            start: s,
                            end: if k + 1 == n { None } else { Some(e) },
                        })
                        .collect();
                    // "Shared Object" spans two words; titles are cut by the ruler, so fine.
                    p.children_view = p.columns.iter().any(|c| c.title == "Children");
                }
            }
            continue;
        }
        // without a ruler (a pasted excerpt, the TUI's saved form) or a line the ruler does
        // not fit (the TUI's fold sign shifts the columns): entries by their own shape
        let entry = if p.columns.is_empty() {
            None
        } else {
            p.entry(line_no, line)
        };
        if let Some(e) = entry.or_else(|| p.entry_without_ruler(line_no, line)) {
            if let Some(prev) = current.take() {
                p.entries.push(prev);
            }
            current = Some(e);
            continue;
        }
        if p.columns.is_empty() && current.is_none() {
            p.quality.add(Problem::PerfReportBadLine, 1, || {
                format!(
                    "{path}:{line_no}: {}",
                    line.chars().take(100).collect::<String>()
                )
            });
            continue;
        }
        // `-g folded` line: COUNT frame;frame…
        let t = line.trim_start();
        let digits = t.bytes().take_while(u8::is_ascii_digit).count();
        if digits > 0
            && t.as_bytes().get(digits) == Some(&b' ')
            && !line.starts_with("            ")
        {
            if let (Some(e), Ok(count)) = (current.as_mut(), t[..digits].parse::<u64>()) {
                folded_mode = true;
                let frames = t[digits + 1..]
                    .trim()
                    .split(';')
                    .map(str::to_string)
                    .collect();
                e.folded.push((count, frames));
                continue;
            }
        }
        let ok = current.as_mut().is_some_and(|e| e.graph_line(line));
        if !ok {
            p.quality.add(Problem::PerfReportBadLine, 1, || {
                format!(
                    "{path}:{line_no}: {}",
                    line.chars().take(100).collect::<String>()
                )
            });
        }
    }
    if let Some(prev) = current.take() {
        p.entries.push(prev);
    }
    if p.entries.is_empty() {
        let (line_no, found) = first_line.unwrap_or((1, "an empty input".to_string()));
        return Err(ReadError::at_line(
            path,
            line_no,
            "perf report --stdio output (a `# Overhead`/`# Children` title, its `# ....` ruler, then entries `NN.NN% … SYMBOL`)",
            format!("{found:?}"),
        ));
    }
    if folded_mode {
        p.profile.unit = WeightUnit::Samples;
    }
    let entries = std::mem::take(&mut p.entries);
    let reported_totals = p.children_view.then(|| {
        let mut totals: Vec<(String, u64)> = Vec::new();
        for e in &entries {
            let w = e.children_bp.unwrap_or(0);
            match totals.iter_mut().find(|(n, _)| *n == e.symbol) {
                Some(t) => t.1 += w,
                None => totals.push((e.symbol.clone(), w)),
            }
        }
        totals
    });
    // One children-view entry pasted alone: its own graph is all there is of the profile.
    let excerpt = p.children_view && !folded_mode && entries.len() == 1;
    if excerpt {
        let e = &entries[0];
        p.quality.add(Problem::PerfReportOneEntry, 1, || {
            format!("{path}:{}: {}", e.line, e.symbol)
        });
        p.finish_excerpt_entry(e);
    } else {
        for e in entries {
            p.finish_entry(e, folded_mode);
        }
    }
    if !folded_mode {
        p.quality
            .add(Problem::PerfReportLossy, 1, || path.to_string());
    }
    Ok(ProfileRead {
        profile: p.profile,
        quality: p.quality,
        format: ProfileFormat::PerfReport,
        event: p.event,
        kernel_release: p.release,
        reported_totals,
    })
}

/// Reads `input` as perf report text.
pub fn read(input: Input) -> Result<ProfileRead, ReadError> {
    let (path, text) = read_text(input)?;
    parse(&path, &text)
}

/// Whether `head` looks like `perf report --stdio` output (an `# Overhead` or `# Children`
/// column title line among the first lines).
pub fn sniff(head: &[u8]) -> bool {
    let text = String::from_utf8_lossy(head);
    let titled = text.lines().take(60).any(|l| {
        let t = l.strip_prefix('#').map(str::trim_start);
        t.is_some_and(|t| {
            t.starts_with("Overhead ") || t.starts_with("Children ") || t == "Overhead"
        })
    });
    // without the header (a pasted excerpt, the TUI's saved form): the first line that is
    // not a comment is an entry
    titled
        || text
            .lines()
            .map(|l| l.strip_suffix('\r').unwrap_or(l))
            .find(|l| !l.trim().is_empty() && !l.starts_with('#'))
            .is_some_and(looks_like_entry)
}

/// `[-|+] NN.NN% [NN.NN%] … [k]|[.] SYMBOL`: the shape of a report entry line.
fn looks_like_entry(line: &str) -> bool {
    let rest = line.strip_prefix(['-', '+']).unwrap_or(line).trim_start();
    let Some((p1, after)) = rest.split_once(' ') else {
        return false;
    };
    parse_bp(p1).is_some()
        && ["[k] ", "[.] ", "[g] ", "[u] ", "[H] "]
            .iter()
            .any(|m| after.contains(m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bp() {
        assert_eq!(parse_bp("49.30%"), Some(4930));
        assert_eq!(parse_bp(" 0.5%"), Some(50));
        assert_eq!(parse_bp("100%"), Some(10000));
        assert_eq!(parse_bp("x%"), None);
    }
}
