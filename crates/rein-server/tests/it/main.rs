//! rein-server's integration tests: every route and error through `oneshot` over the real
//! runtime (SQLite and JSONL in a temp dir, a scripted model), the event stream, the OpenAPI
//! document and the embedded chat. Every JSON answer read with [`send`] is validated against
//! the document's schema for its route and status (`documented.rs`).

mod approvals;
mod behind;
mod browser;
mod client_tools;
mod documented;
mod elicitation;
mod export;
mod fuzz_api;
mod hosted;
mod nul;
mod openapi;
mod proxied;
mod routes;
mod scripted;
mod security;
mod stream;
mod terrafin;
mod transcription;

use axum::{
    Router,
    body::Body,
    http::{Request, StatusCode, header},
};
use http_body_util::BodyExt as _;
use serde_json::Value;
use tower::ServiceExt as _;

/// One request: method, path, optional JSON body, optional bearer token.
pub(crate) fn request(
    method: &str,
    path: &str,
    body: Option<Value>,
    token: Option<&str>,
) -> Request<Body> {
    let mut builder = Request::builder().method(method).uri(path);
    if let Some(token) = token {
        builder = builder.header(header::AUTHORIZATION, format!("Bearer {token}"));
    }
    match body {
        Some(body) => builder
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(body.to_string()))
            .unwrap(),
        None => builder.body(Body::empty()).unwrap(),
    }
}

/// Sends a request and reads the JSON answer (`Value::Null` when the body is not JSON), which
/// must fit the OpenAPI document's schema for the route and status.
pub(crate) async fn send(app: &Router, request: Request<Body>) -> (StatusCode, Value) {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let response = app.clone().oneshot(request).await.unwrap();
    let status = response.status();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let body = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    documented::check(&method, &path, status, &body);
    (status, body)
}

/// `send` for a JSON call without a token.
pub(crate) async fn call(
    app: &Router,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Value) {
    send(app, request(method, path, body, None)).await
}

/// Creates a session and returns its id.
pub(crate) async fn new_session(app: &Router) -> String {
    let (status, body) = call(
        app,
        "POST",
        "/agent/api/runtime/sessions",
        Some(serde_json::json!({ "agentName": "assistant" })),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    body["sessionId"].as_str().unwrap().to_owned()
}
