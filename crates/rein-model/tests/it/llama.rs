//! Against a real llama.cpp `llama-server`, when `REIN_TEST_LLAMA_URL` names one (e.g.
//! `http://127.0.0.1:8080`). Unset, the test prints a note and checks nothing else: it is the
//! one gated test; everything else runs against the scripted server.

use rein_protocol::{Message, ModelRequest, ReplyDelta, StopReason};
use serde_json::json;

use crate::fixtures::weather_tool;
use crate::server::{complete, joined, registry};

fn llama_url() -> Option<String> {
    std::env::var("REIN_TEST_LLAMA_URL").ok().filter(|url| !url.trim().is_empty())
}

#[tokio::test]
async fn real_llama_server_openai_and_anthropic_plain_and_streamed() {
    let Some(url) = llama_url() else {
        println!("note: REIN_TEST_LLAMA_URL is not set; the real-model test did not run");
        return;
    };
    let base = format!("{}/v1", url.trim_end_matches('/').trim_end_matches("/v1"));
    let config = json!({"temperature": 0, "max_tokens": 48, "llm_timeout_seconds": 300, "llm_models": [
        {"value": "openai-plain", "endpoint": base, "stream": false},
        {"value": "openai-stream", "endpoint": base},
        {"value": "anthropic-plain", "provider": "anthropic", "endpoint": base, "stream": false},
        {"value": "anthropic-stream", "provider": "anthropic", "endpoint": base},
    ]});
    let registry = registry(config);
    let mut request = ModelRequest::new(
        vec![
            Message::system("You are a terse assistant."),
            Message::user("Say hello in five words."),
        ],
        vec![],
    );
    request.session_id = Some("rein-llama-test".into());
    for name in ["openai-plain", "openai-stream", "anthropic-plain", "anthropic-stream"] {
        let model = registry.get(name).unwrap();
        let (reply, deltas) = complete(&model, &request).await;
        let reply = reply.unwrap_or_else(|error| panic!("{name}: {error}"));
        println!("{name}: {:?} {:?} usage {:?}", reply.stop_reason, reply.content, reply.usage);
        assert!(!reply.content.trim().is_empty(), "{name}: some text");
        assert!(
            matches!(reply.stop_reason, StopReason::Stop | StopReason::Length),
            "{name}: {:?}",
            reply.stop_reason
        );
        assert!(
            reply.usage.is_some_and(|usage| usage.prompt_tokens > 0 && usage.completion_tokens > 0),
            "{name}: usage"
        );
        if name.ends_with("stream") {
            assert_eq!(joined(&deltas).0, reply.content, "{name}: the deltas add up to the reply");
        } else {
            assert!(deltas.is_empty());
        }
    }

    // With a tool offered: the small model writes calls natively or as text; either way the
    // reply is well-formed and any native call has a name.
    let mut with_tool = ModelRequest::new(
        vec![
            Message::system("Use the tools when they help."),
            Message::user("What is the weather in Paris?"),
        ],
        vec![weather_tool()],
    );
    with_tool.sampling.max_tokens = Some(96);
    for name in ["openai-stream", "anthropic-stream"] {
        let (reply, deltas) = complete(&registry.get(name).unwrap(), &with_tool).await;
        let reply = reply.unwrap_or_else(|error| panic!("{name} with a tool: {error}"));
        println!(
            "{name} with a tool: {:?} {:?} calls {:?}",
            reply.stop_reason, reply.content, reply.tool_calls
        );
        assert!(!reply.content.is_empty() || !reply.tool_calls.is_empty(), "{name}: text or calls");
        for call in &reply.tool_calls {
            assert!(!call.function.name.is_empty());
        }
        let started = deltas
            .iter()
            .filter(|delta| matches!(delta, ReplyDelta::ToolCallStarted { .. }))
            .count();
        assert_eq!(started, reply.tool_calls.len(), "{name}: one start per call");
    }
}
