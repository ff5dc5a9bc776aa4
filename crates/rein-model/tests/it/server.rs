//! A scripted HTTP server on 127.0.0.1: records every request, answers from a script.

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use rein_model::{ModelRegistry, ModelsConfig, ProviderModel, RegistryOptions};
use rein_protocol::{Model, ModelError, ModelReply, ModelRequest, ReplyDelta};
use serde::Serialize;
use serde_json::Value;

/// One scripted answer.
#[derive(Debug, Clone)]
pub(crate) enum Reply {
    /// A status with a body and a content type.
    Body {
        status: u16,
        content_type: &'static str,
        body: Vec<u8>,
        headers: Vec<(&'static str, String)>,
    },
    /// An SSE body sent as these pieces, one HTTP chunk each.
    Chunks { content_type: &'static str, pieces: Vec<Vec<u8>> },
    /// Waits, then answers.
    Delayed(Duration, Box<Reply>),
    /// A status whose body is `template` with the request filled in: `{authorization}`,
    /// `{x-api-key}`, `{x-goog-api-key}` (those headers), `{bearer}` (the Authorization value
    /// without its scheme), `{uri}` (path and query) and `{headers}` (every header, one
    /// `name: value` line each) — a server that echoes what it was sent.
    Echo { status: u16, content_type: &'static str, template: String },
}

impl Reply {
    pub(crate) fn json(status: u16, value: Value) -> Reply {
        Reply::Body {
            status,
            content_type: "application/json",
            body: value.to_string().into_bytes(),
            headers: vec![],
        }
    }

    pub(crate) fn text(status: u16, text: &str) -> Reply {
        Reply::Body {
            status,
            content_type: "text/plain",
            body: text.as_bytes().to_vec(),
            headers: vec![],
        }
    }

    pub(crate) fn with_header(self, name: &'static str, value: &str) -> Reply {
        match self {
            Reply::Body { status, content_type, body, mut headers } => {
                headers.push((name, value.to_owned()));
                Reply::Body { status, content_type, body, headers }
            }
            other => other,
        }
    }

    /// An SSE body from `data:` payloads (each `data: X\n\n`), sent in one piece.
    pub(crate) fn sse(events: &[&str]) -> Reply {
        Reply::sse_pieces(vec![sse_body(events)])
    }

    pub(crate) fn sse_pieces(pieces: Vec<Vec<u8>>) -> Reply {
        Reply::Chunks { content_type: "text/event-stream", pieces }
    }

    pub(crate) fn echo(status: u16, content_type: &'static str, template: &str) -> Reply {
        Reply::Echo { status, content_type, template: template.to_owned() }
    }

    pub(crate) fn delayed(self, delay: Duration) -> Reply {
        Reply::Delayed(delay, Box::new(self))
    }
}

/// `data: X\n\n` for each payload (a payload may carry its own `event:` line first).
pub(crate) fn sse_body(events: &[&str]) -> Vec<u8> {
    let mut body = String::new();
    for event in events {
        if let Some(rest) = event.strip_prefix("event: ") {
            let (name, data) = rest.split_once('\n').unwrap();
            body.push_str(&format!("event: {name}\ndata: {data}\n\n"));
        } else {
            body.push_str(&format!("data: {event}\n\n"));
        }
    }
    body.into_bytes()
}

/// A request as the server saw it.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct Recorded {
    pub(crate) method: String,
    pub(crate) path: String,
    /// The headers that matter for the wire contract.
    pub(crate) headers: BTreeMap<String, String>,
    pub(crate) body: Value,
    #[serde(skip)]
    pub(crate) raw_body: Vec<u8>,
    #[serde(skip)]
    pub(crate) all_headers: BTreeMap<String, String>,
}

const SNAPSHOT_HEADERS: &[&str] = &[
    "accept",
    "anthropic-version",
    "authorization",
    "content-type",
    "x-api-key",
    "x-client",
    "x-goog-api-key",
];

#[derive(Clone, Default)]
struct Shared {
    script: Arc<Mutex<VecDeque<Reply>>>,
    recorded: Arc<Mutex<Vec<Recorded>>>,
}

/// A running scripted server; stopped when dropped.
pub(crate) struct Server {
    pub(crate) url: String,
    shared: Shared,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Server {
    /// Starts a server on 127.0.0.1 answering with `script`, one reply per request.
    pub(crate) async fn start(script: Vec<Reply>) -> Server {
        let shared = Shared::default();
        shared.script.lock().unwrap().extend(script);
        let app = axum::Router::new().fallback(handle).with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Server { url, shared, task }
    }

    /// The requests seen so far.
    pub(crate) fn requests(&self) -> Vec<Recorded> {
        self.shared.recorded.lock().unwrap().clone()
    }

    /// The one request seen (panics otherwise).
    pub(crate) fn request(&self) -> Recorded {
        let requests = self.requests();
        assert_eq!(requests.len(), 1, "expected exactly one request, got {requests:#?}");
        requests.into_iter().next().unwrap()
    }
}

async fn handle(
    State(shared): State<Shared>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let all_headers: BTreeMap<String, String> = headers
        .iter()
        .map(|(name, value)| {
            (name.as_str().to_owned(), value.to_str().unwrap_or("<binary>").to_owned())
        })
        .collect();
    let snapshot_headers = all_headers
        .iter()
        .filter(|(name, _)| SNAPSHOT_HEADERS.contains(&name.as_str()))
        .map(|(name, value)| (name.clone(), value.clone()))
        .collect();
    shared.recorded.lock().unwrap().push(Recorded {
        method: method.to_string(),
        path: uri.to_string(),
        headers: snapshot_headers,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        raw_body: body.to_vec(),
        all_headers: all_headers.clone(),
    });
    let reply = shared.script.lock().unwrap().pop_front();
    let Some(reply) = reply else {
        return Response::builder().status(599).body(Body::from("script exhausted")).unwrap();
    };
    let reply = match reply {
        Reply::Echo { status, content_type, template } => Reply::Body {
            status,
            content_type,
            body: echo(&template, &all_headers, &uri).into_bytes(),
            headers: vec![],
        },
        other => other,
    };
    respond(reply).await
}

/// Fills an echo template from the request.
fn echo(template: &str, headers: &BTreeMap<String, String>, uri: &Uri) -> String {
    let header = |name: &str| headers.get(name).cloned().unwrap_or_default();
    let authorization = header("authorization");
    let bearer = authorization.strip_prefix("Bearer ").unwrap_or(&authorization).to_owned();
    let all: String = headers.iter().map(|(name, value)| format!("{name}: {value}\n")).collect();
    template
        .replace("{authorization}", &authorization)
        .replace("{x-api-key}", &header("x-api-key"))
        .replace("{x-goog-api-key}", &header("x-goog-api-key"))
        .replace("{bearer}", &bearer)
        .replace("{uri}", &uri.to_string())
        .replace("{headers}", &all)
}

async fn respond(mut reply: Reply) -> Response {
    while let Reply::Delayed(delay, inner) = reply {
        tokio::time::sleep(delay).await;
        reply = *inner;
    }
    match reply {
        Reply::Body { status, content_type, body, headers } => {
            let mut response = Response::builder().status(StatusCode::from_u16(status).unwrap());
            response = response.header("content-type", content_type);
            for (name, value) in headers {
                response = response.header(name, value);
            }
            response.body(Body::from(body)).unwrap()
        }
        Reply::Chunks { content_type, pieces } => {
            let stream = futures::stream::iter(
                pieces.into_iter().map(|piece| Ok::<_, Infallible>(Bytes::from(piece))),
            );
            Response::builder()
                .status(200)
                .header("content-type", content_type)
                .body(Body::from_stream(stream))
                .unwrap()
        }
        Reply::Delayed(..) => unreachable!("delays are unwrapped above"),
        Reply::Echo { .. } => unreachable!("echoes are filled in by `handle`"),
    }
}

/// A registry from a JSON config, with no environment.
pub(crate) fn registry(config: Value) -> ModelRegistry {
    registry_with(config, RegistryOptions::default())
}

pub(crate) fn registry_with(config: Value, options: RegistryOptions) -> ModelRegistry {
    let config: ModelsConfig = serde_json::from_value(config).unwrap();
    ModelRegistry::from_config_with_env(&config, &options, |_| None).unwrap()
}

/// The first model of a one-model config: `entry` plus `endpoint` pointing at `server`.
pub(crate) fn model(
    server: &Server,
    provider: &str,
    mut entry: Value,
    global: Value,
) -> Arc<ProviderModel> {
    let endpoint = match provider {
        "gemini" => format!("{}/v1beta", server.url),
        _ => format!("{}/v1", server.url),
    };
    entry["provider"] = provider.into();
    entry["endpoint"] = endpoint.into();
    if entry.get("value").is_none() {
        entry["value"] = "test-model".into();
    }
    let mut config = global;
    config["llm_models"] = Value::Array(vec![entry]);
    registry(config).default_model()
}

/// Calls the model, collecting the deltas it streamed.
pub(crate) async fn complete(
    model: &ProviderModel,
    request: &ModelRequest,
) -> (Result<ModelReply, ModelError>, Vec<ReplyDelta>) {
    let deltas = Mutex::new(Vec::new());
    let sink = |delta: ReplyDelta| deltas.lock().unwrap().push(delta);
    let result = model.complete(request, &sink).await;
    (result, deltas.into_inner().unwrap())
}

/// Text and reasoning deltas joined, for comparing with the assembled reply.
pub(crate) fn joined(deltas: &[ReplyDelta]) -> (String, String) {
    let mut text = String::new();
    let mut reasoning = String::new();
    for delta in deltas {
        match delta {
            ReplyDelta::Text { text: piece } => text.push_str(piece),
            ReplyDelta::Reasoning { text: piece } => reasoning.push_str(piece),
            _ => {}
        }
    }
    (text, reasoning)
}

/// A raw TCP server: for each connection in turn, reads one request and writes `raw` bytes
/// as they are, then closes (a way to break a response at an exact byte). Returns the URL and
/// a counter of connections served.
pub(crate) async fn raw_server(
    responses: Vec<Vec<u8>>,
) -> (String, Arc<Mutex<usize>>, tokio::task::JoinHandle<()>) {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let served = Arc::new(Mutex::new(0));
    let counter = served.clone();
    let task = tokio::spawn(async move {
        for raw in responses {
            let Ok((mut socket, _)) = listener.accept().await else { return };
            let mut request = Vec::new();
            let mut buffer = [0u8; 4096];
            // Read the head, then as many body bytes as Content-Length says.
            loop {
                let read = socket.read(&mut buffer).await.unwrap_or(0);
                if read == 0 {
                    break;
                }
                request.extend_from_slice(&buffer[..read]);
                let text = String::from_utf8_lossy(&request).to_string();
                if let Some(end) = text.find("\r\n\r\n") {
                    let length = text[..end]
                        .lines()
                        .find_map(|line| {
                            line.to_ascii_lowercase()
                                .strip_prefix("content-length:")
                                .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                        })
                        .unwrap_or(0);
                    if request.len() >= end + 4 + length {
                        break;
                    }
                }
            }
            *counter.lock().unwrap() += 1;
            let _ = socket.write_all(&raw).await;
            let _ = socket.shutdown().await;
        }
    });
    (url, served, task)
}
