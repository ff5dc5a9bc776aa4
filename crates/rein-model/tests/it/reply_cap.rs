//! `max_reply_bytes`: a reply past it, streamed or not, ends as cut at the output limit
//! (stop reason `length`) and is never read whole.

use rein_protocol::StopReason;
use serde_json::json;

use crate::fixtures::hello;
use crate::server::{Reply, Server, complete, joined, model};

/// An OpenAI stream of `pieces` chunks of ten letters each, sent one HTTP chunk per event.
fn long_stream(pieces: usize) -> Reply {
    let mut events: Vec<Vec<u8>> = (0..pieces)
        .map(|_| {
            let chunk = json!({"choices": [{"index": 0, "delta": {"content": "abcdefghij"}}]});
            format!("data: {chunk}\n\n").into_bytes()
        })
        .collect();
    let last = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]});
    events.push(format!("data: {last}\n\ndata: [DONE]\n\n").into_bytes());
    Reply::sse_pieces(events)
}

#[tokio::test]
async fn a_streamed_reply_past_max_reply_bytes_is_cut_there() {
    for provider_cap in [2_000u64, 5_000] {
        let server = Server::start(vec![long_stream(1_000)]).await;
        let model = model(&server, "openai", json!({"max_reply_bytes": provider_cap}), json!({}));
        assert_eq!(model.max_reply_bytes() as u64, provider_cap);
        let (reply, deltas) = complete(&model, &hello()).await;
        let reply = reply.expect("a cut reply, not an error");
        assert_eq!(reply.stop_reason, StopReason::Length);
        // Each event is about 80 bytes for 10 letters of text.
        assert!(!reply.content.is_empty());
        assert!((reply.content.len() as u64) < provider_cap, "{}", reply.content.len());
        assert!(reply.content.chars().all(|c| c.is_ascii_lowercase()));
        assert_eq!(joined(&deltas).0, reply.content, "what was streamed is the reply");
        assert_eq!(server.requests().len(), 1, "a cut reply is not retried");
    }
}

#[tokio::test]
async fn a_streamed_reply_under_the_cap_is_whole() {
    let server = Server::start(vec![long_stream(10)]).await;
    let model = model(&server, "openai", json!({"max_reply_bytes": 10_000}), json!({}));
    let reply = complete(&model, &hello()).await.0.unwrap();
    assert_eq!((reply.stop_reason, reply.content.len()), (StopReason::Stop, 100));
}

#[tokio::test]
async fn a_plain_reply_past_max_reply_bytes_is_cut_with_nothing_read() {
    let text = "x".repeat(10_000);
    let body = json!({"choices": [{"message": {"content": text}, "finish_reason": "stop"}]});
    let server = Server::start(vec![Reply::json(200, body.clone())]).await;
    let small =
        model(&server, "openai", json!({"stream": false, "max_reply_bytes": 4_096}), json!({}));
    let reply = complete(&small, &hello()).await.0.expect("a cut reply");
    assert_eq!((reply.stop_reason, reply.content.as_str()), (StopReason::Length, ""));

    let server = Server::start(vec![Reply::json(200, body)]).await;
    let large =
        model(&server, "openai", json!({"stream": false, "max_reply_bytes": 20_000}), json!({}));
    let reply = complete(&large, &hello()).await.0.unwrap();
    assert_eq!(reply.content.len(), 10_000);
}

#[tokio::test]
async fn the_default_cap_is_four_mib_and_each_provider_cuts_its_stream() {
    let server = Server::start(vec![]).await;
    let openai = model(&server, "openai", json!({}), json!({}));
    assert_eq!(openai.max_reply_bytes() as u64, rein_model::DEFAULT_MAX_REPLY_BYTES);
    assert_eq!(rein_model::DEFAULT_MAX_REPLY_BYTES, 4_194_304);

    let text_delta = json!({
        "type": "content_block_delta",
        "index": 0,
        "delta": {"type": "text_delta", "text": "abcdefghij"},
    });
    let start = json!({
        "type": "message_start",
        "message": {"model": "claude", "usage": {"input_tokens": 3}},
    });
    let block = json!({
        "type": "content_block_start",
        "index": 0,
        "content_block": {"type": "text", "text": ""},
    });
    let mut anthropic: Vec<Vec<u8>> = vec![
        format!("event: message_start\ndata: {start}\n\n").into_bytes(),
        format!("event: content_block_start\ndata: {block}\n\n").into_bytes(),
    ];
    anthropic.extend(
        (0..500)
            .map(|_| format!("event: content_block_delta\ndata: {text_delta}\n\n").into_bytes()),
    );
    let gemini_chunk = json!({
        "candidates": [{"content": {"role": "model", "parts": [{"text": "abcdefghij"}]}}],
    });
    let gemini: Vec<Vec<u8>> =
        (0..500).map(|_| format!("data: {gemini_chunk}\n\n").into_bytes()).collect();
    for (provider, pieces) in [("anthropic", anthropic), ("gemini", gemini)] {
        let server = Server::start(vec![Reply::sse_pieces(pieces)]).await;
        let model = model(&server, provider, json!({"max_reply_bytes": 3_000}), json!({}));
        let reply =
            complete(&model, &hello()).await.0.unwrap_or_else(|e| panic!("{provider}: {e}"));
        assert_eq!(reply.stop_reason, StopReason::Length, "{provider}");
        assert!(!reply.content.is_empty() && reply.content.len() < 3_000, "{provider}");
    }
}
