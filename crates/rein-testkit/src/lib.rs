//! Test doubles for rein's ports, for tests and benchmarks only.
//!
//! This crate owns a [`ScriptedModel`] that replays a script of replies (and failures, hangs and
//! stops) and records every request it gets, [`ScriptedTool`] and [`ScriptedSource`] that answer
//! from a closure and record their calls, reply builders in [`reply`], and
//! [`check_well_formed`], the transcript invariant every turn must keep.
//!
//! It must never be a normal dependency of a library crate: it is for `[dev-dependencies]`,
//! `xtask` benchmarks and examples. It depends on `rein-protocol` only and does no I/O.

#![warn(missing_docs, unreachable_pub)]

mod model;
pub mod reply;
mod tool;
mod transcript;

pub use crate::{
    model::{ScriptedModel, Step},
    tool::{ScriptedSource, ScriptedTool},
    transcript::check_well_formed,
};

/// Builds a JSON object from a `serde_json::json!` object literal; panics on anything else
/// (test input only).
#[macro_export]
macro_rules! args {
    ($($tt:tt)*) => {
        match ::serde_json::json!($($tt)*) {
            ::serde_json::Value::Object(map) => map,
            other => panic!("args! needs a JSON object, got {other}"),
        }
    };
}
