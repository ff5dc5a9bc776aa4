//! Integration tests of the hosted runtime: one module per rule, each with a scripted model and
//! a temporary store.

mod approvals;
mod checkpoints;
mod concurrent;
mod events;
mod fingerprint;
mod personas;
mod policy;
mod sessions;
mod support;
mod tasks;
mod turn_limits;
mod view_context;
