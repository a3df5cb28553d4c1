//! [`LineReader`]: the pull loop shared by the line-at-a-time text readers (ftrace and
//! `trace-cmd report` text): take the next line, let the format's line handler turn it into
//! zero or more events queued in [`TextState`], hand them out in order, and finish the
//! state (end-of-input checks) once the lines run out. `perf script` text has its own loop
//! because a callchain block spans several lines.

use stallscope_model::{DataQuality, Event, InputFormat, TraceMeta};

use crate::text_common::lines::{Line, LineSource};
use crate::text_common::state::TextState;
use crate::{EventReader, Input, ReadError};

/// A format's handler for one line: parse it and push events / data-quality notes into the state.
pub(crate) type LineHandler = fn(&mut TextState, &Line<'_>);

/// A text reader driven by one [`LineHandler`].
pub struct LineReader {
    lines: LineSource,
    st: TextState,
    done: bool,
    handle: LineHandler,
}

impl LineReader {
    /// Reads `input` (already decompressed) as `format`, input number `index`.
    pub(crate) fn new(
        input: Input,
        format: InputFormat,
        index: u16,
        handle: LineHandler,
    ) -> LineReader {
        let st = TextState::new(&input, format, index, None);
        let lines = LineSource::new(st.path.clone(), input.into_reader());
        LineReader {
            lines,
            st,
            done: false,
            handle,
        }
    }
}

impl EventReader for LineReader {
    fn meta(&self) -> &TraceMeta {
        &self.st.meta
    }

    fn next_event(&mut self) -> Result<Option<Event>, ReadError> {
        loop {
            if let Some(ev) = self.st.out.pop_front() {
                return Ok(Some(ev));
            }
            if self.done {
                return Ok(None);
            }
            match self.lines.next_line() {
                Ok(Some(line)) => {
                    if self.st.check_line(&line) {
                        let before = self.st.out.len();
                        (self.handle)(&mut self.st, &line);
                        if line.unterminated {
                            self.st.drop_cut_events(before, &line);
                        }
                    }
                }
                Ok(None) => {
                    self.st.finish();
                    self.done = true;
                }
                Err(e) => {
                    self.done = true;
                    return Err(e);
                }
            }
        }
    }

    fn quality(&self) -> &DataQuality {
        &self.st.dq
    }
}
