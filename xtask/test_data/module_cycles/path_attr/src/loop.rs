//! Module `loop_`, in `loop.rs`; uses `c`.

pub fn spin() -> crate::c::Gamma {
    crate::c::Gamma
}
