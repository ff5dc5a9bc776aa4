//! The root calls into `a`; `a`'s tests glob-import `super::*` (which is `a`, not the root) and
//! use `b`, which uses `a`. None of that is a cycle: test blocks are not part of the graph.

mod a;
mod b;

pub fn run() -> u32 {
    a::answer() + b::twice()
}
