//! The served document matches what the server answers: every JSON answer that a route test
//! reads with `send` validates against the OpenAPI document's schema for its route, method and
//! status, and a status the document does not list for the route fails the test.
//!
//! Paths outside the document (the page, its assets, unknown routes) and methods it does not
//! list for a path (the 405 answers) are not checked here; `routes.rs` checks those answers.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex, OnceLock},
};

use axum::http::{Method, StatusCode};
use serde_json::Value;

/// The document, as `GET /agent/api/openapi.json` serves it (`openapi.rs` checks that).
pub(crate) fn document() -> &'static Value {
    static DOCUMENT: OnceLock<Value> = OnceLock::new();
    DOCUMENT.get_or_init(rein_server::openapi_document)
}

/// The documented path template that `path` is an instance of (`{id}` matches one segment).
fn template(paths: &serde_json::Map<String, Value>, path: &str) -> Option<String> {
    let concrete: Vec<&str> = path.split('/').collect();
    paths
        .keys()
        .find(|template| {
            let parts: Vec<&str> = template.split('/').collect();
            parts.len() == concrete.len()
                && parts.iter().zip(&concrete).all(|(part, segment)| {
                    part == segment || (part.starts_with('{') && !segment.is_empty())
                })
        })
        .cloned()
}

/// A validator for one response schema, with the document's components beside it so that its
/// `$ref`s (`#/components/schemas/...`) resolve.
fn validator(schema: &Value) -> jsonschema::Validator {
    let mut root = schema.as_object().cloned().expect("a response schema is an object");
    root.insert("components".into(), document()["components"].clone());
    jsonschema::draft202012::new(&Value::Object(root)).expect("the document's schemas compile")
}

/// Checks one answer against the document; panics, naming the route, when it does not fit.
pub(crate) fn check(method: &Method, path: &str, status: StatusCode, body: &Value) {
    static VALIDATORS: OnceLock<Mutex<HashMap<String, Arc<jsonschema::Validator>>>> =
        OnceLock::new();
    let paths = document()["paths"].as_object().expect("the document has paths");
    let Some(template) = template(paths, path) else { return };
    let method = method.as_str().to_ascii_lowercase();
    let Some(operation) = paths[&template].get(&method) else { return };
    let Some(response) = operation["responses"].get(status.as_str()) else {
        panic!("{method} {template} answered {status}, which the document does not list: {body}");
    };
    let Some(schema) = response.pointer("/content/application~1json/schema") else { return };
    let key = format!("{method} {template} {status}");
    let validator = {
        let mut cache = VALIDATORS.get_or_init(Mutex::default).lock().unwrap();
        Arc::clone(cache.entry(key.clone()).or_insert_with(|| Arc::new(validator(schema))))
    };
    let errors: Vec<String> = validator
        .iter_errors(body)
        .map(|error| format!("at `{}`: {error}", error.instance_path()))
        .collect();
    assert!(
        errors.is_empty(),
        "{key}: the answer does not fit the document:\n{}\n{body}",
        errors.join("\n")
    );
}

#[test]
#[should_panic(expected = "does not fit the document")]
fn an_answer_that_does_not_fit_is_refused() {
    let session = serde_json::json!({ "sessionId": 7 });
    check(&Method::GET, "/agent/api/runtime/sessions/s1", StatusCode::OK, &session);
}

#[test]
#[should_panic(expected = "which the document does not list")]
fn a_status_the_document_does_not_list_is_refused() {
    check(&Method::GET, "/agent/api/runtime/agents", StatusCode::CONFLICT, &Value::Null);
}
