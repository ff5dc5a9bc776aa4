//! The agent loop embedded in a program, against a scripted OpenAI-compatible endpoint that this
//! program serves itself on 127.0.0.1 (so it runs anywhere, with no model and no key).
//!
//! Run: `cargo run -p rein-examples --example embedded_loop`
//! (point it at a real server instead with `REIN_ENDPOINT=http://127.0.0.1:8081/v1`).
//!
//! It prints each event of the turn as it happens, then the answer. The scripted endpoint asks
//! for the local `add` tool first and answers with the tool's result after.

use std::sync::Arc;

use rein::agent::{Agent, AgentConfig, ToolRegistry};
use rein::model::{ModelEntry, ModelRegistry, ModelsConfig, ProviderKind, RegistryOptions};
use rein::protocol::{AgentEvent, CancellationToken, ToolOutput, ToolSpec};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let endpoint = match std::env::var("REIN_ENDPOINT") {
        Ok(endpoint) => endpoint,
        Err(_) => serve_scripted_model().await?,
    };
    let mut entry = ModelEntry::new("scripted", ProviderKind::OpenAi, Some(endpoint));
    entry.settings.stream = Some(Some(false));
    let mut models = ModelsConfig::default();
    models.llm_models.push(entry);
    let model =
        ModelRegistry::from_config(&models, &RegistryOptions::default())?.select("scripted")?;

    let mut tools = ToolRegistry::new();
    let schema = json!({
        "type": "object",
        "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
        "required": ["a", "b"],
    });
    let Value::Object(schema) = schema else { unreachable!("an object literal") };
    let spec = ToolSpec::new("add", "Add two numbers.", schema).read_only(true);
    tools.register_fn(spec, |args, _ctx| async move {
        let number = |key: &str| args.get(key).and_then(Value::as_f64).unwrap_or_default();
        Ok(ToolOutput::text((number("a") + number("b")).to_string()))
    })?;

    let config = AgentConfig {
        system_prompt: "You add numbers with the add tool.".into(),
        ..AgentConfig::default()
    };
    let mut agent = Agent::new(model, Arc::new(tools), config);
    let print_event = |event: AgentEvent| match event {
        AgentEvent::ToolProposal { calls, .. } => {
            for call in calls {
                println!("[model calls {}({})]", call.name, call.arguments_json());
            }
        }
        AgentEvent::ToolResult { name, output, .. } => {
            println!("[{name} returned {}]", output.text)
        }
        AgentEvent::TurnEnd { ending, .. } => println!("[turn ended: {}]", ending.as_str()),
        _ => {}
    };
    let outcome = agent.turn("What is 2 + 40?", &CancellationToken::new(), &print_event).await?;
    println!("{}", outcome.text);
    Ok(())
}

/// Serves a two-step script on a free port and returns its base URL.
async fn serve_scripted_model() -> anyhow::Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}/v1", listener.local_addr()?);
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            tokio::spawn(async move {
                let Ok(request) = read_request(&mut socket).await else { return };
                let body = scripted_reply(&request).to_string();
                let head = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = socket.write_all(head.as_bytes()).await;
                let _ = socket.write_all(body.as_bytes()).await;
            });
        }
    });
    Ok(url)
}

/// Reads one HTTP request and returns its JSON body.
async fn read_request(socket: &mut tokio::net::TcpStream) -> anyhow::Result<Value> {
    let mut buffer = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let read = socket.read(&mut chunk).await?;
        anyhow::ensure!(read > 0, "the client closed the connection");
        buffer.extend_from_slice(&chunk[..read]);
        let text = String::from_utf8_lossy(&buffer);
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head
                .lines()
                .find_map(|line| {
                    line.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().to_owned())
                })
                .and_then(|value| value.parse::<usize>().ok())
                .unwrap_or(0);
            if body.len() >= length {
                return Ok(serde_json::from_str(body)?);
            }
        }
    }
}

/// A tool call when the last message is the user's, an answer from the tool result after.
fn scripted_reply(request: &Value) -> Value {
    let last = request["messages"].as_array().and_then(|m| m.last()).cloned().unwrap_or_default();
    let message = if last["role"] == "tool" {
        json!({"role": "assistant", "content": format!("2 + 40 = {}.", last["content"].as_str().unwrap_or("?"))})
    } else {
        json!({"role": "assistant", "content": null, "tool_calls": [{
            "id": "call_1", "type": "function",
            "function": {"name": "add", "arguments": "{\"a\": 2, \"b\": 40}"},
        }]})
    };
    let finish = if last["role"] == "tool" { "stop" } else { "tool_calls" };
    json!({"id": "scripted", "object": "chat.completion", "choices": [{"index": 0, "message": message, "finish_reason": finish}]})
}
