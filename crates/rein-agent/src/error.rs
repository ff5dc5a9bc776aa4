//! The typed errors of the loop and the registry.

use rein_protocol::{ModelError, ToolError};

/// Why a tool or source could not be registered.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RegistryError {
    /// A tool by that name is already registered.
    #[error("a tool named `{name}` is already registered (from {existing})")]
    DuplicateName {
        /// The name.
        name: String,
        /// Where the registered one comes from (`local` or `source <name>`).
        existing: String,
    },
    /// Listing a source's tools failed.
    #[error("listing the tools of source `{source_name}` failed: {error}")]
    Source {
        /// The source.
        source_name: String,
        /// What went wrong.
        error: ToolError,
    },
}

/// Why a turn ended with an error (the turn's ending is then `error`).
///
/// The history stays well-formed: every call made so far has its result.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The model request failed (after the provider's own retries, and after tighter context
    /// levels for a prompt that was too long).
    #[error("model request failed: {0}")]
    Model(#[from] ModelError),
    /// The reply was cut at the output limit and held only tool calls; none of them ran.
    #[error(
        "the model's reply was cut at the output limit with only tool calls in it; none of them ran"
    )]
    OutputLimit,
}
