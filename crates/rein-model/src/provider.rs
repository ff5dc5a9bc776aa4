//! `ProviderModel`: one configured model behind HTTP, with the timeout, retry and redaction rules.
//!
//! Redaction happens at one place, [`Model::complete`], the only way out of this crate for
//! what a provider sent: every `ModelError` (from a status and body, an error object in a 200
//! or a stream, a transport error that names the URL, a reply that could not be read) has its
//! message scrubbed of the model's configured secrets and of credential shapes; every streamed
//! delta and the assembled reply have the configured secrets (only) taken out. Provider data
//! is left as it is: it must go back to the provider byte for byte.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use futures::StreamExt as _;
use rein_protocol::{
    DeltaSink, Model, ModelError, ModelErrorKind, ModelInfo, ModelReply, ModelRequest, Redactor,
    ReplyDelta,
};

use crate::config::{ProviderKind, RETRY_TIMEOUT_CAP, Shaping};
use crate::error::{AttemptError, from_status, parse_retry_after};
use crate::sse::SseDecoder;
use crate::wire::{Assembler, Prepared, SignatureCache, Target};
use crate::{anthropic, gemini, openai};

/// A model served over HTTP by one of the supported providers.
///
/// Built by [`ModelRegistry`](crate::ModelRegistry). Each call sends one request (streamed
/// unless `stream` is off), with a per-attempt timeout; a timeout, a network error, a 5xx or a
/// 200 without choices is retried once, unless part of the reply was already streamed out.
/// What comes back is redacted: see [`ProviderModel::redactor`].
pub struct ProviderModel {
    pub(crate) info: ModelInfo,
    pub(crate) kind: ProviderKind,
    pub(crate) model: String,
    pub(crate) endpoint: String,
    pub(crate) api_key: Option<String>,
    pub(crate) client_header: Option<String>,
    pub(crate) shaping: Shaping,
    pub(crate) http: reqwest::Client,
    pub(crate) signatures: SignatureCache,
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
            signatures: &self.signatures,
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

    /// Remembers what a reply returned that must go back with its tool calls.
    fn remember(&self, reply: &ModelReply) {
        let Some(data) = &reply.provider_data else { return };
        if let Some(thinking) = anthropic::thinking_blocks(data)
            && let Some(first) = reply.tool_calls.first()
        {
            self.signatures.insert(first.id.clone(), thinking.clone());
        }
        if let Some(signatures) = gemini::thought_signatures(data) {
            for (id, signature) in signatures {
                self.signatures.insert(id.clone(), signature.clone());
            }
        }
    }

    async fn attempt(
        &self,
        prepared: &Prepared,
        timeout: Duration,
        sink: DeltaSink<'_>,
    ) -> Result<ModelReply, AttemptError> {
        match tokio::time::timeout(timeout, self.send(prepared, sink)).await {
            Ok(result) => result.map_err(AttemptError::from),
            Err(_) => Err(AttemptError {
                error: ModelError::new(
                    ModelErrorKind::Retryable,
                    format!("request timed out after {} seconds", timeout.as_secs_f64().round()),
                ),
                timed_out: true,
            }),
        }
    }

    async fn send(
        &self,
        prepared: &Prepared,
        sink: DeltaSink<'_>,
    ) -> Result<ModelReply, ModelError> {
        let mut builder = self
            .http
            .post(&prepared.url)
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(prepared.body.clone());
        if prepared.stream {
            builder = builder.header(reqwest::header::ACCEPT, "text/event-stream");
        }
        for (name, value) in &prepared.headers {
            builder = builder.header(*name, value);
        }
        if let Some(client) = &self.client_header {
            builder = builder.header("x-client", client);
        }
        let response = builder.send().await.map_err(network_error)?;
        let status = response.status().as_u16();
        let header = |name: &str| {
            response.headers().get(name).and_then(|value| value.to_str().ok()).map(str::to_owned)
        };
        if !(200..300).contains(&status) {
            let retry_after = parse_retry_after(
                header("retry-after-ms").as_deref(),
                header("retry-after").as_deref(),
            );
            let body = response.bytes().await.map(|bytes| bytes.to_vec()).unwrap_or_default();
            return Err(from_status(status, &body, retry_after));
        }
        let is_event_stream =
            header("content-type").is_some_and(|kind| kind.contains("text/event-stream"));
        if !(prepared.stream && is_event_stream) {
            // Also a server that ignores `stream: true` and answers with plain JSON.
            let body = response.bytes().await.map_err(network_error)?;
            return self.parse_reply(&body);
        }
        let mut assembler = self.assembler();
        let mut decoder = SseDecoder::new();
        let mut events = Vec::new();
        let mut body = response.bytes_stream();
        let mut done = false;
        while !done && let Some(piece) = body.next().await {
            let piece = piece.map_err(network_error)?;
            decoder.feed(&piece, &mut events);
            for event in events.drain(..) {
                if assembler.event(&event, sink)? {
                    done = true;
                    break;
                }
            }
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

/// A fresh stream assembler for a provider.
pub(crate) fn new_assembler(kind: ProviderKind) -> Box<dyn Assembler> {
    match kind {
        ProviderKind::Anthropic => Box::new(anthropic::StreamAssembler::default()),
        ProviderKind::Gemini => Box::new(gemini::StreamAssembler::default()),
        _ => Box::new(openai::StreamAssembler::default()),
    }
}

/// A transport failure: retryable, except a request that could not even be built.
fn network_error(error: reqwest::Error) -> ModelError {
    let mut message = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(cause) = source {
        message.push_str(": ");
        message.push_str(&cause.to_string());
        source = cause.source();
    }
    let kind = if error.is_builder() { ModelErrorKind::Other } else { ModelErrorKind::Retryable };
    ModelError::new(kind, message)
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
        let reply = match self.attempt(&prepared, self.shaping.timeout, &sink).await {
            Ok(reply) => reply,
            Err(AttemptError { error, timed_out })
                if error.kind == ModelErrorKind::Retryable && !streamed.load(Ordering::Relaxed) =>
            {
                let timeout = if timed_out {
                    self.shaping.timeout
                } else {
                    self.shaping.timeout.min(RETRY_TIMEOUT_CAP)
                };
                self.attempt(&prepared, timeout, &sink).await.map_err(|failure| failure.error)?
            }
            Err(failure) => return Err(failure.error),
        };
        self.remember(&reply);
        Ok(reply)
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
