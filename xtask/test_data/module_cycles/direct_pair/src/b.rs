//! Uses `a` by a path in code, on a later line than its first mention in a comment.

// crate::a::Alpha is named here only in a comment.
pub struct Beta;

pub fn beta() -> Option<crate::a::Alpha> {
    None
}
