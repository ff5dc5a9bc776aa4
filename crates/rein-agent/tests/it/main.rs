//! Integration tests of rein-agent: one module per rule of the loop, each test named after it.

mod support;
mod tool_loop;
