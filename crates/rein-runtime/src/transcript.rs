//! How the runtime writes turns to the transcript store and reads sessions back from it.

use rein_agent::PausedTurn;
use rein_protocol::{AgentEvent, Message, TurnEnding};
use rein_store::{TranscriptEvent, TurnUnfinished};
use serde_json::Value;

/// Bookkeeping lines of the runtime's own (never streamed as agent events).
pub(crate) mod kind {
    /// First line of a session: `{agentName, model}`.
    pub(crate) const SESSION_HEADER: &str = "session_header";
    /// The pinned model changed: `{model}`.
    pub(crate) const RUNTIME_MODEL: &str = "runtime_model";
    /// The conversation was replaced (a discarded checkpoint): `{messages, internal}`.
    pub(crate) const HISTORY_REPLACED: &str = "history_replaced";
    /// The turn that just ended paused at a checkpoint: rein-agent's `PausedTurn`
    /// (`{turnStart, keep, summary}`), so it can be continued or discarded after a restart.
    pub(crate) const TURN_PAUSED: &str = "turn_paused";

    pub(crate) fn is_runtime(kind: &str) -> bool {
        matches!(kind, SESSION_HEADER | RUNTIME_MODEL | HISTORY_REPLACED | TURN_PAUSED)
    }
}

/// The type tag of an agent event (`message`, `tool_result`, ...): the transcript line's type.
pub(crate) fn event_kind(payload: &Value) -> String {
    payload.get("type").and_then(Value::as_str).unwrap_or("agent_event").to_owned()
}

/// The agent event a transcript line holds, if it holds one.
pub(crate) fn agent_event(line: &TranscriptEvent) -> Option<AgentEvent> {
    if kind::is_runtime(&line.kind) {
        return None;
    }
    serde_json::from_value(line.payload.clone()).ok()
}

/// A session read back from its transcript.
#[derive(Debug, Default)]
pub(crate) struct Rebuilt {
    /// The conversation the model is shown (internal messages included).
    pub(crate) history: Vec<Message>,
    /// Whether each message of `history` is internal (hidden from people).
    pub(crate) internal: Vec<bool>,
    /// How the last turn was left, when it did not end cleanly.
    pub(crate) unfinished: Option<TurnUnfinished>,
    /// The last turn, when it paused at a checkpoint and was neither continued nor discarded.
    pub(crate) paused: Option<PausedTurn>,
    /// The id of the last line read (0 for an empty transcript).
    pub(crate) last_event_id: u64,
}

impl Rebuilt {
    /// The messages a person sees.
    pub(crate) fn visible(&self) -> Vec<Message> {
        self.history
            .iter()
            .zip(&self.internal)
            .filter(|(_, internal)| !**internal)
            .map(|(m, _)| m.clone())
            .collect()
    }
}

/// Replays a transcript into the conversation and the state of its last turn.
pub(crate) fn rebuild(lines: &[TranscriptEvent]) -> Rebuilt {
    let mut rebuilt = Rebuilt {
        last_event_id: lines.last().map_or(0, |line| line.event_id),
        ..Rebuilt::default()
    };
    let mut open = false;
    let mut errored = false;
    for line in lines {
        if line.kind == kind::HISTORY_REPLACED {
            let messages: Vec<Message> = line
                .payload
                .get("messages")
                .and_then(|m| serde_json::from_value(m.clone()).ok())
                .unwrap_or_default();
            let internal: Vec<bool> = line
                .payload
                .get("internal")
                .and_then(|m| serde_json::from_value(m.clone()).ok())
                .unwrap_or_default();
            rebuilt.internal =
                (0..messages.len()).map(|i| internal.get(i).copied().unwrap_or(false)).collect();
            rebuilt.history = messages;
            rebuilt.paused = None;
            continue;
        }
        if line.kind == kind::TURN_PAUSED {
            rebuilt.paused = serde_json::from_value(line.payload.clone()).ok();
            continue;
        }
        let Some(event) = agent_event(line) else { continue };
        match event {
            AgentEvent::TurnStarted { .. } => {
                open = true;
                errored = false;
                rebuilt.paused = None;
            }
            AgentEvent::TurnEnd { ending, .. } => {
                open = false;
                errored = ending == TurnEnding::Error;
            }
            AgentEvent::Message { message } => {
                let internal =
                    line.payload.get("internal").and_then(Value::as_bool).unwrap_or(false);
                rebuilt.history.push(message);
                rebuilt.internal.push(internal);
            }
            _ => {}
        }
    }
    if open || errored {
        rebuilt.unfinished = unfinished_from_tail(&rebuilt.history, &rebuilt.internal);
    }
    rebuilt
}

/// TerraFin's `turnUnfinished` read from the end of a conversation whose turn did not end:
/// the newest call has no result (`mid-tool`), tools ran and no answer followed (`mid-turn`),
/// or the user's message has no answer (`no-answer`). `None` when an answer is last.
pub(crate) fn unfinished_from_tail(
    history: &[Message],
    internal: &[bool],
) -> Option<TurnUnfinished> {
    let last =
        history.iter().enumerate().rev().find(|(i, _)| !internal.get(*i).copied().unwrap_or(false));
    let (_, last) = last?;
    match last {
        Message::Assistant { tool_calls, .. } if !tool_calls.is_empty() => {
            Some(TurnUnfinished::MidTool)
        }
        Message::Tool { .. } => {
            // A call of the last assistant message may still lack its result.
            let at = history.iter().rposition(|m| !m.tool_calls().is_empty())?;
            let answered =
                history[at + 1..].iter().filter(|m| matches!(m, Message::Tool { .. })).count();
            if answered < history[at].tool_calls().len() {
                Some(TurnUnfinished::MidTool)
            } else {
                Some(TurnUnfinished::MidTurn)
            }
        }
        Message::User { .. } => Some(TurnUnfinished::NoAnswer),
        _ => None,
    }
}

/// The first 96 characters of `text` with whitespace collapsed, `…` when cut.
pub(crate) fn preview(text: &str, max: usize) -> String {
    let collapsed = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if collapsed.chars().count() <= max {
        return collapsed;
    }
    let mut cut: String = collapsed.chars().take(max.saturating_sub(1)).collect();
    cut.push('\u{2026}');
    cut
}
