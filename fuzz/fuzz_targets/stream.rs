//! Fuzz target: the streaming recoverer against `recover` (`rein_recover::fuzz::stream_bytes`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rein_recover::fuzz::stream_bytes(data));
