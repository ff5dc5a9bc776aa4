//! Uses `a` through the root's re-export, and `c` by its path.

use crate::Alpha;

pub struct Beta(pub Alpha, pub crate::c::Gamma);
