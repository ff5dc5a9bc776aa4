//! MCP elicitation: a server asks the person for input in the middle of a request. Both eras
//! arrive here the same way: a 2025-11-25 `elicitation/create` request, and a 2026-07-28
//! "input required" result of `tools/call` (rmcp answers each of its input requests through the
//! client handler and sends the call again with the responses).
//!
//! The host answers through an [`Elicitor`] (the web chat shows a form built from the schema,
//! `rein chat` asks field by field, `rein run` declines unless `--yes`). Without one the
//! elicitation capability is not declared, so servers do not ask. A request the server cancels
//! (or that is dropped), or one whose tool call is stopped, is answered `cancel`.
//!
//! Only form mode is declared (`{"form": {"schemaValidation": true}}`: the host checks an answer
//! against the whole schema before it is sent). A server that sends a URL-mode request anyway
//! (`mode: "url"`, a page for the person to open) is declined where the request enters
//! ([`request_of`]), before any host sees it: rein neither shows such a page nor asks for the
//! consent URL mode needs, so the capability and the modes taken agree.
//!
//! Which session asks: a server's request names no call, so the source keeps its calls in
//! flight ([`Callers`]) and a request is put to the session of those calls when they all belong
//! to one; when calls of several sessions are in flight on one connection the request names no
//! session (the host declines it rather than ask the wrong person).

use std::{
    sync::{Arc, Mutex, PoisonError},
    time::Duration,
};

use rein_protocol::{CancellationToken, JsonObject};
use serde_json::Value;

/// What a server asks the person.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ElicitationRequest {
    /// The configured server name.
    pub server: String,
    /// The server's message, shown as the question.
    pub message: String,
    /// The JSON schema of the answer, in the vocabulary MCP allows (rmcp has parsed it): an
    /// object of `string` (`minLength`, `maxLength`, `format`), `number`/`integer` (`minimum`,
    /// `maximum`), `boolean`, single-choice (`enum`, `oneOf` of `{const, title}`) and
    /// multiple-choice (`array` of `enum`/`anyOf` items, `minItems`, `maxItems`) properties,
    /// each with an optional `title`, `description` and `default`, and `required`.
    pub requested_schema: JsonObject,
    /// The session whose tool call the server asks during; `None` when no call is in flight or
    /// calls of several sessions are (nobody to ask for sure).
    pub session_id: Option<String>,
    /// How long the question may wait: the server's call timeout (`timeout_seconds`), after
    /// which the call has failed anyway. Unanswered by then, the host answers `cancel`.
    pub timeout: Duration,
}

impl ElicitationRequest {
    /// The answer a person who accepts the form as it is gives: each property's `default`.
    pub fn defaults(&self) -> JsonObject {
        form_defaults(&self.requested_schema)
    }
}

/// The answer to a form of `requested_schema` accepted as it is: each property's `default`.
pub fn form_defaults(requested_schema: &JsonObject) -> JsonObject {
    let mut content = JsonObject::new();
    if let Some(Value::Object(properties)) = requested_schema.get("properties") {
        for (name, property) in properties {
            if let Some(default) = property.get("default") {
                content.insert(name.clone(), default.clone());
            }
        }
    }
    content
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

/// The tool calls in flight on one source: the session each belongs to and its stop token.
#[derive(Debug, Default)]
pub(crate) struct Callers {
    calls: Mutex<Vec<(u64, Option<String>, CancellationToken)>>,
    next: std::sync::atomic::AtomicU64,
}

impl Callers {
    fn calls(&self) -> std::sync::MutexGuard<'_, Vec<(u64, Option<String>, CancellationToken)>> {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Registers a call of `session_id`; the guard removes it when the call ends.
    pub(crate) fn enter(
        self: &Arc<Self>,
        session_id: Option<&str>,
        cancel: &CancellationToken,
    ) -> CallerGuard {
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.calls().push((id, session_id.map(str::to_owned), cancel.clone()));
        CallerGuard { callers: Arc::clone(self), id }
    }

    /// The one session whose calls are in flight (`None` when there are none, or calls of
    /// several sessions or of none), and the stop tokens of those calls.
    pub(crate) fn asker(&self) -> (Option<String>, Vec<CancellationToken>) {
        let calls = self.calls();
        let mut sessions = calls.iter().map(|(_, session, _)| session.as_deref());
        let first = sessions.next().flatten();
        let one = first.filter(|first| sessions.all(|other| other == Some(first)));
        let tokens = calls.iter().map(|(_, _, token)| token.clone()).collect();
        (one.map(str::to_owned), tokens)
    }
}

/// Removes a call from [`Callers`] when dropped.
pub(crate) struct CallerGuard {
    callers: Arc<Callers>,
    id: u64,
}

impl Drop for CallerGuard {
    fn drop(&mut self) {
        self.callers.calls().retain(|(id, _, _)| *id != self.id);
    }
}

/// Why a server's request is declined before any host sees it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum Refused {
    /// A request in a mode rein does not declare (`url`, or one it does not know).
    #[error("an elicitation in `{0}` mode (rein declares only `form`)")]
    Mode(String),
}

/// rmcp's request to rein's, through the wire JSON (rmcp types stay in `connect.rs`); a request
/// in any mode but `form` (which a request without `mode` is) is [`Refused`].
pub(crate) fn request_of(
    server: &str,
    params: &Value,
    session_id: Option<String>,
    timeout: Duration,
) -> Result<ElicitationRequest, Refused> {
    match params.get("mode").map(|mode| mode.as_str().unwrap_or("?")) {
        None | Some("form") => {}
        Some(mode) => return Err(Refused::Mode(mode.chars().take(32).collect())),
    }
    Ok(ElicitationRequest {
        server: server.to_owned(),
        message: params["message"].as_str().unwrap_or_default().to_owned(),
        requested_schema: params["requestedSchema"].as_object().cloned().unwrap_or_default(),
        session_id,
        timeout,
    })
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
            None,
            Duration::from_secs(1),
        )
        .expect("a form request");
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

    #[test]
    fn only_form_requests_are_taken_the_mode_declared() {
        let ask = |params: Value| request_of("s", &params, None, Duration::from_secs(1));
        let form = serde_json::json!({"message": "Who?", "requestedSchema": {"type": "object"}});
        assert!(ask(form).is_ok(), "a request without `mode` is a form");
        let page = |url: &str| {
            serde_json::json!({
                "mode": "url", "message": "Open it", "url": url, "elicitationId": "e1"
            })
        };
        for url in ["javascript:alert(document.cookie)", "https://pay.example/checkout"] {
            assert_eq!(ask(page(url)), Err(Refused::Mode("url".into())), "{url}");
        }
        let odd = serde_json::json!({"mode": "voice", "message": "Say it"});
        assert_eq!(ask(odd), Err(Refused::Mode("voice".into())));
    }

    #[test]
    fn a_question_goes_to_the_one_session_whose_calls_are_in_flight() {
        let callers = Arc::new(Callers::default());
        assert_eq!(callers.asker().0, None);
        let stop = CancellationToken::new();
        let first = callers.enter(Some("a"), &stop);
        let second = callers.enter(Some("a"), &stop);
        let (asker, stops) = callers.asker();
        assert_eq!((asker.as_deref(), stops.len()), (Some("a"), 2));
        let other = callers.enter(Some("b"), &stop);
        assert_eq!(callers.asker().0, None, "two sessions: nobody is asked");
        drop(other);
        drop(first);
        assert_eq!(callers.asker().0.as_deref(), Some("a"));
        drop(second);
        assert_eq!(callers.asker().0, None);
        let _anonymous = callers.enter(None, &stop);
        assert_eq!(callers.asker().0, None);
    }
}
