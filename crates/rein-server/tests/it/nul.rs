//! A NUL character (U+0000) in any string a client sends (an id in the path, a query value, a
//! session id, a message, an approval note, a metadata value, a view context) is
//! `422 nul_character_not_allowed` on both backends, before anything is stored: PostgreSQL
//! cannot keep a NUL in `text` or `jsonb` and answered `500` with its own error text, SQLite
//! kept it. The text `\u0000` (an escaped backslash) is not a NUL and passes.

use std::sync::{Arc, OnceLock};

use axum::{Router, http::StatusCode};
use rein_postgres::{PgDatabase, test_cluster::TestCluster};
use rein_runtime::{Runtime, RuntimeParts, StaticModels};
use rein_server::ServerConfig;
use rein_testkit::{Step, reply};
use serde_json::{Value, json};

use crate::{
    call,
    scripted::{ByPrompt, app, capabilities},
};

const RT: &str = "/agent/api/runtime";

/// `mail` calls `send_email` (which waits for an approval), then answers.
fn model() -> ByPrompt {
    let steps: Vec<Step> = vec![
        reply::call("call_m", "send_email", json!({ "to": "a@example.com" })).into(),
        reply::text("Done.").into(),
    ];
    ByPrompt::new([("mail*", steps)])
}

/// This process's PostgreSQL (`REIN_TEST_DATABASE_URL`, or one it starts).
fn cluster() -> &'static TestCluster {
    static CLUSTER: OnceLock<TestCluster> = OnceLock::new();
    CLUSTER.get_or_init(|| TestCluster::start().expect("a PostgreSQL for the tests"))
}

/// The router over a runtime on a fresh PostgreSQL schema.
fn postgres_app() -> (Router, Runtime) {
    let clock = Arc::new(rein_store::SystemClock);
    let database = PgDatabase::connect(&cluster().fresh_config(clock)).unwrap();
    let models = StaticModels::new().with("scripted", Arc::new(model()));
    let parts = RuntimeParts::new(
        Arc::new(database.session_store()),
        Arc::new(database.transcript_store()),
        Arc::new(models),
    )
    .capabilities(capabilities());
    let runtime = Runtime::new(parts).unwrap();
    (rein_server::router(&ServerConfig::default(), runtime.clone()), runtime)
}

/// `answer` is the refusal of a NUL found `in_` (`path`, `query`, `body`), at `pointer` in a
/// body, saying nothing of a database.
fn refused(
    backend: &str,
    what: &str,
    (status, answer): (StatusCode, Value),
    in_: &str,
    pointer: Option<&str>,
) {
    assert_eq!(
        (status, answer["error"]["code"].as_str()),
        (StatusCode::UNPROCESSABLE_ENTITY, Some("nul_character_not_allowed")),
        "{backend}, {what}: {answer}"
    );
    let details = &answer["error"]["details"];
    assert_eq!(details["in"], in_, "{backend}, {what}: {answer}");
    assert_eq!(details["pointer"].as_str(), pointer, "{backend}, {what}: {answer}");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    for database_words in ["SQLSTATE", "0x00", "byte sequence", "database"] {
        assert!(!message.contains(database_words), "{backend}, {what}: {message}");
    }
}

async fn post(app: &Router, path: &str, body: Value) -> (StatusCode, Value) {
    call(app, "POST", path, Some(body)).await
}

/// The cases, on one backend's router.
async fn a_nul_anywhere_is_refused(backend: &str, app: &Router) {
    let created = post(
        app,
        &format!("{RT}/sessions"),
        json!({ "agentName": "assistant", "sessionId": "s1" }),
    )
    .await;
    assert_eq!(created.0, StatusCode::CREATED, "{backend}: {}", created.1);

    let id = post(
        app,
        &format!("{RT}/sessions"),
        json!({ "agentName": "assistant", "sessionId": "s\u{0}2" }),
    )
    .await;
    refused(backend, "a session id", id, "body", Some("/sessionId"));
    let path = call(app, "GET", &format!("{RT}/sessions/s1%00"), None).await;
    refused(backend, "an id in the path", path, "path", None);
    let query = call(app, "GET", &format!("{RT}/sessions?cursor=a%00"), None).await;
    refused(backend, "a query value", query, "query", None);
    let message =
        post(app, &format!("{RT}/sessions/s1/messages"), json!({ "content": "hi\u{0}" })).await;
    refused(backend, "a message", message, "body", Some("/content"));
    let metadata = json!({ "agentName": "assistant", "metadata": { "note": ["ok", "x\u{0}y"] } });
    let metadata = post(app, &format!("{RT}/sessions"), metadata).await;
    refused(backend, "a metadata value", metadata, "body", Some("/metadata/note/1"));
    let view = json!({ "route": "/", "pageType": "home", "title": "\u{0}" });
    let view = call(app, "PUT", &format!("{RT}/view-contexts/v1"), Some(view)).await;
    refused(backend, "a view context", view, "body", Some("/title"));

    // A real approval: the note with a NUL is refused and nothing is decided.
    let (status, run) =
        post(app, &format!("{RT}/sessions/s1/messages"), json!({ "content": "mail" })).await;
    assert_eq!(status, StatusCode::OK, "{backend}: {run}");
    let approval = run["toolResults"][0]["payload"]["approval"]["approvalId"]
        .as_str()
        .expect("an approval id")
        .to_owned();
    let note =
        post(app, &format!("{RT}/approvals/{approval}/approve"), json!({ "note": "ok\u{0}" }))
            .await;
    refused(backend, "an approval note", note, "body", Some("/note"));
    let (status, pending) = call(app, "GET", &format!("{RT}/approvals/{approval}"), None).await;
    assert_eq!(
        (status, pending["status"].as_str()),
        (StatusCode::OK, Some("pending")),
        "{backend}: {pending}"
    );
    let (status, approved) =
        post(app, &format!("{RT}/approvals/{approval}/approve"), json!({ "note": "ok" })).await;
    assert_eq!(status, StatusCode::OK, "{backend}: {approved}");

    // The text `\u0000` is six characters, not a NUL.
    let literal = json!({ "agentName": "assistant", "metadata": { "note": "\\u0000" } });
    let (status, session) = post(app, &format!("{RT}/sessions"), literal).await;
    assert_eq!(status, StatusCode::CREATED, "{backend}: {session}");
    assert_eq!(session["metadata"]["note"], "\\u0000", "{backend}");

    // Nothing refused was stored.
    let (_, sessions) = call(app, "GET", &format!("{RT}/sessions"), None).await;
    let ids: Vec<&str> = sessions["sessions"]
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|session| session["sessionId"].as_str())
        .collect();
    assert_eq!(ids.len(), 2, "{backend}: {sessions}");
    assert!(!ids.iter().any(|id| id.contains('\0')), "{backend}: {sessions}");
}

#[tokio::test]
async fn a_nul_in_any_stored_string_is_422_on_sqlite() {
    let (app, _runtime, _dir) = app(&ServerConfig::default(), model());
    a_nul_anywhere_is_refused("sqlite", &app).await;
}

#[tokio::test]
async fn a_nul_in_any_stored_string_is_422_on_postgres() {
    let (app, _runtime) = postgres_app();
    a_nul_anywhere_is_refused("postgres", &app).await;
}
