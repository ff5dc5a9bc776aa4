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
