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
    /// The last turn, when it paused at a checkpoint and was neither continued nor discarded.
    pub(crate) paused: Option<PausedTurn>,
    /// The id of the last line read (0 for an empty transcript).
    pub(crate) last_event_id: u64,
}

/// Replays a transcript into the conversation and the state of its last turn.
pub(crate) fn rebuild(lines: &[TranscriptEvent]) -> Rebuilt {
    let mut replay = Replay::default();
    replay.fold(lines);
    replay.into_rebuilt()
}

/// A transcript read so far into a conversation: the fold behind [`rebuild`], which the lines
/// appended later continue ([`Replay::fold`]), so that reading a session again after a turn
/// reads that turn's lines only.
#[derive(Debug, Clone, Default)]
pub(crate) struct Replay {
    history: Vec<Message>,
    internal: Vec<bool>,
    /// When each message of `history` was stored (its line's `createdAt`).
    created_at: Vec<String>,
    paused: Option<PausedTurn>,
    /// A turn started and has not ended.
    open: bool,
    /// The last turn that ended ended with an error.
    errored: bool,
    last_event_id: u64,
}

impl Replay {
    /// Reads `lines`, the transcript's lines after those read so far, in order.
    pub(crate) fn fold(&mut self, lines: &[TranscriptEvent]) {
        for line in lines {
            self.last_event_id = self.last_event_id.max(line.event_id);
            self.read(line);
        }
    }

    fn read(&mut self, line: &TranscriptEvent) {
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
            self.internal =
                (0..messages.len()).map(|i| internal.get(i).copied().unwrap_or(false)).collect();
            // A message kept from the old history keeps the time it was first stored.
            self.created_at = messages
                .iter()
                .enumerate()
                .map(|(i, message)| match (self.history.get(i), self.created_at.get(i)) {
                    (Some(old), Some(at)) if old == message => at.clone(),
                    _ => line.created_at.clone(),
                })
                .collect();
            self.history = messages;
            self.paused = None;
            return;
        }
        if line.kind == kind::TURN_PAUSED {
            self.paused = serde_json::from_value(line.payload.clone()).ok();
            return;
        }
        let Some(event) = agent_event(line) else { return };
        match event {
            AgentEvent::TurnStarted { .. } => {
                self.open = true;
                self.errored = false;
                self.paused = None;
            }
            AgentEvent::TurnEnd { ending, .. } => {
                self.open = false;
                self.errored = ending == TurnEnding::Error;
            }
            AgentEvent::Message { message } => {
                let internal =
                    line.payload.get("internal").and_then(Value::as_bool).unwrap_or(false);
                self.history.push(message);
                self.internal.push(internal);
                self.created_at.push(line.created_at.clone());
            }
            _ => {}
        }
    }

    /// The id of the last line read (0 when none was).
    pub(crate) fn last_event_id(&self) -> u64 {
        self.last_event_id
    }

    /// How the last turn was left, when it did not end cleanly.
    pub(crate) fn unfinished(&self) -> Option<TurnUnfinished> {
        if self.open || self.errored {
            unfinished_from_tail(&self.history, &self.internal)
        } else {
            None
        }
    }

    /// The last turn, when it paused at a checkpoint and was neither continued nor discarded.
    pub(crate) fn paused(&self) -> Option<&PausedTurn> {
        self.paused.as_ref()
    }

    /// The messages a person sees.
    pub(crate) fn visible(&self) -> Vec<Message> {
        self.history
            .iter()
            .zip(&self.internal)
            .filter(|(_, internal)| !**internal)
            .map(|(m, _)| m.clone())
            .collect()
    }

    /// When each of [`Replay::visible`]'s messages was stored (RFC 3339), index for index.
    pub(crate) fn visible_times(&self) -> Vec<String> {
        self.created_at
            .iter()
            .zip(&self.internal)
            .filter(|(_, internal)| !**internal)
            .map(|(at, _)| at.clone())
            .collect()
    }

    fn into_rebuilt(self) -> Rebuilt {
        Rebuilt {
            history: self.history,
            internal: self.internal,
            paused: self.paused,
            last_event_id: self.last_event_id,
        }
    }
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
