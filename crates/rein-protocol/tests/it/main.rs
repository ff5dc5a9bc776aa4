//! Golden wire shapes of rein-protocol's types: what they serialize to, and what they read.

mod redact;
mod wire;
