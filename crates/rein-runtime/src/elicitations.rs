//! Elicitations: questions an MCP server asks the person while one of its tools runs, waiting
//! for the answer.
//!
//! One question, in order: the handle registers a waiter under (session, elicitation id);
//! publishes `elicitation_requested` on the session's stream (a hidden child's question goes to
//! the visible session above it, where the person is); then waits for
//! [`Elicitations::answer`] or the question's timeout (the server's call timeout), whichever
//! comes first, and publishes `elicitation_answered` with what became of it. The waiter is removed
//! on every way out (a guard, also when the server or a stop drops the question), so a late
//! answer finds nothing. The content of an answer goes to the server only: the events carry the
//! action, never the content.
//!
//! The waiters are `waiters.rs`'s: in memory only, under one lock taken alone and never across
//! an `.await`.

use std::time::Duration;

use rein_protocol::{ElicitationAction, JsonObject};
use serde_json::Value;
use tokio::sync::oneshot;

use crate::waiters::{WaitGuard, Waiters};

/// A question of an MCP server for the person.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Elicitation {
    /// The configured name of the server asking.
    pub server: String,
    /// The server's question.
    pub message: String,
    /// The JSON schema of the answer (an object of primitive-typed properties); empty for a
    /// URL elicitation.
    pub requested_schema: JsonObject,
    /// For a URL elicitation: the page the person is asked to open.
    pub url: Option<String>,
    /// How long the question waits for an answer before it is cancelled.
    pub timeout: Duration,
}

impl Elicitation {
    /// A form question of `server`.
    pub fn new(
        server: impl Into<String>,
        message: impl Into<String>,
        requested_schema: JsonObject,
    ) -> Self {
        Elicitation {
            server: server.into(),
            message: message.into(),
            requested_schema,
            url: None,
            timeout: Duration::from_secs(600),
        }
    }

    /// Sets the page of a URL elicitation.
    pub fn url(mut self, url: impl Into<String>) -> Self {
        self.url = Some(url.into());
        self
    }

    /// Sets how long the question waits.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }
}

/// The person's answer to an [`Elicitation`].
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ElicitationReply {
    /// Answered with `content` (the properties of the requested schema).
    Accept(JsonObject),
    /// Declined.
    Decline,
    /// Cancelled.
    Cancel,
}

impl ElicitationReply {
    /// What the reply did, as the events name it.
    pub fn action(&self) -> ElicitationAction {
        match self {
            ElicitationReply::Accept(_) => ElicitationAction::Accept,
            ElicitationReply::Decline => ElicitationAction::Decline,
            ElicitationReply::Cancel => ElicitationAction::Cancel,
        }
    }
}

/// Whether `content` answers `schema`: every required property given, no property the schema
/// does not name, each value of its property's type (`string`, `number`, `integer`, `boolean`)
/// and among its `enum` when it has one. The message says what does not fit.
pub(crate) fn check_content(schema: &JsonObject, content: &JsonObject) -> Result<(), String> {
    let properties = schema.get("properties").and_then(Value::as_object);
    if let Some(Value::Array(required)) = schema.get("required") {
        for name in required.iter().filter_map(Value::as_str) {
            if !content.contains_key(name) {
                return Err(format!("`{name}` is required"));
            }
        }
    }
    for (name, value) in content {
        let Some(property) = properties.and_then(|properties| properties.get(name)) else {
            return Err(format!("`{name}` is not asked for"));
        };
        let fits = match property.get("type").and_then(Value::as_str) {
            Some("string") => value.is_string(),
            Some("number") => value.is_number(),
            Some("integer") => value.is_i64() || value.is_u64(),
            Some("boolean") => value.is_boolean(),
            Some("array") => value.is_array(),
            _ => true,
        };
        if !fits {
            return Err(format!("`{name}` must be of type {}", property["type"]));
        }
        if let Some(Value::Array(allowed)) = property.get("enum")
            && !allowed.contains(value)
        {
            return Err(format!("`{name}` must be one of {}", Value::Array(allowed.clone())));
        }
    }
    Ok(())
}

/// What became of an answer.
#[derive(Debug, PartialEq)]
pub(crate) enum Answered {
    /// The waiting question took it.
    Taken,
    /// No question of that id waits in that session.
    NotFound,
    /// The content does not fit the question's schema (the question still waits).
    Invalid(String),
}

/// A question waiting: where its answer goes, and the schema the answer must fit.
pub(crate) struct Waiter {
    reply: oneshot::Sender<ElicitationReply>,
    schema: JsonObject,
}

/// The questions waiting for an answer, by (session id, elicitation id).
#[derive(Default)]
pub(crate) struct Elicitations {
    waiting: Waiters<Waiter>,
}

impl Elicitations {
    /// The ids of the questions waiting in `session_id`, sorted.
    pub(crate) fn pending(&self, session_id: &str) -> Vec<String> {
        self.waiting.pending(session_id)
    }

    /// Answers a waiting question: an acceptance must fit the question's schema.
    pub(crate) fn answer(&self, session_id: &str, id: &str, reply: ElicitationReply) -> Answered {
        let waiter = self.waiting.take_if(session_id, id, |waiter| match &reply {
            ElicitationReply::Accept(content) => check_content(&waiter.schema, content),
            _ => Ok(()),
        });
        match waiter {
            None => Answered::NotFound,
            Some(Err(message)) => Answered::Invalid(message),
            Some(Ok(waiter)) => match waiter.reply.send(reply) {
                Ok(()) => Answered::Taken,
                // The question ended as the answer came.
                Err(_) => Answered::NotFound,
            },
        }
    }

    /// Registers a waiter for a question asking for `schema`; the guard removes it when dropped.
    pub(crate) fn wait(
        &self,
        session_id: &str,
        id: &str,
        schema: &JsonObject,
    ) -> (oneshot::Receiver<ElicitationReply>, WaitGuard<'_, Waiter>) {
        let (reply, receiver) = oneshot::channel();
        (receiver, self.waiting.wait(session_id, id, Waiter { reply, schema: schema.clone() }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn object(value: Value) -> JsonObject {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn an_answer_reaches_only_its_own_waiting_question() {
        let elicitations = Elicitations::default();
        let (mut receiver, guard) = elicitations.wait("s1", "e1", &JsonObject::new());
        assert_eq!(elicitations.pending("s1"), ["e1"]);
        let decline = ElicitationReply::Decline;
        assert_eq!(elicitations.answer("s2", "e1", decline.clone()), Answered::NotFound);
        assert_eq!(elicitations.answer("s1", "e1", ElicitationReply::Cancel), Answered::Taken);
        assert_eq!(receiver.try_recv(), Ok(ElicitationReply::Cancel));
        assert_eq!(elicitations.answer("s1", "e1", decline), Answered::NotFound, "only once");
        drop(guard);
        let (_receiver, guard) = elicitations.wait("s1", "e2", &JsonObject::new());
        drop(guard);
        assert!(elicitations.pending("s1").is_empty(), "the guard removes the waiter");
    }

    #[test]
    fn an_acceptance_must_fit_the_schema_and_a_misfit_leaves_the_question_waiting() {
        let schema = object(serde_json::json!({
            "type": "object",
            "properties": {
                "name": { "type": "string" },
                "age": { "type": "integer" },
                "color": { "type": "string", "enum": ["red", "blue"] },
                "subscribe": { "type": "boolean" }
            },
            "required": ["name"]
        }));
        let check = |content: Value| check_content(&schema, &object(content));
        assert_eq!(check(serde_json::json!({"name": "Ada", "age": 36, "color": "red"})), Ok(()));
        assert!(check(serde_json::json!({"age": 36})).unwrap_err().contains("`name`"));
        assert!(check(serde_json::json!({"name": "Ada", "age": 3.5})).is_err());
        assert!(check(serde_json::json!({"name": "Ada", "color": "green"})).is_err());
        assert!(check(serde_json::json!({"name": "Ada", "subscribe": "yes"})).is_err());
        assert!(check(serde_json::json!({"name": "Ada", "extra": 1})).is_err());

        let elicitations = Elicitations::default();
        let (mut receiver, _guard) = elicitations.wait("s", "e", &schema);
        let wrong = ElicitationReply::Accept(object(serde_json::json!({"age": 1})));
        assert!(matches!(elicitations.answer("s", "e", wrong), Answered::Invalid(_)));
        assert_eq!(elicitations.pending("s"), ["e"], "still waiting");
        let right = ElicitationReply::Accept(object(serde_json::json!({"name": "Ada"})));
        assert_eq!(elicitations.answer("s", "e", right.clone()), Answered::Taken);
        assert_eq!(receiver.try_recv(), Ok(right));
    }
}
