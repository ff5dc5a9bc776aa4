//! The handle's view context API: what the user is looking at, stored and linked to sessions.

use rein_store::{SessionPatch, ViewContext};
use serde_json::Value;

use crate::error::{Result, RuntimeError, StoreResult as _};

impl super::Runtime {
    /// Stores what the user is looking at (`route` and `pageType` are required).
    pub async fn put_view_context(&self, id: &str, payload: Value) -> Result<ViewContext> {
        let Some(object) = payload.as_object() else {
            return Err(RuntimeError::Invalid("a view context must be a JSON object".to_owned()));
        };
        for key in ["route", "pageType"] {
            if object.get(key).and_then(Value::as_str).is_none_or(str::is_empty) {
                return Err(RuntimeError::Invalid(format!(
                    "a view context needs a non-empty `{key}`"
                )));
            }
        }
        self.core().store().put_view_context(id, &payload).map_store_err()
    }

    /// A stored view context.
    pub async fn view_context(&self, id: &str) -> Result<ViewContext> {
        self.core()
            .store()
            .get_view_context(id)
            .map_store_err()?
            .ok_or_else(|| RuntimeError::ViewContextNotFound(id.to_owned()))
    }

    /// Links a session to a view context (the message call does this before every turn).
    pub async fn link_view_context(&self, session_id: &str, context_id: &str) -> Result<()> {
        self.public_session(session_id)?;
        let patch = SessionPatch {
            view_context_id: Some(Some(context_id.to_owned())),
            ..SessionPatch::default()
        };
        self.core().store().update_session(session_id, &patch).map_store_err()?;
        Ok(())
    }
}
