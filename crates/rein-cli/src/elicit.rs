//! The bridge from MCP servers' questions (elicitation) to the runtime's sessions.
//!
//! The MCP servers start before the runtime, so the bridge is handed to them empty and given the
//! runtime once it is built (a weak handle: the runtime holds the servers' tools, which hold
//! the bridge). A question is put to the session whose tool call it came during
//! (`Runtime::elicit`: `elicitation_requested` on its stream); the host showing that stream
//! answers it: the web chat with a form, `rein chat` field by field, `rein run` by declining (or,
//! with `--yes`, accepting the form's defaults). A question no session can be named for (none
//! in flight, or calls of several sessions on one connection) is declined, and so is one whose
//! schema the runtime cannot check (`Runtime::elicit`).

use std::sync::{Arc, OnceLock};

use rein_mcp::{ElicitFlow, ElicitationAnswer, ElicitationRequest, Elicitor};
use rein_runtime::{Elicitation, ElicitationReply, Runtime, WeakRuntime};

/// Puts MCP servers' questions to the runtime's sessions.
#[derive(Default)]
pub(crate) struct SessionElicitor {
    runtime: OnceLock<WeakRuntime>,
}

impl SessionElicitor {
    /// The bridge, and the elicitor the MCP client options take.
    pub(crate) fn new() -> (Arc<SessionElicitor>, Elicitor) {
        let bridge = Arc::new(SessionElicitor::default());
        let elicitor = Elicitor(bridge.clone());
        (bridge, elicitor)
    }

    /// Gives the bridge its runtime (once; later calls are ignored).
    pub(crate) fn attach(&self, runtime: &Runtime) {
        let _ = self.runtime.set(runtime.downgrade());
    }
}

#[async_trait::async_trait]
impl ElicitFlow for SessionElicitor {
    async fn elicit(&self, request: ElicitationRequest) -> ElicitationAnswer {
        let runtime = self.runtime.get().and_then(WeakRuntime::upgrade);
        let (Some(runtime), Some(session_id)) = (runtime, request.session_id.clone()) else {
            tracing::warn!(
                server = %request.server,
                "an MCP server asked a question outside one session's tool call: declined"
            );
            return ElicitationAnswer::Decline;
        };
        // rein-mcp takes form requests only (the mode it declares), so a question here has no
        // page; the runtime declines a form it could not check.
        let question = Elicitation::new(request.server, request.message, request.requested_schema)
            .timeout(request.timeout);
        match runtime.elicit(&session_id, question).await {
            ElicitationReply::Accept(content) => ElicitationAnswer::Accept(content),
            ElicitationReply::Decline => ElicitationAnswer::Decline,
            _ => ElicitationAnswer::Cancel,
        }
    }
}
