//! Shared helpers: building agents over scripted models and tools, running turns, rendering events.

use std::sync::Arc;

use rein_agent::{Agent, AgentConfig, AgentError, EventLog, ToolRegistry, TurnOutcome};
use rein_protocol::{
    AgentEvent, CancellationToken, JsonObject, Message, Role, ToolOutput, ToolSpec,
};
use rein_testkit::{ScriptedModel, ScriptedTool, check_well_formed};

/// A JSON object from a `json!` literal.
pub(crate) fn obj(value: serde_json::Value) -> JsonObject {
    value.as_object().expect("an object literal").clone()
}

/// A read-only local tool `lookup(q: string)` answering `found <q>`.
pub(crate) fn lookup() -> ScriptedTool {
    let schema = obj(serde_json::json!({
        "type": "object",
        "properties": {"q": {"type": "string"}},
        "required": ["q"]
    }));
    ScriptedTool::new(
        ToolSpec::new("lookup", "Looks something up.", schema).read_only(true),
        |args, _| {
            Ok(ToolOutput::text(format!(
                "found {}",
                args.get("q").and_then(|v| v.as_str()).unwrap_or_default()
            )))
        },
    )
}

/// A registry holding these local tools.
pub(crate) fn registry(tools: &[&ScriptedTool]) -> ToolRegistry {
    let mut registry = ToolRegistry::new();
    for tool in tools {
        registry.register(Arc::new((*tool).clone())).expect("distinct names");
    }
    registry
}

/// An agent over a scripted model.
pub(crate) fn agent(model: &ScriptedModel, registry: ToolRegistry, config: AgentConfig) -> Agent {
    Agent::new(Arc::new(model.clone()), Arc::new(registry), config)
}

/// The result of one turn with its events.
pub(crate) struct Ran {
    pub(crate) result: Result<TurnOutcome, AgentError>,
    pub(crate) events: Vec<AgentEvent>,
}

impl Ran {
    pub(crate) fn outcome(&self) -> &TurnOutcome {
        self.result.as_ref().expect("the turn succeeds")
    }
}

/// Runs one turn with a fresh token and checks the history stays well-formed.
pub(crate) async fn run(agent: &mut Agent, text: &str) -> Ran {
    run_with(agent, text, &CancellationToken::new()).await
}

/// Runs one turn with this token and checks the history stays well-formed.
pub(crate) async fn run_with(agent: &mut Agent, text: &str, cancel: &CancellationToken) -> Ran {
    let log = EventLog::new();
    let result = agent.turn(text, cancel, &log).await;
    if let Err(problem) = check_well_formed(agent.history()) {
        panic!("transcript not well-formed after the turn: {problem}\n{:#?}", agent.history());
    }
    Ran { result, events: log.take() }
}

/// The tool results of a turn's events, as `(call_id, text)`.
pub(crate) fn results(events: &[AgentEvent]) -> Vec<(String, String)> {
    events
        .iter()
        .filter_map(|event| match event {
            AgentEvent::ToolResult { call_id, output, .. } => {
                Some((call_id.clone(), output.text.clone()))
            }
            _ => None,
        })
        .collect()
}

/// The error code of a result made by the loop (`tool_call_unresolved`, ...), if any.
pub(crate) fn codes(events: &[AgentEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|event| match event {
            AgentEvent::ToolResult { output, .. } => Some(
                output
                    .structured
                    .as_ref()
                    .and_then(|s| s.pointer("/error/code"))
                    .and_then(|c| c.as_str())
                    .unwrap_or("ok")
                    .to_owned(),
            ),
            _ => None,
        })
        .collect()
}

/// The notice codes of a turn.
pub(crate) fn notices(events: &[AgentEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|event| match event {
            AgentEvent::Notice { code, .. } => Some(code.clone()),
            _ => None,
        })
        .collect()
}

fn cut(text: &str, max: usize) -> String {
    let one_line = text.replace('\n', "\\n");
    if one_line.chars().count() <= max {
        one_line
    } else {
        format!("{}…", one_line.chars().take(max).collect::<String>())
    }
}

fn render_message(message: &Message) -> String {
    match message {
        Message::Assistant { tool_calls, .. } if !tool_calls.is_empty() => {
            let calls: Vec<String> = tool_calls
                .iter()
                .map(|c| format!("{}={}({})", c.id, c.name, c.arguments_json()))
                .collect();
            format!("assistant calls [{}] text={:?}", calls.join(", "), cut(&message.text(), 60))
        }
        Message::Tool { tool_call_id, is_error, .. } => {
            format!("tool {tool_call_id} error={is_error}: {}", cut(&message.text(), 60))
        }
        other => {
            let role = match other.role() {
                Role::System => "system",
                Role::User => "user",
                Role::Assistant => "assistant",
                Role::Tool => "tool",
            };
            format!("{role}: {}", cut(&other.text(), 60))
        }
    }
}

/// One line per event, for snapshots.
pub(crate) fn render(events: &[AgentEvent]) -> String {
    let mut lines = Vec::new();
    for event in events {
        let line = match event {
            AgentEvent::TurnStarted { text } => format!("turn_started {text:?}"),
            AgentEvent::RequestStarted { step, tools_offered } => {
                format!("request_started step={step} tools={tools_offered}")
            }
            AgentEvent::TextDelta { text } => format!("text_delta {:?}", cut(text, 60)),
            AgentEvent::ReasoningDelta { text } => format!("reasoning_delta {:?}", cut(text, 60)),
            AgentEvent::Reasoning { text } => format!("reasoning {:?}", cut(text, 60)),
            AgentEvent::Message { message } => format!("message {}", render_message(message)),
            AgentEvent::ToolProposal { calls, text } => {
                let names: Vec<&str> = calls.iter().map(|c| c.name.as_str()).collect();
                format!("tool_proposal [{}] text={:?}", names.join(", "), cut(text, 60))
            }
            AgentEvent::ApprovalRequested { approval_id, call } => {
                format!("approval_requested {approval_id} {}", call.name)
            }
            AgentEvent::ToolStarted { call_id, name } => format!("tool_started {call_id} {name}"),
            AgentEvent::ToolResult { call_id, name, output } => {
                format!(
                    "tool_result {call_id} {name} error={}: {}",
                    output.is_error,
                    cut(&output.text, 60)
                )
            }
            AgentEvent::Notice { code, .. } => format!("notice {code}"),
            AgentEvent::Checkpoint { summary } => format!("checkpoint {:?}", cut(summary, 60)),
            AgentEvent::TurnEnd { ending, text, usage } => {
                format!(
                    "turn_end {} {:?} tokens={}",
                    ending.as_str(),
                    cut(text, 60),
                    usage.total_tokens
                )
            }
            AgentEvent::Error { code, message } => format!("error {code}: {}", cut(message, 60)),
            other => format!("{other:?}"),
        };
        lines.push(line);
    }
    lines.join("\n")
}
