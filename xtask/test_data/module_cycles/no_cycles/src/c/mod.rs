//! Holds an item its child uses; declaring the child is no edge.

mod d;

pub use self::d::Delta;

pub struct Gamma;
