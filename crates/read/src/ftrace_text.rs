//! placeholder: ftrace_text (being written)
use stallscope_model::{DataQuality, Event, TraceMeta};
use crate::{EventReader, Input, ReadError};
/// Reader (being written).
pub struct FtraceTextReader { meta: TraceMeta, dq: DataQuality }
impl FtraceTextReader {
    /// Opens the input.
    pub fn open(input: Input, _index: u16) -> Result<Self, ReadError> {
        Err(ReadError::new(&input.path, None, "a supported format", "a reader still being written"))
    }
}
impl EventReader for FtraceTextReader {
    fn meta(&self) -> &TraceMeta { &self.meta }
    fn next_event(&mut self) -> Result<Option<Event>, ReadError> { Ok(None) }
    fn quality(&self) -> &DataQuality { &self.dq }
}
