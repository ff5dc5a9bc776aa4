//! `cargo xtask bench model`: rein-model's client-side cost per request and per streamed chunk.
//!
//! A minimal keep-alive HTTP/1.1 server on 127.0.0.1 answers every request at once with a
//! canned body, so the figures are the client's work: shaping, sending, reading, decoding.

use std::sync::Arc;
use std::time::Instant;

use rein_model::{ModelRegistry, ModelsConfig, ProviderKind, RegistryOptions};
use rein_protocol::{DeltaSink, Message, Model, ModelRequest, ReplyDelta};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

use super::Figures;

const PLAIN_REQUESTS: usize = 3000;
const STREAM_REQUESTS: usize = 200;
const CHUNKS_PER_STREAM: usize = 200;
const DECODE_ROUNDS: usize = 200;

fn openai_stream(chunks: usize) -> Vec<u8> {
    let mut body = String::new();
    for index in 0..chunks {
        let chunk = serde_json::json!({
            "id": "chatcmpl-bench", "object": "chat.completion.chunk", "model": "bench",
            "choices": [{"index": 0, "delta": {"content": format!("token{index} ")}, "finish_reason": null}],
        });
        body.push_str(&format!("data: {chunk}\n\n"));
    }
    let last = serde_json::json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": chunks, "total_tokens": chunks + 10}});
    body.push_str(&format!("data: {last}\n\ndata: [DONE]\n\n"));
    body.into_bytes()
}

fn anthropic_stream(chunks: usize) -> Vec<u8> {
    let mut events = vec![
        serde_json::json!({"type": "message_start", "message": {"model": "bench", "usage": {"input_tokens": 10, "output_tokens": 1}}}),
        serde_json::json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
    ];
    for index in 0..chunks {
        events.push(serde_json::json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": format!("token{index} ")}}));
    }
    events.push(serde_json::json!({"type": "content_block_stop", "index": 0}));
    events.push(serde_json::json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": chunks}}));
    events.push(serde_json::json!({"type": "message_stop"}));
    let mut body = String::new();
    for event in events {
        body.push_str(&format!(
            "event: {}\ndata: {event}\n\n",
            event["type"].as_str().unwrap_or("")
        ));
    }
    body.into_bytes()
}

fn response(content_type: &str, body: &[u8]) -> Vec<u8> {
    let mut raw = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nconnection: keep-alive\r\n\r\n",
        body.len()
    )
    .into_bytes();
    raw.extend_from_slice(body);
    raw
}

/// Serves one keep-alive connection: `/stream/...` gets the SSE body, anything else the plain one.
async fn serve(mut socket: tokio::net::TcpStream, plain: Arc<Vec<u8>>, stream: Arc<Vec<u8>>) {
    let mut buffer = Vec::with_capacity(16 * 1024);
    let mut scratch = [0u8; 16 * 1024];
    loop {
        // Read one request: the head, then Content-Length bytes of body.
        let (head_end, length) = loop {
            if let Some(end) = buffer.windows(4).position(|window| window == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buffer[..end]).to_ascii_lowercase();
                let length = head
                    .lines()
                    .find_map(|line| {
                        line.strip_prefix("content-length:")
                            .map(|value| value.trim().parse().unwrap_or(0))
                    })
                    .unwrap_or(0usize);
                break (end + 4, length);
            }
            match socket.read(&mut scratch).await {
                Ok(0) | Err(_) => return,
                Ok(read) => buffer.extend_from_slice(&scratch[..read]),
            }
        };
        while buffer.len() < head_end + length {
            match socket.read(&mut scratch).await {
                Ok(0) | Err(_) => return,
                Ok(read) => buffer.extend_from_slice(&scratch[..read]),
            }
        }
        let streaming = buffer.starts_with(b"POST /stream/");
        buffer.drain(..head_end + length);
        let reply = if streaming { &stream } else { &plain };
        if socket.write_all(reply).await.is_err() {
            return;
        }
    }
}

pub(crate) fn run() -> anyhow::Result<Figures> {
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    runtime.block_on(async {
        let plain_body = serde_json::json!({
            "id": "chatcmpl-bench", "model": "bench",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello from the bench server."}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 6, "total_tokens": 16},
        })
        .to_string();
        let plain = Arc::new(response("application/json", plain_body.as_bytes()));
        let stream = Arc::new(response("text/event-stream", &openai_stream(CHUNKS_PER_STREAM)));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let address = listener.local_addr()?;
        let server = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let _ = socket.set_nodelay(true);
                tokio::spawn(serve(socket, plain.clone(), stream.clone()));
            }
        });

        let config: ModelsConfig = serde_json::from_value(serde_json::json!({"llm_models": [
            {"value": "plain", "endpoint": format!("http://{address}/plain/v1"), "stream": false},
            {"value": "stream", "endpoint": format!("http://{address}/stream/v1")},
        ]}))?;
        let registry = ModelRegistry::from_config_with_env(&config, &RegistryOptions::default(), |_| None)?;
        let plain_model = registry.get("plain").ok_or_else(|| anyhow::anyhow!("no plain model"))?;
        let stream_model = registry.get("stream").ok_or_else(|| anyhow::anyhow!("no stream model"))?;
        let request = ModelRequest::new(vec![Message::system("You are a bench."), Message::user("Say hello.")], vec![]);
        let ignore = |_: ReplyDelta| {};
        let sink: DeltaSink<'_> = &ignore;

        for _ in 0..100 {
            plain_model.complete(&request, sink).await?;
        }
        let start = Instant::now();
        for _ in 0..PLAIN_REQUESTS {
            plain_model.complete(&request, sink).await?;
        }
        let plain_seconds = start.elapsed().as_secs_f64();

        for _ in 0..10 {
            stream_model.complete(&request, sink).await?;
        }
        let start = Instant::now();
        for _ in 0..STREAM_REQUESTS {
            let reply = stream_model.complete(&request, sink).await?;
            anyhow::ensure!(reply.content.len() > CHUNKS_PER_STREAM, "the stream was not assembled");
        }
        let stream_seconds = start.elapsed().as_secs_f64();
        server.abort();

        let decode = |kind: ProviderKind, body: &[u8]| -> anyhow::Result<f64> {
            let start = Instant::now();
            for _ in 0..DECODE_ROUNDS {
                let (events, ok) = rein_model::fuzz::decode_stream(kind, body);
                anyhow::ensure!(ok && events > CHUNKS_PER_STREAM, "decoding failed");
            }
            Ok(start.elapsed().as_secs_f64() * 1e6 / (DECODE_ROUNDS * CHUNKS_PER_STREAM) as f64)
        };
        let openai_decode = decode(ProviderKind::OpenAi, &openai_stream(CHUNKS_PER_STREAM))?;
        let anthropic_decode = decode(ProviderKind::Anthropic, &anthropic_stream(CHUNKS_PER_STREAM))?;

        Ok(vec![
            ("plain_requests_per_s".to_owned(), PLAIN_REQUESTS as f64 / plain_seconds),
            ("plain_request_us".to_owned(), plain_seconds * 1e6 / PLAIN_REQUESTS as f64),
            ("stream_requests_per_s".to_owned(), STREAM_REQUESTS as f64 / stream_seconds),
            (
                "stream_chunk_over_http_us".to_owned(),
                stream_seconds * 1e6 / (STREAM_REQUESTS * CHUNKS_PER_STREAM) as f64,
            ),
            ("openai_chunk_decode_us".to_owned(), openai_decode),
            ("anthropic_chunk_decode_us".to_owned(), anthropic_decode),
        ])
    })
}
