//! `b` names `a` only in comments, doc comments and literals; `a` uses `b`. No cycle.
//!
//! ```
//! use crate::b::Beta; // a doc example is no edge either
//! ```

mod a;
mod b;
