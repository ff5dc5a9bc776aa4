//! Integration tests for rein-model, against a scripted HTTP server on 127.0.0.1.

mod fixtures;
mod openai;
mod server;
mod shaping;
