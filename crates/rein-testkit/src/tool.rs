//! Scripted tools and tool sources that answer from a closure and record their calls.

use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use rein_protocol::{
    CancellationToken, JsonObject, Tool, ToolContext, ToolError, ToolOutput, ToolSource, ToolSpec,
};

type Handler = dyn Fn(&JsonObject, usize) -> Result<ToolOutput, ToolError> + Send + Sync;

/// A local tool whose answers come from a closure `(arguments, call_index) -> result`.
///
/// Clones share the record of calls. It can also cancel a token when called (to test a stop
/// in the middle of a batch) or never answer (to test cancelling a running call).
#[derive(Clone)]
pub struct ScriptedTool {
    spec: ToolSpec,
    handler: Arc<Handler>,
    calls: Arc<Mutex<Vec<JsonObject>>>,
    cancel_on_call: Option<CancellationToken>,
    hang: bool,
}

impl std::fmt::Debug for ScriptedTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedTool").field("spec", &self.spec).finish_non_exhaustive()
    }
}

impl ScriptedTool {
    /// A tool that answers with `handler(arguments, call_index)`.
    pub fn new(
        spec: ToolSpec,
        handler: impl Fn(&JsonObject, usize) -> Result<ToolOutput, ToolError> + Send + Sync + 'static,
    ) -> Self {
        ScriptedTool {
            spec,
            handler: Arc::new(handler),
            calls: Arc::new(Mutex::new(Vec::new())),
            cancel_on_call: None,
            hang: false,
        }
    }

    /// A tool with no arguments that always answers `text`.
    pub fn constant(name: &str, text: &str) -> Self {
        let text = text.to_owned();
        Self::new(ToolSpec::without_arguments(name, format!("test tool {name}")), move |_, _| {
            Ok(ToolOutput::text(&text))
        })
    }

    /// A tool that answers with its arguments as JSON text (`echo:{...}`).
    pub fn echo(spec: ToolSpec) -> Self {
        let name = spec.name.clone();
        Self::new(spec, move |arguments, _| {
            Ok(ToolOutput::text(format!("{name}:{}", serde_json::Value::Object(arguments.clone()))))
        })
    }

    /// A tool that answers every call with a failed result whose text is `error`.
    pub fn failing(name: &str, error: &str) -> Self {
        let error = error.to_owned();
        Self::new(ToolSpec::without_arguments(name, format!("test tool {name}")), move |_, _| {
            Ok(ToolOutput::error(&error))
        })
    }

    /// Cancels `token` whenever the tool is called (before answering).
    pub fn cancelling(mut self, token: CancellationToken) -> Self {
        self.cancel_on_call = Some(token);
        self
    }

    /// Never answers (the caller must drop the future).
    pub fn hanging(mut self) -> Self {
        self.hang = true;
        self
    }

    /// The arguments of every call so far, in order.
    pub fn calls(&self) -> Vec<JsonObject> {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// How many times the tool was called.
    pub fn call_count(&self) -> usize {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    fn record(&self, arguments: &JsonObject) -> usize {
        let mut calls = self.calls.lock().unwrap_or_else(PoisonError::into_inner);
        calls.push(arguments.clone());
        calls.len() - 1
    }
}

#[async_trait]
impl Tool for ScriptedTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(
        &self,
        arguments: JsonObject,
        _context: ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let index = self.record(&arguments);
        if let Some(token) = &self.cancel_on_call {
            token.cancel();
        }
        if self.hang {
            std::future::pending::<()>().await;
        }
        (self.handler)(&arguments, index)
    }
}

type SourceHandler = dyn Fn(&str, &JsonObject) -> Result<ToolOutput, ToolError> + Send + Sync;

/// A remote tool source (the role of an MCP server) with fixed specs and a closure
/// `(name, arguments) -> result`. Clones share the record of calls.
#[derive(Clone)]
pub struct ScriptedSource {
    name: String,
    specs: Vec<ToolSpec>,
    handler: Arc<SourceHandler>,
    calls: Arc<Mutex<Vec<(String, JsonObject)>>>,
}

impl std::fmt::Debug for ScriptedSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedSource")
            .field("name", &self.name)
            .field("specs", &self.specs)
            .finish_non_exhaustive()
    }
}

impl ScriptedSource {
    /// A source named `name` offering `specs`, answering with `handler`.
    pub fn new(
        name: &str,
        specs: Vec<ToolSpec>,
        handler: impl Fn(&str, &JsonObject) -> Result<ToolOutput, ToolError> + Send + Sync + 'static,
    ) -> Self {
        ScriptedSource {
            name: name.to_owned(),
            specs,
            handler: Arc::new(handler),
            calls: Arc::default(),
        }
    }

    /// The `(tool, arguments)` of every call so far, in order.
    pub fn calls(&self) -> Vec<(String, JsonObject)> {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }
}

#[async_trait]
impl ToolSource for ScriptedSource {
    fn name(&self) -> &str {
        &self.name
    }

    async fn list_tools(&self) -> Result<Vec<ToolSpec>, ToolError> {
        Ok(self.specs.clone())
    }

    async fn call_tool(
        &self,
        name: &str,
        arguments: JsonObject,
        _context: ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        self.calls
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((name.to_owned(), arguments.clone()));
        if !self.specs.iter().any(|spec| spec.name == name) {
            return Err(ToolError::UnknownTool(name.to_owned()));
        }
        (self.handler)(name, &arguments)
    }
}
