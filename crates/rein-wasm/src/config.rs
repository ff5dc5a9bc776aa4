//! glen's config object: the models of `llm_models`, the selected `llm_model`, and the
//! shaping keys read per model first and then globally.

use serde_json::{Map, Value};

/// glen's default request timeout (`llm_timeout_seconds`).
const DEFAULT_TIMEOUT_SECONDS: f64 = 600.0;
/// Hosts the X-Client header goes to when `client_header_hosts` is not set (glen#254).
const DEFAULT_CLIENT_HEADER_HOSTS: &[&str] = &["nrp-nautilus.io"];

/// One model's settings, resolved (model over global).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ModelSettings {
    pub(crate) value: String,
    pub(crate) label: Option<String>,
    pub(crate) endpoint: String,
    pub(crate) wire_model: String,
    pub(crate) api_key: Option<String>,
    pub(crate) temperature: Option<f64>,
    pub(crate) top_p: Option<f64>,
    pub(crate) seed: Option<i64>,
    pub(crate) max_tokens: Option<u64>,
    pub(crate) prompt_cache: bool,
    /// `Some` when the deployment opts the model in to `enable_thinking`; the value is its
    /// default (`reasoning_default`).
    pub(crate) reasoning: Option<bool>,
    pub(crate) timeout_ms: f64,
    pub(crate) context_window: Option<u64>,
    /// The X-Client header, when the endpoint's host is trusted with it.
    pub(crate) client_header: Option<String>,
}

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

/// The settings of the model with this value.
pub(crate) fn resolve(
    config: &Value,
    value: &str,
    client_name: &str,
) -> Result<ModelSettings, String> {
    let model = models(config)
        .into_iter()
        .find(|model| value_of(model) == Some(value))
        .ok_or_else(|| format!("no model `{value}` in llm_models"))?;
    let global = config.as_object();
    let key = |name: &str| -> Option<&Value> {
        model.get(name).or_else(|| global.and_then(|g| g.get(name))).filter(|v| !v.is_null())
    };
    let endpoint = key("endpoint")
        .and_then(Value::as_str)
        .ok_or_else(|| format!("model `{value}` has no endpoint"))?
        .trim_end_matches('/')
        .to_owned();
    let toggle = key("reasoning_toggle").and_then(Value::as_bool).unwrap_or(false);
    let reasoning_default = key("reasoning_default").and_then(Value::as_bool);
    let hosts: Vec<String> = match key("client_header_hosts").and_then(Value::as_array) {
        Some(hosts) => hosts.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
        None => DEFAULT_CLIENT_HEADER_HOSTS.iter().map(|h| (*h).to_owned()).collect(),
    };
    let trusted = host_of(&endpoint)
        .is_some_and(|host| hosts.iter().any(|h| host == h || host.ends_with(&format!(".{h}"))));
    Ok(ModelSettings {
        value: value.to_owned(),
        label: model.get("label").and_then(Value::as_str).map(str::to_owned),
        wire_model: model.get("model").and_then(Value::as_str).unwrap_or(value).to_owned(),
        api_key: key("api_key")
            .and_then(Value::as_str)
            .filter(|k| !k.is_empty())
            .map(str::to_owned),
        endpoint,
        // glen: temperature 0 unless set, so answers do not hang on each endpoint's default.
        temperature: Some(key("temperature").and_then(Value::as_f64).unwrap_or(0.0)),
        top_p: key("top_p").and_then(Value::as_f64),
        seed: key("seed").and_then(Value::as_i64),
        max_tokens: key("max_tokens").and_then(Value::as_u64),
        prompt_cache: key("prompt_cache").and_then(Value::as_bool).unwrap_or(false),
        reasoning: (toggle || reasoning_default.is_some())
            .then(|| reasoning_default.unwrap_or(false)),
        timeout_ms: key("llm_timeout_seconds")
            .and_then(Value::as_f64)
            .unwrap_or(DEFAULT_TIMEOUT_SECONDS)
            * 1000.0,
        context_window: key("context_window").and_then(Value::as_u64),
        client_header: trusted.then(|| client_name.to_owned()),
    })
}

/// The host of a URL (`https://a.b:8080/v1` -> `a.b`).
fn host_of(url: &str) -> Option<&str> {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    Some(host.split(':').next().unwrap_or(host)).filter(|h| !h.is_empty())
}

/// An integer setting of the config (`max_tool_calls`, ...).
pub(crate) fn count(config: &Value, name: &str) -> Option<u32> {
    config.get(name).and_then(Value::as_u64).and_then(|n| u32::try_from(n).ok())
}
