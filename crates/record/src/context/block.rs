//! Block device queue settings from `/sys/block/<dev>/`.
//!
//! ```text
//! dev                   "253:0"
//! queue/scheduler       "none [mq-deadline] kyber bfq"   → mq-deadline
//! queue/nr_requests     "256"
//! device/queue_depth    "32"   (SCSI/SATA only)
//! ```

use std::fs;
use std::path::Path;

use stallscope_model::BlockDeviceContext;

use super::kernel::selected_choice;

/// Reads every device under `sys_block` (`/sys/block`), sorted by name.
pub fn block_devices(sys_block: &Path) -> Vec<BlockDeviceContext> {
    let Ok(rd) = fs::read_dir(sys_block) else {
        return Vec::new();
    };
    let mut devs: Vec<BlockDeviceContext> = rd
        .flatten()
        .map(|e| {
            let dir = e.path();
            let read = |rel: &str| {
                fs::read_to_string(dir.join(rel))
                    .ok()
                    .map(|s| s.trim().to_string())
            };
            BlockDeviceContext {
                name: e.file_name().to_string_lossy().into_owned(),
                dev: read("dev"),
                scheduler: read("queue/scheduler")
                    .and_then(|s| selected_choice(&s).or_else(|| (!s.is_empty()).then_some(s))),
                nr_requests: read("queue/nr_requests").and_then(|s| s.parse().ok()),
                queue_depth: read("device/queue_depth").and_then(|s| s.parse().ok()),
            }
        })
        .collect();
    devs.sort_by(|a, b| a.name.cmp(&b.name));
    devs
}
