//! `ProviderModel`: one configured model behind HTTP, with the timeout, retry and redaction rules.
//!
//! Redaction happens at one place, [`Model::complete`], the only way out of this crate for
//! what a provider sent: every `ModelError` (from a status and body, an error object in a 200
//! or a stream, a transport error that names the URL, a reply that could not be read) has its
//! message scrubbed of the model's configured secrets and of credential shapes; every streamed
//! delta and the assembled reply have the configured secrets (only) taken out. Provider data
//! is left as it is: it must go back to the provider byte for byte.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt as _;
use futures::future::{Either, select};
use rein_protocol::{
    DeltaSink, Model, ModelError, ModelErrorKind, ModelInfo, ModelReply, ModelRequest, Redactor,
    ReplyDelta, StopReason,
};

use crate::config::{MAX_ATTEMPTS, ProviderKind, RETRY_TIMEOUT_CAP, Shaping};
use crate::error::{
    AttemptError, EndpointError, RetryPlan, TIMEOUT_HINT, from_status, parse_retry_after,
    retry_plan, retry_reason,
};
use crate::sse::SseDecoder;
use crate::transport::{BodyStream, HttpRequest, HttpTransport, TransportError};
use crate::wire::{Assembler, Prepared, Target};
use crate::{anthropic, gemini, openai};

/// A model served over HTTP by one of the supported providers.
///
/// Built by [`ModelRegistry`](crate::ModelRegistry). Each call sends one request (streamed
/// unless `stream` is off), with a per-attempt timeout; a timeout, a network error (a refused
/// connection, one closed before the answer), a 5xx or a 200 without choices is retried once
/// at once; a 429 or 503 with a `Retry-After` is retried after the wait it asks for, when that
/// is at most `max_retry_wait_seconds` (at most [`MAX_ATTEMPTS`](crate::MAX_ATTEMPTS) in all).
/// Nothing is retried once part of the reply was streamed out. Each retry is announced as a
/// [`ReplyDelta::Retry`] first. A reply is read up to `max_reply_bytes`; past it, it ends as
/// cut at the output limit. What comes back is redacted: see [`ProviderModel::redactor`].
pub struct ProviderModel {
    pub(crate) info: ModelInfo,
    pub(crate) kind: ProviderKind,
    pub(crate) model: String,
    pub(crate) endpoint: String,
    pub(crate) api_key: Option<String>,
    pub(crate) client_header: Option<String>,
    pub(crate) shaping: Shaping,
    /// Sends the requests and keeps the time (reqwest and tokio natively).
    pub(crate) transport: Arc<dyn HttpTransport>,
    /// What an [`EndpointError`] tells a person to do when the endpoint cannot be reached.
    pub(crate) unreachable_hint: String,
    /// Knows the key (and the endpoint's user-info password), and scrubs what leaves.
    pub(crate) redactor: Redactor,
}

impl std::fmt::Debug for ProviderModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderModel")
            .field("name", &self.info.name)
            .field("provider", &self.kind)
            .field("model", &self.model)
            .field("endpoint", &self.redactor.redact(&self.endpoint))
            .field("api_key", &self.api_key.as_ref().map(|_| "<set>"))
            .field("client_header", &self.client_header)
            .finish_non_exhaustive()
    }
}

impl ProviderModel {
    /// The provider this model speaks to.
    pub fn provider(&self) -> ProviderKind {
        self.kind
    }

    /// The model string sent on the wire.
    pub fn wire_model(&self) -> &str {
        &self.model
    }

    /// The base endpoint.
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    /// The per-attempt timeout.
    pub fn timeout(&self) -> Duration {
        self.shaping.timeout
    }

    /// The X-Client value this model sends (its endpoint is a trusted host), if any.
    pub fn client_header(&self) -> Option<&str> {
        self.client_header.as_deref()
    }

    /// Whether replies are streamed.
    pub fn streams(&self) -> bool {
        self.shaping.stream
    }

    /// The longest `Retry-After` waited for before a request is sent again.
    pub fn max_retry_wait(&self) -> Duration {
        self.shaping.max_retry_wait
    }

    /// The most bytes of one reply read; past it the reply is ended as cut.
    pub fn max_reply_bytes(&self) -> usize {
        self.shaping.max_reply_bytes
    }

    /// The redactor applied to everything this model returns: error messages lose the
    /// configured key, the endpoint's user-info password and every credential shape; streamed
    /// deltas and replies lose the configured secrets.
    pub fn redactor(&self) -> &Redactor {
        &self.redactor
    }

    /// The exact request body this model would send for `request`, as JSON (for inspection
    /// and tests; sending it is [`Model::complete`]).
    pub fn request_body(&self, request: &ModelRequest) -> serde_json::Value {
        let prepared = self.prepare(request);
        serde_json::from_slice(&prepared.body).expect("a prepared body is JSON")
    }

    fn prepare(&self, request: &ModelRequest) -> Prepared {
        let target = Target {
            model: &self.model,
            endpoint: &self.endpoint,
            api_key: self.api_key.as_deref(),
            shaping: &self.shaping,
            max_output_tokens: self.info.max_output_tokens,
        };
        match self.kind {
            ProviderKind::Anthropic => anthropic::prepare(&target, request),
            ProviderKind::Gemini => gemini::prepare(&target, request),
            _ => openai::prepare(&target, request),
        }
    }

    fn parse_reply(&self, body: &[u8]) -> Result<ModelReply, ModelError> {
        match self.kind {
            ProviderKind::Anthropic => anthropic::parse_reply(body),
            ProviderKind::Gemini => gemini::parse_reply(body),
            _ => openai::parse_reply(body),
        }
    }

    fn assembler(&self) -> Box<dyn Assembler> {
        new_assembler(self.kind)
    }

    async fn attempt(
        &self,
        prepared: &Prepared,
        timeout: Duration,
        sink: DeltaSink<'_>,
    ) -> Result<ModelReply, AttemptError> {
        match within(self.transport.as_ref(), timeout, self.send(prepared, sink)).await {
            Some(result) => result.map_err(AttemptError::from),
            None => Err(AttemptError {
                error: EndpointError::TimedOut {
                    endpoint: self.endpoint.clone(),
                    seconds: (timeout.as_secs_f64().round() as u64).max(1),
                    hint: TIMEOUT_HINT.to_owned(),
                }
                .into(),
                timed_out: true,
            }),
        }
    }

    async fn send(
        &self,
        prepared: &Prepared,
        sink: DeltaSink<'_>,
    ) -> Result<ModelReply, ModelError> {
        let response = self
            .transport
            .post(self.http_request(prepared))
            .await
            .map_err(|error| self.network_error(error))?;
        let status = response.status;
        let cap = self.shaping.max_reply_bytes;
        if !(200..300).contains(&status) {
            let retry_after = parse_retry_after(
                response.header("retry-after-ms"),
                response.header("retry-after"),
                self.transport.now(),
            );
            let (body, _) =
                read_capped(response.body, cap.min(ERROR_BODY_BYTES)).await.unwrap_or_default();
            return Err(from_status(status, &body, retry_after));
        }
        let is_event_stream =
            response.header("content-type").is_some_and(|kind| kind.contains("text/event-stream"));
        if !(prepared.stream && is_event_stream) {
            // Also a server that ignores `stream: true` and answers with plain JSON.
            let announced_over = response.content_length.is_some_and(|length| length > cap as u64);
            let (body, over) = if announced_over {
                (Vec::new(), true)
            } else {
                read_capped(response.body, cap).await.map_err(|error| self.network_error(error))?
            };
            if over {
                // Cut JSON cannot be read: the reply is cut with nothing in it.
                let mut reply = ModelReply::default();
                reply.stop_reason = StopReason::Length;
                return Ok(reply);
            }
            return self.parse_reply(&body);
        }
        let mut assembler = self.assembler();
        let mut decoder = SseDecoder::new();
        let mut events = Vec::new();
        let mut body = response.body;
        let mut done = false;
        let mut received = 0usize;
        let mut over = false;
        while !done
            && !over
            && let Some(piece) = body.next().await
        {
            let mut piece = piece.map_err(|error| self.network_error(error))?;
            let room = cap.saturating_sub(received);
            if piece.len() > room {
                over = true;
                piece.truncate(room);
            }
            received += piece.len();
            decoder.feed(&piece, &mut events);
            for event in events.drain(..) {
                if assembler.event(&event, sink)? {
                    done = true;
                    break;
                }
            }
        }
        if over && !done {
            return Ok(assembler.cut());
        }
        if !done {
            decoder.finish(&mut events);
            for event in events.drain(..) {
                if assembler.event(&event, sink)? {
                    break;
                }
            }
        }
        assembler.finish()
    }
}

/// The most bytes of an error response's body read (its message is cut to 500 characters).
const ERROR_BODY_BYTES: usize = 64 * 1024;

/// Reads a body up to `cap` bytes: what was read, and whether the body went on past it (what
/// came past is not kept).
async fn read_capped(
    mut pieces: BodyStream,
    cap: usize,
) -> Result<(Vec<u8>, bool), TransportError> {
    let mut body = Vec::new();
    while let Some(piece) = pieces.next().await {
        let piece = piece?;
        let room = cap - body.len();
        if piece.len() > room {
            body.extend_from_slice(&piece[..room]);
            return Ok((body, true));
        }
        body.extend_from_slice(&piece);
    }
    Ok((body, false))
}

/// A fresh stream assembler for a provider.
pub(crate) fn new_assembler(kind: ProviderKind) -> Box<dyn Assembler> {
    match kind {
        ProviderKind::Anthropic => Box::new(anthropic::StreamAssembler::default()),
        ProviderKind::Gemini => Box::new(gemini::StreamAssembler::default()),
        _ => Box::new(openai::StreamAssembler::default()),
    }
}

/// `work`, or `None` when `limit` passed first (on the transport's clock).
async fn within<T>(
    transport: &dyn HttpTransport,
    limit: Duration,
    work: impl Future<Output = T>,
) -> Option<T> {
    match select(std::pin::pin!(work), transport.sleep(limit)).await {
        Either::Left((value, _)) => Some(value),
        Either::Right(((), _)) => None,
    }
}

impl ProviderModel {
    /// The request as the transport sends it: the provider's headers between Content-Type
    /// (and Accept for a stream) and X-Client.
    fn http_request(&self, prepared: &Prepared) -> HttpRequest {
        let mut headers = vec![("content-type".to_owned(), "application/json".to_owned())];
        if prepared.stream {
            headers.push(("accept".to_owned(), "text/event-stream".to_owned()));
        }
        for (name, value) in &prepared.headers {
            headers.push(((*name).to_owned(), value.clone()));
        }
        if let Some(client) = &self.client_header {
            headers.push(("x-client".to_owned(), client.clone()));
        }
        HttpRequest { url: prepared.url.clone(), headers, body: prepared.body.clone() }
    }

    /// A transport failure: retryable, except a request that could not even be built. A
    /// connection that could not be made is an [`EndpointError::Unreachable`] naming the
    /// endpoint and what to do, not the socket's own words alone.
    fn network_error(&self, error: TransportError) -> ModelError {
        match error {
            TransportError::Connect(reason) => self.unreachable(reason).into(),
            TransportError::Request(message) => ModelError::new(ModelErrorKind::Other, message),
            TransportError::Network(message) => ModelError::new(ModelErrorKind::Retryable, message),
        }
    }

    fn unreachable(&self, reason: String) -> EndpointError {
        EndpointError::Unreachable {
            endpoint: self.endpoint.clone(),
            reason,
            hint: self.unreachable_hint.clone(),
        }
    }

    /// Whether the endpoint's address takes a connection, within `timeout` (name lookup
    /// included): a TCP connection to its host and port, closed at once, so no request
    /// reaches the server. Meant for a short check at start (`rein serve` gives it 2 seconds);
    /// a server that takes the connection may still refuse requests (a wrong path or key).
    /// The error's text has the endpoint's password scrubbed. (Not in WebAssembly, which has
    /// no sockets.)
    #[cfg(not(target_arch = "wasm32"))]
    pub async fn check_endpoint(&self, timeout: Duration) -> Result<(), EndpointError> {
        let scrub = |error: EndpointError| match error {
            EndpointError::Unreachable { endpoint, reason, hint } => EndpointError::Unreachable {
                endpoint: self.redactor.redact(&endpoint).into_owned(),
                reason: self.redactor.redact(&reason).into_owned(),
                hint,
            },
            EndpointError::TimedOut { endpoint, seconds, hint } => EndpointError::TimedOut {
                endpoint: self.redactor.redact(&endpoint).into_owned(),
                seconds,
                hint,
            },
        };
        let Some((host, port)) = host_and_port(&self.endpoint) else {
            return Err(scrub(self.unreachable("not an http:// or https:// URL".to_owned())));
        };
        let connect = async {
            let stream = tokio::net::TcpStream::connect((host.as_str(), port)).await?;
            drop(stream);
            Ok::<(), std::io::Error>(())
        };
        match tokio::time::timeout(timeout, connect).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) => Err(scrub(self.unreachable(error.to_string()))),
            Err(_) => Err(scrub(EndpointError::TimedOut {
                endpoint: self.endpoint.clone(),
                seconds: (timeout.as_secs_f64().round() as u64).max(1),
                hint: self.unreachable_hint.clone(),
            })),
        }
    }
}

/// The host and port an http(s) URL connects to (80 or 443 when it names none).
#[cfg(not(target_arch = "wasm32"))]
fn host_and_port(endpoint: &str) -> Option<(String, u16)> {
    let (default_port, rest) = if let Some(rest) = endpoint.strip_prefix("https://") {
        (443, rest)
    } else {
        (80, endpoint.strip_prefix("http://")?)
    };
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    let (host, port) = if let Some(bracketed) = authority.strip_prefix('[') {
        let (host, after) = bracketed.split_once(']')?;
        (host, after.strip_prefix(':'))
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    if host.is_empty() {
        return None;
    }
    let port = match port {
        Some(port) => port.parse().ok()?,
        None => default_port,
    };
    Some((host.to_owned(), port))
}

#[async_trait]
impl Model for ProviderModel {
    fn info(&self) -> &ModelInfo {
        &self.info
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        deltas: DeltaSink<'_>,
    ) -> Result<ModelReply, ModelError> {
        let redactor = &self.redactor;
        let sink = |delta: ReplyDelta| deltas(redact_delta(redactor, delta));
        match self.complete_unredacted(request, &sink).await {
            Ok(mut reply) => {
                redact_reply(redactor, &mut reply);
                Ok(reply)
            }
            Err(mut error) => {
                redactor.redact_string(&mut error.message);
                Err(error)
            }
        }
    }
}

impl ProviderModel {
    /// The call with its retry, before redaction.
    async fn complete_unredacted(
        &self,
        request: &ModelRequest,
        deltas: DeltaSink<'_>,
    ) -> Result<ModelReply, ModelError> {
        let prepared = self.prepare(request);
        let streamed = AtomicBool::new(false);
        let sink = |delta: ReplyDelta| {
            streamed.store(true, Ordering::Relaxed);
            deltas(delta);
        };
        let mut attempt = 1;
        let mut timeout = self.shaping.timeout;
        let mut transient_retried = false;
        loop {
            let AttemptError { mut error, timed_out } =
                match self.attempt(&prepared, timeout, &sink).await {
                    Ok(reply) => return Ok(reply),
                    Err(failure) => failure,
                };
            // A stream that already sent text to the caller is not retried: the text is out.
            if streamed.load(Ordering::Relaxed) || attempt >= MAX_ATTEMPTS {
                return Err(error);
            }
            let delay = match retry_plan(&error, transient_retried, self.shaping.max_retry_wait) {
                RetryPlan::Surface => return Err(error),
                RetryPlan::TooLong(delay) => {
                    error.message.push_str(&format!(
                        " (the provider asked to retry after {} s, longer than \
                         `max_retry_wait_seconds`, {} s)",
                        delay.as_secs_f64().ceil(),
                        self.shaping.max_retry_wait.as_secs()
                    ));
                    return Err(error);
                }
                RetryPlan::After(delay) => delay,
            };
            if error.retry_after.is_none() {
                transient_retried = true;
            }
            attempt += 1;
            // Not through `sink`: a retry is not part of the reply.
            deltas(ReplyDelta::Retry {
                attempt,
                delay_ms: u64::try_from(delay.as_millis()).unwrap_or(u64::MAX),
                reason: retry_reason(&error),
            });
            if !delay.is_zero() {
                self.transport.sleep(delay).await;
            }
            timeout = if timed_out {
                self.shaping.timeout
            } else {
                self.shaping.timeout.min(RETRY_TIMEOUT_CAP)
            };
        }
    }
}

/// A streamed delta without the configured secrets. (A secret split across two deltas is not
/// seen here; the assembled reply is scrubbed whole.)
fn redact_delta(redactor: &Redactor, mut delta: ReplyDelta) -> ReplyDelta {
    match &mut delta {
        ReplyDelta::Text { text } | ReplyDelta::Reasoning { text } => {
            redactor.redact_string_secrets(text)
        }
        ReplyDelta::ToolCallStarted { id, name, .. } => {
            redactor.redact_string_secrets(id);
            redactor.redact_string_secrets(name);
        }
        // An error's words: scrubbed as error messages are.
        ReplyDelta::Retry { reason, .. } => redactor.redact_string(reason),
        _ => {}
    }
    delta
}

/// The reply's text, reasoning, tool calls and model name without the configured secrets.
fn redact_reply(redactor: &Redactor, reply: &mut ModelReply) {
    if redactor.secret_count() == 0 {
        return;
    }
    redactor.redact_string_secrets(&mut reply.content);
    if let Some(reasoning) = &mut reply.reasoning {
        redactor.redact_string_secrets(reasoning);
    }
    for call in &mut reply.tool_calls {
        redactor.redact_string_secrets(&mut call.id);
        redactor.redact_string_secrets(&mut call.function.name);
        redactor.redact_string_secrets(&mut call.function.arguments);
    }
    if let Some(model) = &mut reply.model {
        redactor.redact_string_secrets(model);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ModelEntry, ModelRegistry, ModelsConfig, RegistryOptions};

    /// A model at `endpoint` with `hint` for it, and its settings' timeout.
    fn model_at(endpoint: &str, hint: Option<&str>) -> std::sync::Arc<ProviderModel> {
        let mut entry = ModelEntry::new("m", ProviderKind::OpenAi, Some(endpoint.to_owned()));
        entry.settings.stream = Some(Some(false));
        let config = ModelsConfig { llm_models: vec![entry], ..ModelsConfig::default() };
        let mut options = RegistryOptions::default();
        if let Some(hint) = hint {
            options = options.with_unreachable_hint(format!("{endpoint}/"), hint);
        }
        let registry = ModelRegistry::from_config_with_env(&config, &options, |_| None)
            .expect("a valid config");
        registry.default_model()
    }

    /// An endpoint nobody listens on (a port that was just free), with user info to scrub.
    fn dead_endpoint() -> String {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        format!("http://rein:pw-secret-9@127.0.0.1:{port}/v1")
    }

    #[tokio::test]
    async fn a_refused_connection_names_the_endpoint_and_the_hosts_hint() {
        let endpoint = dead_endpoint();
        let model = model_at(&endpoint, Some("Start it with `serve-the-model`."));
        let request = ModelRequest::new(vec![rein_protocol::Message::user("hi")], Vec::new());
        let error = model.complete(&request, &|_| {}).await.expect_err("nothing listens");
        assert_eq!(error.kind, ModelErrorKind::Retryable);
        let shown = endpoint.replace("pw-secret-9", "[redacted]");
        assert!(
            error.message.starts_with(&format!("cannot reach the model endpoint {shown} (")),
            "{}",
            error.message
        );
        assert!(
            error.message.ends_with("). Start it with `serve-the-model`."),
            "{}",
            error.message
        );
        assert!(!error.message.contains("pw-secret-9"), "{}", error.message);

        let checked = model.check_endpoint(Duration::from_secs(2)).await.expect_err("refused");
        assert!(matches!(checked, EndpointError::Unreachable { .. }), "{checked}");
        assert_eq!(checked.endpoint(), shown);
        assert_eq!(checked.hint(), "Start it with `serve-the-model`.");
    }

    #[tokio::test]
    async fn without_a_hint_for_the_endpoint_the_general_one_is_given() {
        let model = model_at(&dead_endpoint(), None);
        let checked = model.check_endpoint(Duration::from_secs(2)).await.expect_err("refused");
        assert_eq!(checked.hint(), crate::error::GENERAL_UNREACHABLE_HINT);
    }

    #[tokio::test]
    async fn an_endpoint_that_takes_connections_passes_the_check() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let model = model_at(&format!("http://127.0.0.1:{port}/v1"), None);
        assert_eq!(model.check_endpoint(Duration::from_secs(2)).await, Ok(()));
    }

    #[test]
    fn hosts_and_ports_of_endpoints() {
        let at = |endpoint: &str| host_and_port(endpoint);
        assert_eq!(at("http://127.0.0.1:8081/v1"), Some(("127.0.0.1".into(), 8081)));
        assert_eq!(at("https://api.openai.com/v1"), Some(("api.openai.com".into(), 443)));
        assert_eq!(at("http://user:pw@host/v1"), Some(("host".into(), 80)));
        assert_eq!(at("http://[::1]:9000"), Some(("::1".into(), 9000)));
        assert_eq!(at("http://[::1]"), Some(("::1".into(), 80)));
        assert_eq!(at("ftp://host"), None);
        assert_eq!(at("http://:80/v1"), None);
        assert_eq!(at("http://host:notaport/v1"), None);
    }
}
