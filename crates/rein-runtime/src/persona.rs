//! Persona sub-agents: `consult_<persona>(question)` runs a hidden child session whose short
//! loop must end in a structured memo.

use std::sync::{Arc, Mutex, Weak};

use async_trait::async_trait;
use rein_agent::{Agent, StopMode, ToolRegistry};
use rein_protocol::{
    CancellationToken, JsonObject, Message, Tool, ToolContext, ToolError, ToolOutput, ToolSpec,
};
use rein_store::{NewSession, Session};
use serde_json::{Value, json};

use crate::{
    config::{MemoField, MemoFieldKind, Persona},
    runtime::{Inner, PERSONA_AGENT_PREFIX, lock},
    sink::TurnSink,
    tools,
    transcript::kind,
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
            Err(problems) => {
                let message = format!(
                    "The memo is invalid: {problems}. Fix it and call {SUBMIT_MEMO} again."
                );
                let mut output = ToolOutput::error(format!("Error: {message}"));
                output.structured = Some(
                    json!({"accepted": false, "error": {"code": "memo_invalid", "message": message, "retryable": true}}),
                );
                output
            }
        })
    }
}

/// `consult_<persona>`.
struct ConsultTool {
    inner: Weak<Inner>,
    parent_id: String,
    persona: Persona,
    spec: ToolSpec,
}

pub(crate) fn consult_tool(
    inner: Weak<Inner>,
    parent_id: &str,
    persona: &Persona,
) -> Arc<dyn Tool> {
    Arc::new(ConsultTool {
        inner,
        parent_id: parent_id.to_owned(),
        persona: persona.clone(),
        spec: consult_spec(persona),
    })
}

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

#[async_trait]
impl Tool for ConsultTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(
        &self,
        arguments: JsonObject,
        context: ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let inner = self.inner.upgrade().ok_or_else(|| ToolError::Transport {
            source_name: "runtime".into(),
            message: "the runtime was shut down".into(),
        })?;
        let question =
            arguments.get("question").and_then(Value::as_str).unwrap_or_default().trim().to_owned();
        let name = self.persona.name.clone();
        if question.is_empty() {
            return Ok(ToolOutput::structured(
                json!({"status": "error", "persona": name, "reason": "The question is empty.", "steps": 0}),
            ));
        }
        match consult(&inner, &self.parent_id, &self.persona, &question, &context.cancel).await {
            Ok(result) => Ok(ToolOutput::structured(result)),
            Err(reason) => Ok(ToolOutput::structured(
                json!({"status": "error", "persona": name, "reason": reason, "steps": 0}),
            )),
        }
    }
}

/// Runs one consult in a new hidden child session of `parent_id`.
async fn consult(
    inner: &Arc<Inner>,
    parent_id: &str,
    persona: &Persona,
    question: &str,
    parent_cancel: &CancellationToken,
) -> Result<Value, String> {
    let parent: Session = inner
        .store
        .get_session(parent_id)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| format!("session `{parent_id}` is gone"))?;
    let mut metadata = JsonObject::new();
    metadata.insert("hiddenInternal".into(), json!(true));
    metadata.insert("consultQuestion".into(), json!(question));
    if let Some(settings) = parent.metadata.get("settings") {
        metadata.insert("settings".into(), settings.clone());
    }
    let child = inner
        .store
        .create_session(NewSession {
            owner: parent.owner.clone(),
            agent_id: format!("{PERSONA_AGENT_PREFIX}{}", persona.name),
            model: parent.model.clone(),
            parent_id: Some(parent.id.clone()),
            hidden: true,
            view_context_id: parent.view_context_id.clone(),
            metadata,
            ..NewSession::default()
        })
        .map_err(|e| e.to_string())?;
    inner
        .bookkeeping(&child.id, kind::SESSION_HEADER, json!({"agentName": child.agent_id, "model": child.model, "parentSessionId": parent.id}))
        .map_err(|e| e.to_string())?;
    let definition = inner
        .definition(&child.agent_id)
        .ok_or_else(|| format!("persona `{}` is not configured", persona.name))?;
    let model = inner.model_of(&child).map_err(|e| e.to_string())?;
    let mirror: Arc<Mutex<Vec<(Message, bool)>>> = Arc::default();
    let memo: Arc<Mutex<Option<JsonObject>>> = Arc::default();
    let mut config = inner.agent_config(&child, &definition);
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
        let (mut registry, hidden) =
            tools::session_registry(inner, &child, &definition, Arc::clone(&mirror));
        agent.set_model(tools::OfferedOnly::wrap(Arc::clone(&model), &Arc::new(hidden)));
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
        if let Err(error) = registry.register(Arc::new(memo_tool)) {
            return Err(error.to_string());
        }
        agent.set_tools(Arc::new(registry));
        let text = if attempt == 0 { question.to_owned() } else { MEMO_RETRY_PROMPT.to_owned() };
        let sink = TurnSink::new(Arc::clone(inner), &child.id, Arc::clone(&mirror), Vec::new());
        match agent.turn(text, &end_turn, &sink).await {
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
            "reason": format!("The persona ended without a valid memo. Its last words: {}", tools_preview(&last_text)),
            "steps": steps,
        }),
    })
}

fn tools_preview(text: &str) -> String {
    crate::transcript::preview(text, 200)
}
