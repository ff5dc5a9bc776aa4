//! Elicitation modes against a hand-written stdio server (`servers/url_asker.py`) that asks in
//! whichever mode it is told, whatever rein declared: rein declares only the form mode, a form
//! request reaches the host, and a URL-mode request (a `javascript:` page or an `https` one) is
//! declined before any host sees it.

use std::sync::{Arc, Mutex};

use rein_mcp::{
    ElicitFlow, ElicitationAnswer, ElicitationRequest, Elicitor, McpToolSource, StdioServer,
};
use serde_json::{Value, json};

use crate::support::{call, fast_options, peers, server_file};

/// Plays the host: keeps every request it is shown, and answers a name.
#[derive(Default)]
struct Recorder(Mutex<Vec<ElicitationRequest>>);

#[async_trait::async_trait]
impl ElicitFlow for Recorder {
    async fn elicit(&self, request: ElicitationRequest) -> ElicitationAnswer {
        self.0.lock().unwrap().push(request);
        ElicitationAnswer::Accept(json!({"name": "Ada"}).as_object().cloned().unwrap())
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_declared_form_mode_reaches_the_host_and_a_url_mode_request_is_declined() {
    let recorder = Arc::new(Recorder::default());
    let mut options = fast_options();
    options.elicitor = Some(Elicitor(recorder.clone()));
    let server = StdioServer::new(&peers().python, [server_file("url_asker.py")]);
    let source = McpToolSource::new("asker", server, options);

    let declared = call(&source, "declared", json!({})).await;
    let declared: Value = serde_json::from_str(&declared.text).unwrap();
    assert_eq!(declared, json!({"form": {"schemaValidation": true}}), "form mode only");

    for url in ["javascript:alert(document.cookie)", "https://pay.example/checkout?order=7"] {
        let output = call(&source, "open_page", json!({"url": url})).await;
        assert!(!output.is_error, "{output:?}");
        assert_eq!(output.text, r#"{"action": "decline"}"#, "{url}");
    }
    assert!(recorder.0.lock().unwrap().is_empty(), "no URL-mode request reached the host");

    let output = call(&source, "ask_name", json!({})).await;
    assert_eq!(output.text, r#"{"action": "accept", "content": {"name": "Ada"}}"#);
    let seen = recorder.0.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert_eq!((seen[0].server.as_str(), seen[0].message.as_str()), ("asker", "Who are you?"));
    assert_eq!(seen[0].requested_schema["required"], json!(["name"]));
    source.close().await;
}
