//! Fuzz target: the SSE decoder and every provider's stream assembler (`rein_model::fuzz::sse_decoder`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rein_model::fuzz::sse_decoder(data));
