//! No cycle: modules use each other one way only, and use items the root defines.

mod a;
mod b;
mod c;

pub use crate::{a::Alpha, b::Beta, c::Gamma};

/// Defined in the root; `a` and `c::d` use it, the root only declares them.
pub struct Shared;
