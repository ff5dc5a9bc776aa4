//! The NUL character (U+0000) refused at the edge, in the path, the query and every string of
//! a JSON body, before a route reads them: `422 nul_character_not_allowed`, the same on every
//! backend (PostgreSQL cannot store a NUL in `text` or `jsonb`; the SQLite store would keep
//! one, so a session would behave differently by backend).
//!
//! A JSON body can carry a NUL only as the escape `\u0000` (a raw control character is a syntax
//! error), and a URL only as `%00`; both are found by a scan of the raw bytes. Only a body that
//! has one is parsed again, to say where (`details.pointer`, a JSON Pointer).

use axum::{
    extract::Request,
    http::StatusCode,
    middleware::Next,
    response::{IntoResponse, Response},
};
use serde_json::{Value, json};

use crate::error::ApiError;

/// The code of the refusal, spelled here only.
pub(crate) const CODE: &str = "nul_character_not_allowed";

/// The refusal of a NUL found `where_` (`the path`, `the query`, `the body at /title`), with
/// `details` saying the same for programs.
fn refused(where_: &str, details: Value) -> ApiError {
    ApiError::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        CODE,
        format!("Text must not contain the NUL character (U+0000); found in {where_}."),
    )
    .with_details(details)
}

/// Middleware: a path or query with `%00` is refused before the route reads it.
pub(crate) async fn refuse_in_uri(request: Request, next: Next) -> Response {
    let uri = request.uri();
    if uri.path().contains("%00") {
        return refused("the path", json!({ "in": "path" })).into_response();
    }
    if uri.query().is_some_and(|query| query.contains("%00")) {
        return refused("the query", json!({ "in": "query" })).into_response();
    }
    next.run(request).await
}

/// `Err` when a string (or an object key) of the JSON `body` holds a NUL. A body that is not
/// JSON passes: the caller's parse says what is wrong with it.
pub(crate) fn refuse_in_json(body: &[u8]) -> Result<(), ApiError> {
    if !has_nul_escape(body) {
        return Ok(());
    }
    let Ok(value) = serde_json::from_slice::<Value>(body) else { return Ok(()) };
    match nul_pointer(&value) {
        Some(pointer) => {
            let where_ = if pointer.is_empty() {
                "the body".to_owned()
            } else {
                format!("the body at `{pointer}`")
            };
            Err(refused(&where_, json!({ "in": "body", "pointer": pointer })))
        }
        None => Ok(()),
    }
}

/// Whether JSON text has the escape `\u0000`. A backslash outside a string is a syntax error,
/// so every one seen here opens an escape, which is skipped whole (`\\` is not an escape of
/// the character after it).
fn has_nul_escape(json: &[u8]) -> bool {
    let mut at = 0;
    while let Some(offset) = json[at..].iter().position(|b| *b == b'\\') {
        let escape = at + offset;
        if json[escape + 1..].starts_with(b"u0000") {
            return true;
        }
        at = escape + 2;
        if at >= json.len() {
            return false;
        }
    }
    false
}

/// The JSON Pointer of the first string or key in `value` that holds a NUL.
fn nul_pointer(value: &Value) -> Option<String> {
    match value {
        Value::String(text) => text.contains('\0').then(String::new),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(index, item)| nul_pointer(item).map(|rest| format!("/{index}{rest}"))),
        Value::Object(map) => map.iter().find_map(|(key, item)| {
            let step = format!("/{}", key.replace('~', "~0").replace('/', "~1"));
            if key.contains('\0') {
                Some(step)
            } else {
                nul_pointer(item).map(|rest| format!("{step}{rest}"))
            }
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_nul_escape_is_told_from_an_escaped_backslash() {
        for (json, has) in [
            (r#"{"a": "x\u0000y"}"#, true),
            (r#"{"a": "\\\u0000"}"#, true),
            (r#"{"a": "\\u0000"}"#, false),
            (r#"{"a": "\\\\u0000"}"#, false),
            (r#"{"a": "\u00000"}"#, true),
            (r#"{"a": "\u0001 \n \""}"#, false),
            (r#"{"a": "\"#, false),
            ("", false),
        ] {
            assert_eq!(has_nul_escape(json.as_bytes()), has, "{json}");
        }
    }

    #[test]
    fn the_pointer_names_the_string_or_key() {
        let check = |json: &str| {
            refuse_in_json(json.as_bytes()).err().map(|error| {
                assert_eq!((error.status, error.code), (StatusCode::UNPROCESSABLE_ENTITY, CODE));
                error.details.expect("details")["pointer"].as_str().expect("pointer").to_owned()
            })
        };
        assert_eq!(check(r#"{"title": "a\u0000"}"#).as_deref(), Some("/title"));
        assert_eq!(
            check(r#"{"metadata": {"a/b": ["ok", "\u0000"]}}"#).as_deref(),
            Some("/metadata/a~1b/1")
        );
        assert_eq!(check(r#"{"k\u0000": 1}"#).as_deref(), Some("/k\0"));
        assert_eq!(check(r#""\u0000""#).as_deref(), Some(""));
        assert_eq!(check(r#"{"title": "a\\u0000"}"#), None);
        // Not JSON: the route's parse answers for it.
        assert_eq!(check(r#"{"title": "\u0000"#), None);
    }
}
