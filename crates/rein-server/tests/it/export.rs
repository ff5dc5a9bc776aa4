//! `GET /sessions/{id}/export`: rein-runtime's one export through the router, as Markdown and
//! JSON, credentials scrubbed, a download with a file name, another principal's session not
//! found and a bad format refused.

use axum::http::{StatusCode, header};
use http_body_util::BodyExt as _;
use rein_server::ServerConfig;
use serde_json::{Value, json};
use tower::ServiceExt as _;

use crate::{
    call, request,
    scripted::{ByPrompt, app},
    send,
};

const RT: &str = "/agent/api/runtime";
const SECRET_TEXT: &str =
    "echo my key is sk-live1234567890abcdefXYZ and Bearer abcdefghijklmnop1234";

#[tokio::test]
async fn a_session_exports_as_markdown_and_json_with_credentials_scrubbed() {
    let (app, _runtime, _dir) = app(&ServerConfig::default(), ByPrompt::new([]));
    let id = crate::new_session(&app).await;
    let (status, run) = call(
        &app,
        "POST",
        &format!("{RT}/sessions/{id}/messages"),
        Some(json!({ "content": SECRET_TEXT })),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{run}");

    let response = app
        .clone()
        .oneshot(request("GET", &format!("{RT}/sessions/{id}/export?format=markdown"), None, None))
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let headers = response.headers().clone();
    assert!(headers[header::CONTENT_TYPE].to_str().unwrap().starts_with("text/markdown"));
    let disposition = headers[header::CONTENT_DISPOSITION].to_str().unwrap();
    assert!(
        disposition.starts_with("attachment;") && disposition.ends_with(".md\""),
        "{disposition}"
    );
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    let markdown = String::from_utf8(bytes.to_vec()).unwrap();
    assert!(markdown.starts_with("# "), "{markdown}");
    assert!(markdown.contains("## User\n\necho my key is [redacted]"), "{markdown}");
    assert!(markdown.contains("## Assistant"), "{markdown}");
    for secret in ["sk-live1234567890abcdefXYZ", "abcdefghijklmnop1234"] {
        assert!(!markdown.contains(secret), "{secret} leaked: {markdown}");
    }

    let (status, messages) =
        call(&app, "GET", &format!("{RT}/sessions/{id}/export?format=json"), None).await;
    assert_eq!(status, StatusCode::OK);
    let messages = messages.as_array().expect("an array of messages");
    assert_eq!(messages[0]["role"], "user");
    let text = Value::Array(messages.clone()).to_string();
    assert!(text.contains("[redacted]") && !text.contains("sk-live1234567890abcdefXYZ"), "{text}");
}

#[tokio::test]
async fn export_keeps_to_the_owner_and_the_two_formats() {
    let config = ServerConfig::default()
        .with_token("alice-token-0123456789", "alice")
        .with_token("bob-token-0123456789ab", "bob");
    let (app, _runtime, _dir) = app(&config, ByPrompt::new([]));
    let body = json!({ "agentName": "assistant", "sessionId": "s1" });
    let (status, _) = send(
        &app,
        request("POST", &format!("{RT}/sessions"), Some(body), Some("alice-token-0123456789")),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED);
    let path = format!("{RT}/sessions/s1/export?format=json");
    let (status, body) =
        send(&app, request("GET", &path, None, Some("bob-token-0123456789ab"))).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("hosted_session_not_found"))
    );
    let (status, body) =
        send(&app, request("GET", &path, None, Some("alice-token-0123456789"))).await;
    assert_eq!((status, body), (StatusCode::OK, json!([])));
    let bad = format!("{RT}/sessions/s1/export?format=pdf");
    let (status, body) =
        send(&app, request("GET", &bad, None, Some("alice-token-0123456789"))).await;
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("validation_error"))
    );
}
