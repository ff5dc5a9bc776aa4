//! Command hooks and pinned context from the config, through the `rein` binary: `PreToolUse`
//! blocks, allows, denies by JSON, asks (the call waits for one approval under `rein serve`)
//! and times out; `UserPromptSubmit` adds context or refuses;
//! pinned text and files reach every request, a pinned file re-read before each one.

use std::path::Path;

use serde_json::{Value, json};

use crate::{
    rein,
    support::{
        ScriptedModel, config_with_everything, events, http, of_type, serve, sse_until, stop,
        transcripts_under, write_json,
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
    // The notice names the entry, never the operator's path.
    let notices = of_type(&events, "notice");
    let failed: Vec<&str> = notices
        .iter()
        .filter(|n| n["code"] == "hook_failed")
        .filter_map(|n| n["message"].as_str())
        .collect();
    assert!(failed.iter().any(|m| m.contains("pinned_context_files[0]")), "{notices:#?}");
    let dir_text = dir.path().display().to_string();
    for message in &failed {
        assert!(!message.contains("missing.md") && !message.contains(&dir_text), "{message}");
    }
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

/// A secret on a failing hook's command line, one in what it writes to stderr, and words of its
/// stderr that are no secret (the log keeps those; no client ever reads them).
const COMMAND_SECRET: &str = "sk-live-HOOKCOMMAND0123456789";
const STDERR_SECRET: &str = "sk-live-HOOKSTDERR0123456789";
const STDERR_WORDS: &str = "the-hook-complains-loudly";

#[test]
fn over_rein_serve_a_failing_hook_shows_clients_only_which_hook_failed_and_logs_it_redacted() {
    let model = ScriptedModel::start();
    let dir = tempfile::tempdir().unwrap();
    let complain = format!("cat > /dev/null\necho \"{STDERR_WORDS}: token {STDERR_SECRET}\" >&2\n");
    let fails = script(dir.path(), "fails.sh", &format!("{complain}exit 3\n"));
    let blocks = script(dir.path(), "blocks.sh", &format!("{complain}exit 2\n"));
    let not_json = script(dir.path(), "not-json.sh", "cat > /dev/null\necho 'not json'\n");
    let with_secret = |command: &str| format!("{command} --auth 'Bearer {COMMAND_SECRET}'");
    let mut config = config_with_everything(&model, false, true);
    config["pinned_context_files"] = json!([dir.path().join("missing-notes.md")]);
    config["hooks"] = json!({
        "SessionStart": [{"command": "cat > /dev/null"}, {"command": with_secret(&fails)}],
        "UserPromptSubmit": [{"command": with_secret(&fails)}],
        "PreToolUse": [{"matcher": "^echo$", "command": with_secret(&not_json)}],
        "PostToolUse": [{"matcher": "^echo$", "command": with_secret(&blocks)}],
        "Stop": [{"command": with_secret(&fails)}],
    });
    let path = write_json(dir.path(), "rein.json", &config);
    let data = dir.path().join("data");
    let (child, host) = serve(&["--config", &path], &data);
    const RT: &str = "/agent/api/runtime";
    let body = json!({"agentName": "assistant", "sessionId": "h1"}).to_string();
    let (status, created) = http(&host, "POST", &format!("{RT}/sessions"), Some(&body), None);
    assert_eq!(status, 201, "{created}");
    let message = json!({"content": "say hello"}).to_string();
    let (status, answer) =
        http(&host, "POST", &format!("{RT}/sessions/h1/messages"), Some(&message), None);
    assert_eq!(status, 200, "{answer}");
    // The `Stop` hook runs after the turn; its notice is the last to come.
    let stream = sse_until(&host, &format!("{RT}/sessions/h1/events"), "hooks.Stop[0]");
    let (_, session) = http(&host, "GET", &format!("{RT}/sessions/h1"), None, None);
    let (_, markdown) = http(&host, "GET", &format!("{RT}/sessions/h1/export"), None, None);
    let (_, exported) =
        http(&host, "GET", &format!("{RT}/sessions/h1/export?format=json"), None, None);
    let log = stop(child);
    let transcripts = transcripts_under(&data);

    // Each failure is a notice naming its hook (the event and its place in the config) and
    // what went wrong, nothing more.
    let notices: Vec<Value> = stream
        .lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
        .filter(|event| event["type"] == "notice" && event["code"] == "hook_failed")
        .collect();
    let said = |who: &str, what: &str| {
        notices
            .iter()
            .any(|n| n["message"].as_str().is_some_and(|m| m.contains(who) && m.contains(what)))
    };
    assert!(said("hooks.SessionStart[1]", "exited with status 3"), "{notices:#?}");
    assert!(said("hooks.UserPromptSubmit[0]", "exited with status 3"), "{notices:#?}");
    assert!(said("hooks.PreToolUse[0]", "not JSON"), "{notices:#?}");
    assert!(said("hooks.PostToolUse[0]", "exited with 2"), "{notices:#?}");
    assert!(said("hooks.Stop[0]", "exited with status 3"), "{notices:#?}");
    assert!(said("pinned_context_files[0]", "cannot be read"), "{notices:#?}");
    assert!(!said("hooks.SessionStart[0]", ""), "the first SessionStart hook ran: {notices:#?}");
    assert!(transcripts.contains("hooks.Stop[0]"), "the notices are stored");

    let secrets = [COMMAND_SECRET, STDERR_SECRET];
    let from_the_operator = [STDERR_WORDS, "fails.sh", "blocks.sh", "not-json.sh", "missing-notes"];
    for (place, text) in [
        ("answer", &answer),
        ("session", &session),
        ("event stream", &stream),
        ("Markdown export", &markdown),
        ("JSON export", &exported),
        ("transcript", &transcripts),
    ] {
        for word in secrets.iter().chain(&from_the_operator) {
            assert!(!text.contains(word), "`{word}` reached the {place}: {text}");
        }
    }
    // The log has the command and the stderr, with the secrets scrubbed.
    for word in [STDERR_WORDS, "fails.sh", "blocks.sh", "not-json.sh", "missing-notes"] {
        assert!(log.contains(word), "`{word}` is not in the log: {log}");
    }
    for secret in secrets {
        assert!(!log.contains(secret), "`{secret}` reached the log: {log}");
    }
}

#[test]
fn a_hook_sees_only_the_allowlisted_environment_and_its_passthrough() {
    let model = ScriptedModel::start();
    let dir = tempfile::tempdir().unwrap();
    let seen = dir.path().join("env.txt");
    let command =
        script(dir.path(), "env.sh", &format!("cat > /dev/null\nenv > '{}'\n", seen.display()));
    let config = json!({
        "llm_models": [{"value": "scripted", "endpoint": model.endpoint()}],
        "llm_model": "scripted",
        "hooks": {"SessionStart": [{"command": command, "env_passthrough": ["REIN_HOOK_PASSED"]}]},
    });
    let config = write_json(dir.path(), "rein.json", &config);
    let data = dir.path().join("data");
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_rein"))
        .args(["run", "--json", "--config", &config, "--data-dir", data.to_str().unwrap()])
        .arg("say hello")
        .env("OPENAI_API_KEY", "sk-live-NOTFORHOOKS0123456789")
        .env("REIN_HOOK_TEST_TOKEN", "not-for-hooks-either")
        .env("REIN_HOOK_PASSED", "passed-through")
        .env("LANG", "C.UTF-8")
        .stdin(std::process::Stdio::null())
        .output()
        .expect("rein runs");
    let events = events(&output.stdout);
    assert!(
        of_type(&events, "notice").iter().all(|n| n["code"] != "hook_failed"),
        "{events:#?}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let env = std::fs::read_to_string(&seen).expect("the hook ran and wrote its environment");
    let names: Vec<&str> =
        env.lines().filter_map(|line| line.split_once('=')).map(|p| p.0).collect();
    assert!(names.contains(&"PATH") && names.contains(&"LANG"), "allowlisted: {env}");
    assert!(env.lines().any(|line| line == "REIN_HOOK_PASSED=passed-through"), "{env}");
    for hidden in ["OPENAI_API_KEY", "REIN_HOOK_TEST_TOKEN"] {
        assert!(!names.contains(&hidden), "{hidden} reached the hook: {env}");
    }
    assert!(!env.contains("NOTFORHOOKS") && !env.contains("not-for-hooks"), "{env}");
}
