//! The fuzz entry point never panics; crash inputs found by `cargo xtask fuzz` are replayed here.

use std::path::Path;

use proptest::prelude::*;

/// SSE-shaped text: field lines of the three providers' vocabularies, split and mangled.
fn sse_like() -> impl Strategy<Value = Vec<u8>> {
    let line = prop_oneof![
        Just("data: [DONE]".to_owned()),
        Just("event: message_start".to_owned()),
        Just("event: error".to_owned()),
        Just(": comment".to_owned()),
        Just(String::new()),
        Just(r#"data: {"type":"message_start","message":{"usage":{"input_tokens":1}}}"#.to_owned()),
        Just(r#"data: {"type":"content_block_start","index":0,"content_block":{"type":"tool_use","name":"f","input":{}}}"#.to_owned()),
        Just(r#"data: {"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"{"}}"#.to_owned()),
        Just(r#"data: {"type":"message_stop"}"#.to_owned()),
        Just(r#"data: {"choices":[{"delta":{"tool_calls":[{"index":0,"function":{"name":"f","arguments":"{"}}]},"finish_reason":null}]}"#.to_owned()),
        Just(r#"data: {"choices":[{"delta":{"content":"x"},"finish_reason":"stop"}]}"#.to_owned()),
        Just(r#"data: {"candidates":[{"content":{"parts":[{"functionCall":{"name":"f"}}]},"finishReason":"STOP"}]}"#.to_owned()),
        "data: [ -~]{0,40}",
        "[a-z:]{0,12}",
    ];
    (
        any::<u8>(),
        proptest::collection::vec((line, prop_oneof![Just("\n"), Just("\r\n"), Just("\r")]), 0..30),
    )
        .prop_map(|(split, lines)| {
            let mut bytes = vec![split];
            for (line, end) in lines {
                bytes.extend_from_slice(line.as_bytes());
                bytes.extend_from_slice(end.as_bytes());
            }
            bytes
        })
}

proptest! {
    #[test]
    fn the_sse_fuzz_entry_never_panics_on_bytes(data in proptest::collection::vec(any::<u8>(), 0..512)) {
        rein_model::fuzz::sse_decoder(&data);
    }

    #[test]
    fn the_sse_fuzz_entry_never_panics_on_sse_like_text(data in sse_like()) {
        rein_model::fuzz::sse_decoder(&data);
    }
}

#[test]
fn fuzz_failures_are_replayed() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("test_data/fuzz-failures/sse_decoder");
    let mut replayed = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|extension| extension == "md") {
            continue;
        }
        rein_model::fuzz::sse_decoder(&std::fs::read(&path).unwrap());
        replayed += 1;
    }
    assert!(replayed >= 1, "the seed inputs in {} run", dir.display());
}
