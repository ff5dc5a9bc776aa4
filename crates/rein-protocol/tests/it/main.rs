//! Golden wire shapes of rein-protocol's types (what they serialize to, and what they read), and
//! tool-call arguments read from text.

mod arguments;
mod redact;
mod wire;
