//! rein in the browser and in Node: glen's JavaScript API over rein's loop, built with
//! wasm-bindgen into the `rein-harness` package (`cargo xtask wasm`).
//!
//! This crate owns the JavaScript boundary: `AgentCore` (the loop of `rein-agent` behind glen's
//! `Agent`: config object, callbacks, approval through `onToolProposal`, `abort`),
//! `RegistryCore` (glen's `ToolRegistry`: JavaScript local tools and remote tools reached
//! through any client with `callTool(name, args)`), `recover` (rein's recovery parser as a
//! plain function), and the host's `fetch` and timers as `rein-model`'s HTTP transport, so the
//! models are rein-model's own (OpenAI-compatible, Anthropic, Gemini: one request shaping,
//! streaming, the timeout and `Retry-After` rules), with glen's config keys mapped onto its
//! settings. The package's `index.js` (in `js/`) wraps these in glen's class names and
//! initializes itself.
//!
//! It is the only crate that knows wasm-bindgen or JavaScript, and it must never hold harness
//! or provider logic of its own (turns, limits and recovery stay in `rein-agent` and
//! `rein-recover`; request shaping and reply parsing in `rein-model`). On
//! any target but wasm32 it is empty, so host builds of the workspace need no wasm toolchain.

#![warn(missing_docs, unreachable_pub)]

#[cfg(target_arch = "wasm32")]
mod agent;
#[cfg(target_arch = "wasm32")]
mod callbacks;
#[cfg(target_arch = "wasm32")]
mod config;
#[cfg(target_arch = "wasm32")]
mod fetch;
#[cfg(target_arch = "wasm32")]
mod js;
#[cfg(target_arch = "wasm32")]
mod recover;
#[cfg(target_arch = "wasm32")]
mod registry;

#[cfg(target_arch = "wasm32")]
pub use crate::{agent::AgentCore, recover::recover, registry::RegistryCore};
