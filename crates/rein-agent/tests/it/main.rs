//! Integration tests of rein-agent: one module per rule of the loop, each test named after it.

mod approvals;
mod batch;
mod events;
mod hooks;
mod limits;
mod loop_guard;
mod output_limit;
mod props;
mod recovery;
mod registry;
mod stop;
mod support;
mod tool_loop;
mod validation;
