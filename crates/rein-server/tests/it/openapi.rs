//! The OpenAPI document: valid shape, and every route of the router is described.

use axum::http::StatusCode;
use rein_server::ServerConfig;

use crate::{app, call};

/// Every (method, path) the router serves under /agent/api.
const ROUTES: &[(&str, &str)] = &[
    ("get", "/agent/api/health"),
    ("get", "/agent/api/runtime/agents"),
    ("get", "/agent/api/runtime/models"),
    ("post", "/agent/api/runtime/sessions"),
    ("get", "/agent/api/runtime/sessions"),
    ("get", "/agent/api/runtime/sessions/{id}"),
    ("patch", "/agent/api/runtime/sessions/{id}"),
    ("delete", "/agent/api/runtime/sessions/{id}"),
    ("post", "/agent/api/runtime/sessions/{id}/messages"),
    ("post", "/agent/api/runtime/sessions/{id}/interrupt"),
    ("post", "/agent/api/runtime/sessions/{id}/continue"),
    ("post", "/agent/api/runtime/sessions/{id}/discard"),
    ("get", "/agent/api/runtime/sessions/{id}/tasks"),
    ("get", "/agent/api/runtime/sessions/{id}/approvals"),
    ("get", "/agent/api/runtime/sessions/{id}/events"),
    ("get", "/agent/api/runtime/tasks/{id}"),
    ("post", "/agent/api/runtime/tasks/{id}/cancel"),
    ("get", "/agent/api/runtime/approvals/{id}"),
    ("post", "/agent/api/runtime/approvals/{id}/approve"),
    ("post", "/agent/api/runtime/approvals/{id}/deny"),
    ("put", "/agent/api/runtime/view-contexts/{id}"),
    ("get", "/agent/api/runtime/view-contexts/{id}"),
];

#[tokio::test]
async fn document_describes_every_route() {
    let (app, _) = app(&ServerConfig::default());
    let (status, doc) = call(&app, "GET", "/agent/api/openapi.json", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(doc["openapi"], "3.1.0");
    let paths = doc["paths"].as_object().unwrap();
    let mut described = 0;
    for (path, item) in paths {
        for (method, op) in item.as_object().unwrap() {
            assert!(
                ROUTES.contains(&(method.as_str(), path.as_str())),
                "documented but not routed: {method} {path}"
            );
            assert!(op["operationId"].is_string(), "{method} {path} has no operationId");
            described += 1;
        }
    }
    assert_eq!(described, ROUTES.len(), "a route is missing from the document");
    // Every route answers (not 404 `not_found`, not 405) at the documented method.
    for (method, path) in ROUTES {
        let concrete = path.replace("{id}", "x");
        let (status, body) = call(&app, &method.to_uppercase(), &concrete, None).await;
        if *method == "get" && path.ends_with("/events") {
            continue;
        }
        assert_ne!(body["error"]["code"], "not_found", "{method} {path}");
        assert_ne!(status, StatusCode::METHOD_NOT_ALLOWED, "{method} {path}");
        assert!(!status.is_server_error(), "{method} {path}: {status}");
    }
}

#[test]
fn every_reference_resolves() {
    let doc = rein_server::openapi_document();
    let text = doc.to_string();
    let schemas = doc["components"]["schemas"].as_object().unwrap();
    for reference in text.split("\"$ref\":\"#/components/schemas/").skip(1) {
        let name = &reference[..reference.find('"').unwrap()];
        assert!(schemas.contains_key(name), "dangling $ref {name}");
    }
    // Request schemas are closed, as the server rejects unknown fields.
    for name in
        ["CreateSession", "SessionSettings", "SendMessage", "ApprovalDecision", "ViewContextInput"]
    {
        assert_eq!(schemas[name]["additionalProperties"], false, "{name}");
    }
}
