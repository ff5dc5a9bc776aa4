//! rein: an agent harness, the loop between a language model and tools.
//!
//! This facade only re-exports rein's library crates, each behind a cargo feature, so that an
//! application can depend on `rein` alone or on the single crates it needs. It must never hold
//! code of its own.

#![warn(missing_docs, unreachable_pub)]

#[doc(inline)]
pub use rein_protocol as protocol;

#[cfg(feature = "recover")]
#[doc(inline)]
pub use rein_recover as recover;
