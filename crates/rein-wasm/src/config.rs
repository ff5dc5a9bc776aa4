//! glen's config object as rein-model's `ModelsConfig`: the models of `llm_models`, the
//! selected `llm_model`, and the selected model built by rein-model over the host's `fetch`.
//!
//! The mapping: each `llm_models` entry is a rein-model `ModelEntry` and the config's top level
//! its global settings, so every shaping key (`temperature`, `top_p`, `seed`, `max_tokens`,
//! `reasoning_toggle`, `reasoning_default`, `prompt_cache`, `llm_timeout_seconds`, `stream`,
//! `max_retry_wait_seconds`, `max_reply_bytes`, `thinking_budget_tokens`, and the global
//! `client_header_hosts`) is read per model first and then globally, by rein-model's rules.
//! On top of that, glen lets an entry be named by `value` and sent as `model`, and lets
//! `endpoint` and `api_key` be set once for all models; those are folded into the entry.

use std::sync::Arc;

use rein_model::{ModelRegistry, ModelsConfig, ProviderModel, RegistryOptions};
use serde_json::{Map, Value};

use crate::fetch::FetchTransport;

/// What a failed `fetch` tells a person to do (in a browser it is most often CORS).
const UNREACHABLE_HINT: &str = "Check that the model server at that address is running and, \
    from a web page, that it allows the page's origin (CORS).";

/// The config's model entries.
pub(crate) fn models(config: &Value) -> Vec<&Map<String, Value>> {
    config
        .get("llm_models")
        .and_then(Value::as_array)
        .map(|models| models.iter().filter_map(Value::as_object).collect())
        .unwrap_or_default()
}

/// The value of the model to start with: `llm_model` when it names one, else the first.
pub(crate) fn initial_model(config: &Value) -> Option<String> {
    let models = models(config);
    let named = config.get("llm_model").and_then(Value::as_str);
    named
        .filter(|name| models.iter().any(|model| value_of(model) == Some(*name)))
        .map(str::to_owned)
        .or_else(|| models.first().and_then(|model| value_of(model)).map(str::to_owned))
}

fn value_of(model: &Map<String, Value>) -> Option<&str> {
    model.get("value").or_else(|| model.get("model")).and_then(Value::as_str)
}

/// The rein-model config of the model with this value: that entry alone (named by what is
/// sent, `model` else `value`; `endpoint` and `api_key` from the top level when it has none;
/// without an endpoint, its provider's public one) under the config's global settings.
fn models_config(config: &Value, value: &str) -> Result<ModelsConfig, String> {
    let model = models(config)
        .into_iter()
        .find(|model| value_of(model) == Some(value))
        .ok_or_else(|| format!("no model `{value}` in llm_models"))?;
    let mut entry = model.clone();
    let wire = model.get("model").and_then(Value::as_str).unwrap_or(value).to_owned();
    entry.insert("value".into(), wire.into());
    let mut global = config.as_object().cloned().unwrap_or_default();
    for key in ["endpoint", "api_key"] {
        let absent = entry.get(key).is_none_or(Value::is_null);
        if let Some(shared) = global.remove(key).filter(|_| absent) {
            entry.insert(key.into(), shared);
        }
    }
    global.insert("llm_models".into(), Value::Array(vec![Value::Object(entry)]));
    global.remove("llm_model");
    serde_json::from_value(Value::Object(global))
        .map_err(|error| format!("invalid model settings for `{value}`: {error}"))
}

/// The model with this value, built by rein-model over the host's `fetch`.
pub(crate) fn model(
    config: &Value,
    value: &str,
    client_name: &str,
) -> Result<Arc<ProviderModel>, String> {
    let models = models_config(config, value)?;
    let endpoint = models.llm_models.first().and_then(|entry| entry.endpoint.clone());
    let mut options = RegistryOptions::default().with_client_name(client_name);
    if let Some(endpoint) = endpoint {
        options = options.with_unreachable_hint(endpoint, UNREACHABLE_HINT);
    }
    // No environment in a page: a key is in the config or there is none.
    let registry = ModelRegistry::from_config_with_transport(
        &models,
        &options,
        |_| None,
        Arc::new(FetchTransport),
    )
    .map_err(|error| error.to_string())?;
    Ok(registry.default_model())
}

/// An integer setting of the config (`max_tool_calls`, ...).
pub(crate) fn count(config: &Value, name: &str) -> Option<u32> {
    config.get(name).and_then(Value::as_u64).and_then(|n| u32::try_from(n).ok())
}
