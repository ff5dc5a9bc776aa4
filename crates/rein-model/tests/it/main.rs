//! Integration tests for rein-model, against a scripted HTTP server on 127.0.0.1.

mod anthropic;
mod errors;
mod fixtures;
mod fuzz;
mod gemini;
mod llama;
mod openai;
mod redaction;
mod registry;
mod reply_cap;
mod retry;
mod server;
mod shaping;
mod split;
mod transcription;
mod transport;
