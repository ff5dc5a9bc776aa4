//! The handle's client tool API: the tools a client registers for its session, the claims and
//! the results it posts for their calls (see `client_tools.rs` for one call's protocol and the
//! budgets).

use std::collections::HashSet;

use rein_protocol::{JsonObject, ToolOutput, ToolSpec};
use serde_json::Value;

use crate::{
    client_tools::{Budgets, Claim},
    error::{Result, RuntimeError},
    offer::{Offer, ViewLink},
};

/// The most tools one client may register for a session.
pub const MAX_CLIENT_TOOLS: usize = 64;

/// Whether `name` is a function name every provider takes (`[A-Za-z0-9_-]{1,64}`).
fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

impl super::Runtime {
    /// Replaces the client tools of session `id`. Refused (`hosted_client_tool_name_taken`) when
    /// a name is one of the session's own tools (offered or not) or given twice; a bad name or
    /// an input schema that is not an object schema is `validation_error`; a set that would
    /// take its owner's sets, or the process's, past their byte budget
    /// (`Limits::client_tool_bytes_per_owner`, `Limits::client_tool_bytes`) is
    /// `hosted_client_tool_quota_exceeded`. The set lives in this process's memory with the
    /// session's live state (registering it counts as a use of the session; a session dropped
    /// from memory drops its set) and reaches the session at its next turn.
    pub async fn set_client_tools(&self, id: &str, tools: Vec<ToolSpec>) -> Result<Vec<ToolSpec>> {
        let session = self.public_session(id)?;
        let core = self.core();
        if tools.len() > MAX_CLIENT_TOOLS {
            return Err(RuntimeError::Invalid(format!(
                "at most {MAX_CLIENT_TOOLS} client tools per session"
            )));
        }
        let definition = core.definition(&session.agent_id).unwrap_or_default();
        // Every tool of the session, offered or kept from the model, takes its name.
        let offer =
            Offer::new(core, &definition, session.parent_id.is_some(), ViewLink::AnySession);
        let taken: HashSet<String> = offer.tools().map(|tool| tool.spec().name).collect();
        let mut seen = HashSet::new();
        let mut specs = Vec::with_capacity(tools.len());
        for tool in tools {
            if !valid_name(&tool.name) {
                return Err(RuntimeError::Invalid(format!(
                    "a client tool name must be 1 to 64 letters, digits, `_` or `-`: {:?}",
                    tool.name
                )));
            }
            if taken.contains(&tool.name) || !seen.insert(tool.name.clone()) {
                return Err(RuntimeError::ClientToolNameTaken(tool.name));
            }
            let schema_type = tool.input_schema.get("type").and_then(Value::as_str);
            if schema_type.is_some_and(|t| t != "object") {
                return Err(RuntimeError::Invalid(format!(
                    "the inputSchema of client tool `{}` must be an object schema",
                    tool.name
                )));
            }
            let mut schema: JsonObject = tool.input_schema.clone();
            schema.entry("type").or_insert_with(|| "object".into());
            specs.push(ToolSpec::new(tool.name, tool.description, schema));
        }
        let limits = core.limits();
        let budgets = Budgets {
            per_owner: limits.client_tool_bytes_per_owner,
            total: limits.client_tool_bytes,
        };
        let owner = session.owner.as_deref().unwrap_or("");
        // The session's live state is held while the set goes in, so the eviction (of others,
        // once too many are held, freeing their sets first) never drops this session with it.
        let live = self.shared.live.get(id);
        self.evict_idle_sessions();
        core.client_tools().set(id, owner, specs.clone(), budgets)?;
        drop(live);
        Ok(specs)
    }

    /// The client tools of session `id`.
    pub async fn client_tools(&self, id: &str) -> Result<Vec<ToolSpec>> {
        self.public_session(id)?;
        Ok(self.core().client_tools().get(id))
    }

    /// The ids of the client tool calls of session `id` waiting for a result (a client that
    /// replays the event stream runs only these).
    pub async fn pending_client_tool_calls(&self, id: &str) -> Result<Vec<String>> {
        self.public_session(id)?;
        Ok(self.core().client_tools().pending(id))
    }

    /// Claims the waiting call `call_id` of a client tool in session `id` for the client that
    /// asks, so that one of the page's open tabs runs it: the first claim wins,
    /// `hosted_client_tool_call_claimed` for every later one. `hosted_client_tool_call_not_found`
    /// when no such call waits here; `hosted_turn_on_other_replica` when it may wait on another
    /// replica (the session's turn runs there).
    pub async fn claim_client_tool_call(&self, id: &str, call_id: &str) -> Result<()> {
        let session = self.public_session(id)?;
        match self.core().client_tools().claim(id, call_id) {
            Claim::Won => Ok(()),
            Claim::Taken => Err(RuntimeError::ClientToolCallClaimed(call_id.to_owned())),
            Claim::NotWaiting => Err(self.not_waiting(&session, call_id)),
        }
    }

    /// Why no call `call_id` waits here: its turn runs on another replica, or none waits.
    fn not_waiting(&self, session: &rein_store::Session, call_id: &str) -> RuntimeError {
        if self.turn_elsewhere(session) {
            RuntimeError::OnOtherReplica(session.id.clone())
        } else {
            RuntimeError::ClientToolCallNotFound(call_id.to_owned())
        }
    }

    /// Answers the waiting call `call_id` of a client tool in session `id`: `content` a string
    /// (the result's text) or any JSON (a structured result); `is_error` marks a failure the
    /// model reads. `hosted_client_tool_call_not_found` when no such call waits;
    /// `hosted_turn_on_other_replica` when it may wait on another replica.
    pub async fn answer_client_tool(
        &self,
        id: &str,
        call_id: &str,
        content: Value,
        is_error: bool,
    ) -> Result<()> {
        let session = self.public_session(id)?;
        let output = match (content, is_error) {
            (Value::String(text), false) => ToolOutput::text(text),
            (Value::String(text), true) => ToolOutput::error(text),
            (value, false) => ToolOutput::structured(value),
            (value, true) => ToolOutput::error(value.to_string()),
        };
        if self.core().client_tools().answer(id, call_id, output) {
            Ok(())
        } else {
            Err(self.not_waiting(&session, call_id))
        }
    }
}
