//! A model that does not answer, through the `rein` binary: `rein serve` checks the default
//! model's endpoint at start, says in its log what to do, and reports the same through
//! `GET /models` (`defaultModelStatus`); a turn against it fails with an error that names the
//! endpoint and the fix, not the socket's words alone.

use std::{net::TcpListener, time::Duration};

use serde_json::{Value, json};

use crate::{
    rein,
    support::{ScriptedModel, http, serve, stop, write_json},
};

const RT: &str = "/agent/api/runtime";

/// An endpoint nobody listens on (a port that was just free).
fn dead_endpoint() -> String {
    let port = TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr").port();
    format!("http://127.0.0.1:{port}/v1")
}

fn parse(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("JSON ({e}): {body}"))
}

/// `defaultModelStatus` once the check has ended (bounded wait).
fn checked_status(host: &str) -> Value {
    let mut status = Value::Null;
    for _ in 0..100 {
        let (code, body) = http(host, "GET", &format!("{RT}/models"), None, None);
        assert_eq!(code, 200, "{body}");
        status = parse(&body)["defaultModelStatus"].clone();
        if status["state"] != "checking" {
            return status;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!("the check did not end: {status}");
}

#[test]
fn serve_with_an_unreachable_model_logs_the_hint_and_the_models_route_reports_it() {
    let endpoint = dead_endpoint();
    let dir = tempfile::tempdir().expect("tempdir");
    let config = json!({"llm_models": [{"value": "gone", "endpoint": endpoint, "stream": false}]});
    let path = write_json(dir.path(), "rein.json", &config);
    let (child, host) = serve(&["--config", &path], &dir.path().join("data"));

    let status = checked_status(&host);
    assert_eq!(status["state"], "unreachable", "{status}");
    assert_eq!(status["model"], "gone", "{status}");
    assert_eq!(status["endpoint"], endpoint.as_str(), "{status}");
    assert!(status["checkedAt"].is_string(), "{status}");
    let message = status["message"].as_str().unwrap_or_default();
    assert!(message.starts_with("The default model `gone` does not answer: "), "{message}");
    assert!(message.contains(&format!("cannot reach the model endpoint {endpoint}")), "{message}");
    assert!(message.contains("Nothing listens there: start the model server"), "{message}");
    assert!(
        message.contains("give `--config` a file with a hosted model and its key"),
        "{message}"
    );

    // A turn against it: the error names the endpoint and the fix.
    let body = json!({"agentName": "assistant", "sessionId": "s1"}).to_string();
    let (code, created) = http(&host, "POST", &format!("{RT}/sessions"), Some(&body), None);
    assert_eq!(code, 201, "{created}");
    let (code, run) = http(
        &host,
        "POST",
        &format!("{RT}/sessions/s1/messages"),
        Some(r#"{"content":"hi"}"#),
        None,
    );
    let error = format!("{code} {run}");
    assert!(error.contains(&format!("cannot reach the model endpoint {endpoint}")), "{error}");
    assert!(error.contains("Nothing listens there: start the model server"), "{error}");
    assert!(!error.contains("error sending request"), "not reqwest's words: {error}");

    let log = stop(child);
    let warning = log.lines().find(|line| line.starts_with("rein: warning: The default model"));
    assert_eq!(warning, Some(format!("rein: warning: {message}").as_str()), "{log}");
}

#[test]
fn serve_without_a_config_says_to_start_cargo_xtask_llama_serve() {
    // The keyless default model is at 127.0.0.1:8081; a llama-server someone left running there
    // answers, and then there is nothing to warn about.
    let running = std::net::TcpStream::connect(("127.0.0.1", 8081)).is_ok();
    let dir = tempfile::tempdir().expect("tempdir");
    let (child, host) = serve(&[], &dir.path().join("data"));
    let status = checked_status(&host);
    let log = stop(child);
    if running {
        assert_eq!(status["state"], "reachable", "{status}");
        return;
    }
    assert_eq!(status["state"], "unreachable", "{status}");
    assert_eq!(status["endpoint"], "http://127.0.0.1:8081/v1", "{status}");
    let message = status["message"].as_str().unwrap_or_default();
    assert!(message.contains("start it with `cargo xtask llama serve`"), "{message}");
    assert!(log.contains("start it with `cargo xtask llama serve`"), "{log}");
}

#[test]
fn serve_with_a_model_that_answers_reports_it_reachable_and_warns_about_nothing() {
    let model = ScriptedModel::start();
    let dir = tempfile::tempdir().expect("tempdir");
    let config = json!({"llm_models": [{"value": "here", "endpoint": model.endpoint()}]});
    let path = write_json(dir.path(), "rein.json", &config);
    let (child, host) = serve(&["--config", &path], &dir.path().join("data"));
    let status = checked_status(&host);
    assert_eq!(status["state"], "reachable", "{status}");
    assert_eq!(status["message"], Value::Null, "{status}");
    let log = stop(child);
    assert!(!log.contains("does not answer"), "{log}");
    assert_eq!(
        model.requests.load(std::sync::atomic::Ordering::SeqCst),
        0,
        "the check sends no request"
    );
}

#[test]
fn run_against_an_unreachable_model_names_the_endpoint_and_the_fix() {
    let endpoint = dead_endpoint();
    let dir = tempfile::tempdir().expect("tempdir");
    let config = json!({"llm_models": [{"value": "gone", "endpoint": endpoint, "stream": false}]});
    let path = write_json(dir.path(), "rein.json", &config);
    let data = dir.path().join("data");
    let output =
        rein(&["run", "--config", &path, "--data-dir", data.to_str().expect("utf-8"), "hi"], "");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("rein: the turn failed: "), "{stderr}");
    assert!(stderr.contains(&format!("cannot reach the model endpoint {endpoint}")), "{stderr}");
    assert!(stderr.contains("Nothing listens there: start the model server"), "{stderr}");
    assert!(!stderr.contains("error sending request"), "not reqwest's words: {stderr}");
}
