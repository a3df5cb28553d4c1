//! `stallscope profile`: reads a CPU profile (perf.data samples with callchains, `perf
//! script` text, folded stacks, `perf report --stdio` text) and prints, per function, its
//! self share (samples where it is the leaf, like `perf report --no-children`) and its total
//! share (samples it appears in, like perf's *Children* column).
//!
//! Shares are integer basis points of the total weight (`49.30%` = 4930), rounded half up,
//! so they compare directly with perf's 2-decimal percentages. `--format folded` writes the
//! stacks for flamegraph.pl ([`write_folded`]). `--format json` writes one
//! document, schema `stallscope.profile/1`:
//! `{schema, input, format, event, unit, total_weight, share_denominator (10000 for perf
//! report text, else total_weight), totals_from_input, stacks,
//! functions: [{name, kernel,
//! self_weight, total_weight, self_bp, total_bp}], quality: {key: {severity, count,
//! description, examples}}}`.

use std::io::Write;

use clap::{Args, ValueEnum};
use serde_json::{json, Value};
use stallscope::model::{Profile, WeightUnit};
use stallscope::read::profile::{
    read_profile, KernelSymbolSource, ProfileFormat, ProfileOptions, ProfileRead,
};

use crate::common::{write_quality_text, CliError};

/// Order of the function table.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SortBy {
    /// Self share first (`perf report --no-children`).
    #[default]
    #[value(name = "self")]
    Self_,
    /// Total (children) share first (`perf report --children`).
    Total,
}

/// `--format` of `stallscope profile`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum ProfileOutput {
    /// The function table.
    #[default]
    Text,
    /// One JSON document (`stallscope.profile/1`).
    Json,
    /// Folded stacks for flamegraph.pl / inferno: `comm;root;…;leaf WEIGHT`, identical
    /// stacks summed, in first-seen order.
    Folded,
}

/// Arguments of `stallscope profile`.
#[derive(Args, Debug)]
#[command(
    after_help = "Examples:\n  sudo perf record -a -g -- sleep 5\n  stallscope profile perf.data --top 15\n  \
stallscope profile perf.data --kallsyms saved-kallsyms.txt\n  perf script | stallscope profile -\n  \
stallscope profile out.folded --sort total --format json\n  perf report --stdio --no-children > r.txt && stallscope profile r.txt\n  \
stallscope profile perf.data --format folded | flamegraph.pl > flame.svg\n  \
stallscope profile perf.data --event sched:sched_switch   # off-CPU stacks (perf record -e sched:sched_switch -g)"
)]
pub struct ProfileArgs {
    /// Profile file (`-` = stdin): perf.data, perf script text, folded stacks, perf report text.
    #[arg(value_name = "FILE")]
    file: String,
    /// Functions to print (0 = all).
    #[arg(long, default_value_t = 20, value_name = "N")]
    top: usize,
    /// Order by self share or by total (children) share.
    #[arg(long, value_enum, default_value_t)]
    sort: SortBy,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    format: ProfileOutput,
    /// Kernel symbol table (`/proc/kallsyms` of the recording host). Default: this host's
    /// /proc/kallsyms when the input's kernel release is the running one; `none` disables.
    #[arg(long, value_name = "FILE")]
    kallsyms: Option<String>,
    /// perf.data: leave user frames named by file and offset (`[libc.so.6+0xf8350]`, perf
    /// report's key) instead of naming them from the recording's binaries found on this
    /// host (by build id: perf's ~/.debug cache, else the recorded path).
    #[arg(long)]
    no_user_symbols: bool,
    /// The sampled event to profile (e.g. `cycles`, `sched:sched_switch` for off-CPU stacks);
    /// default: the first event with call chains.
    #[arg(long, value_name = "NAME")]
    event: Option<String>,
    /// Skip format detection: perf-data, perf-script-text, folded, perf-report-text.
    #[arg(long, value_name = "FORMAT")]
    input_format: Option<String>,
}

/// One row of the function table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FunctionShare {
    /// Symbol name.
    pub name: String,
    /// Kernel symbol, when known.
    pub kernel: Option<bool>,
    /// Self weight.
    pub self_weight: u64,
    /// Total (children) weight.
    pub total_weight: u64,
}

/// `part / whole` in basis points, rounded half up (0 when `whole` is 0).
pub fn basis_points(part: u64, whole: u64) -> u64 {
    if whole == 0 {
        return 0;
    }
    let v = (u128::from(part) * 20_000 + u128::from(whole)) / (2 * u128::from(whole));
    u64::try_from(v).unwrap_or(u64::MAX)
}

fn fmt_bp(bp: u64) -> String {
    format!("{}.{:02}%", bp / 100, bp % 100)
}

/// Every function with a non-zero weight, sorted by `sort` (ties by the other share, then
/// name).
pub fn function_table(p: &Profile, sort: SortBy) -> Vec<FunctionShare> {
    let selfw = p.self_weights();
    let totalw = p.total_weights();
    let mut rows: Vec<FunctionShare> = (0..p.symbols.len())
        .filter(|&i| totalw[i] > 0 || selfw[i] > 0)
        .map(|i| FunctionShare {
            name: p.symbols[i].to_string(),
            kernel: p.kernel.get(i).copied().flatten(),
            self_weight: selfw[i],
            total_weight: totalw[i],
        })
        .collect();
    sort_rows(&mut rows, sort);
    rows
}

/// Replaces the total weights by the input's own (perf report's Children column) and adds
/// the symbols only that column names, then sorts again.
pub fn apply_reported_totals(
    rows: &mut Vec<FunctionShare>,
    totals: &[(String, u64)],
    sort: SortBy,
) {
    for (name, w) in totals {
        match rows.iter_mut().find(|r| &r.name == name) {
            Some(r) => r.total_weight = *w,
            None => rows.push(FunctionShare {
                name: name.clone(),
                kernel: None,
                self_weight: 0,
                total_weight: *w,
            }),
        }
    }
    sort_rows(rows, sort);
}

fn sort_rows(rows: &mut [FunctionShare], sort: SortBy) {
    rows.sort_by(|a, b| {
        let key = |r: &FunctionShare| match sort {
            SortBy::Self_ => (r.self_weight, r.total_weight),
            SortBy::Total => (r.total_weight, r.self_weight),
        };
        key(b).cmp(&key(a)).then_with(|| a.name.cmp(&b.name))
    });
}

fn unit_text(u: &WeightUnit) -> String {
    match u {
        WeightUnit::Samples => "samples".to_string(),
        WeightUnit::Period(e) => format!("period of {e}"),
        WeightUnit::BasisPoints => "basis points of perf's total".to_string(),
    }
}

fn kernel_mark(k: Option<bool>) -> &'static str {
    match k {
        Some(true) => "[k]",
        Some(false) => "[.]",
        None => "   ",
    }
}

/// Runs `stallscope profile`.
pub fn run(a: &ProfileArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let symbols = match a.kallsyms.as_deref() {
        None => KernelSymbolSource::Auto,
        Some("none") => KernelSymbolSource::Off,
        Some(f) => KernelSymbolSource::File(f.to_string()),
    };
    let forced = match &a.input_format {
        None => None,
        Some(n) => Some(ProfileFormat::from_name(n).ok_or_else(|| {
            let names: Vec<&str> = ProfileFormat::ALL.iter().map(|f| f.name()).collect();
            CliError::Usage(format!(
                "unknown --input-format {n:?}; expected one of {}",
                names.join(", ")
            ))
        })?),
    };
    let opts = ProfileOptions {
        symbols,
        event: a.event.clone(),
        no_user_symbols: a.no_user_symbols,
    };
    let r = read_profile(&a.file, forced, &opts)?;
    let mut rows = function_table(&r.profile, a.sort);
    if let Some(totals) = &r.reported_totals {
        apply_reported_totals(&mut rows, totals, a.sort);
    }
    // Shares are of the total weight; perf report text already counts in basis points of
    // perf's own total, whose printed entries need not sum to exactly 100.00%.
    let total = match r.profile.unit {
        WeightUnit::BasisPoints => 10_000,
        _ => r.profile.total_weight(),
    };
    let shown = if a.top == 0 {
        rows.len()
    } else {
        a.top.min(rows.len())
    };
    match a.format {
        ProfileOutput::Json => write_json(a, &r, &rows[..shown], total, out),
        ProfileOutput::Folded => write_folded(&r.profile, out),
        ProfileOutput::Text => {
            writeln!(
                out,
                "Profile: {}  [{}]{}",
                a.file,
                r.format.name(),
                r.event
                    .as_deref()
                    .map(|e| format!("  event {e}"))
                    .unwrap_or_default()
            )?;
            writeln!(
                out,
                "  {} stacks, total weight {} ({})",
                r.profile.stacks.len(),
                r.profile.total_weight(),
                unit_text(&r.profile.unit)
            )?;
            write_quality_text(out, &r.quality)?;
            if r.reported_totals.is_some() {
                writeln!(
                    out,
                    "  Total = perf's Children column as printed in the input"
                )?;
            }
            writeln!(out, "{:>8}  {:>8}  Function", "Self", "Total")?;
            for row in &rows[..shown] {
                writeln!(
                    out,
                    "{:>8}  {:>8}  {} {}",
                    fmt_bp(basis_points(row.self_weight, total)),
                    fmt_bp(basis_points(row.total_weight, total)),
                    kernel_mark(row.kernel),
                    row.name
                )?;
            }
            if shown < rows.len() {
                writeln!(
                    out,
                    "  … {} more functions (--top 0 shows all)",
                    rows.len() - shown
                )?;
            }
            Ok(())
        }
    }
}

/// Writes `p` as folded stacks: the comm (spaces as `_`, like stackcollapse-perf) as the
/// root frame when known, then the frames root first, then the summed weight.
pub fn write_folded(p: &Profile, out: &mut dyn Write) -> Result<(), CliError> {
    let mut order: Vec<String> = Vec::new();
    let mut sums: std::collections::HashMap<String, u64> = std::collections::HashMap::new();
    for s in &p.stacks {
        let mut line = s
            .comm
            .map(|c| c.as_str().replace(' ', "_"))
            .unwrap_or_default();
        for &f in s.frames.iter().rev() {
            if !line.is_empty() {
                line.push(';');
            }
            // `;` separates frames: one inside a name becomes `:` (stackcollapse does the same).
            line.push_str(&p.symbol(f).replace(';', ":"));
        }
        if line.is_empty() {
            line.push_str("[unknown]");
        }
        match sums.get_mut(&line) {
            Some(w) => *w += s.weight,
            None => {
                sums.insert(line.clone(), s.weight);
                order.push(line);
            }
        }
    }
    for line in order {
        writeln!(out, "{line} {}", sums.get(&line).copied().unwrap_or(0))?;
    }
    Ok(())
}

fn write_json(
    a: &ProfileArgs,
    r: &ProfileRead,
    rows: &[FunctionShare],
    total: u64,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let functions: Vec<Value> = rows
        .iter()
        .map(|row| {
            json!({
                "name": row.name,
                "kernel": row.kernel,
                "self_weight": row.self_weight,
                "total_weight": row.total_weight,
                "self_bp": basis_points(row.self_weight, total),
                "total_bp": basis_points(row.total_weight, total),
            })
        })
        .collect();
    let unit = match &r.profile.unit {
        WeightUnit::Samples => json!({"kind": "samples"}),
        WeightUnit::Period(e) => json!({"kind": "period", "event": e}),
        WeightUnit::BasisPoints => json!({"kind": "basis_points"}),
    };
    let doc = json!({
        "schema": "stallscope.profile/1",
        "input": a.file,
        "format": r.format.name(),
        "event": r.event,
        "kernel_release": r.kernel_release,
        "unit": unit,
        "total_weight": r.profile.total_weight(),
        "share_denominator": total,
        "totals_from_input": r.reported_totals.is_some(),
        "stacks": r.profile.stacks.len(),
        "functions": functions,
        "quality": serde_json::to_value(&r.quality)?,
    });
    serde_json::to_writer_pretty(&mut *out, &doc)?;
    writeln!(out)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basis_points_round_half_up() {
        assert_eq!(basis_points(1, 781), 13); // 0.128% → 0.13%
        assert_eq!(basis_points(385, 781), 4930); // perf: 49.30%
        assert_eq!(basis_points(1, 0), 0);
        assert_eq!(fmt_bp(4930), "49.30%");
        assert_eq!(fmt_bp(5), "0.05%");
    }
}
