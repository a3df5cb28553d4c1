//! `stallscope completions SHELL`: the shell completion script, generated from the command
//! line's own definition (clap_complete), so it always knows every subcommand and flag.

use std::io::Write;

use clap::Args;
use clap_complete::Shell;

use crate::common::CliError;

/// Arguments of `stallscope completions`.
#[derive(Args)]
#[command(after_help = "Examples:\n  \
stallscope completions bash > /etc/bash_completion.d/stallscope\n  \
stallscope completions zsh > \"${fpath[1]}/_stallscope\"\n  \
stallscope completions fish > ~/.config/fish/completions/stallscope.fish")]
pub struct CompletionsArgs {
    /// The shell to complete in.
    #[arg(value_enum)]
    pub shell: Shell,
}

/// Writes the completion script for `args.shell` of the command `cli`.
pub fn run(
    args: &CompletionsArgs,
    mut cli: clap::Command,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let name = cli.get_name().to_string();
    clap_complete::generate(args.shell, &mut cli, name, out);
    Ok(())
}
