//! Issue 50, finding 11: what waits in one replica's memory. Two `rein serve` replicas on one
//! real PostgreSQL (`server.database_url`), each with a data directory of its own. A page's
//! client tools live in the memory of the replica they were registered on, and a call of one
//! waits in the replica running the turn: a claim or a result sent through the other replica
//! used to be a plain `404 hosted_client_tool_call_not_found`, as if the call had ended. Now it
//! says where the call is (`421 hosted_turn_on_other_replica`), while the turn runs there; the
//! same requests through the turn's replica work, and once the turn has ended the other
//! replica answers `404` again (nothing waits anywhere).

use std::time::{Duration, Instant};

use rein_postgres::test_cluster::TestCluster;
use serde_json::{Value, json};

use crate::support::{
    create_session, http, model_server, send_in_background, serve, write_completion, write_json,
};

const RT: &str = "/agent/api/runtime";

/// The scripted model: `paint` calls the page's `set_color(red)`; after a tool result it says
/// `Done.`; anything else is answered `Answer to: TEXT`.
fn answer(request: &Value, writer: &mut std::net::TcpStream) -> bool {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let last = messages.last().cloned().unwrap_or(Value::Null);
    let user = messages.iter().rev().find(|m| m["role"] == "user");
    let user = user.and_then(|m| m["content"].as_str()).unwrap_or_default().to_owned();
    let message = if last["role"] == "tool" {
        json!({"role": "assistant", "content": "Done."})
    } else if user.starts_with("paint") {
        let call = json!({"id": "call_paint", "type": "function",
            "function": {"name": "set_color", "arguments": "{\"color\":\"red\"}"}});
        return write_completion(
            writer,
            json!({"role": "assistant", "content": null, "tool_calls": [call]}),
            "tool_calls",
        );
    } else {
        json!({"role": "assistant", "content": format!("Answer to: {user}")})
    };
    write_completion(writer, message, "stop")
}

fn parse(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("JSON ({e}): {body}"))
}

/// The pending client tool calls of `session` on `host`, once there is one (at most 30 s).
fn pending_call(host: &str, session: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let (status, body) =
            http(host, "GET", &format!("{RT}/sessions/{session}/client-tools"), None, None);
        assert_eq!(status, 200, "{body}");
        if let Some(id) = parse(&body)["pending"][0].as_str() {
            return id.to_owned();
        }
        assert!(Instant::now() < deadline, "no client tool call waits on {host}: {body}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn finding_11_a_client_tool_call_on_another_replica_says_so() {
    let cluster = TestCluster::start().expect("a PostgreSQL for the test");
    let database_url = cluster.fresh_database_url().expect("a database of the test's own");
    let dir = tempfile::tempdir().expect("tempdir");
    let endpoint = model_server(answer);
    let config = json!({
        "llm_models": [{ "value": "scripted", "label": "Scripted", "endpoint": endpoint,
            "context_window": 32768 }],
        "llm_model": "scripted",
        "server": { "database_url": database_url },
    });
    let config = write_json(dir.path(), "rein.json", &config);
    let (_a, a) = serve(&["--config", &config], &dir.path().join("data-a"));
    let (_b, b) = serve(&["--config", &config], &dir.path().join("data-b"));

    create_session(&a, "s1", None);
    let tools = json!({ "tools": [{ "name": "set_color", "description": "Paints the map.",
        "inputSchema": { "type": "object", "properties": { "color": { "type": "string" } } } }] });
    let path = format!("{RT}/sessions/s1/client-tools");
    let (status, body) = http(&a, "PUT", &path, Some(&tools.to_string()), None);
    assert_eq!(status, 200, "{body}");
    let (status, body) = http(&b, "GET", &path, None, None);
    assert_eq!(status, 200, "{body}");
    assert_eq!(parse(&body)["tools"], json!([]), "the set lives in A's memory");

    let turn = send_in_background(&a, "s1", "paint", None);
    let call_id = pending_call(&a, "s1");
    let claim = format!("{RT}/sessions/s1/client-tools/{call_id}/claim");
    let result = format!("{RT}/sessions/s1/client-tools/{call_id}/result");
    let painted = json!({ "content": "painted red" }).to_string();
    for (route, body) in [(&claim, None), (&result, Some(painted.as_str()))] {
        let (status, refused) = http(&b, "POST", route, body, None);
        assert_eq!(status, 421, "{route} through B: {refused}");
        let refused = parse(&refused);
        assert_eq!(refused["error"]["code"], "hosted_turn_on_other_replica", "{refused}");
        assert_eq!(refused["error"]["details"]["sessionId"], "s1");
    }

    let (status, body) = http(&a, "POST", &claim, None, None);
    assert_eq!(status, 200, "{body}");
    let (status, body) = http(&a, "POST", &result, Some(&painted), None);
    assert_eq!(status, 200, "{body}");
    let (status, run) = turn.join().expect("the turn's thread");
    assert_eq!(status, 200, "{run}");
    assert_eq!(parse(&run)["finalMessage"]["content"], "Done.", "{run}");

    // The turn is over: nothing waits on any replica.
    let (status, gone) = http(&b, "POST", &result, Some(&painted), None);
    assert_eq!(status, 404, "{gone}");
    assert_eq!(parse(&gone)["error"]["code"], "hosted_client_tool_call_not_found", "{gone}");
}
