//! MCP elicitation: a server asks the person for input in the middle of a request. Both eras
//! arrive here the same way: a 2025-11-25 `elicitation/create` request, and a 2026-07-28
//! "input required" result of `tools/call` (rmcp answers each of its input requests through the
//! client handler and sends the call again with the responses).
//!
//! The host answers through an [`Elicitor`] (the web chat shows a form built from the schema,
//! `rein chat` asks field by field, `rein run` declines unless `--yes`). Without one the
//! elicitation capability is not declared, so servers do not ask. A request the server cancels
//! (or that is dropped) is answered `cancel`.

use std::sync::Arc;

use rein_protocol::JsonObject;
use serde_json::Value;

/// What a server asks the person.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ElicitationRequest {
    /// The configured server name.
    pub server: String,
    /// The server's message, shown as the question.
    pub message: String,
    /// The JSON schema of the answer: an object schema with primitive-typed properties (each
    /// may carry `title`, `description`, `default`, `enum`). Empty for a URL elicitation.
    pub requested_schema: JsonObject,
    /// For a URL elicitation: the page the person is asked to open.
    pub url: Option<String>,
}

impl ElicitationRequest {
    /// The answer a person who accepts the form as it is gives: each property's `default`.
    pub fn defaults(&self) -> JsonObject {
        let mut content = JsonObject::new();
        if let Some(Value::Object(properties)) = self.requested_schema.get("properties") {
            for (name, property) in properties {
                if let Some(default) = property.get("default") {
                    content.insert(name.clone(), default.clone());
                }
            }
        }
        content
    }
}

/// The person's answer.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ElicitationAnswer {
    /// Accepted, with the content (the properties of the requested schema).
    Accept(JsonObject),
    /// Declined: the request goes on without the input.
    Decline,
    /// Cancelled: the whole request is abandoned.
    Cancel,
}

/// Asks the person and returns the answer.
#[async_trait::async_trait]
pub trait ElicitFlow: Send + Sync {
    /// Shows `request` and waits for the answer.
    async fn elicit(&self, request: ElicitationRequest) -> ElicitationAnswer;
}

/// [`ClientOptions::elicitor`](crate::ClientOptions::elicitor): a shared [`ElicitFlow`].
#[derive(Clone)]
pub struct Elicitor(pub Arc<dyn ElicitFlow>);

impl std::fmt::Debug for Elicitor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Elicitor(..)")
    }
}

impl PartialEq for Elicitor {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

/// rmcp's request to rein's, through the wire JSON (rmcp types stay in `connect.rs`).
pub(crate) fn request_of(server: &str, params: &Value) -> ElicitationRequest {
    ElicitationRequest {
        server: server.to_owned(),
        message: params["message"].as_str().unwrap_or_default().to_owned(),
        requested_schema: params["requestedSchema"].as_object().cloned().unwrap_or_default(),
        url: params["url"].as_str().map(str::to_owned),
    }
}

/// rein's answer as the wire JSON of an elicitation result.
pub(crate) fn result_json(answer: ElicitationAnswer) -> Value {
    match answer {
        ElicitationAnswer::Accept(content) => {
            serde_json::json!({ "action": "accept", "content": content })
        }
        ElicitationAnswer::Decline => serde_json::json!({ "action": "decline" }),
        ElicitationAnswer::Cancel => serde_json::json!({ "action": "cancel" }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepting_as_is_gives_the_defaults() {
        let request = request_of(
            "s",
            &serde_json::json!({
                "mode": "form", "message": "Who?",
                "requestedSchema": { "type": "object", "properties": {
                    "name": { "type": "string", "default": "Ada" },
                    "age": { "type": "integer", "default": 36 },
                    "color": { "type": "string", "enum": ["red", "blue"], "default": "blue" },
                    "note": { "type": "string" }
                } }
            }),
        );
        assert_eq!(request.message, "Who?");
        assert_eq!(
            Value::Object(request.defaults()),
            serde_json::json!({ "name": "Ada", "age": 36, "color": "blue" })
        );
        assert_eq!(
            result_json(ElicitationAnswer::Decline),
            serde_json::json!({"action": "decline"})
        );
    }
}
