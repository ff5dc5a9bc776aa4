//! The tool memo (glen's memoized reads): results of named tools by tool name and canonical
//! arguments, and [`MemoTool`], a tool served from one.
//!
//! The rule is glen's `ToolRegistry` memo: only the named tools are memoized; the key is the
//! name and the canonical JSON of the arguments (key order does not matter, array order does);
//! a result is stored only when it is no error and no `success: false` payload, so a failure
//! is asked again the next time.

use std::{
    collections::{HashMap, HashSet},
    sync::{Arc, Mutex, MutexGuard, PoisonError},
};

use async_trait::async_trait;
use rein_protocol::{JsonObject, Tool, ToolContext, ToolError, ToolOutput, ToolSpec};

use crate::{outcome::reports_failure, validate::canonical_args};

/// Memoized results of the tools it names, keyed by name and canonical arguments.
#[derive(Default)]
pub struct ToolMemo {
    tools: HashSet<String>,
    results: Mutex<HashMap<String, ToolOutput>>,
}

impl std::fmt::Debug for ToolMemo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolMemo").field("tools", &self.tools).field("stored", &self.len()).finish()
    }
}

impl ToolMemo {
    /// A memo of these tools (none: it memoizes nothing).
    pub fn new<S: Into<String>>(tools: impl IntoIterator<Item = S>) -> Self {
        ToolMemo { tools: tools.into_iter().map(Into::into).collect(), results: Mutex::default() }
    }

    fn results(&self) -> MutexGuard<'_, HashMap<String, ToolOutput>> {
        self.results.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether results of `tool` are memoized.
    pub fn memoizes(&self, tool: &str) -> bool {
        self.tools.contains(tool)
    }

    /// Whether it memoizes no tool at all.
    pub fn is_off(&self) -> bool {
        self.tools.is_empty()
    }

    fn key(&self, tool: &str, arguments: &JsonObject) -> Option<String> {
        self.memoizes(tool).then(|| format!("{tool}:{}", canonical_args(arguments)))
    }

    /// The stored result of this call, if there is one.
    pub fn get(&self, tool: &str, arguments: &JsonObject) -> Option<ToolOutput> {
        let key = self.key(tool, arguments)?;
        self.results().get(&key).cloned()
    }

    /// Stores the result of this call when the tool is memoized and the result is a success
    /// (no error, no `success: false` payload). Returns whether it was stored.
    pub fn store(&self, tool: &str, arguments: &JsonObject, output: &ToolOutput) -> bool {
        let Some(key) = self.key(tool, arguments) else { return false };
        if !memoizable(output) {
            return false;
        }
        self.results().insert(key, output.clone());
        true
    }

    /// Forgets every stored result.
    pub fn clear(&self) {
        self.results().clear();
    }

    /// How many results are stored.
    pub fn len(&self) -> usize {
        self.results().len()
    }

    /// Whether no result is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Whether a result may be memoized: neither an error nor a `success: false` payload.
pub fn memoizable(output: &ToolOutput) -> bool {
    !output.is_error && !reports_failure(output)
}

/// A tool behind a [`ToolMemo`]: a call the memo holds a result for is answered with it without
/// running the tool; any other call runs the tool, and a successful result is stored.
pub struct MemoTool {
    inner: Arc<dyn Tool>,
    memo: Arc<ToolMemo>,
}

impl std::fmt::Debug for MemoTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoTool").field("tool", &self.inner.spec().name).finish_non_exhaustive()
    }
}

impl MemoTool {
    /// `tool` served from `memo` (when the memo names it; otherwise every call runs it).
    pub fn new(tool: Arc<dyn Tool>, memo: Arc<ToolMemo>) -> Self {
        MemoTool { inner: tool, memo }
    }
}

#[async_trait]
impl Tool for MemoTool {
    fn spec(&self) -> &ToolSpec {
        self.inner.spec()
    }

    async fn call(
        &self,
        arguments: JsonObject,
        context: ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let name = &self.inner.spec().name;
        if let Some(hit) = self.memo.get(name, &arguments) {
            tracing::debug!(tool = %name, "served from the tool memo");
            return Ok(hit);
        }
        let key_arguments = self.memo.memoizes(name).then(|| arguments.clone());
        let output = self.inner.call(arguments, context).await?;
        if let Some(arguments) = key_arguments {
            self.memo.store(name, &arguments, &output);
        }
        Ok(output)
    }
}
