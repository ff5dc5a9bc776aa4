//! Command hooks and pinned context from the config, through the `rein` binary: `PreToolUse`
//! blocks, allows, denies by JSON, asks (the call waits for one approval under `rein serve`)
//! and times out; `UserPromptSubmit` adds context or refuses;
//! pinned text and files reach every request, a pinned file re-read before each one.

use std::path::Path;

use serde_json::{Value, json};

use crate::{
    rein,
    support::{
        ScriptedModel, config_with_everything, events, http, of_type, serve, stop, write_json,
    },
};

/// Writes a hook script into `dir` and returns the command that runs it.
fn script(dir: &Path, name: &str, body: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, body).expect("write the hook script");
    let runner = if name.ends_with(".py") { "python3" } else { "sh" };
    format!("{runner} '{}'", path.display())
}

/// `rein run --json PROMPT` with `config` (a JSON config) in `dir`; returns the events.
fn run(dir: &Path, config: &Value, prompt: &str) -> Vec<Value> {
    let config = write_json(dir, "rein.json", config);
    let data = dir.join("data");
    let output = rein(
        &["run", "--json", "--config", &config, "--data-dir", data.to_str().unwrap(), prompt],
        "",
    );
    let events = events(&output.stdout);
    assert!(
        !events.is_empty(),
        "exit {:?}, stderr: {}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    events
}

/// The echo tool's one result, as text.
fn echo_result(events: &[Value]) -> (String, bool) {
    let results = of_type(events, "tool_result");
    assert_eq!(results.len(), 1, "{events:#?}");
    let text = results[0]["output"]["text"].as_str().unwrap_or_default().to_owned();
    (text, results[0]["output"]["is_error"] == true)
}

fn final_text(events: &[Value]) -> String {
    let ends = of_type(events, "turn_end");
    assert_eq!(ends.len(), 1, "{events:#?}");
    ends[0]["text"].as_str().unwrap_or_default().to_owned()
}

fn with_pre_tool_use(model: &ScriptedModel, hook: Value) -> Value {
    let mut config = config_with_everything(model, false, true);
    config["hooks"] = json!({"PreToolUse": [hook]});
    config
}

#[test]
fn a_pre_tool_use_hook_exiting_2_blocks_with_its_stderr_as_the_result() {
    let model = ScriptedModel::start();
    let dir = tempfile::tempdir().unwrap();
    let command = script(
        dir.path(),
        "block.sh",
        "cat > /dev/null\necho 'echo is off limits today' >&2\nexit 2\n",
    );
    let config = with_pre_tool_use(&model, json!({"matcher": "^ech", "command": command}));
    let events = run(dir.path(), &config, "say hello");
    let (text, is_error) = echo_result(&events);
    assert!(is_error, "{text}");
    assert!(text.contains("Blocked by a PreToolUse hook: echo is off limits today"), "{text}");
    assert!(!text.contains("Echo:"), "the tool did not run: {text}");
    // The model reads the reason (the scripted model says what the tool said).
    assert!(final_text(&events).contains("echo is off limits today"), "{events:#?}");
}

#[test]
fn a_pre_tool_use_hook_that_allows_lets_the_call_run_and_reads_the_call() {
    let model = ScriptedModel::start();
    let dir = tempfile::tempdir().unwrap();
    let seen = dir.path().join("seen.json");
    let body = format!(
        "import json, sys\n\
         data = json.load(sys.stdin)\n\
         open({seen:?}, 'w').write(json.dumps(data))\n\
         print(json.dumps({{'hookSpecificOutput': {{'permissionDecision': 'allow'}}}}))\n",
        seen = seen.display().to_string()
    );
    let command = script(dir.path(), "allow.py", &body);
    let config = with_pre_tool_use(&model, json!({"matcher": "echo", "command": command}));
    let events = run(dir.path(), &config, "say hello");
    let (text, is_error) = echo_result(&events);
    assert!(!is_error && text.contains("hello rein"), "{text}");
    let seen: Value = serde_json::from_str(&std::fs::read_to_string(&seen).unwrap()).unwrap();
    assert_eq!(seen["hook_event_name"], "PreToolUse", "{seen:#}");
    assert_eq!(seen["tool_name"], "echo", "{seen:#}");
    assert_eq!(seen["tool_input"]["message"], "hello rein", "{seen:#}");
    assert!(seen["session_id"].as_str().is_some_and(|id| !id.is_empty()), "{seen:#}");
    assert!(seen["cwd"].as_str().is_some_and(|cwd| !cwd.is_empty()), "{seen:#}");
    assert!(of_type(&events, "notice").iter().all(|n| n["code"] != "hook_failed"), "{events:#?}");
}

#[test]
fn a_pre_tool_use_hook_denies_by_json_with_its_reason() {
    let model = ScriptedModel::start();
    let dir = tempfile::tempdir().unwrap();
    let body = "import json, sys\n\
                json.load(sys.stdin)\n\
                print(json.dumps({'hookSpecificOutput': {'permissionDecision': 'deny', \
                'permissionDecisionReason': 'use the calendar instead'}}))\n";
    let command = script(dir.path(), "deny.py", body);
    let config = with_pre_tool_use(&model, json!({"command": command}));
    let events = run(dir.path(), &config, "say hello");
    let (text, is_error) = echo_result(&events);
    assert!(is_error && text.contains("use the calendar instead"), "{text}");
    assert!(final_text(&events).contains("use the calendar instead"), "{events:#?}");
}

#[test]
fn a_pre_tool_use_hook_that_times_out_is_a_notice_and_is_killed() {
    let model = ScriptedModel::start();
    let dir = tempfile::tempdir().unwrap();
    let pid_file = dir.path().join("sleeper.pid");
    let body = format!("sleep 600 &\necho $! > '{}'\nwait\n", pid_file.display());
    let command = script(dir.path(), "slow.sh", &body);
    let config = with_pre_tool_use(&model, json!({"command": command, "timeout": 1}));
    let events = run(dir.path(), &config, "say hello");
    let (text, is_error) = echo_result(&events);
    assert!(!is_error && text.contains("hello rein"), "not blocked: {text}");
    let notices = of_type(&events, "notice");
    assert!(
        notices.iter().any(|n| n["code"] == "hook_failed"
            && n["message"].as_str().is_some_and(|m| m.contains("timed out"))),
        "{notices:#?}"
    );
    // The hook's own child went with its process group: gone, or a zombie waiting to be reaped.
    let pid = std::fs::read_to_string(&pid_file).unwrap();
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())).unwrap_or_default();
    let state = stat.rsplit_once(')').map(|(_, rest)| rest.trim_start().chars().next());
    assert!(matches!(state, None | Some(Some('Z' | 'X'))), "the sleeper lives on: {stat}");
}

#[test]
fn a_user_prompt_submit_hook_exiting_2_refuses_the_prompt() {
    let model = ScriptedModel::start();
    let dir = tempfile::tempdir().unwrap();
    let command =
        script(dir.path(), "refuse.sh", "cat > /dev/null\necho 'no prompts today' >&2\nexit 2\n");
    let config = json!({
        "llm_models": [{"value": "scripted", "endpoint": model.endpoint()}],
        "llm_model": "scripted",
        "hooks": {"UserPromptSubmit": [{"command": command}]},
    });
    let events = run(dir.path(), &config, "say hello");
    assert_eq!(final_text(&events), "no prompts today", "{events:#?}");
    assert_eq!(of_type(&events, "turn_end")[0]["ending"], "interrupted");
    assert_eq!(model.requests.load(std::sync::atomic::Ordering::SeqCst), 0, "no model request");
}

#[test]
fn a_missing_pinned_file_is_a_notice_and_the_rest_is_still_pinned() {
    let model = ScriptedModel::start();
    let dir = tempfile::tempdir().unwrap();
    let config = json!({
        "llm_models": [{"value": "scripted", "endpoint": model.endpoint()}],
        "llm_model": "scripted",
        "pinned_context": "PINNED-TEXT",
        "pinned_context_files": [dir.path().join("missing.md")],
    });
    let events = run(dir.path(), &config, "say hello");
    assert_eq!(of_type(&events, "turn_end")[0]["ending"], "answered", "{events:#?}");
    let notices = of_type(&events, "notice");
    assert!(
        notices.iter().any(|n| n["code"] == "hook_failed"
            && n["message"].as_str().is_some_and(|m| m.contains("missing.md"))),
        "{notices:#?}"
    );
    let systems = model.system_texts();
    assert!(!systems.is_empty(), "the model was asked");
    assert!(systems.iter().all(|s| s.contains("PINNED-TEXT")), "{systems:?}");
}

#[test]
fn pinned_files_are_reread_for_each_request_and_prompt_context_is_sent() {
    let model = ScriptedModel::start();
    let dir = tempfile::tempdir().unwrap();
    let notes = dir.path().join("notes.md");
    std::fs::write(&notes, "NOTE before the call").unwrap();
    // The prompt hook adds context for the turn; the tool hook rewrites the pinned file.
    let prompt = script(
        dir.path(),
        "prompt.py",
        "import json, sys\n\
         data = json.load(sys.stdin)\n\
         print(json.dumps({'additionalContext': 'CONTEXT for ' + data['prompt']}))\n",
    );
    let rewrite = script(
        dir.path(),
        "rewrite.sh",
        &format!("cat > /dev/null\necho 'NOTE after the call' > '{}'\n", notes.display()),
    );
    let mut config = config_with_everything(&model, false, true);
    config["pinned_context"] = json!("PINNED-TEXT");
    config["pinned_context_files"] = json!([notes]);
    config["hooks"] = json!({
        "UserPromptSubmit": [{"command": prompt}],
        "PostToolUse": [{"matcher": "echo", "command": rewrite}],
    });
    let events = run(dir.path(), &config, "say hello");
    assert_eq!(of_type(&events, "turn_end")[0]["ending"], "answered", "{events:#?}");
    let systems = model.system_texts();
    assert_eq!(systems.len(), 2, "the call, then the answer: {systems:?}");
    for system in &systems {
        assert!(system.contains("PINNED-TEXT"), "{system}");
        assert!(system.contains("CONTEXT for say hello"), "{system}");
    }
    assert!(systems[0].contains("NOTE before the call"), "{}", systems[0]);
    assert!(systems[1].contains("NOTE after the call"), "re-read: {}", systems[1]);
    assert!(!systems[1].contains("NOTE before"), "{}", systems[1]);
}

#[test]
fn over_rein_serve_a_pinned_file_changed_between_two_messages_is_read_again() {
    let model = ScriptedModel::start();
    let dir = tempfile::tempdir().unwrap();
    let notes = dir.path().join("notes.md");
    std::fs::write(&notes, "NOTE one").unwrap();
    let config = json!({
        "llm_models": [{"value": "scripted", "endpoint": model.endpoint()}],
        "llm_model": "scripted",
        "pinned_context_files": [notes],
    });
    let config = write_json(dir.path(), "rein.json", &config);
    let (child, host) = serve(&["--config", &config], &dir.path().join("data"));
    let session = r#"{"agentName":"assistant","sessionId":"s1"}"#;
    let (status, created) = http(&host, "POST", "/agent/api/runtime/sessions", Some(session), None);
    assert_eq!(status, 201, "{created}");
    let path = "/agent/api/runtime/sessions/s1/messages";
    let (status, answer) = http(&host, "POST", path, Some(r#"{"content":"first"}"#), None);
    assert_eq!(status, 200, "{answer}");
    let first_turn = model.system_texts().len();
    std::fs::write(&notes, "NOTE two").unwrap();
    let (status, answer) = http(&host, "POST", path, Some(r#"{"content":"second"}"#), None);
    assert_eq!(status, 200, "{answer}");
    stop(child);
    let systems = model.system_texts();
    assert!(first_turn > 0 && systems.len() > first_turn, "{systems:?}");
    assert!(systems[..first_turn].iter().all(|s| s.contains("NOTE one")), "{systems:?}");
    assert!(
        systems[first_turn..].iter().all(|s| s.contains("NOTE two") && !s.contains("NOTE one")),
        "{systems:?}"
    );
}

#[test]
fn over_rein_serve_a_pre_tool_use_hook_that_asks_makes_the_call_wait_for_a_persons_approval() {
    // Auto-approve on: only the hook makes `echo` wait.
    hook_ask_flow(true, "^echo$", "say hello");
}

#[test]
fn a_hook_asking_about_a_side_effect_that_asks_anyway_needs_one_approval_not_two() {
    hook_ask_flow(false, "^toggle", "toggle it");
}

/// Under `rein serve` with a `PreToolUse` hook answering "ask" for the tools `matcher` names:
/// the call waits with the hook's reason, runs after one approval, and asks again after that
/// (the approval was for once).
fn hook_ask_flow(auto_approve: bool, matcher: &str, prompt: &str) {
    const RT: &str = "/agent/api/runtime";
    let model = ScriptedModel::start();
    let dir = tempfile::tempdir().unwrap();
    let answer = r#"{"hookSpecificOutput":{"permissionDecision":"ask","permissionDecisionReason":"needs a look"}}"#;
    let command = script(dir.path(), "ask.sh", &format!("cat > /dev/null\necho '{answer}'\n"));
    let mut config = with_pre_tool_use(&model, json!({"matcher": matcher, "command": command}));
    config["auto_approve"] = json!(auto_approve);
    let path = write_json(dir.path(), "rein.json", &config);
    let (child, host) = serve(&["--config", &path], &dir.path().join("data"));
    let body = json!({"agentName": "assistant", "sessionId": "ask1"}).to_string();
    let (status, created) = http(&host, "POST", &format!("{RT}/sessions"), Some(&body), None);
    assert_eq!(status, 201, "{created}");
    let turn = |host: &str| {
        let path = format!("{RT}/sessions/ask1/messages");
        let content = json!({ "content": prompt }).to_string();
        let (status, body) = http(host, "POST", &path, Some(&content), None);
        assert_eq!(status, 200, "{body}");
        serde_json::from_str::<Value>(&body).expect("JSON")["toolResults"][0].clone()
    };

    let waiting = turn(&host);
    assert_eq!(waiting["payload"]["approvalRequired"], true, "{waiting}");
    let approval = &waiting["payload"]["approval"];
    let reason = approval["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("PreToolUse hook") && reason.contains("needs a look"), "{approval}");
    let id = approval["approvalId"].as_str().expect("an approval id").to_owned();
    let (status, listed) = http(&host, "GET", &format!("{RT}/approvals/{id}"), None, None);
    assert_eq!(status, 200, "{listed}");
    assert!(listed.contains(r#""status":"pending""#), "{listed}");

    let (status, decided) =
        http(&host, "POST", &format!("{RT}/approvals/{id}/approve"), Some("{}"), None);
    assert_eq!(status, 200, "{decided}");
    let ran = turn(&host);
    assert_eq!(ran["isError"], false, "the identical call runs after one approval: {ran}");
    assert_ne!(ran["payload"]["approvalRequired"], true, "{ran}");
    let again = turn(&host);
    assert_eq!(again["payload"]["approvalRequired"], true, "once means once: {again}");
    stop(child);
}
