//! The model registry: `llm_models` entries turned into ready `ProviderModel`s.

use std::sync::Arc;

use rein_protocol::{ModelInfo, Redactor};

use crate::config::{
    DEFAULT_CLIENT_HEADER_HOSTS, ModelEntry, ModelsConfig, ProviderKind, Shaping, host_is_trusted,
};
use crate::error::{ConfigError, GENERAL_UNREACHABLE_HINT};
use crate::provider::ProviderModel;
use crate::transport::HttpTransport;

/// What the host application sets when it builds a registry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RegistryOptions {
    /// The X-Client header value; overrides the config's `client_name`; default `rein/<version>`.
    pub client_name: Option<String>,
    /// What an [`EndpointError`](crate::EndpointError) tells a person to do when an endpoint
    /// cannot be reached, by endpoint (as configured; a trailing `/` does not count). An
    /// endpoint without one gets a general hint.
    pub unreachable_hints: Vec<(String, String)>,
}

impl RegistryOptions {
    /// Options with this X-Client value.
    pub fn with_client_name(mut self, client_name: impl Into<String>) -> Self {
        self.client_name = Some(client_name.into());
        self
    }

    /// Options that tell a person `hint` when `endpoint` cannot be reached (`Start it with …`).
    pub fn with_unreachable_hint(
        mut self,
        endpoint: impl Into<String>,
        hint: impl Into<String>,
    ) -> Self {
        self.unreachable_hints.push((endpoint.into(), hint.into()));
        self
    }

    /// The hint for `endpoint`: the one given for it, else the general one.
    fn unreachable_hint(&self, endpoint: &str) -> String {
        let endpoint = endpoint.trim_end_matches('/');
        self.unreachable_hints
            .iter()
            .find(|(known, _)| known.trim_end_matches('/') == endpoint)
            .map(|(_, hint)| hint.clone())
            .unwrap_or_else(|| GENERAL_UNREACHABLE_HINT.to_owned())
    }
}

/// The X-Client value when neither the host nor the config sets one.
pub fn default_client_name() -> String {
    format!("rein/{}", env!("CARGO_PKG_VERSION"))
}

/// The configured models, by name, sharing one transport (natively: one HTTP connection pool).
#[derive(Debug, Clone)]
pub struct ModelRegistry {
    models: Vec<Arc<ProviderModel>>,
    entries: Vec<ModelEntry>,
    config: ModelsConfig,
    client_name: String,
    default_name: String,
    transport: Arc<dyn HttpTransport>,
    options: RegistryOptions,
}

impl ModelRegistry {
    /// Builds the registry, reading keys from the process environment. (Native only, as is
    /// [`ModelRegistry::from_config_with_env`]: in WebAssembly the host brings the transport,
    /// see [`ModelRegistry::from_config_with_transport`].)
    #[cfg(not(target_arch = "wasm32"))]
    pub fn from_config(
        config: &ModelsConfig,
        options: &RegistryOptions,
    ) -> Result<Self, ConfigError> {
        Self::from_config_with_env(config, options, |name| std::env::var(name).ok())
    }

    /// Builds the registry with `env` as the environment (for tests and embedding hosts).
    ///
    /// A model's key is its `api_key`; else the variable named by `api_key_env`; else, only for
    /// a model at its provider's public endpoint, `OPENAI_API_KEY` / `ANTHROPIC_API_KEY` /
    /// `GEMINI_API_KEY`, so a key is never sent to a host it was not meant for.
    #[cfg(not(target_arch = "wasm32"))]
    pub fn from_config_with_env(
        config: &ModelsConfig,
        options: &RegistryOptions,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        if config.llm_models.is_empty() {
            return Err(ConfigError::NoModels);
        }
        let transport = crate::native::ReqwestTransport::new().map_err(ConfigError::HttpClient)?;
        Self::from_config_with_transport(config, options, env, Arc::new(transport))
    }

    /// Builds the registry with `env` as the environment and `transport` sending the requests
    /// and keeping the time (in WebAssembly, the host's `fetch` and timers). Keys are found as
    /// [`ModelRegistry::from_config_with_env`] says.
    pub fn from_config_with_transport(
        config: &ModelsConfig,
        options: &RegistryOptions,
        env: impl Fn(&str) -> Option<String>,
        transport: Arc<dyn HttpTransport>,
    ) -> Result<Self, ConfigError> {
        if config.llm_models.is_empty() {
            return Err(ConfigError::NoModels);
        }
        let client_name = options
            .client_name
            .clone()
            .or_else(|| config.client_name.clone())
            .unwrap_or_else(default_client_name);
        check_header_value("client_name", &client_name)?;
        let mut entries = Vec::with_capacity(config.llm_models.len());
        for (index, entry) in config.llm_models.iter().enumerate() {
            if entry.value.trim().is_empty() {
                return Err(ConfigError::EmptyModelName { index });
            }
            if entries.iter().any(|known: &ModelEntry| known.value == entry.value) {
                return Err(ConfigError::DuplicateModel { name: entry.value.clone() });
            }
            let mut entry = entry.clone();
            entry.api_key = resolve_key(&entry, &env);
            if let Some(key) = &entry.api_key {
                check_header_value(&format!("the key of model `{}`", entry.value), key)?;
            }
            entries.push(entry);
        }
        let mut registry = ModelRegistry {
            models: Vec::new(),
            default_name: String::new(),
            entries,
            config: config.clone(),
            client_name,
            transport,
            options: options.clone(),
        };
        registry.models = registry
            .entries
            .iter()
            .map(|entry| registry.build(entry, &entry.value).map(Arc::new))
            .collect::<Result<_, _>>()?;
        registry.default_name = config
            .llm_model
            .clone()
            .filter(|name| !name.is_empty())
            .unwrap_or_else(|| registry.entries[0].value.clone());
        Ok(registry)
    }

    fn build(&self, entry: &ModelEntry, model: &str) -> Result<ProviderModel, ConfigError> {
        let endpoint =
            entry.endpoint.clone().unwrap_or_else(|| entry.provider.default_endpoint().to_owned());
        let redactor = model_redactor(entry.api_key.as_deref(), &endpoint);
        let host = endpoint_host(&endpoint).map_err(|reason| ConfigError::InvalidEndpoint {
            model: entry.value.clone(),
            endpoint: redactor.redact(&endpoint).into_owned(),
            reason,
        })?;
        let hosts: Vec<String> = match &self.config.client_header_hosts {
            Some(hosts) => hosts.clone(),
            None => DEFAULT_CLIENT_HEADER_HOSTS.iter().map(|host| (*host).to_owned()).collect(),
        };
        let mut info = ModelInfo::named(model);
        info.provider = Some(entry.provider.as_str().to_owned());
        if model == entry.value {
            info.label = entry.label.clone();
            info.context_window = entry.context_window;
            info.max_output_tokens = entry.max_output_tokens;
            info.tokenizer = entry.tokenizer.clone();
        }
        Ok(ProviderModel {
            info,
            kind: entry.provider,
            model: model.to_owned(),
            endpoint: endpoint.trim_end_matches('/').to_owned(),
            api_key: entry.api_key.clone(),
            client_header: host_is_trusted(&host, &hosts).then(|| self.client_name.clone()),
            shaping: Shaping::resolve(&entry.settings, &self.config.settings),
            transport: Arc::clone(&self.transport),
            unreachable_hint: self.options.unreachable_hint(&endpoint),
            redactor,
        })
    }

    /// The model configured under `name`.
    pub fn get(&self, name: &str) -> Option<Arc<ProviderModel>> {
        self.models.iter().find(|model| model.info.name == name).cloned()
    }

    /// The model configured under `name`; an unknown name is sent to the first entry's
    /// endpoint with its key and settings, as GLEN does for a model string it has no entry for.
    pub fn select(&self, name: &str) -> Result<Arc<ProviderModel>, ConfigError> {
        if let Some(model) = self.get(name) {
            return Ok(model);
        }
        if name.trim().is_empty() {
            return Err(ConfigError::UnknownModel(name.to_owned()));
        }
        let first =
            self.entries.first().ok_or_else(|| ConfigError::UnknownModel(name.to_owned()))?;
        self.build(first, name).map(Arc::new)
    }

    /// The model selected at start (`llm_model`, else the first entry).
    pub fn default_model(&self) -> Arc<ProviderModel> {
        match self.select(&self.default_name) {
            Ok(model) => model,
            Err(_) => self.models[0].clone(),
        }
    }

    /// The name of the model selected at start.
    pub fn default_name(&self) -> &str {
        &self.default_name
    }

    /// What each configured model is, in config order.
    pub fn infos(&self) -> Vec<ModelInfo> {
        self.models.iter().map(|model| model.info.clone()).collect()
    }

    /// The configured names, in config order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.models.iter().map(|model| model.info.name.as_str())
    }
}

fn resolve_key(entry: &ModelEntry, env: &impl Fn(&str) -> Option<String>) -> Option<String> {
    let non_empty = |key: Option<String>| key.filter(|key| !key.trim().is_empty());
    if let Some(key) = non_empty(entry.api_key.clone()) {
        return Some(key);
    }
    if let Some(name) = entry.api_key_env.as_deref().filter(|name| !name.is_empty()) {
        return non_empty(env(name));
    }
    let official = match &entry.endpoint {
        None => true,
        Some(endpoint) => entry.provider.is_official_endpoint(endpoint),
    };
    if official { non_empty(env(entry.provider.default_key_env())) } else { None }
}

/// The redactor of one model: its key, and the password of its endpoint's user info, are the
/// exact secrets (on top of the credential shapes every redactor knows).
fn model_redactor(api_key: Option<&str>, endpoint: &str) -> Redactor {
    let mut redactor = Redactor::default();
    if let Some(key) = api_key {
        redactor.add_secret(key);
    }
    if let Some(password) = rein_protocol::url_password(endpoint) {
        redactor.add_secret(password);
    }
    redactor
}

/// The host of an http(s) URL, or why it is not one.
fn endpoint_host(endpoint: &str) -> Result<String, String> {
    let rest = endpoint
        .strip_prefix("https://")
        .or_else(|| endpoint.strip_prefix("http://"))
        .ok_or_else(|| "not an http:// or https:// URL".to_owned())?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let authority = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    let host = if let Some(bracketed) = authority.strip_prefix('[') {
        bracketed.split(']').next().unwrap_or("")
    } else {
        authority.split(':').next().unwrap_or("")
    };
    if host.is_empty() {
        return Err("no host".to_owned());
    }
    Ok(host.to_ascii_lowercase())
}

fn check_header_value(what: &str, value: &str) -> Result<(), ConfigError> {
    if value.bytes().all(|byte| byte == b'\t' || (0x20..0x7f).contains(&byte)) {
        Ok(())
    } else {
        Err(ConfigError::Invalid(format!("{what} holds characters an HTTP header cannot carry")))
    }
}

impl ProviderKind {
    /// Whether `endpoint` is this provider's public endpoint host.
    pub fn is_official_endpoint(self, endpoint: &str) -> bool {
        endpoint_host(endpoint).ok() == endpoint_host(self.default_endpoint()).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoint_hosts() {
        assert_eq!(
            endpoint_host("https://llm-proxy.nrp-nautilus.io/v1").as_deref(),
            Ok("llm-proxy.nrp-nautilus.io")
        );
        assert_eq!(endpoint_host("http://user:pw@127.0.0.1:8080/v1").as_deref(), Ok("127.0.0.1"));
        assert_eq!(endpoint_host("http://[::1]:80").as_deref(), Ok("::1"));
        assert!(endpoint_host("ftp://x").is_err());
        assert!(endpoint_host("https:///v1").is_err());
    }

    #[test]
    fn endpoint_passwords() {
        use rein_protocol::url_password;
        assert_eq!(url_password("http://user:pw-secret@127.0.0.1:8080/v1"), Some("pw-secret"));
        assert_eq!(url_password("http://user@host/v1"), None);
        assert_eq!(url_password("http://host/v1?a=b@c:d"), None);
        assert_eq!(url_password("no scheme"), None);
        let redactor = model_redactor(Some("sk-configured-key"), "http://u:pw-secret-1@h/v1");
        assert_eq!(redactor.secret_count(), 2);
    }

    #[test]
    fn an_invalid_endpoint_error_does_not_show_its_credentials() {
        let mut entry =
            ModelEntry::new("m", ProviderKind::OpenAi, Some("ftp://u:pw-secret-1@h".into()));
        entry.api_key = Some("configured-key-1".into());
        let config = ModelsConfig { llm_models: vec![entry], ..ModelsConfig::default() };
        let error =
            ModelRegistry::from_config_with_env(&config, &RegistryOptions::default(), |_| None)
                .unwrap_err();
        assert!(matches!(error, ConfigError::InvalidEndpoint { .. }), "{error}");
        assert!(!error.to_string().contains("pw-secret-1"), "{error}");
    }
}
