//! [`InputOptions`]: which trace files to read and how — what every command's facade call
//! takes (files, a forced format, merging unrelated files, a progress hook).

use stallscope_model::InputFormat;

use crate::analyze::AnalyzeError;
use crate::Inputs;

/// The inputs of one analysis.
#[derive(Clone, Debug)]
pub struct InputOptions {
    /// Trace files (`-` = stdin), merged in time order.
    pub files: Vec<String>,
    /// Skip format detection.
    pub input_format: Option<InputFormat>,
    /// Merge files even when they cannot be one recording.
    pub merge_unrelated: bool,
    /// Merge files that hold the same events (one recording twice, two recordings of the
    /// same CPUs made together), identical events counted once.
    pub merge_overlapping: bool,
    /// Called once the inputs are open (to attach a progress display).
    pub on_open: Option<fn(&mut Inputs)>,
}

impl InputOptions {
    /// `files`, formats detected.
    pub fn new(files: Vec<String>) -> InputOptions {
        InputOptions {
            files,
            input_format: None,
            merge_unrelated: false,
            merge_overlapping: false,
            on_open: None,
        }
    }

    /// Opens the inputs.
    pub fn open(&self) -> Result<Inputs, AnalyzeError> {
        let mut inputs = Inputs::open(&self.files, self.input_format)?;
        if self.merge_unrelated {
            inputs.allow_unrelated();
        }
        if self.merge_overlapping {
            inputs.allow_overlapping();
        }
        if let Some(f) = self.on_open {
            f(&mut inputs);
        }
        Ok(inputs)
    }
}
