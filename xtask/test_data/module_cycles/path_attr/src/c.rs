//! Uses `a::b`, closing the circle `a::b -> loop_ -> c -> a::b`.

pub struct Gamma;

pub fn call() {
    crate::a::b::back();
}
