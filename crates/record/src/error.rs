//! Why a recording could not be made. Every variant is a fatal, user-facing error (the CLI
//! exits 2 and prints the message); recoverable problems are warnings printed to stderr.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// A recording failed.
#[derive(Debug)]
pub enum RecordError {
    /// Not root and no CAP_SYS_ADMIN.
    NotPrivileged(String),
    /// tracefs is neither mounted nor mountable.
    NoTracefs(String),
    /// Bad options (unknown event group, bad CPU list, no event exists…).
    Usage(String),
    /// A tracefs or output file operation failed.
    Io {
        /// What was being done (`writing instances/stallscope-12/buffer_size_kb`).
        what: String,
        /// The file involved.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// The traced command could not be started.
    Spawn(String, io::Error),
    /// A per-CPU reader thread failed.
    Reader(String),
}

impl RecordError {
    /// Builds an [`RecordError::Io`].
    pub fn io(what: impl Into<String>, path: impl Into<PathBuf>, source: io::Error) -> Self {
        RecordError::Io {
            what: what.into(),
            path: path.into(),
            source,
        }
    }
}

impl fmt::Display for RecordError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecordError::NotPrivileged(m) | RecordError::NoTracefs(m) | RecordError::Usage(m) => {
                write!(f, "{m}")
            }
            RecordError::Io { what, path, source } => {
                write!(f, "{what} ({}): {source}", path.display())
            }
            RecordError::Spawn(cmd, e) => write!(f, "cannot start {cmd:?}: {e}"),
            RecordError::Reader(m) => write!(f, "trace reader: {m}"),
        }
    }
}

impl std::error::Error for RecordError {}
