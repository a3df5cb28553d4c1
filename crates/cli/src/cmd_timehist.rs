//! `stallscope timehist` (being written).

use std::io::Write;

use clap::Args;

use crate::common::{CliError, InputArgs};

/// Arguments of `stallscope timehist`.
#[derive(Args, Debug)]
pub struct TimehistArgs {
    #[command(flatten)]
    input: InputArgs,
}

/// Runs the command.
pub fn run(args: &TimehistArgs, _out: &mut dyn Write) -> Result<(), CliError> {
    Err(CliError::Usage(format!("{} is not implemented yet", args.input.files.len())))
}
