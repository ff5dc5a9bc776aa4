//! `CommonArgs`: the options every agent command shares, and loading the config they name.

use std::path::PathBuf;

use clap::Args;

use crate::{config, wire};

/// Options shared by the commands that run the agent.
#[derive(Debug, Clone, Args)]
pub(crate) struct CommonArgs {
    /// A config file (rein TOML/JSON, GLEN config.json or mcpServers JSON); may be repeated,
    /// later files add to and override earlier ones.
    #[arg(long = "config", value_name = "FILE")]
    pub(crate) configs: Vec<PathBuf>,
    /// The model to use, by its name (`value` in GLEN's config).
    #[arg(long, value_name = "NAME")]
    pub(crate) model: Option<String>,
    /// Where sessions and transcripts are stored (default: $XDG_DATA_HOME/rein).
    #[arg(long, value_name = "DIR")]
    pub(crate) data_dir: Option<PathBuf>,
}

/// Loads the config files of `common`, printing warnings; errors stop.
fn load_config(common: &CommonArgs) -> anyhow::Result<config::Config> {
    let env = |name: &str| std::env::var(name).ok();
    match config::load(&common.configs, &env) {
        Ok(loaded) => {
            for warning in &loaded.warnings {
                eprintln!("rein: {warning}");
            }
            Ok(loaded.config)
        }
        Err(errors) => Err(errors.into()),
    }
}

impl CommonArgs {
    /// Loads the config and builds the runtime.
    pub(crate) async fn wire(&self) -> anyhow::Result<(config::Config, wire::Wired)> {
        let config = load_config(self)?;
        let overrides =
            wire::Overrides { model: self.model.clone(), data_dir: self.data_dir.clone() };
        let wired = wire::wire(&config, &overrides).await?;
        for (server, error) in &wired.unreachable {
            eprintln!(
                "rein: warning: MCP server `{server}` is not reachable, its tools are left out: {error}"
            );
        }
        Ok((config, wired))
    }
}
