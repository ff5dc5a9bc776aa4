//! `rein run`: one turn end to end against a scripted model and a real MCP server.

use crate::{
    rein,
    support::{ScriptedModel, config_with_everything, events, of_type, write_json},
};

#[test]
fn json_events_show_the_echo_call_and_the_answer() {
    for stream in [false, true] {
        let model = ScriptedModel::start();
        let dir = tempfile::tempdir().unwrap();
        let config =
            write_json(dir.path(), "rein.json", &config_with_everything(&model, stream, true));
        let data = dir.path().join("data");
        let output = rein(
            &[
                "run",
                "--json",
                "--config",
                &config,
                "--data-dir",
                data.to_str().unwrap(),
                "say hello",
            ],
            "",
        );
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            output.status.success(),
            "stream={stream}: exit {:?}, stderr: {stderr}",
            output.status
        );
        let events = events(&output.stdout);
        let proposals = of_type(&events, "tool_proposal");
        assert_eq!(proposals.len(), 1, "{events:#?}");
        assert_eq!(proposals[0]["calls"][0]["function"]["name"], "echo");
        let results = of_type(&events, "tool_result");
        assert_eq!(results.len(), 1, "{events:#?}");
        let text = results[0]["output"]["text"].as_str().unwrap_or_default();
        assert!(text.contains("hello rein"), "the echo comes back: {text}");
        assert_ne!(results[0]["output"]["is_error"], true, "{:#}", results[0]);
        let ends = of_type(&events, "turn_end");
        assert_eq!(ends.len(), 1, "{events:#?}");
        assert_eq!(ends[0]["ending"], "answered");
        assert!(
            ends[0]["text"].as_str().unwrap_or_default().contains("The tool said:"),
            "{:#}",
            ends[0]
        );
        // Event ids are increasing: the same ids the server's stream carries.
        let ids: Vec<u64> = events.iter().map(|e| e["id"].as_u64().expect("an id")).collect();
        assert!(ids.windows(2).all(|w| w[0] < w[1]), "{ids:?}");
        assert_eq!(model.requests.load(std::sync::atomic::Ordering::SeqCst), 2);
    }
}

#[test]
fn plain_output_prints_the_answer() {
    let model = ScriptedModel::start();
    let dir = tempfile::tempdir().unwrap();
    let config = write_json(dir.path(), "rein.json", &config_with_everything(&model, false, true));
    let data = dir.path().join("data");
    let output =
        rein(&["run", "--config", &config, "--data-dir", data.to_str().unwrap(), "say hello"], "");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success(), "stderr: {}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(stdout.lines().collect::<Vec<_>>(), ["The tool said: Echo: hello rein"], "{stdout}");
}

#[test]
fn a_failing_model_endpoint_exits_non_zero_with_one_line() {
    let model = ScriptedModel::start();
    let dir = tempfile::tempdir().unwrap();
    let config = write_json(dir.path(), "rein.json", &config_with_everything(&model, false, true));
    let data = dir.path().join("data");
    for json in [false, true] {
        let mut args =
            vec!["run", "--config", &config, "--data-dir", data.to_str().unwrap(), "please fail"];
        if json {
            args.insert(1, "--json");
        }
        let output = rein(&args, "");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!output.status.success(), "json={json}: a failed turn exits non-zero");
        let lines: Vec<&str> = stderr.lines().collect();
        assert_eq!(lines.len(), 1, "json={json}: one line on stderr: {stderr}");
        assert!(lines[0].starts_with("rein: "), "{stderr}");
        assert!(
            lines[0].contains("400") || lines[0].contains("refuses"),
            "the provider's reason: {stderr}"
        );
        if json {
            let events = events(&output.stdout);
            let ends = of_type(&events, "turn_end");
            assert_eq!(ends.len(), 1, "{events:#?}");
            assert_eq!(ends[0]["ending"], "error");
        } else {
            assert!(
                output.stdout.is_empty(),
                "nothing on stdout: {}",
                String::from_utf8_lossy(&output.stdout)
            );
        }
    }
}

#[test]
fn an_unreachable_model_endpoint_exits_non_zero() {
    // A port that was just free: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    let config = serde_json::json!({
        "llm_models": [{"value": "gone", "endpoint": format!("http://127.0.0.1:{port}/v1"), "stream": false}],
    });
    let config = write_json(dir.path(), "rein.json", &config);
    let data = dir.path().join("data");
    let output =
        rein(&["run", "--config", &config, "--data-dir", data.to_str().unwrap(), "hello"], "");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("rein: "), "{stderr}");
}
