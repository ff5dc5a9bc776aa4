//! A real runtime (SQLite + JSONL in a temp dir) behind the router, with a scripted model.
//!
//! [`ByPrompt`] picks a `rein_testkit::ScriptedModel` by the newest user message (a key ending
//! in `*` matches messages starting with the rest), so each message of a test has its own
//! script whatever the number of model calls before it; extra calls get a plain default answer
//! (`Done.`), a message starting with `echo ` is answered with its own text, and one starting
//! with `retry ` first reports a retried request (`ReplyDelta::Retry`), as a provider does. Replies are
//! streamed word by word, so clients see text arrive in pieces.

use std::{collections::HashMap, sync::Arc, time::Duration};

use async_trait::async_trait;
use rein_protocol::{
    DeltaSink, JsonObject, Message, Model, ModelError, ModelInfo, ModelReply, ModelRequest,
    ReplyDelta, Role, Tool, ToolContext, ToolError, ToolOutput, ToolSpec,
};
use rein_runtime::{
    Capabilities, Capability, Runtime, RuntimeConfig, RuntimeParts, StaticModels, TaskContext,
    TaskHandler,
};
use rein_server::ServerConfig;
use rein_store::{JsonlTranscriptStore, SqliteConfig, SqliteSessionStore, TranscriptConfig};
use rein_testkit::{ScriptedModel, ScriptedTool, Step, reply};
use serde_json::Value;

/// Scripts keyed by the user message they answer.
pub(crate) struct ByPrompt {
    info: ModelInfo,
    scripts: HashMap<String, ScriptedModel>,
    fallback: ScriptedModel,
    /// Pause between streamed words (zero in router tests).
    pace: Duration,
}

impl ByPrompt {
    pub(crate) fn new(scripts: impl IntoIterator<Item = (&'static str, Vec<Step>)>) -> Self {
        ByPrompt {
            info: ModelInfo::named("scripted"),
            scripts: scripts
                .into_iter()
                .map(|(prompt, steps)| (prompt.to_owned(), ScriptedModel::new(steps)))
                .collect(),
            fallback: ScriptedModel::repeating([reply::text("Done.")]),
            pace: Duration::ZERO,
        }
    }

    pub(crate) fn paced(mut self, pace: Duration) -> Self {
        self.pace = pace;
        self
    }
}

fn last_user_text(request: &ModelRequest) -> String {
    request
        .messages
        .iter()
        .rev()
        .find(|m| m.role() == Role::User)
        .map(Message::text)
        .unwrap_or_default()
}

#[async_trait]
impl Model for ByPrompt {
    fn info(&self) -> &ModelInfo {
        &self.info
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        deltas: DeltaSink<'_>,
    ) -> Result<ModelReply, ModelError> {
        let prompt = last_user_text(request);
        let script = self.scripts.get(&prompt).or_else(|| {
            self.scripts
                .iter()
                .find(|(key, _)| {
                    key.strip_suffix('*').is_some_and(|start| prompt.starts_with(start))
                })
                .map(|(_, script)| script)
        });
        if prompt.starts_with("retry ") {
            // As a provider does when a request failed and is sent again.
            deltas(ReplyDelta::Retry {
                attempt: 2,
                delay_ms: 1000,
                reason: "HTTP 503: the model is overloaded".to_owned(),
            });
        }
        let reply = match script {
            Some(script) if script.remaining() > 0 => script.complete(request, &|_| {}).await?,
            _ if prompt.starts_with("echo ") => reply::text(prompt.clone()),
            _ => self.fallback.complete(request, &|_| {}).await?,
        };
        let mut first = true;
        for word in reply.content.split_inclusive(' ') {
            if !first && !self.pace.is_zero() {
                tokio::time::sleep(self.pace).await;
            }
            first = false;
            deltas(ReplyDelta::Text { text: word.to_owned() });
        }
        Ok(reply)
    }
}

/// The tools of the test agent: `weather` (read-only), `send_email` (side effects: needs
/// approval), and `report`, a background task that reports the stage `writing the outline`
/// and runs until cancelled.
pub(crate) fn capabilities() -> Capabilities {
    let schema = |field: &str| {
        serde_json::json!({ "type": "object", "properties": { field: { "type": "string" } }, "required": [field] })
            .as_object()
            .cloned()
            .unwrap_or_default()
    };
    let weather = ScriptedTool::new(
        ToolSpec::new("weather", "The weather in a city.", schema("city")).read_only(true),
        |_, _| Ok(ToolOutput::text("sunny, 24 °C")),
    );
    let email = ScriptedTool::new(
        ToolSpec::new("send_email", "Sends an email.", schema("to")).side_effects(true),
        |_, _| Ok(ToolOutput::text("sent")),
    );
    let report = UntilCancelled(ToolSpec::without_arguments("report", "Writes a long report."));
    Capabilities::new()
        .with(Capability::new(Arc::new(weather)))
        .with(Capability::new(Arc::new(email)))
        .with(Capability::new(Arc::new(report)).with_task_handler(Arc::new(ReportHandler)))
}

/// The background `report`: shows a stage, then waits to be cancelled.
struct ReportHandler;

#[async_trait]
impl TaskHandler for ReportHandler {
    async fn run(&self, _arguments: JsonObject, context: TaskContext) -> Result<Value, String> {
        context.heartbeat("writing the outline").await.map_err(|error| error.to_string())?;
        context.cancellation().cancelled().await;
        Err("cancelled before the report was done".to_owned())
    }
}

/// A tool that runs until its call is cancelled (a long report a person gives up on).
struct UntilCancelled(ToolSpec);

#[async_trait]
impl Tool for UntilCancelled {
    fn spec(&self) -> &ToolSpec {
        &self.0
    }

    async fn call(
        &self,
        _arguments: JsonObject,
        context: ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        context.cancel.cancelled().await;
        Ok(ToolOutput::error("cancelled before the report was done"))
    }
}

/// A runtime over fresh stores in `dir`, with the scripted model as its only model.
pub(crate) fn runtime(dir: &std::path::Path, model: ByPrompt) -> Runtime {
    runtime_with(dir, model, RuntimeConfig::default())
}

/// [`runtime`] with its agents, personas and limits configured.
pub(crate) fn runtime_with(
    dir: &std::path::Path,
    model: ByPrompt,
    config: RuntimeConfig,
) -> Runtime {
    let store = SqliteSessionStore::open(&SqliteConfig::at(dir.join("sessions.sqlite3"))).unwrap();
    let transcripts =
        JsonlTranscriptStore::open(&TranscriptConfig::at(dir.join("transcripts"))).unwrap();
    let models = StaticModels::new().with("scripted", Arc::new(model));
    let parts = RuntimeParts::new(Arc::new(store), Arc::new(transcripts), Arc::new(models))
        .capabilities(capabilities())
        .config(config);
    Runtime::new(parts).unwrap()
}

/// A router over a real runtime; keep the temp dir alive as long as the router.
pub(crate) fn app(
    config: &ServerConfig,
    model: ByPrompt,
) -> (axum::Router, Runtime, tempfile::TempDir) {
    app_with(config, model, RuntimeConfig::default())
}

/// [`app`] over [`runtime_with`].
pub(crate) fn app_with(
    config: &ServerConfig,
    model: ByPrompt,
    runtime_config: RuntimeConfig,
) -> (axum::Router, Runtime, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let runtime = runtime_with(dir.path(), model, runtime_config);
    (rein_server::router(config, runtime.clone()), runtime, dir)
}
