//! Closes the circle: uses `a` through the root's re-export of an item of an inline module.

pub struct Gamma;

pub fn gamma(_: crate::Hidden) {}
