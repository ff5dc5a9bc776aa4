//! The handle's elicitation API: putting an MCP server's question to the person of a session,
//! and the answers clients post (see `elicitations.rs` for one question's protocol).

use rein_protocol::AgentEvent;
use rein_store::Session;

use crate::{
    elicitations::{Answered, Elicitation, ElicitationReply, Form, is_web_url},
    error::{Result, RuntimeError},
};

/// How far up a hidden child's parents a question looks for the visible session.
const MAX_PARENT_HOPS: usize = 8;

impl super::Runtime {
    /// Puts `question` to the person of session `session_id` (a hidden child's question goes to
    /// the visible session above it) and waits for the answer: `elicitation_requested` on the
    /// session's stream, then the first of [`Self::answer_elicitation`] and the question's
    /// timeout (answered [`ElicitationReply::Cancel`]); `elicitation_answered` says which.
    /// Dropping the future (the server or a stop took the question back) withdraws it, with an
    /// `elicitation_answered` of `cancel`. Answered [`ElicitationReply::Decline`] at once, and
    /// never shown: a question whose schema is outside the form vocabulary MCP allows (rein
    /// could not check the answer), one whose `url` is not `http(s)`, and one for an unknown
    /// session.
    pub async fn elicit(&self, session_id: &str, question: Elicitation) -> ElicitationReply {
        let form = match Form::read(&question.requested_schema) {
            Ok(form) => form,
            Err(error) => {
                tracing::warn!(server = %question.server, %error, "a question declined");
                return ElicitationReply::Decline;
            }
        };
        if let Some(url) = &question.url
            && !is_web_url(url)
        {
            // The URL is the server's; it goes to the log only as its length.
            tracing::warn!(
                server = %question.server,
                url_chars = url.chars().count(),
                "a question declined: its page is not an http(s) URL"
            );
            return ElicitationReply::Decline;
        }
        let Ok(session) = self.asked_session(session_id) else {
            tracing::warn!(
                session = session_id,
                server = %question.server,
                "an MCP server asked a session that is not there: declined"
            );
            return ElicitationReply::Decline;
        };
        let core = self.core();
        let id = rein_store::new_id("eli");
        let (answer, _guard) = core.elicitations().wait(&session.id, &id, form);
        let event = AgentEvent::ElicitationRequested {
            elicitation_id: id.clone(),
            server: question.server.clone(),
            message: question.message.clone(),
            requested_schema: question.requested_schema.clone(),
            url: question.url.clone(),
        };
        core.events().publish(&session.id, event, false);
        // Withdrawn (dropped) before an answer: the stream still hears that it ended.
        let mut ended = Ended { runtime: self, session_id: &session.id, id: &id, done: false };
        let reply = match tokio::time::timeout(question.timeout, answer).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(_)) | Err(_) => ElicitationReply::Cancel,
        };
        ended.publish(reply.action());
        reply
    }

    /// The session a question of `session_id`'s tool call is put to: the first visible one up
    /// its parents.
    fn asked_session(&self, session_id: &str) -> Result<Session> {
        let store = self.core().store();
        let mut id = session_id.to_owned();
        for _ in 0..=MAX_PARENT_HOPS {
            let session = store
                .get_session(&id)
                .map_err(RuntimeError::from_store)?
                .ok_or_else(|| RuntimeError::SessionNotFound(id.clone()))?;
            match (&session.parent_id, session.hidden) {
                (Some(parent), true) => id = parent.clone(),
                _ => return Ok(session),
            }
        }
        Err(RuntimeError::SessionNotFound(session_id.to_owned()))
    }

    /// The ids of the questions of session `id` waiting for an answer (a client that replays
    /// the event stream shows only these).
    pub async fn pending_elicitations(&self, id: &str) -> Result<Vec<String>> {
        self.public_session(id)?;
        Ok(self.core().elicitations().pending(id))
    }

    /// Answers the waiting question `elicitation_id` of session `id`.
    /// `hosted_elicitation_not_found` when no such question waits; an acceptance whose content
    /// breaks a rule of the requested schema is [`RuntimeError::ElicitationAnswerMisfit`]
    /// (`validation_error`, naming the property and the rule), and the question still waits.
    /// None waits here while the session's turn runs on another replica (where it may wait):
    /// `hosted_turn_on_other_replica`.
    pub async fn answer_elicitation(
        &self,
        id: &str,
        elicitation_id: &str,
        reply: ElicitationReply,
    ) -> Result<()> {
        let session = self.public_session(id)?;
        match self.core().elicitations().answer(id, elicitation_id, reply) {
            Answered::Taken => Ok(()),
            // Replicas: the session's turn, and so its question, waits on another one.
            Answered::NotFound if self.turn_elsewhere(&session) => {
                Err(RuntimeError::OnOtherReplica(session.id))
            }
            Answered::NotFound => Err(RuntimeError::ElicitationNotFound(elicitation_id.to_owned())),
            Answered::Invalid(misfit) => Err(RuntimeError::ElicitationAnswerMisfit(misfit)),
        }
    }
}

/// Publishes `elicitation_answered` once: with the reply's action, or `cancel` when the question
/// was withdrawn before it had one.
struct Ended<'a> {
    runtime: &'a super::Runtime,
    session_id: &'a str,
    id: &'a str,
    done: bool,
}

impl Ended<'_> {
    fn publish(&mut self, action: rein_protocol::ElicitationAction) {
        if std::mem::replace(&mut self.done, true) {
            return;
        }
        let event = AgentEvent::ElicitationAnswered { elicitation_id: self.id.to_owned(), action };
        self.runtime.core().events().publish(self.session_id, event, false);
    }
}

impl Drop for Ended<'_> {
    fn drop(&mut self) {
        self.publish(rein_protocol::ElicitationAction::Cancel);
    }
}
