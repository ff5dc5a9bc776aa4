//! Fuzz target: native argument repair and leak scrubbing (`rein_recover::fuzz::repair_bytes`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rein_recover::fuzz::repair_bytes(data));
