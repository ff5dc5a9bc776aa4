//! TerraFin's clients against rein's routes: every answer a TerraFin widget or Python client
//! reads validates against the schemas of TerraFin's response models (`terrafin/`, fields and
//! types, written from TerraFin's public contract), and a replay of the widget's calls in the
//! order it makes them shows every message once.

use std::collections::HashSet;

use axum::http::StatusCode;
use rein_server::ServerConfig;
use rein_testkit::{Step, reply};
use serde_json::{Value, json};

use crate::{
    call, request,
    scripted::{ByPrompt, app},
};

const RT: &str = "/agent/api/runtime";

/// TerraFin's response models as JSON Schemas, under `$defs`.
const MODELS: &str = include_str!("terrafin/models.schema.json");

/// Where `answer` breaks TerraFin's model `name` (a `$defs` entry of [`MODELS`]).
fn misfits(name: &str, answer: &Value) -> Vec<String> {
    let models: Value = serde_json::from_str(MODELS).expect("the TerraFin schemas are JSON");
    let root = json!({ "$defs": models["$defs"], "$ref": format!("#/$defs/{name}") });
    let validator = jsonschema::draft202012::new(&root).expect("the TerraFin schemas compile");
    validator.iter_errors(answer).map(|e| format!("{} at {}", e, e.instance_path())).collect()
}

/// Fails unless `answer` fits TerraFin's model `name`.
pub(crate) fn check(name: &str, answer: &Value) {
    let errors = misfits(name, answer);
    assert!(errors.is_empty(), "{name} does not fit TerraFin's model: {errors:#?}\n{answer}");
}

#[test]
fn the_schemas_refuse_the_shapes_terrafins_clients_broke_on() {
    let session = json!({ "sessionId": "s", "agentName": "a" });
    let run = |final_message: Value| json!({ "sessionId": "s", "agentName": "a", "steps": 1, "finalMessage": final_message, "session": session });
    assert!(misfits("Run", &run(Value::Null)).is_empty());
    assert!(!misfits("Run", &run(json!("the answer as text"))).is_empty());
    let message = json!({ "role": "assistant", "content": "hi" });
    assert!(!misfits("Run", &run(message)).is_empty(), "a message without createdAt");
    let named = json!({ "sessionId": "s", "agentName": "a", "runtimeModel": "fast" });
    assert!(!misfits("Session", &named).is_empty(), "runtimeModel as a string");
}

/// The question the replay asks twice, and its answer.
const QUESTION: &str = "weather in Lisbon?";
const ANSWER: &str = "Sunny in Lisbon.";

fn scripts() -> Vec<(&'static str, Vec<Step>)> {
    let call = || reply::call("call_w", "weather", json!({ "city": "Lisbon" })).into();
    vec![
        (QUESTION, vec![call(), reply::text(ANSWER).into(), call(), reply::text(ANSWER).into()]),
        ("write the report", vec![reply::call("call_r", "report", json!({})).into()]),
        (
            "do it",
            vec![
                reply::calls(&[
                    ("send_email", json!({ "to": "a@example.com" })),
                    ("start_report_task", json!({})),
                ])
                .into(),
                reply::text("Asked for approval; the report runs.").into(),
            ],
        ),
    ]
}

/// The key TerraFin's widget merges and de-duplicates messages by.
fn widget_key(message: &Value) -> String {
    let text = |key: &str| message[key].as_str().unwrap_or("").to_owned();
    format!(
        "{}::{}::{}::{}::{}",
        text("createdAt"),
        text("role"),
        text("name"),
        text("toolCallId"),
        text("content")
    )
}

async fn send(app: &axum::Router, id: &str, content: &str) -> Value {
    let path = format!("{RT}/sessions/{id}/messages");
    let (status, run) = call(app, "POST", &path, Some(json!({ "content": content }))).await;
    assert_eq!(status, StatusCode::OK, "{run}");
    check("Run", &run);
    run
}

#[tokio::test]
async fn every_answer_fits_terrafins_models() {
    let (app, runtime, _dir) = app(&ServerConfig::default(), ByPrompt::new(scripts()));
    let dispatcher = runtime.start_dispatcher();
    let (_, catalog) = call(&app, "GET", &format!("{RT}/agents"), None).await;
    check("Catalog", &catalog);
    let tools = catalog["agents"][0]["tools"].as_array().cloned().unwrap_or_default();
    let task_tool = tools.iter().find(|t| t["name"] == "start_report_task");
    assert_eq!(task_tool.map(|t| &t["executionMode"]), Some(&json!("task")), "{catalog}");
    assert_eq!(task_tool.map(|t| &t["capabilityName"]), Some(&json!("report")));

    let view = json!({ "route": "/stock/AAPL", "pageType": "stock" });
    let (_, context) = call(&app, "PUT", &format!("{RT}/view-contexts/v1"), Some(view)).await;
    check("ViewContext", &context);
    let (_, context) = call(&app, "GET", &format!("{RT}/view-contexts/v1"), None).await;
    check("ViewContext", &context);

    let body = json!({ "agentName": "assistant", "sessionId": "s1" });
    let (status, session) = call(&app, "POST", &format!("{RT}/sessions"), Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{session}");
    check("Session", &session);
    assert_eq!(session["runtimeModel"]["modelRef"], "scripted", "{session}");

    let run = send(&app, "s1", "do it").await;
    let started =
        run["toolResults"].as_array().and_then(|r| r.iter().find(|r| r["task"].is_object()));
    let task_id = started.and_then(|r| r["task"]["taskId"].as_str()).unwrap_or_default().to_owned();
    assert!(task_id.starts_with("task:"), "the call names the task it started: {run}");
    assert_eq!(run["finalMessage"]["content"], "Asked for approval; the report runs.");

    let (_, list) = call(&app, "GET", &format!("{RT}/sessions"), None).await;
    check("SessionList", &list);
    let (_, tasks) = call(&app, "GET", &format!("{RT}/sessions/s1/tasks"), None).await;
    check("TaskList", &tasks);
    let (_, task) = call(&app, "GET", &format!("{RT}/tasks/{task_id}"), None).await;
    check("Task", &task);
    let (_, approvals) = call(&app, "GET", &format!("{RT}/sessions/s1/approvals"), None).await;
    check("ApprovalList", &approvals);
    let approval_id = approvals["approvals"][0]["approvalId"].as_str().unwrap_or_default();
    let (_, approval) = call(&app, "GET", &format!("{RT}/approvals/{approval_id}"), None).await;
    check("Approval", &approval);
    let path = format!("{RT}/approvals/{approval_id}/deny");
    let (_, denied) = call(&app, "POST", &path, Some(json!({ "note": "no" }))).await;
    check("Approval", &denied);
    let (_, cancelled) = call(&app, "POST", &format!("{RT}/tasks/{task_id}/cancel"), None).await;
    check("Task", &cancelled);
    let (_, session) = call(&app, "GET", &format!("{RT}/sessions/s1"), None).await;
    check("Session", &session);
    let actions: Vec<&str> = session["auditTrail"]
        .as_array()
        .map(|trail| trail.iter().filter_map(|e| e["action"].as_str()).collect())
        .unwrap_or_default();
    assert!(actions.contains(&"deny") && actions.contains(&"cancel_task"), "{session}");
    dispatcher.shutdown().await;
}

/// The widget's progress line names the running tool from `capabilityCalls`: a call is listed
/// from the moment the model makes it, while it runs.
#[tokio::test]
async fn a_poller_sees_the_running_tool() {
    let (app, _runtime, _dir) = app(&ServerConfig::default(), ByPrompt::new(scripts()));
    let body = json!({ "agentName": "assistant", "sessionId": "s1" });
    let (status, _) = call(&app, "POST", &format!("{RT}/sessions"), Some(body)).await;
    assert_eq!(status, StatusCode::CREATED);
    let sending = {
        let app = app.clone();
        tokio::spawn(async move { send(&app, "s1", "write the report").await })
    };
    let mut running = None;
    for _ in 0..2000 {
        let (_, session) = call(&app, "GET", &format!("{RT}/sessions/s1"), None).await;
        check("Session", &session);
        if let Some(calls) = session["capabilityCalls"].as_array().filter(|c| !c.is_empty()) {
            running = Some(calls[0].clone());
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let running = running.expect("the running call was never listed");
    assert_eq!(running["capabilityName"], "report", "{running}");
    assert_eq!(running["finished"], false, "{running}");
    assert!(running["calledAt"].as_str().is_some_and(|at| at.contains('T')), "{running}");
    let (status, _) = call(&app, "POST", &format!("{RT}/sessions/s1/interrupt"), None).await;
    assert_eq!(status, StatusCode::OK);
    let run = sending.await.expect("the send's task");
    assert_eq!(run["turnEnding"], "interrupted", "{run}");
    assert_eq!(run["session"]["capabilityCalls"][0]["finished"], true, "{run}");
}

#[tokio::test]
async fn a_model_is_named_by_its_name_or_by_terrafins_object() {
    let (app, _runtime, _dir) = app(&ServerConfig::default(), ByPrompt::new([]));
    let (_, catalog) = call(&app, "GET", &format!("{RT}/agents"), None).await;
    let model = catalog["agents"][0]["runtimeModel"].clone();
    assert_eq!(model["modelRef"], "scripted", "{catalog}");
    let body = json!({ "agentName": "assistant", "sessionId": "s1", "runtimeModel": model });
    let (status, session) = call(&app, "POST", &format!("{RT}/sessions"), Some(body)).await;
    assert_eq!((status, &session["runtimeModel"]), (StatusCode::CREATED, &model), "{session}");
    for choice in [json!("scripted"), model.clone()] {
        let path = format!("{RT}/sessions/s1");
        let (status, session) =
            call(&app, "PATCH", &path, Some(json!({ "runtimeModel": choice }))).await;
        assert_eq!((status, &session["runtimeModel"]), (StatusCode::OK, &model), "{session}");
    }
    let path = format!("{RT}/sessions/s1");
    let unknown = json!({ "runtimeModel": { "modelRef": "nope", "providerId": "x" } });
    let (status, body) = call(&app, "PATCH", &path, Some(unknown)).await;
    assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{body}");
}

/// The widget's calls in its order: catalog, view context, create, the baseline read, a send
/// while it polls the session, the same question again, history, tasks, approvals, delete.
#[tokio::test]
async fn the_widgets_calls_show_every_message_once() {
    let (app, _runtime, _dir) = app(&ServerConfig::default(), ByPrompt::new(scripts()));
    let (_, catalog) = call(&app, "GET", &format!("{RT}/agents"), None).await;
    check("Catalog", &catalog);
    let view = json!({ "route": "/stock/AAPL", "pageType": "stock", "title": "Apple" });
    let (status, _) = call(&app, "PUT", &format!("{RT}/view-contexts/vc-1"), Some(view)).await;
    assert_eq!(status, StatusCode::OK);
    let body = json!({ "agentName": "assistant", "metadata": { "viewContextId": "vc-1" } });
    let (status, created) = call(&app, "POST", &format!("{RT}/sessions"), Some(body)).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    let id = created["sessionId"].as_str().unwrap_or_default().to_owned();
    let session_path = format!("{RT}/sessions/{id}");
    let (_, baseline) = call(&app, "GET", &session_path, None).await;
    check("Session", &baseline);

    // The first send, with the session polled until it answers (each read fits the model).
    let sending = {
        let (app, id) = (app.clone(), id.clone());
        tokio::spawn(async move { send(&app, &id, QUESTION).await })
    };
    while !sending.is_finished() {
        let (status, polled) = call(&app, "GET", &session_path, None).await;
        assert_eq!(status, StatusCode::OK, "{polled}");
        check("Session", &polled);
        tokio::task::yield_now().await;
    }
    let first = sending.await.expect("the send's task");
    let roles: Vec<&str> = first["messagesAdded"]
        .as_array()
        .map(|m| m.iter().filter_map(|m| m["role"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(roles, ["user", "tool", "assistant"], "no empty assistant message: {first}");
    assert_eq!(first["messagesAdded"][1]["name"], "weather");
    assert_eq!(first["messagesAdded"][1]["toolCallId"], "call_w");
    assert_eq!(first["finalMessage"]["content"], ANSWER);
    let second = send(&app, &id, QUESTION).await;
    assert_eq!(second["finalMessage"]["content"], ANSWER);

    // History after a reload: both pairs, every message under its own key, no empty bubble.
    let (_, history) = call(&app, "GET", &format!("{RT}/sessions"), None).await;
    check("SessionList", &history);
    let (_, session) = call(&app, "GET", &session_path, None).await;
    check("Session", &session);
    let messages = session["messages"].as_array().cloned().unwrap_or_default();
    let count = |role: &str, content: &str| {
        messages.iter().filter(|m| m["role"] == role && m["content"] == content).count()
    };
    assert_eq!((count("user", QUESTION), count("assistant", ANSWER)), (2, 2), "{session}");
    let keys: HashSet<String> = messages.iter().map(widget_key).collect();
    assert_eq!(keys.len(), messages.len(), "two messages share a widget key: {session}");
    assert!(
        messages.iter().all(|m| m["role"] != "assistant" || m["content"] != ""),
        "an empty assistant message is listed: {session}"
    );
    assert_eq!(messages[0]["role"], "system", "the system message first: {session}");

    // A turn that asks for an approval and starts a task; the widget polls the task from the
    // answer, decides with `{note: null}` and cancels with a bodiless POST.
    let third = send(&app, &id, "do it").await;
    let started =
        third["toolResults"].as_array().and_then(|r| r.iter().find(|r| r["task"].is_object()));
    let task_id = started.and_then(|r| r["task"]["taskId"].as_str()).unwrap_or_default().to_owned();
    let (_, tasks) = call(&app, "GET", &format!("{session_path}/tasks"), None).await;
    check("TaskList", &tasks);
    assert_eq!(tasks["tasks"][0]["taskId"], task_id.as_str(), "{tasks}");
    let (_, approvals) = call(&app, "GET", &format!("{session_path}/approvals"), None).await;
    check("ApprovalList", &approvals);
    let approval_id = approvals["approvals"][0]["approvalId"].as_str().unwrap_or_default();
    let path = format!("{RT}/approvals/{approval_id}/approve");
    let (status, approved) = call(&app, "POST", &path, Some(json!({ "note": null }))).await;
    assert_eq!((status, approved["status"].as_str()), (StatusCode::OK, Some("approved")));
    check("Approval", &approved);
    let (status, task) = call(&app, "POST", &format!("{RT}/tasks/{task_id}/cancel"), None).await;
    assert_eq!((status, task["status"].as_str()), (StatusCode::OK, Some("cancelled")), "{task}");
    let (status, deleted) = call(&app, "DELETE", &session_path, None).await;
    assert_eq!(status, StatusCode::OK, "{deleted}");
    check("Deleted", &deleted);
}

/// TerraFin answers a cancel with the task already `cancelled`; so does rein, for a task its
/// worker is running (whose handler learns it through its context), and the session can go.
#[tokio::test]
async fn a_running_task_is_answered_cancelled_at_once() {
    let (app, runtime, _dir) = app(&ServerConfig::default(), ByPrompt::new(scripts()));
    let dispatcher = runtime.start_dispatcher();
    let body = json!({ "agentName": "assistant", "sessionId": "s1" });
    let (status, _) = call(&app, "POST", &format!("{RT}/sessions"), Some(body)).await;
    assert_eq!(status, StatusCode::CREATED);
    let run = send(&app, "s1", "do it").await;
    let started =
        run["toolResults"].as_array().and_then(|r| r.iter().find(|r| r["task"].is_object()));
    let task_id = started.and_then(|r| r["task"]["taskId"].as_str()).unwrap_or_default().to_owned();
    let task_path = format!("{RT}/tasks/{task_id}");
    let mut running = false;
    for _ in 0..2000 {
        let (_, task) = call(&app, "GET", &task_path, None).await;
        if task["progress"]["stage"] == "writing the outline" {
            running = true;
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    assert!(running, "the task never ran");
    let (status, task) = call(&app, "POST", &format!("{task_path}/cancel"), None).await;
    assert_eq!((status, task["status"].as_str()), (StatusCode::OK, Some("cancelled")), "{task}");
    check("Task", &task);
    let (_, task) = call(&app, "GET", &task_path, None).await;
    assert_eq!(task["status"], "cancelled", "{task}");
    let (status, deleted) = call(&app, "DELETE", &format!("{RT}/sessions/s1"), None).await;
    assert_eq!(status, StatusCode::OK, "{deleted}");
    dispatcher.shutdown().await;
}

/// TerraFin's Python client in HTTP mode, as its server forwards it in token mode: its create
/// call sends every key, unset ones as `null`, which is a create even where clients may not set
/// the system prompt; a refusal carries `error.message`, the text the client raises with; and
/// the run's `finalMessage["content"]` is the answer.
#[tokio::test]
async fn the_python_clients_calls_in_token_mode() {
    const TOKEN: &str = "terrafin-server-token";
    let config = ServerConfig {
        tokens: [(TOKEN.to_owned(), "terrafin".to_owned())].into(),
        ..ServerConfig::default()
    };
    let (app, _runtime, _dir) = app(&config, ByPrompt::new(scripts()));
    let post = |path: String, body: Value| request("POST", &path, Some(body), Some(TOKEN));
    let create = |prompt: Value| json!({ "agentName": "assistant", "sessionId": null, "systemPrompt": prompt, "metadata": {} });

    let (status, created) =
        crate::send(&app, post(format!("{RT}/sessions"), create(Value::Null))).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    check("Session", &created);
    let (status, refused) =
        crate::send(&app, post(format!("{RT}/sessions"), create(json!("Be brief.")))).await;
    assert_eq!(status, StatusCode::FORBIDDEN, "{refused}");
    assert!(refused["error"]["message"].as_str().is_some_and(|m| !m.is_empty()), "{refused}");

    let id = created["sessionId"].as_str().unwrap_or_default();
    let path = format!("{RT}/sessions/{id}/messages");
    let (status, run) = crate::send(&app, post(path, json!({ "content": QUESTION }))).await;
    assert_eq!(status, StatusCode::OK, "{run}");
    check("Run", &run);
    assert_eq!(run["finalMessage"]["content"], ANSWER, "{run}");
    let delete = request("DELETE", &format!("{RT}/sessions/{id}"), None, Some(TOKEN));
    let (status, deleted) = crate::send(&app, delete).await;
    assert_eq!(status, StatusCode::OK, "{deleted}");
    check("Deleted", &deleted);
}

/// The system message a session lists first: the prompt its client gave at creation, as
/// TerraFin shows it; never the operator's (the agent's), which is withheld.
#[tokio::test]
async fn the_listed_system_message_is_the_sessions_own_prompt_never_the_operators() {
    let (app, _runtime, _dir) = app(&ServerConfig::default(), ByPrompt::new(scripts()));
    let create = |id: &str, prompt: Value| json!({ "agentName": "assistant", "sessionId": id, "systemPrompt": prompt });
    for (id, prompt) in [("own", json!("Answer in French.")), ("agents", Value::Null)] {
        let (status, session) =
            call(&app, "POST", &format!("{RT}/sessions"), Some(create(id, prompt))).await;
        assert_eq!(status, StatusCode::CREATED, "{session}");
        check("Session", &session);
    }
    let system = |session: &Value| session["messages"][0].clone();
    let (_, own) = call(&app, "GET", &format!("{RT}/sessions/own"), None).await;
    assert_eq!(system(&own)["role"], "system", "{own}");
    assert_eq!(system(&own)["content"], "Answer in French.", "{own}");
    assert!(system(&own)["metadata"].get("promptWithheld").is_none(), "{own}");
    let (_, agents) = call(&app, "GET", &format!("{RT}/sessions/agents"), None).await;
    assert_eq!(system(&agents)["role"], "system", "{agents}");
    assert_eq!(system(&agents)["content"], "", "{agents}");
    assert_eq!(system(&agents)["metadata"]["promptWithheld"], true, "{agents}");
}
