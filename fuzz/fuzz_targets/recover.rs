//! Fuzz target: the whole recovery entry point (`rein_recover::fuzz::recover_bytes`).
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| rein_recover::fuzz::recover_bytes(data));
