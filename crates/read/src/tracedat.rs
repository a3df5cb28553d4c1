//! placeholder: trace-cmd trace.dat reader (being written).
use crate::{EventReader, Input, ReadError};

/// trace.dat option id under which `stallscope record` stores its
/// [`stallscope_model::SystemContext`] as JSON (trace-cmd skips unknown option ids).
pub const OPTION_SYSTEM_CONTEXT: u16 = 0x5353;
use stallscope_model::{DataQuality, Event, TraceMeta};
/// Reader (being written).
pub struct TraceDatReader {
    meta: TraceMeta,
    dq: DataQuality,
}
impl TraceDatReader {
    /// Opens the input.
    pub fn open(input: Input, _index: u16) -> Result<Self, ReadError> {
        Err(ReadError::at_byte(&input.path, 0, "a format this build reads", "a trace-cmd trace.dat file, which is not supported yet: convert it with `trace-cmd report -N > trace.txt`"))
    }
}
impl EventReader for TraceDatReader {
    fn meta(&self) -> &TraceMeta {
        &self.meta
    }
    fn next_event(&mut self) -> Result<Option<Event>, ReadError> {
        Ok(None)
    }
    fn quality(&self) -> &DataQuality {
        &self.dq
    }
}
