//! Canonical JSON and the sha256 fingerprint that keys approvals.

use serde_json::Value;
use sha2::{Digest, Sha256};

/// Canonical JSON (keys sorted at every depth, no whitespace), shared with the loop.
pub use rein_agent::canonical_json;

/// The fingerprint of a call: sha256 (hex) of the canonical JSON of
/// `{action, toolName, inputPayload}`.
pub fn call_fingerprint(action: &str, tool: &str, arguments: &Value) -> String {
    let record =
        serde_json::json!({ "action": action, "toolName": tool, "inputPayload": arguments });
    let digest = Sha256::digest(canonical_json(&record).as_bytes());
    digest.iter().map(|byte| format!("{byte:02x}")).collect()
}
