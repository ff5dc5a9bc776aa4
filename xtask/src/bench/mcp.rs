//! `cargo xtask bench mcp`: tool-call latency and calls/s through rein's `McpToolSource` beside
//! rmcp used directly, over stdio and Streamable HTTP, against server-everything (a real server).
//!
//! The measuring runs in `crates/rein-mcp/examples/mcp_bench.rs` (rmcp stays inside rein-mcp);
//! this task installs the peers, runs it in release mode and records its figures. The ratios
//! (`*_ratio_rein_over_rmcp`) show rein's own overhead: latency ratio near 1 is good.

use std::process::{Command, Stdio};

use anyhow::Context as _;

use super::Figures;

pub(crate) fn run() -> anyhow::Result<Figures> {
    let envs = crate::peers::install_for_tests()?;
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let output = Command::new(cargo)
        .args(["run", "--quiet", "--release", "-p", "rein-mcp", "--example", "mcp_bench"])
        .envs(envs.iter().map(|(key, value)| (key, value)))
        .current_dir(crate::project_root())
        .stderr(Stdio::inherit())
        .output()
        .context("running the mcp_bench example")?;
    anyhow::ensure!(output.status.success(), "the mcp_bench example failed");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().last().context("mcp_bench printed nothing")?;
    let figures: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(line).context("mcp_bench did not print a JSON object")?;
    Ok(figures
        .into_iter()
        .filter_map(|(name, value)| value.as_f64().map(|value| (name, value)))
        .collect())
}
