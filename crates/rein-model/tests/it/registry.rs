//! The model registry: GLEN config files, keys from the environment, metadata, selection.

use std::path::Path;

use rein_model::{ConfigError, ModelRegistry, ModelsConfig, ProviderKind, RegistryOptions};
use serde_json::json;

fn load(value: serde_json::Value) -> ModelsConfig {
    serde_json::from_value(value).unwrap()
}

fn env(name: &str) -> Option<String> {
    match name {
        "OPENAI_API_KEY" => Some("env-openai".into()),
        "ANTHROPIC_API_KEY" => Some("env-anthropic".into()),
        "GEMINI_API_KEY" => Some("env-gemini".into()),
        "MY_PROXY_KEY" => Some("env-proxy".into()),
        _ => None,
    }
}

#[test]
fn a_whole_glen_config_file_loads() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("test_data/glen-config.json");
    let config: ModelsConfig =
        serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let registry =
        ModelRegistry::from_config_with_env(&config, &RegistryOptions::default(), env).unwrap();
    assert_eq!(
        registry.names().collect::<Vec<_>>(),
        ["qwen3", "claude-sonnet", "gemini-2.5-flash", "local"]
    );
    assert_eq!(registry.default_name(), "claude-sonnet");
    let default = registry.default_model();
    assert_eq!(
        (default.provider(), default.endpoint()),
        (ProviderKind::Anthropic, "https://api.anthropic.com/v1")
    );
    insta::assert_json_snapshot!(registry.infos());
    let qwen = registry.get("qwen3").unwrap();
    assert_eq!(qwen.client_header(), Some(rein_model::default_client_name().as_str()));
    assert_eq!(qwen.timeout().as_secs(), 120);
    assert!(!registry.get("local").unwrap().streams());
}

#[test]
fn keys_come_from_the_entry_then_api_key_env_then_the_providers_variable_at_its_own_endpoint() {
    let config = load(json!({"llm_models": [
        {"value": "literal", "api_key": "sk-literal", "api_key_env": "MY_PROXY_KEY"},
        {"value": "named", "endpoint": "https://proxy.example/v1", "api_key_env": "MY_PROXY_KEY"},
        {"value": "named-missing", "api_key_env": "NOT_SET"},
        {"value": "official-openai"},
        {"value": "official-anthropic", "provider": "anthropic"},
        {"value": "official-gemini", "provider": "google"},
        {"value": "elsewhere", "endpoint": "http://127.0.0.1:8080/v1"},
    ]}));
    let registry =
        ModelRegistry::from_config_with_env(&config, &RegistryOptions::default(), env).unwrap();
    let key = |name: &str| {
        let debug = format!("{:?}", registry.get(name).unwrap());
        debug.contains("api_key: Some")
    };
    let body = |name: &str| registry.get(name).unwrap();
    assert!(
        key("literal")
            && key("named")
            && key("official-openai")
            && key("official-anthropic")
            && key("official-gemini")
    );
    assert!(
        !key("named-missing"),
        "a named variable that is unset means no key, not the provider's variable"
    );
    assert!(!key("elsewhere"), "OPENAI_API_KEY is not sent to a host it was not meant for");
    assert_eq!(body("official-gemini").provider(), ProviderKind::Gemini);
}

#[test]
fn configuration_errors_are_typed() {
    let build = |value: serde_json::Value| {
        ModelRegistry::from_config_with_env(&load(value), &RegistryOptions::default(), |_| None)
    };
    assert_eq!(build(json!({})).unwrap_err(), ConfigError::NoModels);
    assert_eq!(
        build(json!({"llm_models": [{"value": " "}]})).unwrap_err(),
        ConfigError::EmptyModelName { index: 0 }
    );
    assert_eq!(
        build(json!({"llm_models": [{"value": "a"}, {"value": "a"}]})).unwrap_err(),
        ConfigError::DuplicateModel { name: "a".into() }
    );
    assert!(matches!(
        build(json!({"llm_models": [{"value": "a", "endpoint": "ftp://x"}]})),
        Err(ConfigError::InvalidEndpoint { .. })
    ));
    assert!(matches!(
        build(json!({"llm_models": [{"value": "a", "api_key": "line\nbreak"}]})),
        Err(ConfigError::Invalid(_))
    ));
    let wrong_type = serde_json::from_value::<ModelsConfig>(
        json!({"llm_models": [{"value": "a", "temperature": "hot"}]}),
    );
    assert!(wrong_type.is_err(), "a wrongly typed setting is a deserialization error, not a panic");
}

#[test]
fn select_falls_back_to_the_first_entry_for_an_unknown_name() {
    let config = load(json!({"llm_model": "nowhere", "llm_models": [
        {"value": "first", "endpoint": "https://a.example/v1", "context_window": 1000},
        {"value": "second", "endpoint": "https://b.example/v1"},
    ]}));
    let registry =
        ModelRegistry::from_config_with_env(&config, &RegistryOptions::default(), |_| None)
            .unwrap();
    let model = registry.select("nowhere").unwrap();
    assert_eq!((model.wire_model(), model.endpoint()), ("nowhere", "https://a.example/v1"));
    assert_eq!(
        rein_protocol::Model::info(&*model).context_window,
        None,
        "the first entry's metadata is not borrowed"
    );
    assert_eq!(registry.default_model().wire_model(), "nowhere");
    assert_eq!(registry.select("second").unwrap().endpoint(), "https://b.example/v1");
    assert!(matches!(registry.select(""), Err(ConfigError::UnknownModel(_))));
}

#[test]
fn model_settings_round_trip_keeping_present_nulls() {
    let config = load(
        json!({"temperature": 0.5, "llm_models": [{"value": "a", "temperature": null, "top_p": 0.9}]}),
    );
    let again: ModelsConfig =
        serde_json::from_value(serde_json::to_value(&config).unwrap()).unwrap();
    assert_eq!(again, config);
    assert_eq!(config.llm_models[0].settings.temperature, Some(None));
}
