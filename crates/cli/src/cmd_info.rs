//! placeholder
use std::io::Write;
use clap::Args;
use crate::common::{CliError, InputArgs};
/// Args.
#[derive(Args, Debug)]
pub struct InfoArgs { #[command(flatten)] input: InputArgs }
/// Run.
pub fn run(args: &InfoArgs, _out: &mut dyn Write) -> Result<(), CliError> { let _ = args.input.open()?; Ok(()) }
