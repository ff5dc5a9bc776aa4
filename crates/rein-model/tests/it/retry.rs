//! Timeouts and the one retry: what is retried, what is not, and that both attempts match.

use std::time::Duration;

use rein_protocol::ModelErrorKind;
use serde_json::json;

use crate::fixtures::{hello, tool_round};
use crate::server::{Reply, Server, complete, model, registry};

fn ok() -> Reply {
    Reply::json(
        200,
        json!({"choices": [{"message": {"content": "fine"}, "finish_reason": "stop"}]}),
    )
}

#[tokio::test]
async fn a_5xx_is_retried_once_with_identical_bytes() {
    let server = Server::start(vec![Reply::text(502, "bad gateway"), ok()]).await;
    let model = model(&server, "openai", json!({"stream": false}), json!({}));
    assert_eq!(complete(&model, &tool_round()).await.0.unwrap().content, "fine");
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(requests[0].raw_body, requests[1].raw_body);
}

#[tokio::test]
async fn the_retrys_error_propagates() {
    let server =
        Server::start(vec![Reply::text(500, "first"), Reply::text(503, "second"), ok()]).await;
    let model = model(&server, "openai", json!({"stream": false}), json!({}));
    let error = complete(&model, &hello()).await.0.unwrap_err();
    assert_eq!(
        (error.kind, error.status, error.message.as_str()),
        (ModelErrorKind::Retryable, Some(503), "second")
    );
    assert_eq!(server.requests().len(), 2, "exactly one retry");
}

#[tokio::test]
async fn a_200_without_choices_is_retried_once() {
    let server =
        Server::start(vec![Reply::json(200, json!({"object": "chat.completion"})), ok()]).await;
    let model = model(&server, "openai", json!({"stream": false}), json!({}));
    assert_eq!(complete(&model, &hello()).await.0.unwrap().content, "fine");
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn a_4xx_is_never_retried_not_even_429() {
    for status in [400, 404, 422, 429] {
        let server = Server::start(vec![Reply::text(status, "no"), ok()]).await;
        let model = model(&server, "openai", json!({"stream": false}), json!({}));
        let error = complete(&model, &hello()).await.0.unwrap_err();
        assert_eq!(error.status, Some(status));
        assert_eq!(server.requests().len(), 1, "{status}");
    }
}

#[tokio::test]
async fn a_timeout_is_retried_once() {
    let server = Server::start(vec![ok().delayed(Duration::from_secs(30)), ok()]).await;
    let model =
        model(&server, "openai", json!({"stream": false, "llm_timeout_seconds": 0.3}), json!({}));
    assert_eq!(complete(&model, &hello()).await.0.unwrap().content, "fine");
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn two_timeouts_are_a_retryable_timeout_error() {
    let slow = ok().delayed(Duration::from_secs(30));
    let server = Server::start(vec![slow.clone(), slow]).await;
    let model = model(&server, "openai", json!({"llm_timeout_seconds": 0.2}), json!({}));
    let error = complete(&model, &hello()).await.0.unwrap_err();
    assert_eq!(error.kind, ModelErrorKind::Retryable);
    assert!(error.message.contains("timed out"), "{}", error.message);
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn a_stream_that_stalls_times_out() {
    let server = Server::start(vec![
        Reply::sse_pieces(vec![b": waiting\n\n".to_vec()]).delayed(Duration::from_secs(30)),
        Reply::sse(&[
            r#"{"choices":[{"delta":{"content":"late"},"finish_reason":"stop"}]}"#,
            "[DONE]",
        ]),
    ])
    .await;
    let model = model(&server, "openai", json!({"llm_timeout_seconds": 0.3}), json!({}));
    assert_eq!(complete(&model, &hello()).await.0.unwrap().content, "late");
}

#[tokio::test]
async fn a_network_error_is_retried_once_then_typed() {
    // A port that was just free: nothing listens there.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let config = json!({"llm_models": [{"value": "m", "endpoint": format!("http://127.0.0.1:{port}/v1"), "llm_timeout_seconds": 5}]});
    let error = complete(&registry(config).default_model(), &hello()).await.0.unwrap_err();
    assert_eq!((error.kind, error.status), (ModelErrorKind::Retryable, None));
}

#[tokio::test]
async fn a_dropped_request_abandons_the_call() {
    // Cancel-safety: the loop stops a turn by dropping the future.
    let server = Server::start(vec![ok().delayed(Duration::from_secs(30))]).await;
    let model = model(&server, "openai", json!({"stream": false}), json!({}));
    let request = hello();
    let arrived = async {
        while server.requests().is_empty() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::select! {
        _ = complete(&model, &request) => panic!("the reply is 30 s away"),
        () = arrived => {}
    }
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(server.requests().len(), 1, "no retry after a drop");
}
