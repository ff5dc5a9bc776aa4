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
//! Before it is shown, a question must be one the person can be shown and rein can check: its
//! schema is read into a [`Form`] (`form.rs`: the vocabulary MCP allows), and its page, if it has
//! one, must be an `http(s)` URL ([`is_web_url`]); a question that is not is declined at once
//! and never reaches the stream. An acceptance is checked against every rule of the form.
//!
//! The waiters are `waiters.rs`'s: in memory only, under one lock taken alone and never across
//! an `.await`.

mod form;

use std::time::Duration;

use rein_protocol::{ElicitationAction, JsonObject};
use tokio::sync::oneshot;

pub(crate) use self::form::Form;
pub use self::form::{AnswerMisfit, FormRule};
use crate::waiters::{WaitGuard, Waiters};

/// A question of an MCP server for the person.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Elicitation {
    /// The configured name of the server asking.
    pub server: String,
    /// The server's question.
    pub message: String,
    /// The JSON schema of the answer, in the vocabulary MCP allows (`form.rs`); empty for a
    /// question that only asks to open a page. One outside it declines the question unshown.
    pub requested_schema: JsonObject,
    /// A page the person is asked to open: shown only when it is an `http(s)` URL with a host
    /// ([`is_web_url`]); any other declines the question unshown.
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

/// Whether `url` is one a person may be sent to: `http://` or `https://` (any case) and a
/// host, with no user name in front of it (`https://bank.example@evil.example/` shows one host
/// and opens another) and no space or control character anywhere. Anything else
/// (`javascript:`, `data:`, `file:`, a relative path) is never shown as a link.
pub(crate) fn is_web_url(url: &str) -> bool {
    let Some((scheme, rest)) = url.split_once("://") else { return false };
    let web = scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https");
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    web && !authority.is_empty()
        && !authority.starts_with(':')
        && !authority.contains('@')
        && !url.chars().any(|c| c.is_whitespace() || c.is_control())
}

/// What became of an answer.
#[derive(Debug, PartialEq)]
pub(crate) enum Answered {
    /// The waiting question took it.
    Taken,
    /// No question of that id waits in that session.
    NotFound,
    /// The content does not fit the question's form (the question still waits).
    Invalid(AnswerMisfit),
}

/// A question waiting: where its answer goes, and the form the answer must fit.
pub(crate) struct Waiter {
    reply: oneshot::Sender<ElicitationReply>,
    form: Form,
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
            ElicitationReply::Accept(content) => waiter.form.check(content),
            _ => Ok(()),
        });
        match waiter {
            None => Answered::NotFound,
            Some(Err(misfit)) => Answered::Invalid(misfit),
            Some(Ok(waiter)) => match waiter.reply.send(reply) {
                Ok(()) => Answered::Taken,
                // The question ended as the answer came.
                Err(_) => Answered::NotFound,
            },
        }
    }

    /// Registers a waiter for a question asking `form`; the guard removes it when dropped.
    pub(crate) fn wait(
        &self,
        session_id: &str,
        id: &str,
        form: Form,
    ) -> (oneshot::Receiver<ElicitationReply>, WaitGuard<'_, Waiter>) {
        let (reply, receiver) = oneshot::channel();
        (receiver, self.waiting.wait(session_id, id, Waiter { reply, form }))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    fn object(value: Value) -> JsonObject {
        value.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn an_answer_reaches_only_its_own_waiting_question() {
        let elicitations = Elicitations::default();
        let (mut receiver, guard) = elicitations.wait("s1", "e1", Form::default());
        assert_eq!(elicitations.pending("s1"), ["e1"]);
        let decline = ElicitationReply::Decline;
        assert_eq!(elicitations.answer("s2", "e1", decline.clone()), Answered::NotFound);
        assert_eq!(elicitations.answer("s1", "e1", ElicitationReply::Cancel), Answered::Taken);
        assert_eq!(receiver.try_recv(), Ok(ElicitationReply::Cancel));
        assert_eq!(elicitations.answer("s1", "e1", decline), Answered::NotFound, "only once");
        drop(guard);
        let (_receiver, guard) = elicitations.wait("s1", "e2", Form::default());
        drop(guard);
        assert!(elicitations.pending("s1").is_empty(), "the guard removes the waiter");
    }

    #[test]
    fn an_acceptance_must_fit_the_form_and_a_misfit_leaves_the_question_waiting() {
        let schema = object(serde_json::json!({
            "type": "object",
            "properties": { "name": { "type": "string", "minLength": 2 } },
            "required": ["name"]
        }));
        let elicitations = Elicitations::default();
        let form = Form::read(&schema).expect("a form");
        let (mut receiver, _guard) = elicitations.wait("s", "e", form);
        let short = ElicitationReply::Accept(object(serde_json::json!({"name": "A"})));
        let Answered::Invalid(misfit) = elicitations.answer("s", "e", short) else {
            panic!("a misfit")
        };
        assert_eq!((misfit.field.as_str(), misfit.rule), ("name", FormRule::MinLength));
        assert_eq!(misfit.to_string(), "`name` must have at least 2 characters (minLength)");
        assert_eq!(elicitations.pending("s"), ["e"], "still waiting");
        let right = ElicitationReply::Accept(object(serde_json::json!({"name": "Ada"})));
        assert_eq!(elicitations.answer("s", "e", right.clone()), Answered::Taken);
        assert_eq!(receiver.try_recv(), Ok(right));
    }

    #[test]
    fn only_http_s_urls_with_a_host_are_web_urls() {
        for (url, web) in [
            ("https://pay.example/checkout?order=7", true),
            ("http://127.0.0.1:8080/", true),
            ("HTTPS://PAY.EXAMPLE", true),
            ("https://user@pay.example/", false),
            ("https://pay.example@evil.example/", false),
            ("javascript:alert(1)", false),
            ("JavaScript://pay.example/%0Aalert(1)", false),
            ("data:text/html,<script>alert(1)</script>", false),
            ("file:///etc/passwd", false),
            ("vbscript:msgbox", false),
            ("//pay.example/", false),
            ("/relative", false),
            ("https://", false),
            ("https:///path", false),
            ("https://@/", false),
            (" https://pay.example/", false),
            ("https://pay.example/\nx", false),
            ("https://pay .example/", false),
        ] {
            assert_eq!(is_web_url(url), web, "{url:?}");
        }
    }
}
