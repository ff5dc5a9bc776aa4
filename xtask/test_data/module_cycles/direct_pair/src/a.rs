//! Uses `b` in a `use` and `c` one way.

use crate::b::Beta;
use crate::c::Gamma;

pub struct Alpha;

pub fn alpha(_: Beta, _: Gamma) {}
