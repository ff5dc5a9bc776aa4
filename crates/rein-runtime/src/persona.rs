//! Persona sub-agents: `consult_<persona>(question)` runs a hidden child session whose short
//! loop must end in a structured memo (`submit_memo`), with one retry prompt when it does not.
//!
//! The consult tool itself is a session tool (`session_tools`); it runs [`consult`] and hands
//! it the way to build the child's tools, so that this file never names the session tools.

use std::{
    collections::HashSet,
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use async_trait::async_trait;
use rein_agent::{Agent, RegistryError, StopMode, ToolRegistry};
use rein_protocol::{
    CancellationToken, FailureCode, JsonObject, Tool, ToolContext, ToolError, ToolFailure,
    ToolOutput, ToolSpec,
};
use rein_store::{NewSession, Session, StoreError};
use serde_json::{Value, json};

use crate::{
    config::{AgentDefinition, MemoField, MemoFieldKind, Persona},
    core::Core,
    error::RuntimeError,
    history::History,
    model_filter::HiddenToolFilter,
    names::AgentId,
    session_meta::SessionMeta,
    sink::TurnSink,
    transcript::{self, kind},
};

/// The internal tool a persona submits its memo through.
pub const SUBMIT_MEMO: &str = "submit_memo";

/// The prompt of the one retry when a persona's turn ended without a valid memo.
pub const MEMO_RETRY_PROMPT: &str = "You ended without submitting your memo. Call `submit_memo` now, once, with every \
required field filled in from what you have found. Do not answer in plain text.";

/// The spec of `consult_<persona>`.
pub(crate) fn consult_spec(persona: &Persona) -> ToolSpec {
    let schema = json!({
        "type": "object",
        "properties": {"question": {"type": "string", "minLength": 1, "description": "What to ask the persona."}},
        "required": ["question"],
        "additionalProperties": false,
    });
    let Value::Object(schema) = schema else { unreachable!("a JSON object literal") };
    ToolSpec::new(
        persona.tool_name(),
        format!("Ask the {} persona for a structured memo. {}", persona.name, persona.description),
        schema,
    )
}

/// The memo tool's input schema, from the persona's memo fields.
fn memo_schema(fields: &[MemoField]) -> JsonObject {
    let mut properties = JsonObject::new();
    let mut required = Vec::new();
    for field in fields {
        let schema = match field.kind {
            MemoFieldKind::String => {
                json!({"type": "string", "minLength": 1, "description": field.description})
            }
            MemoFieldKind::Integer => {
                let mut schema = json!({"type": "integer", "description": field.description});
                if let Some(min) = field.min {
                    schema["minimum"] = json!(min);
                }
                if let Some(max) = field.max {
                    schema["maximum"] = json!(max);
                }
                schema
            }
            MemoFieldKind::Enum => {
                json!({"type": "string", "enum": field.values, "description": field.description})
            }
            // A bare string is accepted and made a one-item list by the validator.
            MemoFieldKind::List => {
                json!({"type": ["array", "string", "null"], "items": {"type": "string"}, "description": field.description})
            }
        };
        properties.insert(field.name.clone(), schema);
        if field.required {
            required.push(Value::String(field.name.clone()));
        }
    }
    let schema = json!({"type": "object", "properties": properties, "required": required, "additionalProperties": false});
    match schema {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    }
}

/// Checks and normalizes a memo: every problem found, or the memo with lists coerced.
pub fn validate_memo(fields: &[MemoField], arguments: &JsonObject) -> Result<JsonObject, String> {
    let mut memo = JsonObject::new();
    let mut problems = Vec::new();
    for key in arguments.keys() {
        if !fields.iter().any(|field| &field.name == key) {
            problems.push(format!("`{key}` is not a memo field"));
        }
    }
    for field in fields {
        let value = arguments.get(&field.name).cloned().unwrap_or(Value::Null);
        let name = &field.name;
        let checked = match (field.kind, &value) {
            (_, Value::Null) if !field.required => Ok(match field.kind {
                MemoFieldKind::List => json!([]),
                _ => Value::Null,
            }),
            (MemoFieldKind::List, Value::Null) => Err(format!("`{name}` is required")),
            (_, Value::Null) => Err(format!("`{name}` is required")),
            (MemoFieldKind::String, Value::String(text)) if !text.trim().is_empty() => {
                Ok(value.clone())
            }
            (MemoFieldKind::String, _) => Err(format!("`{name}` must be a non-empty string")),
            (MemoFieldKind::Enum, Value::String(text))
                if field.values.iter().any(|v| v == text) =>
            {
                Ok(value.clone())
            }
            (MemoFieldKind::Enum, _) => {
                Err(format!("`{name}` must be one of {}", field.values.join(", ")))
            }
            (MemoFieldKind::Integer, number) => match number
                .as_i64()
                .or_else(|| number.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64))
            {
                Some(n)
                    if field.min.is_none_or(|min| n >= min)
                        && field.max.is_none_or(|max| n <= max) =>
                {
                    Ok(json!(n))
                }
                _ => Err(format!(
                    "`{name}` must be an integer{}",
                    match (field.min, field.max) {
                        (Some(min), Some(max)) => format!(" from {min} to {max}"),
                        _ => String::new(),
                    }
                )),
            },
            (MemoFieldKind::List, Value::String(text)) => Ok(json!([text])),
            (MemoFieldKind::List, Value::Array(items)) if items.iter().all(Value::is_string) => {
                Ok(value.clone())
            }
            (MemoFieldKind::List, _) => Err(format!("`{name}` must be a list of strings")),
        };
        match checked {
            Ok(value) => {
                memo.insert(name.clone(), value);
            }
            Err(problem) => problems.push(problem),
        }
    }
    if problems.is_empty() { Ok(memo) } else { Err(problems.join("; ")) }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `submit_memo`: validates the memo, keeps it and ends the child's turn.
struct MemoTool {
    spec: ToolSpec,
    fields: Vec<MemoField>,
    memo: Arc<Mutex<Option<JsonObject>>>,
    end_turn: CancellationToken,
}

#[async_trait]
impl Tool for MemoTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(
        &self,
        arguments: JsonObject,
        _context: ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        Ok(match validate_memo(&self.fields, &arguments) {
            Ok(memo) => {
                *lock(&self.memo) = Some(memo);
                self.end_turn.cancel();
                ToolOutput::text("Memo received.")
            }
            Err(problems) => ToolOutput::failed(
                ToolFailure::new(
                    FailureCode::MemoInvalid,
                    format!("The memo is invalid: {problems}."),
                )
                .retryable(true)
                .hint(format!("Fix it and call {SUBMIT_MEMO} again.")),
            ),
        })
    }
}

/// Why a consult could not run; its text is the `reason` the parent's model reads.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConsultError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The parent session was deleted meanwhile.
    #[error("session `{0}` is gone")]
    ParentGone(String),
    /// The persona is not in the config.
    #[error("persona `{0}` is not configured")]
    NotConfigured(String),
    /// The child could not be set up (its transcript, its model).
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// The memo tool's name is taken in the child's registry.
    #[error(transparent)]
    Registry(#[from] RegistryError),
}

/// The system prompt of a persona's child: its own, then how to end with the memo.
fn system_prompt(persona: &Persona) -> String {
    let fields: Vec<String> = persona
        .memo_fields
        .iter()
        .map(|f| {
            format!(
                "- {}{}: {}",
                f.name,
                if f.required { "" } else { " (optional)" },
                f.description
            )
        })
        .collect();
    format!(
        "{}\n\nYou are consulted by another agent. Research the question with your tools if needed, then end by \
         calling `{SUBMIT_MEMO}` exactly once with your memo. Its fields:\n{}",
        persona.system_prompt,
        fields.join("\n")
    )
}

/// Runs one consult in a new hidden child session of `parent_id`.
///
/// `child_tools` builds the child's registry (and the names kept from its model) for each
/// attempt; the memo tool is added to it.
pub(crate) async fn consult(
    core: &Arc<Core>,
    parent_id: &str,
    persona: &Persona,
    question: &str,
    parent_cancel: &CancellationToken,
    child_tools: impl Fn(&Session, &AgentDefinition, &History) -> (ToolRegistry, HashSet<String>),
) -> Result<Value, ConsultError> {
    let parent: Session = core
        .store()
        .get_session(parent_id)?
        .ok_or_else(|| ConsultError::ParentGone(parent_id.to_owned()))?;
    let child = core.store().create_session(NewSession {
        owner: parent.owner.clone(),
        agent_id: AgentId::Persona(&persona.name).to_string(),
        model: parent.model.clone(),
        parent_id: Some(parent.id.clone()),
        hidden: true,
        view_context_id: parent.view_context_id.clone(),
        metadata: SessionMeta::persona_child(&parent.metadata, question),
        ..NewSession::default()
    })?;
    core.events().bookkeeping(
        &child.id,
        kind::SESSION_HEADER,
        json!({"agentName": child.agent_id, "model": child.model, "parentSessionId": parent.id}),
    )?;
    let definition = core
        .definition(&child.agent_id)
        .ok_or_else(|| ConsultError::NotConfigured(persona.name.clone()))?;
    let model = core.model_of(&child)?;
    let history = History::default();
    let memo: Arc<Mutex<Option<JsonObject>>> = Arc::default();
    let mut config = core.agent_config(&child, &definition);
    config.system_prompt = system_prompt(persona);
    config.stop_mode = StopMode::EndNow;
    let mut agent = Agent::new(Arc::clone(&model), Arc::new(ToolRegistry::new()), config);
    let mut steps = 0;
    let mut last_text = String::new();
    for attempt in 0..2 {
        if parent_cancel.is_cancelled() {
            break;
        }
        let end_turn = parent_cancel.child_token();
        let (mut registry, hidden) = child_tools(&child, &definition, &history);
        agent.set_model(HiddenToolFilter::wrap(Arc::clone(&model), &Arc::new(hidden)));
        let memo_tool = MemoTool {
            spec: ToolSpec::new(
                SUBMIT_MEMO,
                "Submit your memo; this ends your work.",
                memo_schema(&persona.memo_fields),
            ),
            fields: persona.memo_fields.clone(),
            memo: Arc::clone(&memo),
            end_turn: end_turn.clone(),
        };
        registry.register(Arc::new(memo_tool))?;
        agent.set_tools(Arc::new(registry));
        let text = if attempt == 0 { question.to_owned() } else { MEMO_RETRY_PROMPT.to_owned() };
        let sink = TurnSink::new(Arc::clone(core), &child.id, history.clone(), Vec::new());
        let turned = agent.turn(text, &end_turn, &sink).await;
        sink.flush();
        match turned {
            Ok(outcome) => {
                steps += outcome.steps;
                last_text = outcome.text;
            }
            Err(error) => {
                last_text = error.to_string();
            }
        }
        if lock(&memo).is_some() {
            break;
        }
    }
    let memo = lock(&memo).take();
    Ok(match memo {
        Some(memo) => {
            let mut result = JsonObject::new();
            result.insert("status".into(), json!("ok"));
            result.insert("persona".into(), json!(persona.name));
            result.extend(memo);
            result.insert("steps".into(), json!(steps));
            result.insert("sessionId".into(), json!(child.id));
            Value::Object(result)
        }
        None => json!({
            "status": "failed",
            "persona": persona.name,
            "reason": format!("The persona ended without a valid memo. Its last words: {}", transcript::preview(&last_text, 200)),
            "steps": steps,
        }),
    })
}
