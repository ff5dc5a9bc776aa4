//! Uses `b`.

pub fn alpha() -> crate::b::Beta {
    crate::b::Beta
}
