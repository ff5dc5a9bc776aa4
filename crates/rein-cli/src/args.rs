//! `CommonArgs`: the options every agent command shares, and loading the config they name.

use std::path::PathBuf;

use anyhow::Context as _;
use clap::Args;
use rein_runtime::{CreateSession, Runtime, SessionView};

use crate::{config, wire};

/// Options shared by the commands that run the agent.
#[derive(Debug, Clone, Args)]
pub(crate) struct CommonArgs {
    /// A config file (rein TOML/JSON, GLEN config.json or mcpServers JSON); may be repeated,
    /// later files add to and override earlier ones.
    #[arg(long = "config", value_name = "FILE")]
    pub(crate) configs: Vec<PathBuf>,
    /// The model to use, by its name (`value` in GLEN's config). Sessions of `chat` and `run`
    /// start on it whatever their agent's `model`; for `serve` it is the default model, which
    /// an agent's own `model` comes before.
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

/// The agent a terminal session talks to: `wanted` when it is configured (an error listing the
/// agents when it is not), else the first agent.
pub(crate) fn pick_agent(runtime: &Runtime, wanted: Option<&str>) -> anyhow::Result<String> {
    let agents = runtime.agents();
    let names: Vec<&str> = agents.iter().map(|agent| agent.name.as_str()).collect();
    match wanted {
        Some(name) if names.contains(&name) => Ok(name.to_owned()),
        Some(name) => {
            anyhow::bail!(
                "no agent named `{name}`; the configured agents are: {}",
                names.join(", ")
            )
        }
        None => names.first().map(|name| (*name).to_owned()).context("no agent is configured"),
    }
}

/// A new session of `agent`: on the model the user picked (`--model`, `/model`), else on the
/// agent's own `model`, else on the default model (the runtime decides the last two).
pub(crate) async fn new_session(
    runtime: &Runtime,
    agent: &str,
    picked_model: Option<&str>,
) -> anyhow::Result<SessionView> {
    let mut request = CreateSession::agent(agent);
    if let Some(model) = picked_model {
        request = request.model(model);
    }
    runtime.create_session(request).await.context("creating a session")
}

impl CommonArgs {
    /// Loads the config and builds the runtime for a terminal (an MCP server's OAuth URL is
    /// printed, the redirect comes back to a loopback port).
    pub(crate) async fn wire(&self) -> anyhow::Result<(config::Config, wire::Wired)> {
        self.wire_with(|_| Ok(wire::McpHost::Terminal)).await
    }

    /// Loads the config and builds the runtime, with `mcp_host` (from the config) saying how a
    /// person authorizes an MCP server.
    pub(crate) async fn wire_with(
        &self,
        mcp_host: impl FnOnce(&config::Config) -> anyhow::Result<wire::McpHost>,
    ) -> anyhow::Result<(config::Config, wire::Wired)> {
        let config = load_config(self)?;
        let overrides = wire::Overrides {
            model: self.model.clone(),
            data_dir: self.data_dir.clone(),
            mcp_host: mcp_host(&config)?,
        };
        let wired = wire::wire(&config, &overrides).await?;
        for (server, error) in &wired.unreachable {
            eprintln!(
                "rein: warning: MCP server `{server}` is not reachable yet ({error}); retrying in \
                 the background, its tools join when it answers"
            );
        }
        Ok((config, wired))
    }
}
