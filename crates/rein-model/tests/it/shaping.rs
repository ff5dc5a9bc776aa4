//! Request shaping: one test per rule of glen's request shaping, on the OpenAI-compatible wire.

use std::time::Duration;

use rein_model::{ModelsConfig, RegistryOptions};
use rein_protocol::{Message, ModelRequest, ToolChoice};
use serde_json::{Value, json};

use crate::fixtures::{hello, tool_round};
use crate::server::{Reply, Server, complete, model, registry, registry_with};

fn ok_reply() -> Reply {
    Reply::json(200, json!({"choices": [{"message": {"content": "ok"}, "finish_reason": "stop"}]}))
}

/// Sends `request` to a plain (non-streaming) OpenAI model with these settings; returns the body.
async fn body_for(entry: Value, global: Value, request: &ModelRequest) -> Value {
    let server = Server::start(vec![ok_reply()]).await;
    let mut entry = entry;
    if entry.get("stream").is_none() {
        entry["stream"] = false.into();
    }
    let model = model(&server, "openai", entry, global);
    let (result, _) = complete(&model, request).await;
    result.unwrap();
    server.request().body
}

#[tokio::test]
async fn body_keys_follow_glen_order() {
    let body = body_for(
        json!({"seed": 7, "top_p": 0.9, "reasoning_toggle": true}),
        json!({}),
        &tool_round(),
    )
    .await;
    let keys: Vec<&str> = body.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "model",
            "messages",
            "tools",
            "tool_choice",
            "user",
            "temperature",
            "top_p",
            "seed",
            "enable_thinking"
        ]
    );
}

#[tokio::test]
async fn temperature_defaults_to_zero() {
    let body = body_for(json!({}), json!({}), &hello()).await;
    assert_eq!(body["temperature"], json!(0.0));
}

#[tokio::test]
async fn per_model_key_wins_even_when_null() {
    let body = body_for(json!({"temperature": null}), json!({"temperature": 0.7}), &hello()).await;
    assert!(body.get("temperature").is_none(), "{body}");
    let body = body_for(json!({"temperature": 0.2}), json!({"temperature": 0.7}), &hello()).await;
    assert_eq!(body["temperature"], json!(0.2));
}

#[tokio::test]
async fn global_applies_when_model_lacks_the_key() {
    let body = body_for(
        json!({}),
        json!({"temperature": 0.7, "top_p": 0.5, "seed": 3, "max_tokens": 99}),
        &hello(),
    )
    .await;
    assert_eq!(
        (&body["temperature"], &body["top_p"], &body["seed"], &body["max_tokens"]),
        (&json!(0.7), &json!(0.5), &json!(3), &json!(99))
    );
}

#[tokio::test]
async fn global_null_temperature_falls_back_to_zero() {
    let body = body_for(json!({}), json!({"temperature": null}), &hello()).await;
    assert_eq!(body["temperature"], json!(0.0));
}

#[tokio::test]
async fn top_p_seed_and_max_tokens_are_sent_only_when_set() {
    let body = body_for(json!({}), json!({}), &hello()).await;
    for key in
        ["top_p", "seed", "max_tokens", "enable_thinking", "stream", "tools", "tool_choice", "user"]
    {
        assert!(body.get(key).is_none(), "{key} in {body}");
    }
    let body = body_for(
        json!({"top_p": 0.9, "seed": 11, "max_tokens": 512}),
        json!({"top_p": 0.1}),
        &hello(),
    )
    .await;
    assert_eq!(
        (&body["top_p"], &body["seed"], &body["max_tokens"]),
        (&json!(0.9), &json!(11), &json!(512))
    );
}

#[tokio::test]
async fn request_sampling_overrides_configured_values() {
    let mut request = hello();
    request.sampling.temperature = Some(1.0);
    request.sampling.max_tokens = Some(64);
    let body = body_for(json!({"temperature": 0.3, "max_tokens": 512}), json!({}), &request).await;
    assert_eq!((&body["temperature"], &body["max_tokens"]), (&json!(1.0), &json!(64)));
}

#[tokio::test]
async fn enable_thinking_is_omitted_for_a_model_not_opted_in() {
    let mut request = hello();
    request.reasoning = Some(true);
    let body = body_for(json!({}), json!({}), &request).await;
    assert!(body.get("enable_thinking").is_none(), "the override is ignored: {body}");
    let body = body_for(json!({"reasoning_toggle": "yes"}), json!({}), &hello()).await;
    assert!(body.get("enable_thinking").is_none(), "only `true` opts in: {body}");
}

#[tokio::test]
async fn enable_thinking_is_on_for_a_toggle_model_by_default() {
    let body = body_for(json!({"reasoning_toggle": true}), json!({}), &hello()).await;
    assert_eq!(body["enable_thinking"], json!(true));
}

#[tokio::test]
async fn enable_thinking_follows_reasoning_default() {
    let body = body_for(json!({"reasoning_default": false}), json!({}), &hello()).await;
    assert_eq!(body["enable_thinking"], json!(false));
    let body = body_for(
        json!({}),
        json!({"reasoning_toggle": true, "reasoning_default": false}),
        &hello(),
    )
    .await;
    assert_eq!(body["enable_thinking"], json!(false));
}

#[tokio::test]
async fn enable_thinking_request_override_wins() {
    let mut request = hello();
    request.reasoning = Some(false);
    let body =
        body_for(json!({"reasoning_toggle": true, "reasoning_default": true}), json!({}), &request)
            .await;
    assert_eq!(body["enable_thinking"], json!(false));
    request.reasoning = Some(true);
    let body = body_for(json!({"reasoning_default": false}), json!({}), &request).await;
    assert_eq!(body["enable_thinking"], json!(true));
}

#[tokio::test]
async fn prompt_cache_puts_a_breakpoint_on_the_system_prompt() {
    let body = body_for(json!({"prompt_cache": true}), json!({}), &tool_round()).await;
    assert_eq!(
        body["messages"][0],
        json!({"role": "system", "content": [{"type": "text", "text": "You are terse.", "cache_control": {"type": "ephemeral"}}]})
    );
    assert_eq!(
        body["messages"][1],
        json!({"role": "user", "content": "Weather in Paris?"}),
        "others pass through"
    );
    let body = body_for(json!({}), json!({"prompt_cache": "true"}), &hello()).await;
    assert_eq!(
        body["messages"][0],
        json!({"role": "system", "content": "You are terse."}),
        "only `true` enables it"
    );
}

#[tokio::test]
async fn system_prompt_is_sent_byte_for_byte_without_prompt_cache() {
    let body = body_for(json!({}), json!({}), &tool_round()).await;
    assert_eq!(body["messages"][0], json!({"role": "system", "content": "You are terse."}));
}

#[test]
fn llm_timeout_seconds_defaults_to_600_and_ignores_invalid_values() {
    let timeout = |entry: Value, global: Value| {
        let mut config = global;
        let mut entry = entry;
        entry["value"] = "m".into();
        entry["endpoint"] = "http://127.0.0.1:9/v1".into();
        config["llm_models"] = json!([entry]);
        registry(config).default_model().timeout()
    };
    assert_eq!(timeout(json!({}), json!({})), Duration::from_secs(600));
    assert_eq!(timeout(json!({}), json!({"llm_timeout_seconds": 30})), Duration::from_secs(30));
    assert_eq!(
        timeout(json!({"llm_timeout_seconds": 5}), json!({"llm_timeout_seconds": 30})),
        Duration::from_secs(5)
    );
    assert_eq!(
        timeout(json!({"llm_timeout_seconds": 0.25}), json!({})),
        Duration::from_millis(250)
    );
    for invalid in [json!(0), json!(-3), json!("30"), json!(null)] {
        assert_eq!(
            timeout(
                json!({"llm_timeout_seconds": invalid.clone()}),
                json!({"llm_timeout_seconds": 30})
            ),
            Duration::from_secs(600),
            "a per-model {invalid} is present, so it wins, and falls back to 600"
        );
    }
}

#[tokio::test]
async fn x_client_goes_only_to_trusted_hosts() {
    // Default trusted hosts: nrp-nautilus.io; 127.0.0.1 is not one.
    let server = Server::start(vec![ok_reply()]).await;
    let plain = model(&server, "openai", json!({"stream": false}), json!({}));
    complete(&plain, &hello()).await.0.unwrap();
    assert!(!server.request().all_headers.contains_key("x-client"));

    let server = Server::start(vec![ok_reply()]).await;
    let model = model(
        &server,
        "openai",
        json!({"stream": false}),
        json!({"client_header_hosts": ["127.0.0.1"]}),
    );
    complete(&model, &hello()).await.0.unwrap();
    assert_eq!(server.request().headers["x-client"], rein_model::default_client_name());
}

#[test]
fn x_client_trusts_nrp_nautilus_and_its_subdomains_by_default() {
    let config = json!({"llm_models": [
        {"value": "a", "endpoint": "https://llm-proxy.nrp-nautilus.io/v1"},
        {"value": "b", "endpoint": "https://nrp-nautilus.io/v1"},
        {"value": "c", "endpoint": "https://nrp-nautilus.io.example.com/v1"},
        {"value": "d", "endpoint": "https://notnrp-nautilus.io/v1"},
    ]});
    let registry = registry(config);
    let sends = |name: &str| registry.get(name).unwrap().client_header().is_some();
    assert!(sends("a") && sends("b"));
    assert!(!sends("c") && !sends("d"));
}

#[tokio::test]
async fn x_client_value_is_settable_by_the_host_application() {
    let server = Server::start(vec![ok_reply()]).await;
    let config = json!({"client_header_hosts": ["127.0.0.1"], "llm_models": [
        {"value": "m", "endpoint": format!("{}/v1", server.url), "stream": false}
    ]});
    let registry =
        registry_with(config, RegistryOptions::default().with_client_name("geo-agent/v3"));
    complete(&registry.default_model(), &hello()).await.0.unwrap();
    assert_eq!(server.request().headers["x-client"], "geo-agent/v3");
}

#[tokio::test]
async fn no_authorization_header_without_an_api_key() {
    let server = Server::start(vec![ok_reply(), ok_reply()]).await;
    let model_without = model(&server, "openai", json!({"stream": false}), json!({}));
    complete(&model_without, &hello()).await.0.unwrap();
    let model_empty = model(&server, "openai", json!({"stream": false, "api_key": ""}), json!({}));
    complete(&model_empty, &hello()).await.0.unwrap();
    for request in server.requests() {
        assert!(!request.all_headers.contains_key("authorization"), "{:?}", request.all_headers);
    }
}

#[tokio::test]
async fn api_key_is_sent_as_a_bearer_token() {
    let server = Server::start(vec![ok_reply()]).await;
    let model = model(&server, "openai", json!({"stream": false, "api_key": "sk-test"}), json!({}));
    complete(&model, &hello()).await.0.unwrap();
    assert_eq!(server.request().headers["authorization"], "Bearer sk-test");
}

#[tokio::test]
async fn user_carries_the_session_id() {
    let body = body_for(json!({}), json!({}), &tool_round()).await;
    assert_eq!(body["user"], json!("session-42"));
}

#[tokio::test]
async fn tools_are_omitted_when_empty() {
    let body = body_for(json!({}), json!({}), &hello()).await;
    assert!(body.get("tools").is_none() && body.get("tool_choice").is_none(), "{body}");
}

#[tokio::test]
async fn tool_choice_is_auto_or_none() {
    let mut request = tool_round();
    let body = body_for(json!({}), json!({}), &request).await;
    assert_eq!(body["tool_choice"], json!("auto"));
    assert_eq!(body["tools"][0]["function"]["name"], json!("get_weather"));
    request.tool_choice = ToolChoice::None;
    let body = body_for(json!({}), json!({}), &request).await;
    assert_eq!(body["tool_choice"], json!("none"));
}

#[tokio::test]
async fn reasoning_is_never_sent_back() {
    let body = body_for(json!({}), json!({}), &tool_round()).await;
    let text = body.to_string();
    assert!(
        !text.contains("reasoning_content") && !text.contains("The user wants weather."),
        "{text}"
    );
}

#[tokio::test]
async fn endpoint_gets_chat_completions_appended_once() {
    for suffix in ["/v1", "/v1/", "/v1/chat/completions"] {
        let server = Server::start(vec![ok_reply()]).await;
        let config = json!({"llm_models": [{"value": "m", "endpoint": format!("{}{suffix}", server.url), "stream": false}]});
        complete(&registry(config).default_model(), &hello()).await.0.unwrap();
        assert_eq!(server.request().path, "/v1/chat/completions", "endpoint ending in {suffix}");
    }
}

#[tokio::test]
async fn streaming_asks_for_usage() {
    let server = Server::start(vec![ok_reply()]).await;
    let model = model(&server, "openai", json!({}), json!({}));
    complete(&model, &hello()).await.0.unwrap();
    let request = server.request();
    assert_eq!(
        (&request.body["stream"], &request.body["stream_options"]),
        (&json!(true), &json!({"include_usage": true}))
    );
    assert_eq!(request.headers["accept"], "text/event-stream");
}

#[tokio::test]
async fn model_is_the_selected_name_even_without_an_entry() {
    let server = Server::start(vec![ok_reply()]).await;
    let config = json!({"llm_models": [{"value": "listed", "endpoint": format!("{}/v1", server.url), "stream": false, "api_key": "k"}]});
    let model = registry(config).select("unlisted-model").unwrap();
    complete(&model, &hello()).await.0.unwrap();
    let request = server.request();
    assert_eq!(request.body["model"], json!("unlisted-model"));
    assert_eq!(request.headers["authorization"], "Bearer k", "the first entry's endpoint and key");
}

#[tokio::test]
async fn request_snapshot_openai_all_settings() {
    let server = Server::start(vec![ok_reply()]).await;
    let config: Value = json!({
        "client_header_hosts": ["127.0.0.1"],
        "temperature": 0.4,
        "llm_models": [{
            "value": "qwen2.5-coder", "endpoint": format!("{}/v1", server.url), "api_key": "sk-test",
            "top_p": 0.8, "seed": 1, "max_tokens": 256, "reasoning_toggle": true, "prompt_cache": true,
        }],
    });
    let config: ModelsConfig = serde_json::from_value(config).unwrap();
    let registry = rein_model::ModelRegistry::from_config_with_env(
        &config,
        &RegistryOptions::default().with_client_name("rein/test"),
        |_| None,
    )
    .unwrap();
    complete(&registry.default_model(), &tool_round()).await.0.unwrap();
    insta::assert_json_snapshot!(server.request());
}

#[tokio::test]
async fn request_snapshot_openai_defaults() {
    let server = Server::start(vec![ok_reply()]).await;
    let model = model(&server, "openai", json!({}), json!({}));
    let mut request = hello();
    request.messages.push(Message::assistant("Hi."));
    request.messages.push(Message::user("Bye"));
    complete(&model, &request).await.0.unwrap();
    insta::assert_json_snapshot!(server.request());
}
