//! tracefs metadata copied into the trace.dat, read before tracing starts: `header_page`,
//! `header_event`, the enabled events' `format` files, `events/ftrace/*/format`,
//! `printk_formats`, `trace_clock`; and at the end `saved_cmdlines` (completed with the names
//! of the tasks the system context describes).

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use stallscope_model::SystemContext;
use stallscope_read::ringbuf::PageLayout;
use stallscope_read::tracefs_format::{parse_saved_cmdlines, Endian, HeaderPage};

use crate::events::ResolvedEvents;
use crate::instance::Instance;
use crate::tracefs::read_bytes;
use crate::RecordError;

/// Byte order of this host = of the running kernel whose pages we copy.
const HOST_ENDIAN: Endian = if cfg!(target_endian = "big") {
    Endian::Big
} else {
    Endian::Little
};

/// Metadata blobs of one recording.
#[derive(Debug)]
pub struct Metadata {
    /// `events/header_page`.
    pub header_page: Vec<u8>,
    /// `events/header_event`.
    pub header_event: Vec<u8>,
    /// Sub-buffer layout from `header_page`.
    pub layout: PageLayout,
    /// Enabled events' format files per system.
    pub systems: Vec<(String, Vec<Vec<u8>>)>,
    /// `events/ftrace/*/format`.
    pub ftrace_formats: Vec<Vec<u8>>,
    /// `printk_formats` (empty when unreadable).
    pub printk_formats: Vec<u8>,
    /// The instance's `trace_clock` (`[local] global …`).
    pub trace_clock: String,
    /// Offset of `common_pid` in every record, from the first format file (4 if absent).
    pub common_pid_offset: usize,
}

impl Metadata {
    /// Reads everything from the instance (formats are shared with the top level) and the
    /// tracefs root.
    pub fn read(
        root: &Path,
        inst: &Instance,
        events: &ResolvedEvents,
    ) -> Result<Metadata, RecordError> {
        let header_page = read_bytes(&inst.path("events/header_page"))?;
        let header_event = read_bytes(&inst.path("events/header_event"))?;
        let hp = HeaderPage::parse(&String::from_utf8_lossy(&header_page))
            .map_err(|e| RecordError::Reader(format!("cannot parse events/header_page: {e}")))?;
        let layout = PageLayout::from_header_page(&hp, HOST_ENDIAN).ok_or_else(|| {
            RecordError::Reader(format!(
                "events/header_page has a {}-byte commit word (expected 4 or 8)",
                hp.commit_size
            ))
        })?;
        let mut systems = Vec::new();
        for (sys, evs) in &events.by_system {
            let mut formats = Vec::new();
            for ev in evs {
                formats.push(read_bytes(
                    &inst.path(&format!("events/{sys}/{ev}/format")),
                )?);
            }
            systems.push((sys.clone(), formats));
        }
        let common_pid_offset = systems
            .first()
            .and_then(|(_, f)| f.first())
            .and_then(|f| common_pid_offset(&String::from_utf8_lossy(f)))
            .unwrap_or(4);
        Ok(Metadata {
            common_pid_offset,
            header_page,
            header_event,
            layout,
            systems,
            ftrace_formats: read_ftrace_formats(root),
            printk_formats: read_bytes(&root.join("printk_formats")).unwrap_or_default(),
            trace_clock: inst.read("trace_clock").unwrap_or_default(),
        })
    }
}

/// The `offset:` of `common_pid` in a format file
/// (`\tfield:int common_pid;\toffset:4;\tsize:4;\tsigned:1;`).
pub fn common_pid_offset(format: &str) -> Option<usize> {
    let line = format.lines().find(|l| l.contains(" common_pid;"))?;
    let rest = line.split("offset:").nth(1)?;
    rest.split(';').next()?.trim().parse().ok()
}

/// `events/ftrace/*/format` (readable ones; used by trace-cmd for `print`/`bprint` only).
pub fn read_ftrace_formats(root: &Path) -> Vec<Vec<u8>> {
    let Ok(rd) = fs::read_dir(root.join("events/ftrace")) else {
        return Vec::new();
    };
    let mut names: Vec<PathBuf> = rd.flatten().map(|e| e.path().join("format")).collect();
    names.sort();
    names
        .into_iter()
        .filter_map(|p| read_bytes(&p).ok())
        .collect()
}

/// The kernel's `saved_cmdlines` plus `PID COMM` for described tasks it does not name (the
/// kernel keeps only a small, recent set of names).
pub fn merged_cmdlines(kernel: &str, ctx: &SystemContext) -> String {
    let mut out = kernel.to_string();
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
    let known: BTreeSet<i32> = parse_saved_cmdlines(kernel)
        .into_iter()
        .map(|(p, _)| p)
        .collect();
    for t in &ctx.tasks {
        if !known.contains(&t.pid) && !t.comm.contains('\n') {
            out.push_str(&format!("{} {}\n", t.pid, t.comm));
        }
    }
    out
}

/// The system context as the JSON stored in option `OPTION_SYSTEM_CONTEXT`.
pub fn context_json(ctx: &SystemContext) -> Result<Vec<u8>, RecordError> {
    serde_json::to_vec(ctx)
        .map_err(|e| RecordError::Reader(format!("cannot serialize the system context: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_pid_offset_from_a_real_format() {
        let f = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../fixtures/samples/formats/sched_sched_switch.format"
        ))
        .unwrap();
        assert_eq!(common_pid_offset(&f), Some(4));
        assert_eq!(common_pid_offset("name: x\n"), None);
    }

    #[test]
    fn cmdlines_keep_the_kernel_names_and_add_described_tasks() {
        let ctx = SystemContext {
            tasks: vec![
                stallscope_model::TaskContext {
                    pid: 12,
                    comm: "renamed".into(),
                    ..Default::default()
                },
                stallscope_model::TaskContext {
                    pid: 40,
                    comm: "a b".into(),
                    ..Default::default()
                },
            ],
            ..Default::default()
        };
        assert_eq!(
            merged_cmdlines("12 kworker/0:1\n7 bash", &ctx),
            "12 kworker/0:1\n7 bash\n40 a b\n"
        );
        assert_eq!(merged_cmdlines("", &ctx), "12 renamed\n40 a b\n");
    }
}
