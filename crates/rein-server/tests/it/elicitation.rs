//! Questions of MCP servers (elicitation) through the router: a tool that asks the person
//! during its call (as rein's MCP bridge does for a server's `elicitation/create`) puts an
//! `elicitation_requested` on the session's stream; `GET .../elicitations` lists it, `POST
//! .../elicitations/{id}` answers it (an answer that does not fit the schema is refused and the
//! question still waits); the tool gets the content, the events carry only the action; a
//! question nobody answers is cancelled at its timeout.

use std::{
    sync::{Arc, OnceLock},
    time::Duration,
};

use async_trait::async_trait;
use axum::http::StatusCode;
use futures::StreamExt as _;
use rein_protocol::{JsonObject, Tool, ToolContext, ToolError, ToolOutput, ToolSpec};
use rein_runtime::{
    Capability, Elicitation, ElicitationReply, Runtime, RuntimeConfig, RuntimeParts, StaticModels,
    WeakRuntime,
};
use rein_server::ServerConfig;
use rein_store::{JsonlTranscriptStore, SqliteConfig, SqliteSessionStore, TranscriptConfig};
use rein_testkit::{Step, reply};
use serde_json::{Value, json};
use tower::ServiceExt as _;

use crate::{call, request, scripted::ByPrompt, send};

const RT: &str = "/agent/api/runtime";

/// A tool that puts one question to the person during its call, and says what it got: a
/// greeting when the answer has a `name`, else the answer's content.
pub(crate) struct Ask {
    spec: ToolSpec,
    runtime: Arc<OnceLock<WeakRuntime>>,
    question: Elicitation,
}

impl Ask {
    /// `ask_name` asking `question`, whose runtime is set in `runtime` once it is built.
    fn capability(runtime: Arc<OnceLock<WeakRuntime>>, question: Elicitation) -> Capability {
        let spec = ToolSpec::without_arguments("ask_name", "Greets the person.").read_only(true);
        Capability::new(Arc::new(Ask { spec, runtime, question }))
    }
}

/// The greeter's question: a required `name` and an optional integer `age` (the browser checks
/// use it too).
pub(crate) struct AskName;

impl AskName {
    /// `ask_name` asking for a name, whose runtime is set in `runtime` once it is built.
    pub(crate) fn capability(runtime: Arc<OnceLock<WeakRuntime>>, timeout: Duration) -> Capability {
        Ask::capability(runtime, name_question(timeout))
    }
}

fn name_question(timeout: Duration) -> Elicitation {
    let schema = json!({
        "type": "object",
        "properties": {
            "name": { "type": "string", "title": "Your name" },
            "age": { "type": "integer" }
        },
        "required": ["name"]
    });
    Elicitation::new("greeter", "Who are you?", schema.as_object().cloned().unwrap_or_default())
        .timeout(timeout)
}

#[async_trait]
impl Tool for Ask {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(
        &self,
        _arguments: JsonObject,
        context: ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let runtime = self.runtime.get().and_then(WeakRuntime::upgrade).expect("the runtime");
        let session = context.session_id.as_deref().expect("a session");
        Ok(match runtime.elicit(session, self.question.clone()).await {
            ElicitationReply::Accept(content) => {
                match content.get("name").and_then(Value::as_str) {
                    Some(name) => ToolOutput::text(format!("Hello, {name}!")),
                    None => ToolOutput::text(format!("accepted {}", Value::Object(content))),
                }
            }
            ElicitationReply::Decline => ToolOutput::text("declined"),
            _ => ToolOutput::text("cancelled"),
        })
    }
}

fn greeter_app(timeout: Duration) -> (axum::Router, Runtime, tempfile::TempDir) {
    asking_app(name_question(timeout))
}

/// The router over a runtime whose scripted model calls `ask_name` (asking `question`) on
/// "greet me", then answers "Greeted.".
fn asking_app(question: Elicitation) -> (axum::Router, Runtime, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let script: (&str, Vec<Step>) = (
        "greet me",
        vec![reply::call("call_ask", "ask_name", json!({})).into(), reply::text("Greeted.").into()],
    );
    let store =
        SqliteSessionStore::open(&SqliteConfig::at(dir.path().join("sessions.sqlite3"))).unwrap();
    let transcripts =
        JsonlTranscriptStore::open(&TranscriptConfig::at(dir.path().join("transcripts"))).unwrap();
    let models = StaticModels::new().with("scripted", Arc::new(ByPrompt::new([script])));
    let cell = Arc::new(OnceLock::new());
    let capabilities =
        crate::scripted::capabilities().with(Ask::capability(cell.clone(), question));
    let parts = RuntimeParts::new(Arc::new(store), Arc::new(transcripts), Arc::new(models))
        .capabilities(capabilities)
        .config(RuntimeConfig::default());
    let runtime = Runtime::new(parts).unwrap();
    let _ = cell.set(runtime.downgrade());
    (rein_server::router(&ServerConfig::default(), runtime.clone()), runtime, dir)
}

/// Reads the session's event stream until its first event of `kind`; returns its data.
async fn next_event(app: &axum::Router, id: &str, kind: &str) -> Value {
    let response =
        app.clone().oneshot(request("GET", &format!("{RT}/sessions/{id}/events"), None, None));
    let mut body = response.await.unwrap().into_body().into_data_stream();
    let mut text = String::new();
    let marker = format!("event: {kind}\n");
    loop {
        if let Some(frame) = text.split("\n\n").find(|f| f.contains(&marker)) {
            let data = frame.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
            return serde_json::from_str(data).unwrap();
        }
        let chunk = tokio::time::timeout(Duration::from_secs(30), body.next())
            .await
            .unwrap_or_else(|_| panic!("a {kind} within 30 s"))
            .unwrap()
            .unwrap();
        text.push_str(std::str::from_utf8(&chunk).unwrap());
    }
}

async fn start_turn(app: &axum::Router) -> tokio::task::JoinHandle<(StatusCode, Value)> {
    let body = json!({ "agentName": "assistant", "sessionId": "s1" });
    let (status, body) =
        send(app, request("POST", &format!("{RT}/sessions"), Some(body), None)).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let app = app.clone();
    tokio::spawn(async move {
        call(
            &app,
            "POST",
            &format!("{RT}/sessions/s1/messages"),
            Some(json!({"content": "greet me"})),
        )
        .await
    })
}

#[tokio::test]
async fn a_question_is_streamed_answered_through_the_router_and_its_content_reaches_the_tool() {
    let (app, _runtime, _dir) = greeter_app(Duration::from_secs(60));
    let turn = start_turn(&app).await;
    let asked = next_event(&app, "s1", "elicitation_requested").await;
    assert_eq!(asked["server"], "greeter");
    assert_eq!(asked["message"], "Who are you?");
    assert_eq!(asked["requested_schema"]["required"], json!(["name"]));
    let id = asked["elicitation_id"].as_str().unwrap().to_owned();
    let (status, pending) =
        call(&app, "GET", &format!("{RT}/sessions/s1/elicitations"), None).await;
    assert_eq!((status, &pending["pending"]), (StatusCode::OK, &json!([id])));

    let answer_path = format!("{RT}/sessions/s1/elicitations/{id}");
    // An answer without the required field, or of the wrong type, is refused; still waiting.
    for content in [json!({"age": 36}), json!({"name": "Ada", "age": "old"})] {
        let body = json!({ "action": "accept", "content": content });
        let (status, refused) = call(&app, "POST", &answer_path, Some(body)).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
        assert_eq!(refused["error"]["code"], "validation_error");
    }
    let (status, bad) = call(&app, "POST", &answer_path, Some(json!({"action": "maybe"}))).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{bad}");

    let body = json!({ "action": "accept", "content": { "name": "Ada Lovelace", "age": 36 } });
    let (status, answered) = call(&app, "POST", &answer_path, Some(body)).await;
    assert_eq!(status, StatusCode::OK, "{answered}");
    assert_eq!(answered, json!({ "sessionId": "s1", "elicitationId": id, "action": "accept" }));
    let (status, run) = turn.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{run}");
    assert_eq!(run["finalMessage"]["content"], "Greeted.");
    assert_eq!(run["toolResults"][0]["payload"]["output"], "Hello, Ada Lovelace!", "{run}");

    // Answered once; the stream says how it ended, and the content is in no event.
    let (status, again) =
        call(&app, "POST", &answer_path, Some(json!({ "action": "decline" }))).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{again}");
    assert_eq!(again["error"]["code"], "hosted_elicitation_not_found");
    let ended = next_event(&app, "s1", "elicitation_answered").await;
    assert_eq!(
        ended,
        json!({ "type": "elicitation_answered", "elicitation_id": id, "action": "accept" })
    );
    let (_, pending) = call(&app, "GET", &format!("{RT}/sessions/s1/elicitations"), None).await;
    assert_eq!(pending["pending"], json!([]));
    let (_, session) = call(&app, "GET", &format!("{RT}/sessions/s1"), None).await;
    let transcript = session.to_string();
    assert!(!transcript.contains("\"age\":36"), "the answer's content stays out of the session");
}

#[tokio::test]
async fn a_declined_question_and_one_nobody_answers_in_time() {
    let (app, _runtime, _dir) = greeter_app(Duration::from_millis(400));
    let turn = start_turn(&app).await;
    let asked = next_event(&app, "s1", "elicitation_requested").await;
    let ended = next_event(&app, "s1", "elicitation_answered").await;
    assert_eq!(
        (ended["elicitation_id"].clone(), ended["action"].clone()),
        (asked["elicitation_id"].clone(), json!("cancel"))
    );
    let (status, run) = turn.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{run}");
    assert_eq!(run["toolResults"][0]["payload"]["output"], "cancelled", "{run}");

    let (app, _runtime, _dir) = greeter_app(Duration::from_secs(60));
    let turn = start_turn(&app).await;
    let asked = next_event(&app, "s1", "elicitation_requested").await;
    let id = asked["elicitation_id"].as_str().unwrap();
    let path = format!("{RT}/sessions/s1/elicitations/{id}");
    let (status, _) = call(&app, "POST", &path, Some(json!({ "action": "decline" }))).await;
    assert_eq!(status, StatusCode::OK);
    let (_, run) = turn.await.unwrap();
    assert_eq!(run["toolResults"][0]["payload"]["output"], "declined", "{run}");
    // Another session's question is not found from here.
    let (status, _) = call(
        &app,
        "POST",
        &format!("{RT}/sessions/nope/elicitations/{id}"),
        Some(json!({"action": "cancel"})),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}

/// Every answer of a session's event stream up to its first `kind`, as the stream's text.
async fn stream_until(app: &axum::Router, id: &str, kind: &str) -> String {
    let response =
        app.clone().oneshot(request("GET", &format!("{RT}/sessions/{id}/events"), None, None));
    let mut body = response.await.unwrap().into_body().into_data_stream();
    let mut text = String::new();
    while !text.contains(&format!("event: {kind}\n")) {
        let chunk = tokio::time::timeout(Duration::from_secs(30), body.next())
            .await
            .unwrap_or_else(|_| panic!("a {kind} within 30 s"))
            .unwrap()
            .unwrap();
        text.push_str(std::str::from_utf8(&chunk).unwrap());
    }
    text
}

/// A form using every keyword MCP's requested schema allows (2025-11-25 `schema.ts`).
fn every_keyword() -> Elicitation {
    let schema = json!({
        "type": "object",
        "properties": {
            "name": { "type": "string", "minLength": 2, "maxLength": 10 },
            "email": { "type": "string", "format": "email" },
            "site": { "type": "string", "format": "uri" },
            "born": { "type": "string", "format": "date" },
            "meet": { "type": "string", "format": "date-time" },
            "age": { "type": "integer", "minimum": 18, "maximum": 130 },
            "score": { "type": "number", "minimum": 0, "maximum": 1 },
            "size": { "type": "string", "enum": ["s", "m"], "enumNames": ["Small", "Medium"] },
            "color": { "type": "string", "oneOf": [
                { "const": "#f00", "title": "Red" }, { "const": "#00f", "title": "Blue" }
            ] },
            "tags": { "type": "array", "minItems": 1, "maxItems": 2,
                      "items": { "type": "string", "enum": ["a", "b", "c"] } },
            "pets": { "type": "array", "items": { "anyOf": [
                { "const": "cat", "title": "Cat" }, { "const": "dog", "title": "Dog" }
            ] } },
            "ok": { "type": "boolean", "default": true }
        },
        "required": ["name", "email"]
    });
    Elicitation::new("form", "Tell me everything.", schema.as_object().cloned().unwrap_or_default())
}

#[tokio::test]
async fn an_answer_is_checked_against_every_rule_and_a_misfit_names_its_field_and_rule() {
    let (app, _runtime, _dir) = asking_app(every_keyword());
    let turn = start_turn(&app).await;
    let asked = next_event(&app, "s1", "elicitation_requested").await;
    let path =
        format!("{RT}/sessions/s1/elicitations/{}", asked["elicitation_id"].as_str().unwrap());
    let fits = json!({
        "name": "Ada", "email": "ada@example.org", "site": "https://ada.example/notes?x=1",
        "born": "1815-12-10", "meet": "2025-11-25T09:30:00+01:00", "age": 36, "score": 0.5,
        "size": "m", "color": "#00f", "tags": ["a", "c"], "pets": ["cat"], "ok": false
    });
    let misfits = [
        ("name", json!("A"), "minLength"),
        ("name", json!("Ada Lovelace King"), "maxLength"),
        ("email", json!("ada"), "format"),
        ("email", json!("ada@exa mple.org"), "format"),
        ("site", json!("not a uri"), "format"),
        ("born", json!("1815-02-30"), "format"),
        ("meet", json!("2025-11-25 09:30"), "format"),
        ("age", json!(17), "minimum"),
        ("age", json!(131), "maximum"),
        ("age", json!(36.5), "type"),
        ("score", json!(1.5), "maximum"),
        ("score", json!(-0.1), "minimum"),
        ("size", json!("Small"), "enum"),
        ("color", json!("Red"), "oneOf"),
        ("tags", json!([]), "minItems"),
        ("tags", json!(["a", "b", "c"]), "maxItems"),
        ("tags", json!(["z"]), "items"),
        ("pets", json!(["cow"]), "items"),
        ("pets", json!("cat"), "type"),
        ("ok", json!("yes"), "type"),
        ("extra", json!(1), "additionalProperties"),
    ];
    for (field, value, rule) in misfits {
        let mut content = fits.clone();
        content[field] = value.clone();
        let body = json!({ "action": "accept", "content": content });
        let (status, refused) = call(&app, "POST", &path, Some(body)).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{field} = {value}: {refused}");
        assert_eq!(refused["error"]["code"], "validation_error", "{refused}");
        assert_eq!(
            refused["error"]["details"],
            json!({ "field": field, "rule": rule }),
            "{field} = {value}: {refused}"
        );
        let message = refused["error"]["message"].as_str().unwrap();
        assert!(message.contains(&format!("`{field}`")), "{message}");
    }
    let mut missing = fits.clone();
    missing.as_object_mut().unwrap().remove("email");
    let body = json!({ "action": "accept", "content": missing });
    let (status, refused) = call(&app, "POST", &path, Some(body)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{refused}");
    assert_eq!(refused["error"]["details"], json!({ "field": "email", "rule": "required" }));

    // Still waiting after every misfit: the answer that fits is taken, as it was sent.
    let body = json!({ "action": "accept", "content": fits });
    let (status, answered) = call(&app, "POST", &path, Some(body)).await;
    assert_eq!(status, StatusCode::OK, "{answered}");
    let (status, run) = turn.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{run}");
    assert_eq!(run["toolResults"][0]["payload"]["output"], "Hello, Ada!", "{run}");
}

#[tokio::test]
async fn a_link_that_is_not_http_s_never_reaches_the_stream_and_an_https_one_does() {
    // Shown by mistake, a question would wait its 5 s and be cancelled, not declined.
    let page = |url: &str| {
        Elicitation::new("pay", "Open the page", JsonObject::new())
            .url(url)
            .timeout(Duration::from_secs(5))
    };
    for url in ["javascript:alert(document.cookie)", "data:text/html,<script>alert(1)</script>"] {
        let (app, _runtime, _dir) = asking_app(page(url));
        let turn = start_turn(&app).await;
        let (status, run) = turn.await.unwrap();
        assert_eq!(status, StatusCode::OK, "{run}");
        assert_eq!(run["toolResults"][0]["payload"]["output"], "declined", "{url}: {run}");
        let stream = stream_until(&app, "s1", "turn_end").await;
        assert!(!stream.contains("elicitation_requested"), "{url} was shown: {stream}");
        assert!(!stream.contains(url) && !stream.contains("javascript:"), "{stream}");
    }

    let url = "https://pay.example/checkout?order=7";
    let (app, _runtime, _dir) = asking_app(page(url));
    let turn = start_turn(&app).await;
    let asked = next_event(&app, "s1", "elicitation_requested").await;
    assert_eq!(asked["url"], url, "{asked}");
    let path =
        format!("{RT}/sessions/s1/elicitations/{}", asked["elicitation_id"].as_str().unwrap());
    let body = json!({ "action": "accept", "content": {} });
    let (status, answered) = call(&app, "POST", &path, Some(body)).await;
    assert_eq!(status, StatusCode::OK, "{answered}");
    let (_, run) = turn.await.unwrap();
    assert_eq!(run["toolResults"][0]["payload"]["output"], "accepted {}", "{run}");
}
