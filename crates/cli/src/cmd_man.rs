//! `stallscope man --to DIR`: the manual pages (`stallscope.1` and one `stallscope-NAME.1`
//! per subcommand), generated from the command line's own definition (clap_mangen), so the
//! pages and `--help` never disagree.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;

use crate::common::CliError;

/// Arguments of `stallscope man`.
#[derive(Args)]
#[command(after_help = "Examples:\n  \
stallscope man --to /usr/local/share/man/man1 && mandb -q\n  \
stallscope man --to /tmp/man && man -l /tmp/man/stallscope-analyze.1")]
pub struct ManArgs {
    /// Directory to write the pages into (created if missing).
    #[arg(long)]
    pub to: PathBuf,
}

/// Writes the pages of the command `cli` and lists them.
pub fn run(args: &ManArgs, cli: clap::Command, out: &mut dyn Write) -> Result<(), CliError> {
    std::fs::create_dir_all(&args.to)
        .map_err(|e| CliError::Usage(format!("--to {}: {e}", args.to.display())))?;
    let cli = cli.version(env!("CARGO_PKG_VERSION"));
    let name = cli.get_name().to_string();
    write_page(&args.to, &name, cli.clone(), out)?;
    for sub in cli.get_subcommands() {
        let page = format!("{name}-{}", sub.get_name());
        // a subcommand's page is titled by its full name (`stallscope-analyze(1)`)
        let sub = sub
            .clone()
            .name(page.clone())
            .version(env!("CARGO_PKG_VERSION"));
        write_page(&args.to, &page, sub, out)?;
    }
    Ok(())
}

fn write_page(
    dir: &Path,
    page: &str,
    cmd: clap::Command,
    out: &mut dyn Write,
) -> Result<(), CliError> {
    let path = dir.join(format!("{page}.1"));
    let mut bytes = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut bytes)?;
    std::fs::write(&path, bytes)
        .map_err(|e| CliError::Io(std::io::Error::other(format!("{}: {e}", path.display()))))?;
    writeln!(out, "{}", path.display())?;
    Ok(())
}
