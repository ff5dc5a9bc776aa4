//! The read-only `current_view_context` tool's spec and answer: what the user is looking at,
//! looked up in the session owner's namespace only.

use rein_protocol::ToolSpec;
use rein_store::Session;
use serde_json::{Value, json};

use crate::{
    core::Core,
    owner::{check_client_id, scoped_id, unscoped_id},
};

/// The name of the read-only view context tool.
pub const CURRENT_VIEW_CONTEXT: &str = "current_view_context";

/// The spec of `current_view_context`.
pub(crate) fn view_context_spec() -> ToolSpec {
    let schema = json!({
        "type": "object",
        "properties": {"viewContextId": {"type": "string", "description": "A specific view context; the session's linked one by default."}},
    });
    let Value::Object(schema) = schema else { unreachable!("a JSON object literal") };
    ToolSpec::new(
        CURRENT_VIEW_CONTEXT,
        "What the user is looking at right now: the page's route, type, title, selection and entities. Call it when \
         the user says \"this\" or \"here\".",
        schema,
    )
    .read_only(true)
}

/// The view context linked to `session`: its own, or (a persona child) its parent's.
fn linked_id(core: &Core, session: &Session) -> Option<String> {
    session.view_context_id.clone().or_else(|| {
        // Persona children read their parent's.
        let parent = session.parent_id.as_deref()?;
        core.store().get_session(parent).ok().flatten()?.view_context_id
    })
}

/// Whether a view context is linked to `session`: only then is `current_view_context` offered.
pub(crate) fn is_linked(core: &Core, session: &Session) -> bool {
    linked_id(core, session).is_some()
}

/// TerraFin's three result shapes of `current_view_context`.
pub(crate) fn read_view_context(core: &Core, session: &Session, requested: Option<&str>) -> Value {
    let linked_id = linked_id(core, session);
    let linked = linked_id.is_some();
    // The model names a view context the way the page did; it is looked up in the session
    // owner's namespace only, never another principal's (a persona child has its parent's
    // owner).
    let owner = session.owner.as_deref();
    let Some(id) = requested.map(|id| scoped_id(owner, id)).or(linked_id) else {
        return json!({"available": false, "linked": false, "reason": "No view context is linked to this session."});
    };
    let shown = unscoped_id(owner, &id).to_owned();
    let found = if requested.is_some_and(|id| check_client_id("viewContextId", id).is_err()) {
        Ok(None)
    } else {
        core.store().get_view_context(&id)
    };
    match found {
        Ok(Some(context)) => {
            let field = |key: &str| context.payload.get(key).cloned().unwrap_or(Value::Null);
            let or_empty =
                |key: &str, empty: Value| context.payload.get(key).cloned().unwrap_or(empty);
            json!({
                "available": true,
                "linked": linked,
                "contextId": shown,
                "createdAt": context.created_at.to_rfc3339(),
                "updatedAt": context.updated_at.to_rfc3339(),
                "route": field("route"),
                "pageType": field("pageType"),
                "title": field("title"),
                "summary": field("summary"),
                "selection": or_empty("selection", json!({})),
                "entities": or_empty("entities", json!([])),
                "metadata": or_empty("metadata", json!({})),
            })
        }
        Ok(None) => {
            json!({"available": false, "linked": linked, "contextId": shown, "reason": "The view context was not found."})
        }
        Err(error) => {
            json!({"available": false, "linked": linked, "contextId": shown, "reason": error.to_string()})
        }
    }
}
