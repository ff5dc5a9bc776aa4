//! The OpenAPI document: valid shape, every route of the router described, and its component
//! schemas exactly what the wire types generate. (That every answer fits it: `documented.rs`.)

use axum::http::StatusCode;
use rein_server::{
    AgentList, Approval, ApprovalDecision, ApprovalList, ApprovalRuleList, AuditLog, CreateSession,
    DeletedSession, ErrorBody, Interrupted, McpServerList, ModelList, RevokedApprovalRule,
    RunResponse, SendMessage, ServerConfig, Session, SessionList, SessionSettings, Task, TaskList,
    ViewContext, ViewContextInput,
};
use schemars::generate::SchemaSettings;

use crate::{
    call,
    scripted::{ByPrompt, app},
};

/// Every (method, path) the router serves under /agent/api.
const ROUTES: &[(&str, &str)] = &[
    ("get", "/agent/api/health"),
    ("get", "/agent/api/runtime/agents"),
    ("get", "/agent/api/runtime/models"),
    ("get", "/agent/api/runtime/mcp/servers"),
    ("post", "/agent/api/runtime/mcp/servers/{name}/connect"),
    ("get", "/agent/api/runtime/mcp/oauth/callback"),
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
    ("get", "/agent/api/runtime/sessions/{id}/audit"),
    ("get", "/agent/api/runtime/sessions/{id}/events"),
    ("get", "/agent/api/runtime/tasks/{id}"),
    ("post", "/agent/api/runtime/tasks/{id}/cancel"),
    ("get", "/agent/api/runtime/approvals/{id}"),
    ("post", "/agent/api/runtime/approvals/{id}/approve"),
    ("post", "/agent/api/runtime/approvals/{id}/deny"),
    ("get", "/agent/api/runtime/approval-rules"),
    ("delete", "/agent/api/runtime/approval-rules/{id}"),
    ("put", "/agent/api/runtime/view-contexts/{id}"),
    ("get", "/agent/api/runtime/view-contexts/{id}"),
    ("get", "/agent/api/runtime/sessions/{id}/export"),
    ("put", "/agent/api/runtime/sessions/{id}/client-tools"),
    ("get", "/agent/api/runtime/sessions/{id}/client-tools"),
    ("post", "/agent/api/runtime/sessions/{id}/client-tools/{call_id}/claim"),
    ("post", "/agent/api/runtime/sessions/{id}/client-tools/{call_id}/result"),
    ("get", "/agent/api/runtime/sessions/{id}/elicitations"),
    ("post", "/agent/api/runtime/sessions/{id}/elicitations/{elicitation_id}"),
    ("post", "/agent/api/runtime/transcriptions"),
];

#[tokio::test]
async fn document_describes_every_route() {
    let (app, _runtime, _dir) = app(&ServerConfig::default(), ByPrompt::new([]));
    let (status, doc) = call(&app, "GET", "/agent/api/openapi.json", None).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(doc, rein_server::openapi_document(), "the served document is the generated one");
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
        let concrete = path.replace("{id}", "x").replace("{call_id}", "c");
        let (status, body) = call(&app, &method.to_uppercase(), &concrete, None).await;
        if *method == "get" && path.ends_with("/events") {
            continue;
        }
        assert_ne!(body["error"]["code"], "not_found", "{method} {path}");
        if path.ends_with("/transcriptions") {
            // This router has no transcriber: voice input is not configured (a 503 by design).
            assert_eq!(body["error"]["code"], "hosted_transcription_not_configured");
            continue;
        }
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
    for name in [
        "CreateSession",
        "SessionSettings",
        "SendMessage",
        "ApprovalDecision",
        "ViewContextInput",
        "ClientToolSetInput",
        "ClientToolInput",
        "ClientToolResultInput",
    ] {
        assert_eq!(schemas[name]["additionalProperties"], false, "{name}");
    }
}

#[test]
fn component_schemas_are_what_the_types_generate() {
    // JSON Schema 2020-12 (OpenAPI 3.1's dialect) with every `$ref` into the components;
    // requests as serde reads them, responses as serde writes them.
    let settings = || {
        SchemaSettings::draft2020_12().with(|settings| {
            settings.definitions_path = "/components/schemas".into();
            settings.meta_schema = None;
        })
    };
    let mut requests = settings().for_deserialize().into_generator();
    requests.subschema_for::<CreateSession>();
    requests.subschema_for::<SessionSettings>();
    requests.subschema_for::<SendMessage>();
    requests.subschema_for::<ApprovalDecision>();
    requests.subschema_for::<ViewContextInput>();
    requests.subschema_for::<rein_server::ClientToolSetInput>();
    requests.subschema_for::<rein_server::ClientToolResultInput>();
    requests.subschema_for::<rein_server::ElicitationAnswerInput>();
    let mut responses = settings().for_serialize().into_generator();
    responses.subschema_for::<ErrorBody>();
    responses.subschema_for::<AgentList>();
    responses.subschema_for::<ModelList>();
    responses.subschema_for::<McpServerList>();
    responses.subschema_for::<rein_server::McpAuthorization>();
    responses.subschema_for::<Session>();
    responses.subschema_for::<SessionList>();
    responses.subschema_for::<DeletedSession>();
    responses.subschema_for::<RunResponse>();
    responses.subschema_for::<Interrupted>();
    responses.subschema_for::<Task>();
    responses.subschema_for::<TaskList>();
    responses.subschema_for::<Approval>();
    responses.subschema_for::<ApprovalList>();
    responses.subschema_for::<ApprovalRuleList>();
    responses.subschema_for::<RevokedApprovalRule>();
    responses.subschema_for::<AuditLog>();
    responses.subschema_for::<ViewContext>();
    responses.subschema_for::<rein_server::ClientToolSet>();
    responses.subschema_for::<rein_server::ClientToolAnswered>();
    responses.subschema_for::<rein_server::ClientToolClaimed>();
    responses.subschema_for::<rein_server::TranscriptionResult>();
    responses.subschema_for::<rein_server::ElicitationList>();
    responses.subschema_for::<rein_server::ElicitationAnswered>();
    let mut expected = requests.take_definitions(true);
    expected.extend(responses.take_definitions(true));

    let doc = rein_server::openapi_document();
    let served = doc["components"]["schemas"].as_object().unwrap();
    let mut names: Vec<&String> = served.keys().collect();
    let mut generated: Vec<&String> = expected.keys().collect();
    names.sort();
    generated.sort();
    assert_eq!(names, generated, "the document's schemas are exactly the wire types'");
    for (name, schema) in &expected {
        assert_eq!(&served[name], schema, "`{name}` is not what its type generates");
    }
    // Responses describe what serde always writes: a field that is always there is required.
    assert_eq!(served["Session"]["required"].as_array().unwrap().len(), 16);
    assert_eq!(
        served["Error"]["properties"]["error"]["$ref"], "#/components/schemas/ErrorDetail",
        "errors are described by their type too"
    );
}
