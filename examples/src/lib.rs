//! rein's example programs live in `examples/*.rs` (`cargo run -p rein-examples --example NAME`).
//!
//! This library is empty on purpose: it only gives the package a target, and must never hold
//! code the examples or anything else would depend on.
