//! The model configuration (GLEN's `llm_models` plus provider kinds) and how settings resolve.

use std::time::Duration;

use serde::{Deserialize, Deserializer, Serialize};

/// The request timeout when `llm_timeout_seconds` is absent or not a positive number (GLEN).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(600);

/// The longest timeout a retry gets after a failure that was not a timeout (GLEN).
pub const RETRY_TIMEOUT_CAP: Duration = Duration::from_secs(90);

/// The longest `Retry-After` a request waits for when `max_retry_wait_seconds` is not set: a
/// provider asking for more gets its error shown instead.
pub const DEFAULT_MAX_RETRY_WAIT: Duration = Duration::from_secs(60);

/// The most attempts one request gets: the first, then at most two retries (one of them, at
/// most, without a `Retry-After`: GLEN's single retry).
pub const MAX_ATTEMPTS: u32 = 3;

/// The largest reply read when `max_reply_bytes` is not set (4 MiB): a reply past it is ended
/// as cut at the output limit (stop reason `length`), never buffered whole.
pub const DEFAULT_MAX_REPLY_BYTES: u64 = 4 * 1024 * 1024;

/// Hosts that get the X-Client header when `client_header_hosts` is not set (GLEN).
pub const DEFAULT_CLIENT_HEADER_HOSTS: &[&str] = &["nrp-nautilus.io"];

/// Anthropic's thinking budget when `thinking_budget_tokens` is not set (the API's minimum).
pub const DEFAULT_THINKING_BUDGET: u32 = 1024;

/// Anthropic requires `max_tokens`; this is sent when neither the request nor the settings nor
/// the model's `max_output_tokens` give one.
pub const DEFAULT_ANTHROPIC_MAX_TOKENS: u32 = 4096;

/// Which wire protocol a model speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[non_exhaustive]
pub enum ProviderKind {
    /// OpenAI-compatible Chat Completions (OpenAI, llama.cpp, vLLM, Ollama, proxies).
    #[default]
    #[serde(alias = "openai-compatible", alias = "openai_compatible")]
    OpenAi,
    /// Anthropic Messages.
    Anthropic,
    /// Google Gemini (`generateContent`, API version `v1beta`).
    #[serde(alias = "google")]
    Gemini,
}

impl ProviderKind {
    /// The endpoint used when a model entry names none.
    pub fn default_endpoint(self) -> &'static str {
        match self {
            ProviderKind::OpenAi => "https://api.openai.com/v1",
            ProviderKind::Anthropic => "https://api.anthropic.com/v1",
            ProviderKind::Gemini => "https://generativelanguage.googleapis.com/v1beta",
        }
    }

    /// The environment variable holding the provider's key.
    pub fn default_key_env(self) -> &'static str {
        match self {
            ProviderKind::OpenAi => "OPENAI_API_KEY",
            ProviderKind::Anthropic => "ANTHROPIC_API_KEY",
            ProviderKind::Gemini => "GEMINI_API_KEY",
        }
    }

    /// The config name (`openai`, `anthropic`, `gemini`).
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::OpenAi => "openai",
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::Gemini => "gemini",
        }
    }
}

/// Request-shaping settings that may be given per model and globally.
///
/// GLEN's rule: a key **present** in the model entry wins, even when its value is `null`;
/// otherwise the global value applies. Each field is therefore `None` when the key is absent
/// and `Some(None)` when it is present as `null`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ModelSettings {
    /// Sampling temperature. Default 0; a per-model `null` omits it.
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub temperature: Option<Option<f64>>,
    /// Nucleus sampling; sent only when set.
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub top_p: Option<Option<f64>>,
    /// Sampling seed; sent only when set.
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub seed: Option<Option<i64>>,
    /// The output limit; sent only when set (Anthropic always needs one, see
    /// [`DEFAULT_ANTHROPIC_MAX_TOKENS`]).
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<Option<u32>>,
    /// The model can think on request: `enable_thinking` is sent (default on). Only `true`
    /// counts, as in GLEN.
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub reasoning_toggle: Option<serde_json::Value>,
    /// The model's thinking setting when the request does not override it; used only when it
    /// is a boolean.
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub reasoning_default: Option<serde_json::Value>,
    /// Put a cache breakpoint on the system prompt. Only `true` counts.
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub prompt_cache: Option<serde_json::Value>,
    /// Per-attempt timeout in seconds; anything but a positive finite number means 600.
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub llm_timeout_seconds: Option<serde_json::Value>,
    /// Stream the reply (default on).
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub stream: Option<Option<bool>>,
    /// The longest `Retry-After` (of a 429 or a 503) waited for before the request is sent
    /// again, in seconds; a longer one is not waited for, and the error is shown. Default 60;
    /// 0 never waits (a `Retry-After: 0` still retries).
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub max_retry_wait_seconds: Option<Option<u64>>,
    /// The most bytes of one reply read, streamed or not; past it the reply is ended as cut
    /// (stop reason `length`). Default 4194304 (4 MiB); 0 means the default.
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub max_reply_bytes: Option<Option<u64>>,
    /// Anthropic's and Gemini's thinking budget in tokens when thinking is on.
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub thinking_budget_tokens: Option<Option<u32>>,
}

/// A field that is present (even as `null`) deserializes to `Some(..)`.
fn present<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<Option<T>, D::Error> {
    T::deserialize(deserializer).map(Some)
}

/// One entry of `llm_models`. Its `Debug` shows whether a key is set, never the key.
#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ModelEntry {
    /// The model string sent to the provider, and the name it is selected by.
    pub value: String,
    /// A human label.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub label: Option<String>,
    /// The wire protocol (default `openai`).
    #[serde(default)]
    pub provider: ProviderKind,
    /// The base URL (`.../v1`); the provider's public endpoint when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<String>,
    /// The key, literally. An empty key counts as none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key: Option<String>,
    /// The environment variable holding the key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// The context window in tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u64>,
    /// The most output tokens the model writes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u64>,
    /// The tokenizer family (`o200k_base`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer: Option<String>,
    /// Per-model request shaping.
    #[serde(flatten)]
    pub settings: ModelSettings,
}

impl std::fmt::Debug for ModelEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let redactor = rein_protocol::Redactor::default();
        f.debug_struct("ModelEntry")
            .field("value", &self.value)
            .field("label", &self.label)
            .field("provider", &self.provider)
            .field("endpoint", &self.endpoint.as_deref().map(|endpoint| redactor.redact(endpoint)))
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .field("api_key_env", &self.api_key_env)
            .field("context_window", &self.context_window)
            .field("max_output_tokens", &self.max_output_tokens)
            .field("tokenizer", &self.tokenizer)
            .field("settings", &self.settings)
            .finish()
    }
}

impl ModelEntry {
    /// An entry for a model string at an endpoint, everything else default.
    pub fn new(value: impl Into<String>, provider: ProviderKind, endpoint: Option<String>) -> Self {
        ModelEntry { value: value.into(), provider, endpoint, ..ModelEntry::default() }
    }
}

/// The model part of an application config (GLEN's `layers-input.json` keys).
///
/// Unknown keys are ignored, so a whole GLEN config deserializes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ModelsConfig {
    /// The models that can be selected.
    #[serde(default)]
    pub llm_models: Vec<ModelEntry>,
    /// The model selected at start; the first entry when absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub llm_model: Option<String>,
    /// Hosts (and their subdomains) that get the X-Client header; global only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_header_hosts: Option<Vec<String>>,
    /// The X-Client header value (default `rein/<version>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_name: Option<String>,
    /// Global request shaping, under the per-model settings.
    #[serde(flatten)]
    pub settings: ModelSettings,
}

/// The settings of one model after GLEN's resolution rules.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Shaping {
    pub(crate) temperature: Option<f64>,
    pub(crate) top_p: Option<f64>,
    pub(crate) seed: Option<i64>,
    pub(crate) max_tokens: Option<u32>,
    pub(crate) reasoning_capable: bool,
    pub(crate) reasoning_default: Option<bool>,
    pub(crate) prompt_cache: bool,
    pub(crate) timeout: Duration,
    pub(crate) stream: bool,
    pub(crate) thinking_budget: u32,
    pub(crate) max_retry_wait: Duration,
    pub(crate) max_reply_bytes: usize,
}

/// Per model if the key is present there, else global.
fn star<T: Clone>(model: &Option<Option<T>>, global: &Option<Option<T>>) -> Option<T> {
    match model {
        Some(value) => value.clone(),
        None => global.clone().flatten(),
    }
}

/// The same rule for loosely typed keys (a present `null` is `Value::Null`).
fn star_value<'a>(
    model: &'a Option<serde_json::Value>,
    global: &'a Option<serde_json::Value>,
) -> Option<&'a serde_json::Value> {
    if model.is_some() { model.as_ref() } else { global.as_ref() }
}

impl Shaping {
    pub(crate) fn resolve(model: &ModelSettings, global: &ModelSettings) -> Self {
        let temperature = match &model.temperature {
            Some(value) => *value,
            None => Some(global.temperature.flatten().unwrap_or(0.0)),
        };
        let timeout = star_value(&model.llm_timeout_seconds, &global.llm_timeout_seconds)
            .and_then(serde_json::Value::as_f64)
            .filter(|seconds| seconds.is_finite() && *seconds > 0.0 && *seconds < 1e9)
            .map(Duration::from_secs_f64)
            .unwrap_or(DEFAULT_TIMEOUT);
        Shaping {
            temperature,
            top_p: star(&model.top_p, &global.top_p),
            seed: star(&model.seed, &global.seed),
            max_tokens: star(&model.max_tokens, &global.max_tokens),
            reasoning_capable: star_value(&model.reasoning_toggle, &global.reasoning_toggle)
                == Some(&serde_json::Value::Bool(true)),
            reasoning_default: star_value(&model.reasoning_default, &global.reasoning_default)
                .and_then(serde_json::Value::as_bool),
            prompt_cache: star_value(&model.prompt_cache, &global.prompt_cache)
                == Some(&serde_json::Value::Bool(true)),
            timeout,
            stream: star(&model.stream, &global.stream).unwrap_or(true),
            thinking_budget: star(&model.thinking_budget_tokens, &global.thinking_budget_tokens)
                .unwrap_or(DEFAULT_THINKING_BUDGET),
            max_retry_wait: star(&model.max_retry_wait_seconds, &global.max_retry_wait_seconds)
                .map_or(DEFAULT_MAX_RETRY_WAIT, Duration::from_secs),
            max_reply_bytes: star(&model.max_reply_bytes, &global.max_reply_bytes)
                .filter(|bytes| *bytes > 0)
                .unwrap_or(DEFAULT_MAX_REPLY_BYTES)
                .try_into()
                .unwrap_or(usize::MAX),
        }
    }

    /// GLEN's `enable_thinking`: omitted for a model that is neither capable nor has a default;
    /// else the request's override, else the default, else on.
    pub(crate) fn enable_thinking(&self, request_override: Option<bool>) -> Option<bool> {
        if !self.reasoning_capable && self.reasoning_default.is_none() {
            return None;
        }
        Some(request_override.or(self.reasoning_default).unwrap_or(true))
    }
}

/// Whether `host` is one of `hosts` or a subdomain of one (GLEN's suffix rule).
pub(crate) fn host_is_trusted(host: &str, hosts: &[String]) -> bool {
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    hosts.iter().any(|suffix| {
        let suffix = suffix.trim().trim_start_matches('.').to_ascii_lowercase();
        !suffix.is_empty() && (host == suffix || host.ends_with(&format!(".{suffix}")))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(json: &str) -> ModelSettings {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn present_null_differs_from_absent() {
        assert_eq!(settings(r#"{"temperature": null}"#).temperature, Some(None));
        assert_eq!(settings("{}").temperature, None);
        assert_eq!(settings(r#"{"temperature": 0.5}"#).temperature, Some(Some(0.5)));
    }

    #[test]
    fn host_suffix_rule() {
        let hosts = vec!["nrp-nautilus.io".to_owned()];
        assert!(host_is_trusted("nrp-nautilus.io", &hosts));
        assert!(host_is_trusted("llm-proxy.NRP-nautilus.io", &hosts));
        assert!(!host_is_trusted("evilnrp-nautilus.io", &hosts));
        assert!(!host_is_trusted("nrp-nautilus.io.evil.com", &hosts));
    }

    #[test]
    fn an_entrys_debug_hides_its_key() {
        let mut entry = ModelEntry::new(
            "m",
            ProviderKind::OpenAi,
            Some("http://user:endpoint-password@127.0.0.1/v1".into()),
        );
        entry.api_key = Some("sk-live-0123456789abcdefghij".into());
        let debug = format!("{entry:?}");
        assert!(debug.contains(r#"api_key: Some("<set>")"#), "{debug}");
        assert!(!debug.contains("0123456789abcdefghij"), "{debug}");
        assert!(!debug.contains("endpoint-password"), "{debug}");
    }
}
