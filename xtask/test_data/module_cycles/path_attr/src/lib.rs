//! `#[path]` modules, nested directories and `super::super` resolve to the right files.

#[path = "loop.rs"]
mod loop_;
mod a;
mod c;

pub(in crate::a) struct Visibility;
