//! glen's `ToolRegistry`: JavaScript local tools (`execute(args)`) and remote tools called
//! through a client's `callTool(name, args)` (glen's `MCPClient`, or any object with it).

use std::sync::Arc;

use async_trait::async_trait;
use rein_agent::ToolRegistry;
use rein_protocol::{JsonObject, Tool, ToolContext, ToolError, ToolOutput, ToolSpec};
use serde_json::Value;
use wasm_bindgen::prelude::*;

use crate::js::{Held, error_text, from_js, js_error, method, on_js, settle, to_js};

/// How a tool is reached.
enum Backend {
    /// `execute(args)` of the tool object.
    Local(Held),
    /// `client.callTool(name, args)`.
    Remote(Held),
}

/// A tool whose code is JavaScript.
struct JsTool {
    spec: ToolSpec,
    backend: Arc<Backend>,
}

#[async_trait]
impl Tool for JsTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, arguments: JsonObject, _: ToolContext) -> Result<ToolOutput, ToolError> {
        let backend = Arc::clone(&self.backend);
        let name = self.spec.name.clone();
        let arguments = Value::Object(arguments);
        let answer = on_js(move || async move {
            let args = to_js(&arguments);
            let called = match &*backend {
                Backend::Local(execute) => {
                    let execute: js_sys::Function = execute.get().unchecked_into();
                    execute.call1(&JsValue::NULL, &args)
                }
                Backend::Remote(client) => {
                    let client = client.get();
                    match method(&client, "callTool") {
                        Some(call) => call.call2(&client, &name.as_str().into(), &args),
                        None => Err(js_error("the client has no callTool(name, args)")),
                    }
                }
            };
            let settled = match called {
                Ok(value) => settle(value).await,
                Err(error) => Err(error),
            };
            match settled {
                Ok(value) => output(&value),
                Err(error) => ToolOutput::error(error_text(&error)),
            }
        });
        answer.await.map_err(|_| ToolError::Cancelled)
    }
}

/// A tool's answer as the model reads it: a string as it is, an MCP result
/// (`{content: [{type: "text", text}], isError}`) as its text parts, anything else as JSON.
fn output(value: &JsValue) -> ToolOutput {
    if let Some(text) = value.as_string() {
        return ToolOutput::text(text);
    }
    let json = from_js(value);
    if let Some(parts) = json.get("content").and_then(Value::as_array) {
        let text: Vec<String> = parts
            .iter()
            .map(|part| match part.get("text").and_then(Value::as_str) {
                Some(text) => text.to_owned(),
                None => part.to_string(),
            })
            .collect();
        let text = text.join("\n");
        return if json.get("isError").and_then(Value::as_bool).unwrap_or(false) {
            ToolOutput::error(text)
        } else {
            ToolOutput::text(text)
        };
    }
    match json {
        Value::Null => ToolOutput::text(""),
        other => ToolOutput::structured(other),
    }
}

/// The registry behind glen's `ToolRegistry` class.
#[wasm_bindgen]
#[derive(Default)]
pub struct RegistryCore {
    tools: Vec<Arc<JsTool>>,
}

fn spec_of(tool: &JsValue) -> Result<ToolSpec, JsValue> {
    let json = from_js(tool);
    let name = json
        .get("name")
        .and_then(Value::as_str)
        .filter(|name| !name.is_empty())
        .ok_or_else(|| js_error("a tool needs a name"))?;
    let description = json.get("description").and_then(Value::as_str).unwrap_or("");
    let schema = ["inputSchema", "input_schema", "parameters"]
        .iter()
        .find_map(|key| json.get(*key).and_then(Value::as_object))
        .cloned()
        .unwrap_or_else(|| {
            // No schema declared: any object (glen sends such a tool with no checks).
            let mut schema = JsonObject::new();
            schema.insert("type".into(), "object".into());
            schema.insert("additionalProperties".into(), true.into());
            schema
        });
    Ok(ToolSpec::new(name, description, schema))
}

#[wasm_bindgen]
impl RegistryCore {
    /// An empty registry.
    #[wasm_bindgen(constructor)]
    pub fn new() -> RegistryCore {
        RegistryCore::default()
    }

    fn add(&mut self, spec: ToolSpec, backend: Backend) -> Result<(), JsValue> {
        if self.tools.iter().any(|tool| tool.spec.name == spec.name) {
            return Err(js_error(&format!("a tool named `{}` is already registered", spec.name)));
        }
        self.tools.push(Arc::new(JsTool { spec, backend: Arc::new(backend) }));
        Ok(())
    }

    /// Registers `{name, description, inputSchema, execute}`; `execute(args)` may return a
    /// value or a promise.
    #[wasm_bindgen(js_name = registerLocal)]
    pub fn register_local(&mut self, tool: JsValue) -> Result<(), JsValue> {
        let spec = spec_of(&tool)?;
        let execute = method(&tool, "execute")
            .ok_or_else(|| js_error(&format!("tool `{}` has no execute function", spec.name)))?;
        self.add(spec, Backend::Local(Held::new(execute.into())))
    }

    /// Registers remote tools (MCP `tools/list` entries) served by `client.callTool(name,
    /// args)`. Returns how many were registered.
    #[wasm_bindgen(js_name = registerRemote)]
    pub fn register_remote(&mut self, tools: JsValue, client: JsValue) -> Result<usize, JsValue> {
        if method(&client, "callTool").is_none() {
            return Err(js_error("registerRemote needs a client with callTool(name, args)"));
        }
        let tools: js_sys::Array =
            tools.dyn_into().map_err(|_| js_error("registerRemote needs a list of tools"))?;
        let client = Arc::new(client);
        let mut count = 0;
        for tool in tools.iter() {
            let spec = spec_of(&tool)?.remote(true);
            self.add(spec, Backend::Remote(Held::new((*client).clone())))?;
            count += 1;
        }
        Ok(count)
    }

    /// The names of the registered tools, in order.
    #[wasm_bindgen(getter)]
    pub fn names(&self) -> Vec<String> {
        self.tools.iter().map(|tool| tool.spec.name.clone()).collect()
    }
}

impl RegistryCore {
    /// rein's registry over these tools, as a turn sees them.
    pub(crate) fn build(&self) -> Result<ToolRegistry, String> {
        let mut registry = ToolRegistry::new();
        for tool in &self.tools {
            registry.register(Arc::clone(tool) as Arc<dyn Tool>).map_err(|e| e.to_string())?;
        }
        Ok(registry)
    }
}
