//! Has a child in `a/b.rs`.

mod b;
