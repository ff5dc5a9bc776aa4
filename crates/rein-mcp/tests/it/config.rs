//! The `mcpServers` config: cases in `test_data/config/*.json`, each `{"input": ..., "expect": ...}`
//! where `expect` is the config as rein writes it back, or `{"error": "<message>"}`.

use rein_mcp::McpServers;
use serde_json::{Value, json};

use crate::conversions::cases;

fn check(input: &Value, expect: &Value) -> Result<(), String> {
    let got = match McpServers::from_json(&input.to_string()) {
        Ok(servers) => json!({ "mcpServers": servers }),
        Err(error) => json!({ "error": error.to_string() }),
    };
    if &got == expect { Ok(()) } else { Err(format!("got {got:#}")) }
}

#[test]
fn config_cases() {
    cases("config", check);
}

#[test]
fn embeds_in_a_host_config() {
    #[derive(serde::Deserialize)]
    struct HostConfig {
        #[serde(rename = "mcpServers")]
        servers: McpServers,
    }
    let text = r#"{"mcpServers": {"fs": {"command": "npx", "args": ["-y", "server-filesystem", "/tmp"]}}}"#;
    let config: HostConfig = serde_json::from_str(text).unwrap();
    assert_eq!(config.servers.servers[0].name, "fs");
    let bad = r#"{"mcpServers": {"fs": {"command": "npx", "args": "-y"}}}"#;
    let error = serde_json::from_str::<HostConfig>(bad).err().unwrap().to_string();
    assert!(error.contains("`fs`") && error.contains("`args`"), "{error}");
}
