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

/// A tool that asks the person for a name during its call, and greets whoever answers (the
/// browser checks use it too).
pub(crate) struct AskName {
    spec: ToolSpec,
    runtime: Arc<OnceLock<WeakRuntime>>,
    timeout: Duration,
}

impl AskName {
    /// `ask_name`, whose runtime is set in `runtime` once it is built.
    pub(crate) fn capability(runtime: Arc<OnceLock<WeakRuntime>>, timeout: Duration) -> Capability {
        let spec = ToolSpec::without_arguments("ask_name", "Greets the person.").read_only(true);
        Capability::new(Arc::new(AskName { spec, runtime, timeout }))
    }
}

#[async_trait]
impl Tool for AskName {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(
        &self,
        _arguments: JsonObject,
        context: ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        let runtime = self.runtime.get().and_then(WeakRuntime::upgrade).expect("the runtime");
        let schema = json!({
            "type": "object",
            "properties": {
                "name": { "type": "string", "title": "Your name" },
                "age": { "type": "integer" }
            },
            "required": ["name"]
        });
        let question = Elicitation::new(
            "greeter",
            "Who are you?",
            schema.as_object().cloned().unwrap_or_default(),
        )
        .timeout(self.timeout);
        let session = context.session_id.as_deref().expect("a session");
        Ok(match runtime.elicit(session, question).await {
            ElicitationReply::Accept(content) => {
                ToolOutput::text(format!("Hello, {}!", content["name"].as_str().unwrap_or("?")))
            }
            ElicitationReply::Decline => ToolOutput::text("declined"),
            _ => ToolOutput::text("cancelled"),
        })
    }
}

fn greeter_app(timeout: Duration) -> (axum::Router, Runtime, tempfile::TempDir) {
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
        crate::scripted::capabilities().with(AskName::capability(cell.clone(), timeout));
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
    assert_eq!(run["finalMessage"], "Greeted.");
    assert_eq!(run["toolResults"][0]["payload"], "Hello, Ada Lovelace!", "{run}");

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
    assert_eq!(run["toolResults"][0]["payload"], "cancelled", "{run}");

    let (app, _runtime, _dir) = greeter_app(Duration::from_secs(60));
    let turn = start_turn(&app).await;
    let asked = next_event(&app, "s1", "elicitation_requested").await;
    let id = asked["elicitation_id"].as_str().unwrap();
    let path = format!("{RT}/sessions/s1/elicitations/{id}");
    let (status, _) = call(&app, "POST", &path, Some(json!({ "action": "decline" }))).await;
    assert_eq!(status, StatusCode::OK);
    let (_, run) = turn.await.unwrap();
    assert_eq!(run["toolResults"][0]["payload"], "declined", "{run}");
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
