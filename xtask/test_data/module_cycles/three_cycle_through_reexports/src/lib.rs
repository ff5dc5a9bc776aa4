//! A 3-cycle that only shows through the root's re-exports (nested braces, with and without
//! `crate::`).

mod a;
mod b;
mod c;

pub use crate::{
    a::{Alpha, inner::Hidden},
    b::{Beta, nested::{Deep}},
};
pub use c::Gamma as Renamed;
