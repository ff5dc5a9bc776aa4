//! Uses `b` through the root's re-export.

use crate::Beta;

pub struct Alpha(pub Beta);

pub mod inner {
    pub struct Hidden;
}
