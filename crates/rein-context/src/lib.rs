//! Context budget and transcript normalizer for rein (pure, no I/O).
//!
//! [`ContextBudget::prepare`] turns a stored transcript into the messages sent to a model: it
//! normalizes the transcript (every call answered, orphans and empties gone, the provider's
//! role rules kept), cuts long tool results (ending them with a `read_tool_result` pointer),
//! counts tokens with tiktoken (cached per message), and picks the loosest of four [`Level`]s
//! that fits the model's window. [`read_tool_result`] gives the model the exact text that was
//! cut, in slices. [`normalize`] and [`validate`] are the normalizer on its own.
//!
//! This crate owns token counting, the budget levels, tool-result truncation and slicing, and
//! the normalizer. It must never do I/O, and never rewrite a stored transcript: it reads
//! slices and returns new messages.

#![warn(missing_docs, unreachable_pub)]

mod budget;
mod cut;
mod error;
mod level;
mod normalize;
mod slice;
mod tokens;

pub use crate::{
    budget::{BudgetConfig, ContextBudget, PrepareInput, Prepared},
    error::{ContextError, Malformation},
    level::{Level, LevelLimits},
    normalize::{
        PLACEHOLDER_TEXT, Provider, UNRESOLVED_CODE, UNRESOLVED_TEXT, normalize, validate,
    },
    slice::{
        READ_TOOL_RESULT, ReadArgs, Slice, read_tool_result, read_tool_result_in,
        read_tool_result_spec,
    },
    tokens::Tokenizer,
};
