//! Capabilities: the tools the runtime offers, which of them may run in the background, and
//! the handlers of background tasks.

use std::sync::Arc;

use async_trait::async_trait;
use rein_protocol::{JsonObject, Tool, ToolContext, ToolError, ToolOutput, ToolSource, ToolSpec};
use serde_json::Value;

use crate::task_context::TaskContext;

/// Runs a background task. The handler reports progress with [`TaskContext::heartbeat`], checks
/// [`TaskContext::cancelled`], and may keep resume state with the checkpoint calls.
#[async_trait]
pub trait TaskHandler: Send + Sync {
    /// Runs the task to its end: `Ok(result)` completes it, `Err(message)` fails it.
    async fn run(&self, arguments: JsonObject, context: TaskContext) -> Result<Value, String>;
}

/// One tool the runtime can offer, with how it may run.
#[derive(Clone)]
pub struct Capability {
    tool: Arc<dyn Tool>,
    background: bool,
    handler: Option<Arc<dyn TaskHandler>>,
}

impl std::fmt::Debug for Capability {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Capability")
            .field("name", &self.tool.spec().name)
            .field("background", &self.background)
            .field("handler", &self.handler.is_some())
            .finish()
    }
}

impl Capability {
    /// A tool that runs inline only.
    pub fn new(tool: Arc<dyn Tool>) -> Self {
        Capability { tool, background: false, handler: None }
    }

    /// Also offers `start_<name>_task`, which runs the tool itself as a background task.
    pub fn background(mut self) -> Self {
        self.background = true;
        self
    }

    /// Also offers `start_<name>_task`, run by `handler` with a [`TaskContext`].
    pub fn with_task_handler(mut self, handler: Arc<dyn TaskHandler>) -> Self {
        self.background = true;
        self.handler = Some(handler);
        self
    }

    /// The tool's spec.
    pub fn spec(&self) -> &ToolSpec {
        self.tool.spec()
    }

    /// Whether it can run as a background task.
    pub fn is_background(&self) -> bool {
        self.background
    }

    /// The tool itself.
    pub(crate) fn tool(&self) -> &Arc<dyn Tool> {
        &self.tool
    }

    /// The handler its background tasks run with, when it has one (else the tool runs).
    pub(crate) fn handler(&self) -> Option<&Arc<dyn TaskHandler>> {
        self.handler.as_ref()
    }
}

/// The set of capabilities a runtime offers (each agent's policy picks from it).
#[derive(Clone, Default, Debug)]
pub struct Capabilities {
    entries: Vec<Capability>,
}

impl Capabilities {
    /// No capabilities.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a capability; a later one with the same name replaces the earlier.
    pub fn add(&mut self, capability: Capability) -> &mut Self {
        let name = capability.spec().name.clone();
        self.entries.retain(|entry| entry.spec().name != name);
        self.entries.push(capability);
        self
    }

    /// Adds a capability (builder form).
    pub fn with(mut self, capability: Capability) -> Self {
        self.add(capability);
        self
    }

    /// Adds every tool of a remote source (an MCP server) as an inline capability.
    pub async fn add_source(&mut self, source: Arc<dyn ToolSource>) -> Result<usize, ToolError> {
        let specs = source.list_tools().await?;
        let count = specs.len();
        for spec in specs {
            self.add(Capability::new(Arc::new(SourceTool { source: Arc::clone(&source), spec })));
        }
        Ok(count)
    }

    /// Lets the capability called `name` also run as a background task (`start_<name>_task`);
    /// `false` when there is none.
    pub fn mark_background(&mut self, name: &str) -> bool {
        match self.entries.iter_mut().find(|entry| entry.spec().name == name) {
            Some(entry) => {
                entry.background = true;
                true
            }
            None => false,
        }
    }

    /// The capability called `name`.
    pub fn get(&self, name: &str) -> Option<&Capability> {
        self.entries.iter().find(|entry| entry.spec().name == name)
    }

    /// Every capability, in the order added.
    pub fn iter(&self) -> impl Iterator<Item = &Capability> {
        self.entries.iter()
    }
}

/// One tool of a remote source, as a local `Tool`.
struct SourceTool {
    source: Arc<dyn ToolSource>,
    spec: ToolSpec,
}

#[async_trait]
impl Tool for SourceTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(
        &self,
        arguments: JsonObject,
        context: ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        self.source.call_tool(&self.spec.name, arguments, context).await
    }
}
