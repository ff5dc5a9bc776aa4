//! Model providers for rein: the only crate that speaks HTTP to language models.
//!
//! It owns [`ProviderModel`], which implements [`rein_protocol::Model`] for three wire
//! protocols ([`ProviderKind`]): OpenAI-compatible Chat Completions (OpenAI, llama.cpp, vLLM,
//! Ollama, proxies), Anthropic Messages and Google Gemini `generateContent` (v1beta), each
//! plain and streamed over Server-Sent Events. It shapes requests by GLEN's rules (sampling
//! settings per model then global, temperature 0 by default, `enable_thinking`, the prompt
//! cache breakpoint, the X-Client header only to trusted hosts, no Authorization without a
//! key, `user` = the session id), applies a per-attempt timeout and retries a timeout, a
//! network error, a 5xx or a 200 without choices once, and a 429 or 503 with a `Retry-After`
//! (up to `max_retry_wait_seconds`) after the wait it asks for; a reply is read up to
//! `max_reply_bytes` and ended as cut past it. Failures are
//! [`rein_protocol::ModelError`]s with a kind the loop acts on; configuration problems are
//! [`ConfigError`]s. A connection that cannot be made or a request that times out says which
//! endpoint and what to do ([`EndpointError`], also what [`ProviderModel::check_endpoint`], a
//! short check at start, returns). [`ModelRegistry`] builds the models from GLEN's `llm_models` config
//! ([`ModelsConfig`]).
//!
//! Requests go out through an [`HttpTransport`], the one seam between shaping and the wire:
//! natively it is reqwest with tokio's timers (what [`ModelRegistry::from_config`] uses); for
//! `wasm32-unknown-unknown`, where this crate builds without reqwest or tokio, the host brings
//! its own ([`ModelRegistry::from_config_with_transport`]; `rein-wasm` passes the JavaScript
//! host's `fetch` and timers), and everything above stays the same: shaping, the timeout and
//! retry rules, streaming, the reply cap and redaction.
//!
//! Native tool calls come back as [`rein_protocol::RawToolCall`]s with their argument text
//! exactly as received: repairing it is `rein-recover`'s job, in the loop.
//!
//! This crate must never let a reqwest type out of its API, depend on another rein crate than
//! `rein-protocol`, know JavaScript, or panic on anything a server sends.

#![warn(missing_docs, unreachable_pub)]

mod anthropic;
mod config;
mod error;
pub mod fuzz;
mod gemini;
#[cfg(not(target_arch = "wasm32"))]
mod native;
mod openai;
mod provider;
mod registry;
mod sse;
mod transcription;
mod transport;
mod wire;

pub use crate::{
    config::{
        DEFAULT_ANTHROPIC_MAX_TOKENS, DEFAULT_CLIENT_HEADER_HOSTS, DEFAULT_MAX_REPLY_BYTES,
        DEFAULT_MAX_RETRY_WAIT, DEFAULT_THINKING_BUDGET, DEFAULT_TIMEOUT, MAX_ATTEMPTS, ModelEntry,
        ModelSettings, ModelsConfig, ProviderKind, RETRY_TIMEOUT_CAP,
    },
    error::{ConfigError, EndpointError},
    provider::ProviderModel,
    registry::{ModelRegistry, RegistryOptions, default_client_name},
    transcription::OpenAiTranscriber,
    transport::{BodyStream, HttpRequest, HttpResponse, HttpTransport, TransportError},
};

/// The `anthropic-version` header value sent to Anthropic.
pub const ANTHROPIC_VERSION: &str = anthropic::ANTHROPIC_VERSION;
