//! The README's library example: an agent with one local tool and one MCP server.
//!
//! Run: `cargo run -p rein-examples --example library` with a model at http://127.0.0.1:8081/v1
//! (`cargo xtask llama serve`, or any OpenAI-compatible server: set REIN_ENDPOINT) and Node.js
//! for the MCP server (`npx -y @modelcontextprotocol/server-everything`).

use std::sync::Arc;

use rein::agent::{Agent, AgentConfig, NoEvents, ToolRegistry};
use rein::mcp::{ClientOptions, McpToolSource, StdioServer};
use rein::model::{ModelEntry, ModelRegistry, ModelsConfig, ProviderKind, RegistryOptions};
use rein::protocol::{CancellationToken, ToolOutput, ToolSpec};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let endpoint =
        std::env::var("REIN_ENDPOINT").unwrap_or_else(|_| "http://127.0.0.1:8081/v1".into());
    let mut models = ModelsConfig::default();
    models.llm_models.push(ModelEntry::new("local", ProviderKind::OpenAi, Some(endpoint)));
    let model =
        ModelRegistry::from_config(&models, &RegistryOptions::default())?.select("local")?;

    let mut tools = ToolRegistry::new();
    let spec = ToolSpec::without_arguments("dice", "Roll a six-sided die.").read_only(true);
    tools.register_fn(spec, |_args, _ctx| async { Ok(ToolOutput::text("4")) })?;
    let everything = StdioServer::new("npx", ["-y", "@modelcontextprotocol/server-everything"]);
    tools
        .register_source(Arc::new(McpToolSource::new(
            "everything",
            everything,
            ClientOptions::default(),
        )))
        .await?;

    let config = AgentConfig {
        system_prompt: "You are a helpful assistant.".into(),
        ..AgentConfig::default()
    };
    let mut agent = Agent::new(model, Arc::new(tools), config);
    let outcome = agent
        .turn("Roll the die, then echo the number.", &CancellationToken::new(), &NoEvents)
        .await?;
    println!("{}", outcome.text);
    Ok(())
}
