//! View context: put and get, linked to a session and re-linked before every turn, read
//! through `current_view_context` in TerraFin's result shapes.

use rein_runtime::{CURRENT_VIEW_CONTEXT, CreateSession, RuntimeError};
use rein_testkit::reply;
use serde_json::{Value, json};

use crate::support::harness;

fn page(route: &str) -> Value {
    json!({"route": route, "pageType": "stock", "title": "Apple", "selection": {"ticker": "AAPL"}, "entities": [{"ticker": "AAPL"}]})
}

#[tokio::test]
async fn put_and_get() {
    let h = harness(vec![]);
    let stored = h.rt.put_view_context("view-1", page("/stock/AAPL")).await.unwrap();
    assert_eq!(stored.payload["route"], "/stock/AAPL");
    let read = h.rt.view_context("view-1").await.unwrap();
    assert_eq!(read.payload, page("/stock/AAPL"));
    let missing = h.rt.view_context("nope").await.unwrap_err();
    assert!(matches!(missing, RuntimeError::ViewContextNotFound(_)));
    let bad = h.rt.put_view_context("view-2", json!({"route": "/x"})).await.unwrap_err();
    assert_eq!(bad.code(), "validation_error");
}

#[tokio::test]
async fn current_view_context_reads_the_page_relinked_before_every_turn() {
    let tool = |id: &str| reply::call(id, CURRENT_VIEW_CONTEXT, json!({})).into();
    let h = harness(vec![
        tool("c1"),
        reply::text("nothing linked").into(),
        tool("c2"),
        reply::text("missing").into(),
        tool("c3"),
        reply::text("apple").into(),
        tool("c4"),
        reply::text("msft").into(),
    ]);
    h.rt.create_session(CreateSession::agent("assistant").id("s")).await.unwrap();
    let r = h.rt.send_message("s", "what is this?", None).await.unwrap();
    assert_eq!(
        r.tool_results[0].1.structured,
        Some(
            json!({"available": false, "linked": false, "reason": "No view context is linked to this session."})
        )
    );

    // Linked, but the page never published it.
    let r = h.rt.send_message("s", "and now?", Some("view-1")).await.unwrap();
    let shape = r.tool_results[0].1.structured.clone().unwrap();
    assert_eq!(shape["available"], json!(false));
    assert_eq!(shape["linked"], json!(true));
    assert_eq!(shape["contextId"], json!("view-1"));

    h.rt.put_view_context("view-1", page("/stock/AAPL")).await.unwrap();
    let r = h.rt.send_message("s", "this stock?", None).await.unwrap();
    let shape = r.tool_results[0].1.structured.clone().unwrap();
    assert_eq!(shape["available"], json!(true));
    assert_eq!(shape["route"], json!("/stock/AAPL"));
    assert_eq!(shape["selection"], json!({"ticker": "AAPL"}));
    for key in ["createdAt", "updatedAt", "pageType", "title", "summary", "entities", "metadata"] {
        assert!(shape.get(key).is_some(), "missing {key}");
    }

    // The user moved to another page (another tab's context): re-linked before the turn.
    h.rt.put_view_context("view-2", page("/stock/MSFT")).await.unwrap();
    let r = h.rt.send_message("s", "and this one?", Some("view-2")).await.unwrap();
    assert_eq!(r.tool_results[0].1.structured.clone().unwrap()["route"], json!("/stock/MSFT"));
    assert_eq!(h.rt.session("s").await.unwrap().view_context_id.as_deref(), Some("view-2"));
}

#[tokio::test]
async fn current_view_context_is_offered_only_once_a_view_context_is_linked() {
    let h = harness(vec![reply::text("no page").into(), reply::text("a page").into()]);
    h.rt.create_session(CreateSession::agent("assistant").id("s")).await.unwrap();
    let offered = |step: usize| {
        h.model.requests()[step].tools.iter().any(|tool| tool.name == CURRENT_VIEW_CONTEXT)
    };
    h.rt.send_message("s", "hello", None).await.unwrap();
    assert!(!offered(0), "nothing is linked: the model cannot use it");
    let view = h.rt.session("s").await.unwrap().tools;
    assert!(
        view.iter().all(|tool| tool.name != CURRENT_VIEW_CONTEXT),
        "the session's tools say so"
    );

    h.rt.send_message("s", "what is this?", Some("view-1")).await.unwrap();
    assert!(offered(1), "linked before the turn: offered");
    let view = h.rt.session("s").await.unwrap().tools;
    assert!(view.iter().any(|tool| tool.name == CURRENT_VIEW_CONTEXT));
}
