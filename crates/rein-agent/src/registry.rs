//! The tool registry: local tools and remote sources behind one dispatch by name.

use std::{
    collections::{HashMap, HashSet},
    future::Future,
    pin::Pin,
    sync::Arc,
};

use async_trait::async_trait;
use rein_protocol::{
    FailureCode, JsonObject, Tool, ToolCall, ToolContext, ToolError, ToolFailure, ToolOutput,
    ToolSource, ToolSpec,
};

use crate::{
    error::RegistryError,
    memo::ToolMemo,
    validate::{ArgsValidator, shared_validator},
};

type BoxedCall = dyn Fn(
        JsonObject,
        ToolContext,
    ) -> Pin<Box<dyn Future<Output = Result<ToolOutput, ToolError>> + Send>>
    + Send
    + Sync;

/// A local tool made from an async closure and a spec (name, description, input schema,
/// read-only and side-effect flags).
pub struct FnTool {
    spec: ToolSpec,
    call: Box<BoxedCall>,
}

impl std::fmt::Debug for FnTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FnTool").field("spec", &self.spec).finish_non_exhaustive()
    }
}

impl FnTool {
    /// A tool that runs `call(arguments, context)`.
    ///
    /// ```
    /// # use rein_agent::FnTool;
    /// # use rein_protocol::{ToolOutput, ToolSpec};
    /// let schema = serde_json::json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]});
    /// let spec = ToolSpec::new("double", "Doubles n.", schema.as_object().unwrap().clone()).read_only(true);
    /// let tool = FnTool::new(spec, |args, _ctx| async move {
    ///     let n = args["n"].as_i64().unwrap_or_default();
    ///     Ok(ToolOutput::text((n * 2).to_string()))
    /// });
    /// ```
    pub fn new<F, Fut>(spec: ToolSpec, call: F) -> Self
    where
        F: Fn(JsonObject, ToolContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ToolOutput, ToolError>> + Send + 'static,
    {
        FnTool {
            spec,
            call: Box::new(move |arguments, context| Box::pin(call(arguments, context))),
        }
    }
}

#[async_trait]
impl Tool for FnTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(
        &self,
        arguments: JsonObject,
        context: ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        (self.call)(arguments, context).await
    }
}

enum Backend {
    Local(Arc<dyn Tool>),
    Remote(Arc<dyn ToolSource>),
}

struct Entry {
    spec: ToolSpec,
    backend: Backend,
    validator: Option<Arc<ArgsValidator>>,
}

impl Entry {
    fn origin(&self) -> String {
        match &self.backend {
            Backend::Local(_) => "local".to_owned(),
            Backend::Remote(source) => format!("source {}", source.name()),
        }
    }
}

/// The result of one dispatch.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Dispatched {
    /// What the model reads. Unknown tools, invalid arguments and calls that could not be made
    /// are error results here, never a panic or an `Err`.
    pub output: ToolOutput,
    /// Served from the memo of idempotent reads.
    pub cached: bool,
}

/// Local tools and remote sources behind one dispatch by name.
///
/// Tools keep their registration order (local tools as registered, each source's tools as it
/// lists them). A duplicate name is a registration error. Results of the tools named with
/// [`ToolRegistry::with_memo_tools`] are memoized by name and canonical arguments; failed
/// results and `success: false` payloads are never cached.
#[derive(Default)]
pub struct ToolRegistry {
    entries: Vec<Entry>,
    by_name: HashMap<String, usize>,
    memo: ToolMemo,
}

impl std::fmt::Debug for ToolRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolRegistry")
            .field("tools", &self.names())
            .field("memo", &self.memo)
            .finish_non_exhaustive()
    }
}

impl ToolRegistry {
    /// An empty registry that memoizes nothing.
    pub fn new() -> Self {
        Self::default()
    }

    /// Memoizes the results of these tools (idempotent metadata reads).
    pub fn with_memo_tools<S: Into<String>>(mut self, names: impl IntoIterator<Item = S>) -> Self {
        self.memo = ToolMemo::new(names);
        self
    }

    /// Registers a local tool.
    pub fn register(&mut self, tool: Arc<dyn Tool>) -> Result<(), RegistryError> {
        let spec = tool.spec().clone();
        self.check_free(&spec.name)?;
        self.insert(spec, Backend::Local(tool));
        Ok(())
    }

    /// Registers a local tool made from an async closure (see [`FnTool::new`]).
    pub fn register_fn<F, Fut>(&mut self, spec: ToolSpec, call: F) -> Result<(), RegistryError>
    where
        F: Fn(JsonObject, ToolContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ToolOutput, ToolError>> + Send + 'static,
    {
        self.register(Arc::new(FnTool::new(spec, call)))
    }

    /// Lists a remote source's tools and registers them all, or none when one name is taken.
    /// Returns how many were registered.
    pub async fn register_source(
        &mut self,
        source: Arc<dyn ToolSource>,
    ) -> Result<usize, RegistryError> {
        let specs = source.list_tools().await.map_err(|error| RegistryError::Source {
            source_name: source.name().to_owned(),
            error,
        })?;
        let mut seen = HashSet::new();
        for spec in &specs {
            self.check_free(&spec.name)?;
            if !seen.insert(spec.name.as_str()) {
                return Err(RegistryError::DuplicateName {
                    name: spec.name.clone(),
                    existing: format!("source {}", source.name()),
                });
            }
        }
        let count = specs.len();
        for spec in specs {
            self.insert(spec, Backend::Remote(Arc::clone(&source)));
        }
        Ok(count)
    }

    /// Removes every tool of the source with this name (to re-list it, say); returns how many.
    pub fn remove_source(&mut self, source_name: &str) -> usize {
        let before = self.entries.len();
        self.entries.retain(
            |entry| !matches!(&entry.backend, Backend::Remote(s) if s.name() == source_name),
        );
        self.by_name =
            self.entries.iter().enumerate().map(|(i, e)| (e.spec.name.clone(), i)).collect();
        before - self.entries.len()
    }

    fn check_free(&self, name: &str) -> Result<(), RegistryError> {
        match self.by_name.get(name) {
            Some(&index) => Err(RegistryError::DuplicateName {
                name: name.to_owned(),
                existing: self.entries[index].origin(),
            }),
            None => Ok(()),
        }
    }

    fn insert(&mut self, spec: ToolSpec, backend: Backend) {
        let validator = match shared_validator(&spec.input_schema) {
            Ok(validator) => Some(validator),
            Err(error) => {
                tracing::warn!(tool = %spec.name, %error, "input schema does not compile; arguments go unchecked");
                None
            }
        };
        self.by_name.insert(spec.name.clone(), self.entries.len());
        self.entries.push(Entry { spec, backend, validator });
    }

    /// The specs of every tool, in registration order (what the model is offered).
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.entries.iter().map(|entry| entry.spec.clone()).collect()
    }

    /// The names of every tool, in registration order.
    pub fn names(&self) -> Vec<&str> {
        self.entries.iter().map(|entry| entry.spec.name.as_str()).collect()
    }

    /// How many tools there are.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The spec of a tool.
    pub fn spec(&self, name: &str) -> Option<&ToolSpec> {
        self.entry(name).map(|entry| &entry.spec)
    }

    /// Whether a tool is registered.
    pub fn contains(&self, name: &str) -> bool {
        self.by_name.contains_key(name)
    }

    /// Whether `name` is a registered local tool (unknown names are not local).
    pub fn is_local(&self, name: &str) -> bool {
        self.entry(name)
            .is_some_and(|entry| matches!(entry.backend, Backend::Local(_)) && !entry.spec.remote)
    }

    /// The source serving a remote tool; `None` for local and unknown tools.
    pub fn source_of(&self, name: &str) -> Option<&str> {
        match self.entry(name).map(|e| &e.backend) {
            Some(Backend::Remote(source)) => Some(source.name()),
            _ => None,
        }
    }

    /// Whether a call of `name` needs the host's approval when auto-approve is off: remote or
    /// side-effecting tools do, local tools without side effects never.
    pub fn needs_approval(&self, name: &str) -> bool {
        self.entry(name).is_some_and(|entry| {
            matches!(entry.backend, Backend::Remote(_))
                || entry.spec.remote
                || entry.spec.side_effects
        })
    }

    fn entry(&self, name: &str) -> Option<&Entry> {
        self.by_name.get(name).map(|&index| &self.entries[index])
    }

    /// Checks a call before it runs: the tool must exist and the arguments must fit its input
    /// schema (integral floats in integer fields are narrowed). Returns the arguments to run
    /// with, or the error result the model reads (retryable: it says what to fix).
    pub fn check_arguments(
        &self,
        name: &str,
        arguments: &JsonObject,
    ) -> Result<JsonObject, ToolOutput> {
        let Some(entry) = self.entry(name) else {
            return Err(self.unknown(name));
        };
        let mut arguments = arguments.clone();
        if let Some(validator) = &entry.validator
            && let Err(problems) = validator.check(&mut arguments)
        {
            let failure = ToolFailure::new(
                FailureCode::InvalidArguments,
                format!("invalid arguments for `{name}`: {problems}."),
            )
            .retryable(true)
            .hint("Fix the arguments and call it again.");
            return Err(ToolOutput::failed(failure));
        }
        Ok(arguments)
    }

    /// Runs a checked call (see [`ToolRegistry::check_arguments`]), through the memo. A call
    /// that could not be made (`ToolError`) becomes an error result.
    pub async fn execute(
        &self,
        name: &str,
        arguments: JsonObject,
        context: ToolContext,
    ) -> Dispatched {
        let Some(entry) = self.entry(name) else {
            return Dispatched { output: self.unknown(name), cached: false };
        };
        if let Some(hit) = self.memo.get(name, &arguments) {
            return Dispatched { output: hit, cached: true };
        }
        let key_arguments = self.memo.memoizes(name).then(|| arguments.clone());
        let result = match &entry.backend {
            Backend::Local(tool) => tool.call(arguments, context).await,
            Backend::Remote(source) => source.call_tool(name, arguments, context).await,
        };
        let output = match result {
            Ok(output) => output,
            Err(error) => tool_error_output(name, &error),
        };
        if let Some(arguments) = key_arguments {
            self.memo.store(name, &arguments, &output);
        }
        Dispatched { output, cached: false }
    }

    /// Checks and runs a call: [`ToolRegistry::check_arguments`] then [`ToolRegistry::execute`].
    pub async fn dispatch(&self, call: &ToolCall, context: ToolContext) -> Dispatched {
        match self.check_arguments(&call.name, &call.arguments) {
            Ok(arguments) => self.execute(&call.name, arguments, context).await,
            Err(output) => Dispatched { output, cached: false },
        }
    }

    /// The retryable answer to a call of a tool that is not registered, listing the ones that are.
    fn unknown(&self, name: &str) -> ToolOutput {
        let failure = ToolFailure::new(FailureCode::UnknownTool, format!("Unknown tool: {name}."))
            .retryable(true)
            .hint(format!("Available tools: {}", self.names().join(", ")));
        ToolOutput::failed(failure)
    }

    /// Forgets every memoized result.
    pub fn clear_memo(&self) {
        self.memo.clear();
    }

    /// How many results are memoized.
    pub fn memo_len(&self) -> usize {
        self.memo.len()
    }
}

/// The error result for a call that could not be made.
fn tool_error_output(name: &str, error: &ToolError) -> ToolOutput {
    let (code, retryable) = match error {
        ToolError::UnknownTool(_) => (FailureCode::UnknownTool, true),
        ToolError::InvalidArguments { .. } => (FailureCode::InvalidArguments, true),
        ToolError::Cancelled => (FailureCode::Unresolved, false),
        _ => (FailureCode::ToolFailed, true),
    };
    let failure = ToolFailure::new(code, format!("executing {name} failed: {error}"));
    ToolOutput::failed(failure.retryable(retryable))
}
