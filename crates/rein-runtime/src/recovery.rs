//! Turns whose process died: found at start (every session leased by an instance that is gone)
//! and when a turn is asked for on a session still leased by one, and closed at once instead of
//! after the lease runs out.
//!
//! Closing a dead turn writes what it left open into the transcript, so the conversation reads
//! well-formed and the model and the user learn what happened:
//! - a call the model made that never started gets a result saying it was not run;
//! - a call that started and has no stored result gets a result saying its outcome is unknown
//!   (it may have run) and that it was not run again; it is never re-run silently;
//! - a `turn_recovered` notice, then the turn's end (`interrupted`).
//!
//! The session's lease is then ended with `turnUnfinished` read from the tail as it was
//! (`mid-tool`, `mid-turn` or `no-answer`), and a new message is taken at once.

use std::collections::HashSet;

use rein_protocol::{
    AgentEvent, FailureCode, Message, ToolCall, ToolFailure, ToolOutput, TurnEnding, Usage,
};
use rein_store::{Session, TranscriptEvent};

use crate::{
    core::Core,
    error::{Result, StoreResult as _},
    transcript,
};

/// The notice code of a closed dead turn.
pub(crate) const TURN_RECOVERED: &str = "turn_recovered";

/// What a call's result says when its turn's process died before it started.
const NOT_RUN: &str = "Not run: the process running this turn stopped before this call started.";

/// What a call's result says when its process died while it ran.
const OUTCOME_UNKNOWN: &str = "Outcome unknown: the process running this turn stopped while \
     this call ran, before its result was stored. It may or may not have taken effect, and it \
     was not run again. Check before repeating it, and tell the user.";

/// Closes the turn of every session leased by an instance that is gone; returns how many.
pub(crate) fn recover_dead_turns(core: &Core) -> usize {
    let sessions = match core.store().sessions_with_turn_in_flight() {
        Ok(sessions) => sessions,
        Err(error) => {
            tracing::warn!(%error, "could not list the sessions with a turn in flight");
            return 0;
        }
    };
    let mut gone = HashSet::new();
    let mut closed = 0;
    for session in sessions {
        let Some(owner) = session.turn_owner.clone() else { continue };
        if owner == core.instance() || !core.store().instance_gone(&owner) {
            continue;
        }
        match close_dead_turn(core, &session, &owner) {
            Ok(true) => closed += 1,
            Ok(false) => {}
            Err(error) => {
                tracing::warn!(session = %session.id, %error, "could not close a dead turn");
            }
        }
        gone.insert(owner);
    }
    for owner in gone {
        core.store().forget_instance(&owner);
    }
    if closed > 0 {
        tracing::info!(count = closed, "closed the turns of a process that stopped");
    }
    closed
}

/// Closes `session`'s turn when the instance leasing it is gone; `Ok(true)` when it did.
pub(crate) fn take_over_if_dead(core: &Core, session_id: &str) -> Result<bool> {
    let Some(session) = core.store().get_session(session_id).map_store_err()? else {
        return Ok(false);
    };
    let Some(owner) = session.turn_owner.clone() else { return Ok(false) };
    if !session.turn_in_flight || owner == core.instance() || !core.store().instance_gone(&owner) {
        return Ok(false);
    }
    close_dead_turn(core, &session, &owner)
}

/// Writes the end of `session`'s dead turn (leased by `owner`) and ends its lease.
fn close_dead_turn(core: &Core, session: &Session, owner: &str) -> Result<bool> {
    let lines = core.transcripts().read_all(&session.id).map_store_err()?;
    let rebuilt = transcript::rebuild(&lines);
    let unfinished = transcript::unfinished_from_tail(&rebuilt.history, &rebuilt.internal)
        .or(session.turn_unfinished);
    let started = started_in_open_turn(&lines);
    let unanswered = unanswered_calls(&rebuilt.history);
    let turn_open = turn_is_open(&lines);
    let events = core.events();
    for call in &unanswered {
        let text = if started.contains(call.id.as_str()) { OUTCOME_UNKNOWN } else { NOT_RUN };
        let output = ToolOutput::failed(ToolFailure::new(FailureCode::Unresolved, text));
        events.publish(
            &session.id,
            AgentEvent::ToolResult {
                call_id: call.id.clone(),
                name: call.name.clone(),
                output: output.clone(),
            },
            false,
        );
        let message = Message::tool(call.id.clone(), output.text.clone(), true);
        events.publish(&session.id, AgentEvent::Message { message }, false);
    }
    let unknown = unanswered.iter().filter(|call| started.contains(call.id.as_str())).count();
    let message = match unknown {
        0 => "The process running this turn stopped; the turn was closed.".to_owned(),
        n => format!(
            "The process running this turn stopped; the turn was closed. {n} call(s) may have \
             run without a stored result and were not run again."
        ),
    };
    events.publish(
        &session.id,
        AgentEvent::Notice { code: TURN_RECOVERED.to_owned(), message: message.clone() },
        false,
    );
    if turn_open {
        events.publish(
            &session.id,
            AgentEvent::TurnEnd {
                ending: TurnEnding::Interrupted,
                text: message,
                usage: Usage::default(),
            },
            false,
        );
    }
    if let Err(error) = events.sync(&session.id) {
        tracing::warn!(session = %session.id, %error, "could not sync a closed dead turn");
    }
    let ended = core.store().end_turn(&session.id, owner, unfinished).map_store_err()?;
    tracing::info!(session = %session.id, dead = owner, ?unfinished, "closed a dead turn");
    Ok(ended)
}

/// Whether the transcript's last turn began and did not end.
fn turn_is_open(lines: &[TranscriptEvent]) -> bool {
    let mut open = false;
    for event in lines.iter().filter_map(transcript::agent_event) {
        match event {
            AgentEvent::TurnStarted { .. } => open = true,
            AgentEvent::TurnEnd { .. } => open = false,
            _ => {}
        }
    }
    open
}

/// The ids of the calls that started in the transcript's last turn.
fn started_in_open_turn(lines: &[TranscriptEvent]) -> HashSet<String> {
    let mut started = HashSet::new();
    for event in lines.iter().filter_map(transcript::agent_event) {
        match event {
            AgentEvent::TurnStarted { .. } => started.clear(),
            AgentEvent::ToolStarted { call_id, .. } => {
                started.insert(call_id);
            }
            _ => {}
        }
    }
    started
}

/// The calls of the last assistant message with calls that have no result after it.
fn unanswered_calls(history: &[Message]) -> Vec<ToolCall> {
    let Some(at) = history.iter().rposition(|m| !m.tool_calls().is_empty()) else {
        return Vec::new();
    };
    let answered: HashSet<&str> = history[at + 1..]
        .iter()
        .filter_map(|message| match message {
            Message::Tool { tool_call_id, .. } => Some(tool_call_id.as_str()),
            _ => None,
        })
        .collect();
    history[at]
        .tool_calls()
        .iter()
        .filter(|call| !answered.contains(call.id.as_str()))
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn call(id: &str) -> ToolCall {
        ToolCall::new(id, "send", serde_json::Map::new())
    }

    #[test]
    fn the_unanswered_calls_are_those_of_the_last_call_message_without_a_result() {
        let history = vec![
            Message::user("hi"),
            Message::assistant_calls(None, vec![call("a"), call("b"), call("c")]),
            Message::tool("a", "done", false),
        ];
        let ids: Vec<String> = unanswered_calls(&history).into_iter().map(|c| c.id).collect();
        assert_eq!(ids, ["b", "c"]);
        assert!(unanswered_calls(&[Message::user("hi")]).is_empty());
    }

    #[test]
    fn started_calls_are_counted_from_the_last_turn_only() {
        let line = |seq: u64, payload: serde_json::Value| TranscriptEvent {
            event_id: seq,
            session_id: "s".into(),
            kind: transcript::event_kind(&payload),
            created_at: String::new(),
            payload,
        };
        let lines = vec![
            line(1, json!({"type": "turn_started", "text": "one"})),
            line(2, json!({"type": "tool_started", "call_id": "old", "name": "send"})),
            line(3, {
                let end = AgentEvent::TurnEnd {
                    ending: TurnEnding::Answered,
                    text: String::new(),
                    usage: Usage::default(),
                };
                serde_json::to_value(end).unwrap()
            }),
            line(4, json!({"type": "turn_started", "text": "two"})),
            line(5, json!({"type": "tool_started", "call_id": "new", "name": "send"})),
        ];
        let started = started_in_open_turn(&lines);
        assert!(started.contains("new") && !started.contains("old"), "{started:?}");
        assert!(turn_is_open(&lines));
        assert!(!turn_is_open(&lines[..3]));
    }
}
