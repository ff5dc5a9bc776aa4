//! `rein chat` in a pseudo-terminal (driven by python3's `pty` module): an approved MCP call, and
//! Ctrl-C during a slow reply stopping the turn but not the program.

use std::{
    io::Write as _,
    path::Path,
    process::{Command, Stdio},
};

use serde_json::{Value, json};

use crate::support::{ScriptedModel, config_with_everything, write_json};

/// Runs `rein ARGS` in a pseudo-terminal through the steps; returns the driver's report.
pub(crate) fn drive(args: &[&str], steps: &Value) -> Value {
    let driver = Path::new(env!("CARGO_MANIFEST_DIR")).join("test_data/pty_driver.py");
    let mut child = Command::new("python3")
        .arg(driver)
        .arg(env!("CARGO_BIN_EXE_rein"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("python3 runs");
    child.stdin.take().unwrap().write_all(steps.to_string().as_bytes()).unwrap();
    let output = child.wait_with_output().unwrap();
    serde_json::from_slice(&output.stdout).unwrap_or_else(|e| {
        panic!("the driver's report ({e}): {}", String::from_utf8_lossy(&output.stdout))
    })
}

pub(crate) fn check(report: &Value) {
    let output = report["output"].as_str().unwrap_or_default();
    assert!(
        report["ok"] == true,
        "failed at step {} (exit {}):\n{output}",
        report["failed_step"],
        report["exit"]
    );
}

#[test]
fn an_approved_side_effecting_mcp_call_runs_and_is_answered() {
    let model = ScriptedModel::start();
    let dir = tempfile::tempdir().unwrap();
    let config = write_json(dir.path(), "rein.json", &config_with_everything(&model, true, false));
    let data = dir.path().join("data");
    let steps = json!([
        {"expect": "/help lists the commands."},
        {"expect": "›"},
        {"send": "/tools\n"},
        {"expect": "echo"},
        {"expect": "›"},
        {"send": "toggle the logging\n"},
        {"expect": "toggle-simulated-logging needs your approval"},
        {"expect": "Allow toggle-simulated-logging("},
        {"expect": "[a]lways for this session"},
        {"send": "y\n"},
        {"expect": "✓ toggle-simulated-logging:"},
        {"expect": "The tool said:"},
        {"expect": "›"},
        {"send": "/quit\n"},
    ]);
    let report =
        drive(&["chat", "--config", &config, "--data-dir", data.to_str().unwrap()], &steps);
    check(&report);
}

#[test]
fn ctrl_c_stops_a_slow_turn_but_not_the_program() {
    let model = ScriptedModel::start();
    let dir = tempfile::tempdir().unwrap();
    let config = write_json(dir.path(), "rein.json", &config_with_everything(&model, true, true));
    let data = dir.path().join("data");
    let steps = json!([
        {"expect": "/help lists the commands."},
        {"expect": "›"},
        {"send": "be slow please\n"},
        {"expect": "Thinking slowly"},
        {"interrupt": true},
        {"expect": "(stopping…)"},
        {"expect": "(stopped)"},
        {"expect": "›"},
        // The program is still there: a second turn runs to its answer.
        {"send": "say hello\n"},
        {"expect": "The tool said: Echo: hello rein"},
        {"expect": "›"},
        {"send": "/quit\n"},
    ]);
    let report =
        drive(&["chat", "--config", &config, "--data-dir", data.to_str().unwrap()], &steps);
    check(&report);
    let output = report["output"].as_str().unwrap_or_default();
    assert!(!output.contains("and done."), "the slow reply was cut, not waited out:\n{output}");
}

#[test]
fn auto_off_and_on_really_switch_approvals_for_the_session() {
    let model = ScriptedModel::start();
    let dir = tempfile::tempdir().unwrap();
    // `auto_approve = true`: the config asks for nothing, until `/auto off`.
    let config = write_json(dir.path(), "rein.json", &config_with_everything(&model, true, true));
    let data = dir.path().join("data");
    let steps = json!([
        {"expect": "/help lists the commands."},
        {"expect": "›"},
        {"send": "/auto off\n"},
        {"expect": "auto-approve off"},
        {"expect": "›"},
        {"send": "toggle the logging\n"},
        {"expect": "toggle-simulated-logging needs your approval"},
        {"expect": "[a]lways for this session"},
        {"send": "n\n"},
        {"expect": "›"},
        {"send": "/auto on\n"},
        {"expect": "auto-approve on"},
        {"expect": "›"},
        {"send": "toggle the logging again\n"},
        {"expect": "✓ toggle-simulated-logging:"},
        {"expect": "The tool said:"},
        {"expect": "›"},
        {"send": "/quit\n"},
    ]);
    let report =
        drive(&["chat", "--config", &config, "--data-dir", data.to_str().unwrap()], &steps);
    check(&report);
    let output = report["output"].as_str().unwrap_or_default();
    assert_eq!(
        output.matches("needs your approval").count(),
        1,
        "only the call made with auto-approve off asked:\n{output}"
    );
}

/// The reply of a small open model, streamed a few bytes at a time: its reasoning in `<think>`
/// and its call written into the text as `<tool_call>` JSON.
const MARKUP_REPLY: &str = "<think>The user wants an echo; I will call the echo tool.</think>\
    Let me check that. <tool_call>{\"name\": \"echo\", \"arguments\": {\"message\": \"hi there\"}}</tool_call>";

/// A streaming model: the first request gets [`MARKUP_REPLY`] in 6-byte deltas, 10 ms apart;
/// after the tool's result, a plain answer.
fn markup_model() -> String {
    crate::support::model_server(|request, writer| {
        let messages = request["messages"].as_array().cloned().unwrap_or_default();
        let after_tool = messages.last().is_some_and(|m| m["role"] == "tool");
        let head =
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
        if writer.write_all(head.as_bytes()).is_err() {
            return false;
        }
        let chunk = crate::support::sse_chunk;
        if after_tool {
            let _ = writer.write_all(
                chunk(json!({"role": "assistant", "content": "Echoed it."}), None).as_bytes(),
            );
        } else {
            let bytes = MARKUP_REPLY.as_bytes();
            for piece in bytes.chunks(6) {
                let text = String::from_utf8_lossy(piece);
                if writer.write_all(chunk(json!({"content": text}), None).as_bytes()).is_err() {
                    return false;
                }
                let _ = writer.flush();
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
        }
        let _ = writer.write_all(chunk(json!({}), Some("stop")).as_bytes());
        let _ = writer.write_all(b"data: [DONE]\n\n");
        false
    })
}

#[test]
fn a_streamed_reply_with_think_and_an_embedded_call_shows_no_markup() {
    let endpoint = markup_model();
    let dir = tempfile::tempdir().unwrap();
    let config = json!({
        "llm_models": [{
            "value": "scripted", "label": "Scripted", "endpoint": endpoint,
            "context_window": 32768, "stream": true,
        }],
        "llm_model": "scripted",
        "auto_approve": true,
        "mcpServers": {
            "everything": {"command": "node", "args": [crate::support::everything_peer().display().to_string()]},
        },
    });
    let config = write_json(dir.path(), "rein.json", &config);
    let data = dir.path().join("data");
    let steps = json!([
        {"expect": "›"},
        {"send": "echo something\n"},
        {"expect": "Let me check that."},
        {"expect": "✓ echo: Echo: hi there"},
        {"expect": "Echoed it."},
        {"expect": "›"},
        {"send": "/quit\n"},
    ]);
    let report =
        drive(&["chat", "--config", &config, "--data-dir", data.to_str().unwrap()], &steps);
    check(&report);
    // What a person reads: the output without its colour escapes.
    let raw = report["output"].as_str().unwrap_or_default();
    let output = raw.replace("\u{1b}[2m", "").replace("\u{1b}[0m", "");
    assert!(
        output.contains("I will call the echo tool.\r\nLet me"),
        "the reasoning, then the text:\n{output}"
    );
    for markup in ["<think", "think>", "<tool_call", "tool_call>", "{\"name\"", "\"arguments\""] {
        assert!(!output.contains(markup), "`{markup}` reached the terminal:\n{output}");
    }
    // Every piece of markup was written in 6-byte pieces: even its fragments stay hidden.
    for fragment in ["<thi", "</th", "<too", "_call", "{\"na"] {
        assert!(!output.contains(fragment), "`{fragment}` reached the terminal:\n{output}");
    }
}

#[test]
fn a_retried_model_request_is_shown_and_the_turn_goes_on() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let calls = std::sync::Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    // The first request is refused with a 503 that says when to come back; the next answers.
    let endpoint = crate::support::model_server(move |_, writer| {
        if seen.fetch_add(1, Ordering::SeqCst) == 0 {
            let body = r#"{"error":{"message":"overloaded, try again","type":"server_error"}}"#;
            let head = format!(
                "HTTP/1.1 503 Service Unavailable\r\nretry-after: 1\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            let _ = writer.write_all(head.as_bytes());
            let _ = writer.write_all(body.as_bytes());
            return false;
        }
        crate::support::write_completion(
            writer,
            json!({"role": "assistant", "content": "Back again."}),
            "stop",
        )
    });
    let dir = tempfile::tempdir().unwrap();
    let config = json!({
        "llm_models": [{"value": "scripted", "endpoint": endpoint, "stream": false}],
        "llm_model": "scripted",
    });
    let config = write_json(dir.path(), "rein.json", &config);
    let data = dir.path().join("data");
    let steps = json!([
        {"expect": "›"},
        {"send": "hello\n"},
        {"expect": "retrying the model in 1 s (attempt 2)"},
        {"expect": "Back again."},
        {"expect": "›"},
        {"send": "/quit\n"},
    ]);
    let report =
        drive(&["chat", "--config", &config, "--data-dir", data.to_str().unwrap()], &steps);
    check(&report);
}
