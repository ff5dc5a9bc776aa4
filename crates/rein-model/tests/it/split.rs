//! Streaming reassembly does not depend on where the byte stream is split (all providers).

use proptest::prelude::*;
use serde_json::json;

use crate::fixtures::hello;
use crate::server::{Reply, Server, complete, joined, model};

/// Cuts `body` at the given offsets (sorted; out-of-range ones ignored).
fn split_at(body: &[u8], cuts: &[usize]) -> Vec<Vec<u8>> {
    let mut pieces = Vec::new();
    let mut start = 0;
    for &cut in cuts {
        if cut > start && cut < body.len() {
            pieces.push(body[start..cut].to_vec());
            start = cut;
        }
    }
    pieces.push(body[start..].to_vec());
    pieces
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

/// Serves `body` whole and split at `cuts`; the replies and the joined deltas must match.
fn check(provider: &str, body: Vec<u8>, cuts: &[usize], crlf: bool) -> Result<(), TestCaseError> {
    let body = if crlf {
        String::from_utf8(body).unwrap().replace('\n', "\r\n").into_bytes()
    } else {
        body
    };
    let pieces = split_at(&body, cuts);
    runtime().block_on(async {
        let whole = Server::start(vec![Reply::sse_pieces(vec![body.clone()])]).await;
        let split = Server::start(vec![Reply::sse_pieces(pieces)]).await;
        let (expected, expected_deltas) =
            complete(&model(&whole, provider, json!({}), json!({})), &hello()).await;
        let (actual, actual_deltas) =
            complete(&model(&split, provider, json!({}), json!({})), &hello()).await;
        let expected = expected.unwrap();
        let actual = actual.unwrap();
        prop_assert!(!expected.tool_calls.is_empty());
        prop_assert_eq!(&actual, &expected);
        prop_assert_eq!(actual_deltas, expected_deltas.clone());
        prop_assert_eq!(
            joined(&expected_deltas),
            (expected.content.clone(), expected.reasoning.clone().unwrap_or_default())
        );
        Ok(())
    })
}

fn cuts() -> impl Strategy<Value = Vec<usize>> {
    proptest::collection::vec(0usize..4000, 0..40).prop_map(|mut cuts| {
        cuts.sort_unstable();
        cuts.dedup();
        cuts
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    #[test]
    fn openai_stream_reassembly_does_not_depend_on_the_split(cuts in cuts(), crlf in any::<bool>()) {
        check("openai", crate::openai::stream_body(), &cuts, crlf)?;
    }

    #[test]
    fn anthropic_stream_reassembly_does_not_depend_on_the_split(cuts in cuts(), crlf in any::<bool>()) {
        check("anthropic", crate::anthropic::thinking_stream(), &cuts, crlf)?;
    }

    #[test]
    fn gemini_stream_reassembly_does_not_depend_on_the_split(cuts in cuts(), crlf in any::<bool>()) {
        check("gemini", crate::gemini::stream_body(), &cuts, crlf)?;
    }
}
