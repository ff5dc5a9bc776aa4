//! Part of `b`'s directory, not of the cycle.

pub struct Deep;
