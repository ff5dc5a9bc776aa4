//! rein: an agent harness, the loop between a language model and tools.
//!
//! This facade only re-exports rein's library crates, each behind a cargo feature, so that an
//! application can depend on `rein` alone or on the single crates it needs. It must never hold
//! code of its own.
//!
//! | feature | module | crate |
//! |---|---|---|
//! | (always) | [`protocol`] | `rein-protocol`: messages, tool specs, events, the `Model`/`Tool`/`ToolSource` ports |
//! | `recover` (default) | `recover` | `rein-recover`: tool calls and reasoning recovered from model text |
//! | `context` | `context` | `rein-context`: token counting, the context budget, the normalizer |
//! | `model` | `model` | `rein-model`: OpenAI-compatible, Anthropic and Gemini providers, the model registry |
//! | `mcp` | `mcp` | `rein-mcp`: MCP servers (stdio, Streamable HTTP) as tool sources |
//! | `agent` | `agent` | `rein-agent`: the loop, the tool registry, local function tools |
//! | `store` | `store` | `rein-store`: SQLite sessions and JSONL transcripts |
//! | `postgres` | `postgres` | `rein-postgres`: the same stores on PostgreSQL, shared by replicas |
//! | `runtime` | `runtime` | `rein-runtime`: the hosted runtime (sessions, approvals, tasks, personas) |
//! | `full` | all of the above | |

#![warn(missing_docs, unreachable_pub)]

#[doc(inline)]
pub use rein_protocol as protocol;

#[cfg(feature = "recover")]
#[doc(inline)]
pub use rein_recover as recover;

#[cfg(feature = "context")]
#[doc(inline)]
pub use rein_context as context;

#[cfg(feature = "model")]
#[doc(inline)]
pub use rein_model as model;

#[cfg(feature = "mcp")]
#[doc(inline)]
pub use rein_mcp as mcp;

#[cfg(feature = "agent")]
#[doc(inline)]
pub use rein_agent as agent;

#[cfg(feature = "store")]
#[doc(inline)]
pub use rein_store as store;

#[cfg(feature = "postgres")]
#[doc(inline)]
pub use rein_postgres as postgres;

#[cfg(feature = "runtime")]
#[doc(inline)]
pub use rein_runtime as runtime;
