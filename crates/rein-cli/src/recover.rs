//! `rein recover`: run the recovery parser over one model reply and print what it found.

use std::path::PathBuf;

/// Arguments of `rein recover`.
#[derive(Debug, clap::Args)]
pub(crate) struct RecoverArgs {
    /// Names of the tools offered to the model, comma-separated.
    #[arg(long, value_delimiter = ',')]
    tools: Vec<String>,
    /// The input is an OpenAI wire message object, not raw content.
    #[arg(long)]
    message: bool,
    /// The file to read; stdin when absent.
    file: Option<PathBuf>,
}

pub(crate) fn run(args: &RecoverArgs) -> anyhow::Result<()> {
    let _ = args;
    anyhow::bail!("not built yet")
}
