//! `stallscope iolat`: btt's block I/O phases (Q2Q Q2G G2I Q2M I2D D2C Q2C, plus M2D and
//! Q2D) with N / min / avg / max per device, per process or per operation, log2 latency
//! histograms and per-second IOPS / throughput. Definitions: `stallscope::timeline::iolat`
//! and `docs/iolat.md`.
//!
//! Text output follows btt's `-A` layout (seconds with 9 decimals, devices as `(  7,  0)`),
//! so the tables can be compared line by line:
//!
//! ```text
//! ==================== Per Device ====================
//!
//!             Q2Q           MIN           AVG           MAX           N
//! --------------- ------------- ------------- ------------- -----------
//! (  7,  0)         0.000000544   0.005578401   0.160759294          33
//! ```
//!
//! Inputs that are all blktrace binary files take a lean path (`stallscope::iolat`, over
//! `stallscope::read::blktrace::lean`): records are decoded straight into a reused `BlockEvent` and fed to the tracker, with no `Event` (and no
//! allocation) per record. Anything unusual in them (garbage between records, a truncated
//! record, an action stallscope does not model) makes the command start over on the general
//! path, so errors and data-quality counts are the reader's. With more than one usable CPU
//! the files are read on a second thread (`stallscope::read::blktrace::lean::batch`) while
//! this one runs the tracker; the output is the same either way.
//!
//! JSON (`--format json`), schema `stallscope.iolat/1`:
//! `{"schema", "by", "counts": {bios, requests, flushes, requeued, partially_completed,
//! beyond_rate_window}, "groups": [GROUP], "all": GROUP, "rates": [{"device", "seconds":
//! [{second, ios, read_ios, write_ios, bytes, read_bytes, write_bytes}]}], "data_quality"}`
//! where GROUP is `{"key", "remapper"?, "bios", "phases": [{phase, n, min_ns, avg_ns, max_ns,
//! total_ns}], "histograms": [{phase, buckets: [{low_us, high_us, count}]}]}` and `groups`
//! holds the rows selected by `--by`.

use std::io::Write;

use clap::Args;
use serde::Serialize;
use stallscope::iolat::{iolat, IolatDone, IolatRun};
use stallscope::model::DataQuality;
use stallscope::timeline::iolat::{
    DeviceRates, GroupBy, GroupReport, IolatReport, RequestCounts, PHASES,
};

use crate::common::{write_quality_text, CliError, InputArgs, OutputFormat};

/// Arguments of `stallscope iolat`.
#[derive(Args, Debug)]
#[command(
    after_help = "Phases as btt defines them: Q = bio queued, G = request allocated, \
I = inserted into the I/O scheduler, M = merged into a request, D = dispatched to the driver, \
C = completed. btt measures every queued bio, so a request of 16 merged bios gives 16 D2C and \
Q2C samples, each counted for the task that queued that bio.\n\n\
Inputs: blktrace per-CPU files (DEV.blktrace.N, or the DEV prefix, or their directory), \
blkparse text, or block:* tracepoints in perf.data, trace.dat or ftrace text.\n\n\
Examples:\n  stallscope iolat sda.blktrace.0 sda.blktrace.1\n  stallscope iolat sda          \
# every sda.blktrace.N\n  stallscope iolat --by process trace.dat\n  \
blkparse -i sda | stallscope iolat -\n  stallscope iolat --format json perf.data | jq '.groups[0].phases'"
)]
pub struct IolatArgs {
    #[command(flatten)]
    input: InputArgs,
    /// Rows per device, per process (the task that queued each bio) or per operation.
    #[arg(long, value_name = "device|process|op", default_value = "device")]
    by: String,
    /// Output format.
    #[arg(long, value_enum, default_value_t)]
    format: OutputFormat,
    /// Read blktrace files through the general reader even when the lean path could (tests).
    #[arg(long, hide = true)]
    general_path: bool,
}

#[derive(Serialize)]
struct IolatJson<'a> {
    schema: &'static str,
    by: GroupBy,
    counts: &'a RequestCounts,
    groups: &'a [GroupReport],
    all: &'a GroupReport,
    rates: &'a [DeviceRates],
    data_quality: &'a DataQuality,
}

/// Seconds with 9 decimals from integer ns (btt's `%13.9f`).
fn secs9(ns: u64) -> String {
    format!("{}.{:09}", ns / 1_000_000_000, ns % 1_000_000_000)
}

/// btt's device label `(  7,  0)`; other keys as they are.
fn label(by: GroupBy, key: &str) -> String {
    if by == GroupBy::Device {
        if let Some((ma, mi)) = key.split_once(',') {
            return format!("({ma:>3},{mi:>3})");
        }
    }
    key.to_string()
}

fn groups_of(report: &IolatReport, by: GroupBy) -> &[GroupReport] {
    match by {
        GroupBy::Device => &report.devices,
        GroupBy::Process => &report.processes,
        GroupBy::Op => &report.ops,
    }
}

fn write_table_header(out: &mut dyn Write, title: &str) -> std::io::Result<()> {
    writeln!(
        out,
        "{title:>15} {:>13} {:>13} {:>13} {:>11}",
        "MIN", "AVG", "MAX", "N"
    )?;
    writeln!(
        out,
        "--------------- ------------- ------------- ------------- -----------"
    )
}

fn write_row(out: &mut dyn Write, name: &str, g: &GroupReport, phase: &str) -> std::io::Result<()> {
    if let Some(r) = g.phases.iter().find(|r| r.phase == phase) {
        writeln!(
            out,
            "{name:<15} {:>13} {:>13} {:>13} {:>11}",
            secs9(r.min_ns),
            secs9(r.avg_ns),
            secs9(r.max_ns),
            r.n
        )?;
    }
    Ok(())
}

fn write_text(
    out: &mut dyn Write,
    report: &IolatReport,
    by: GroupBy,
    dq: &DataQuality,
) -> std::io::Result<()> {
    let c = &report.counts;
    writeln!(
        out,
        "stallscope iolat: {} bios queued, {} requests and {} flushes completed ({} requeued, {} completed in parts)\n",
        c.bios, c.requests, c.flushes, c.requeued, c.partially_completed
    )?;
    let groups = groups_of(report, by);
    let title = match by {
        GroupBy::Device => "Per Device",
        GroupBy::Process => "Per Process",
        GroupBy::Op => "Per Operation",
    };
    writeln!(out, "==================== {title} ====================\n")?;
    for phase in PHASES {
        write_table_header(out, phase)?;
        for g in groups {
            write_row(out, &label(by, &g.key), g, phase)?;
        }
        writeln!(out)?;
    }
    writeln!(
        out,
        "==================== All Devices ====================\n"
    )?;
    write_table_header(out, "ALL")?;
    for phase in PHASES {
        write_row(out, phase, &report.all, phase)?;
    }
    writeln!(out)?;
    writeln!(
        out,
        "==================== Latency Histograms (log2 usecs) ====================\n"
    )?;
    for g in groups {
        for h in &g.histograms {
            let max = h.buckets.iter().map(|b| b.count).max().unwrap_or(0).max(1);
            writeln!(out, "{} {}", label(by, &g.key), h.phase)?;
            writeln!(out, "{:>19} : {:<9} distribution", "usecs", "count")?;
            for b in &h.buckets {
                let stars = (b.count * 40).div_ceil(max) as usize;
                let high = if b.high_us == u64::MAX {
                    "inf".to_string()
                } else {
                    b.high_us.to_string()
                };
                writeln!(
                    out,
                    "{:>8} -> {:<8}: {:<9}|{:<40}|",
                    b.low_us,
                    high,
                    b.count,
                    "*".repeat(stars)
                )?;
            }
            writeln!(out)?;
        }
    }
    writeln!(
        out,
        "==================== Per Second ====================\n"
    )?;
    writeln!(
        out,
        "{:>10} | {:>8} {:>9} {:>9} {:>9} {:>10} {:>10}",
        "DEV", "SECOND", "IOPS", "READ/s", "WRITE/s", "READ MB/s", "WRITE MB/s"
    )?;
    for d in &report.rates {
        for s in &d.seconds {
            writeln!(
                out,
                "{:>10} | {:>8} {:>9} {:>9} {:>9} {:>10} {:>10}",
                label(GroupBy::Device, &d.device),
                s.second,
                s.ios,
                s.read_ios,
                s.write_ios,
                mb(s.read_bytes),
                mb(s.write_bytes)
            )?;
        }
    }
    writeln!(out)?;
    write_quality_text(out, dq)
}

/// Bytes as MB (10^6) with 2 decimals, in integer arithmetic.
fn mb(bytes: u64) -> String {
    let centi = (bytes + 5_000) / 10_000;
    format!("{}.{:02}", centi / 100, centi % 100)
}

/// Runs the command.
pub fn run(args: &IolatArgs, out: &mut dyn Write) -> Result<(), CliError> {
    let by = GroupBy::from_name(&args.by).ok_or_else(|| {
        CliError::Usage(format!(
            "unknown --by {:?}; expected device, process or op",
            args.by
        ))
    })?;
    let mut run = IolatRun::new(args.input.options()?, by);
    run.general_path = args.general_path;
    let IolatDone {
        report,
        quality: dq,
        ..
    } = iolat(&run)?;
    let c = &report.counts;
    if c.bios == 0 && c.requests == 0 && c.flushes == 0 {
        return Err(CliError::missing(
            "iolat",
            &args.input.files,
            "no block request events (iolat needs block_bio_queue / Q and block_rq_issue / D, with block_rq_insert, block_getrq and block_rq_complete for the other phases)",
            "stallscope record --events block,block:block_getrq -o trace.dat -- COMMAND` or `blktrace -d DEV",
        )
        .json_too(args.format, out));
    }
    match args.format {
        OutputFormat::Text => write_text(out, &report, by, &dq)?,
        OutputFormat::Json => {
            serde_json::to_writer(
                &mut *out,
                &IolatJson {
                    schema: "stallscope.iolat/1",
                    by,
                    counts: &report.counts,
                    groups: groups_of(&report, by),
                    all: &report.all,
                    rates: &report.rates,
                    data_quality: &dq,
                },
            )?;
            out.write_all(b"\n")?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_and_labels_print_like_btt() {
        // btt prints "%13.9f" of seconds and "(%3d,%3d)" devices.
        assert_eq!(secs9(544), "0.000000544");
        assert_eq!(secs9(160_759_294), "0.160759294");
        assert_eq!(secs9(12_000_000_001), "12.000000001");
        assert_eq!(label(GroupBy::Device, "7,0"), "(  7,  0)");
        assert_eq!(label(GroupBy::Device, "259,12"), "(259, 12)");
        assert_eq!(label(GroupBy::Process, "dd"), "dd");
        assert_eq!(mb(1_234_567), "1.23");
        assert_eq!(mb(0), "0.00");
    }
}
