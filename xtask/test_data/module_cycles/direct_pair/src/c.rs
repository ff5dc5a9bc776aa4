//! Used by `a`, uses nothing.

pub struct Gamma;
