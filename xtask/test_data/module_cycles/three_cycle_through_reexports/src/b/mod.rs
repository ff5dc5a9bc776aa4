//! Reaches `c` through the root's renamed re-export; its child `nested` lives in `b/`.

pub mod nested;

pub struct Beta;

pub fn beta() -> crate::Renamed {
    crate::Renamed
}
