//! Model resolution: a session's pinned model name to a `Model`.

use std::sync::Arc;

use rein_protocol::{Model, ModelInfo};

/// Turns a model name into a model. The runtime asks it once per session (and again when a
/// person pins another model); it never changes a session's model on its own.
pub trait ModelResolver: Send + Sync {
    /// The model called `name`, if configured.
    fn resolve(&self, name: &str) -> Option<Arc<dyn Model>>;
    /// The model new sessions are pinned to unless told otherwise.
    fn default_model(&self) -> Option<String>;
    /// Every configured model.
    fn list(&self) -> Vec<ModelInfo>;
}

/// A fixed list of models, the first (or the named one) being the default.
#[derive(Clone, Default)]
pub struct StaticModels {
    models: Vec<(String, Arc<dyn Model>)>,
    default: Option<String>,
}

impl std::fmt::Debug for StaticModels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.models.iter().map(|(name, _)| name.as_str()).collect();
        f.debug_struct("StaticModels")
            .field("models", &names)
            .field("default", &self.default)
            .finish()
    }
}

impl StaticModels {
    /// No models (turns fail with `NotConfigured`).
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a model under `name` (the first added is the default).
    pub fn with(mut self, name: impl Into<String>, model: Arc<dyn Model>) -> Self {
        let name = name.into();
        if self.default.is_none() {
            self.default = Some(name.clone());
        }
        self.models.push((name, model));
        self
    }

    /// Makes `name` the default.
    pub fn with_default(mut self, name: impl Into<String>) -> Self {
        self.default = Some(name.into());
        self
    }
}

impl ModelResolver for StaticModels {
    fn resolve(&self, name: &str) -> Option<Arc<dyn Model>> {
        self.models.iter().find(|(n, _)| n == name).map(|(_, model)| Arc::clone(model))
    }

    fn default_model(&self) -> Option<String> {
        self.default.clone()
    }

    fn list(&self) -> Vec<ModelInfo> {
        self.models
            .iter()
            .map(|(name, model)| {
                let mut info = model.info().clone();
                info.name = name.clone();
                info
            })
            .collect()
    }
}
