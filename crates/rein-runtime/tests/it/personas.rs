//! Personas: `consult_<persona>` runs a hidden child session whose loop must end in a
//! validated memo (one retry prompt); children get no consult tools and read their parent's
//! view context; deleting the parent deletes them.

use rein_protocol::Message;
use rein_runtime::{
    CreateSession, MEMO_RETRY_PROMPT, MemoField, MemoFieldKind, Persona, SUBMIT_MEMO, validate_memo,
};
use rein_store::SessionFilter;
use rein_testkit::{args, reply};
use serde_json::json;

use crate::support::{default_config, harness_with};

fn persona() -> Persona {
    let mut persona =
        Persona::new("value_investor", "A patient value investor.", "You are a value investor.");
    persona.allowed_tools = vec!["lookup".into(), "current_view_context".into()];
    persona
}

fn memo() -> serde_json::Value {
    json!({"stance": "bullish", "confidence": 70, "thesis": "Cheap and growing.", "key_evidence": "P/E of 12"})
}

#[tokio::test]
async fn consult_runs_a_hidden_child_that_ends_in_a_memo() {
    let config = default_config().persona(persona());
    let h = harness_with(
        config,
        vec![
            // Parent asks the persona.
            reply::call("p1", "consult_value_investor", json!({"question": "Is AAPL cheap?"}))
                .into(),
            // Child: reads the parent's page, then submits.
            reply::call("k1", "current_view_context", json!({})).into(),
            reply::call("k2", SUBMIT_MEMO, memo()).into(),
            // Parent answers from the memo.
            reply::text("The value investor is bullish.").into(),
        ],
        |c| c,
    );
    h.rt.put_view_context("view-1", json!({"route": "/stock/AAPL", "pageType": "stock"}))
        .await
        .unwrap();
    h.rt.create_session(CreateSession::agent("assistant").id("parent").view_context("view-1"))
        .await
        .unwrap();
    let report =
        h.rt.send_message("parent", "What would a value investor say?", None).await.unwrap();
    assert_eq!(report.final_message, "The value investor is bullish.");
    let result = report.tool_results[0].1.structured.clone().unwrap();
    assert_eq!(result["status"], json!("ok"));
    assert_eq!(result["stance"], json!("bullish"));
    assert_eq!(result["key_evidence"], json!(["P/E of 12"]), "a bare string becomes a list");

    let requests = h.model.requests();
    let child_tools: Vec<&str> = requests[1].tools.iter().map(|t| t.name.as_str()).collect();
    assert!(child_tools.contains(&SUBMIT_MEMO));
    assert!(child_tools.contains(&"lookup"));
    assert!(child_tools.iter().all(|t| !t.starts_with("consult_")), "{child_tools:?}");
    assert!(!child_tools.contains(&"send_email"));
    assert!(requests[0].tools.iter().any(|t| t.name == "consult_value_investor"));
    // The child read its parent's view context.
    let child_view = requests[2]
        .messages
        .iter()
        .find_map(|m| match m {
            Message::Tool { tool_call_id, content, .. } if tool_call_id == "k1" => {
                Some(content.text())
            }
            _ => None,
        })
        .unwrap();
    assert!(child_view.contains("/stock/AAPL"), "{child_view}");

    // The child is hidden: not listed, not readable through the public API.
    let child_id = result["sessionId"].as_str().unwrap().to_owned();
    assert_eq!(h.rt.list_sessions(None).await.unwrap().len(), 1);
    assert!(h.rt.session(&child_id).await.is_err());
    let stored = h.store.get_session(&child_id).unwrap().unwrap();
    assert!(stored.hidden);
    assert_eq!(stored.parent_id.as_deref(), Some("parent"));
    assert!(
        !h.transcripts.read_all(&child_id).unwrap().is_empty(),
        "the child writes its own transcript"
    );

    // Deleting the parent deletes the child and its transcript.
    let deleted = h.rt.delete_session("parent").await.unwrap();
    assert_eq!(deleted, vec![child_id.clone(), "parent".to_owned()]);
    assert!(h.store.get_session(&child_id).unwrap().is_none());
    assert!(h.transcripts.read_all(&child_id).unwrap().is_empty());
    let filter = SessionFilter { include_hidden: true, ..SessionFilter::default() };
    assert!(h.store.list_sessions(&filter).unwrap().is_empty());
}

#[tokio::test]
async fn a_persona_without_a_memo_gets_one_retry_prompt_then_fails() {
    let config = default_config().persona(persona());
    let h = harness_with(
        config,
        vec![
            reply::call("p1", "consult_value_investor", json!({"question": "Q1"})).into(),
            // Child answers in text: the retry prompt follows; an invalid memo is refused, a
            // valid one accepted.
            reply::text("I think it's fine.").into(),
            reply::call(
                "k1",
                SUBMIT_MEMO,
                json!({"stance": "sideways", "confidence": 500, "thesis": ""}),
            )
            .into(),
            reply::call("k2", SUBMIT_MEMO, memo()).into(),
            reply::call("p2", "consult_value_investor", json!({"question": "Q2"})).into(),
            // Second consult: text twice, so it fails.
            reply::text("No memo.").into(),
            reply::text("Still no memo.").into(),
            reply::text("Done.").into(),
        ],
        |c| c,
    );
    h.rt.create_session(CreateSession::agent("assistant").id("s")).await.unwrap();
    let report = h.rt.send_message("s", "ask twice", None).await.unwrap();
    let first = report.tool_results[0].1.structured.clone().unwrap();
    assert_eq!(first["status"], json!("ok"), "{first}");
    let second = report.tool_results[1].1.structured.clone().unwrap();
    assert_eq!(second["status"], json!("failed"), "{second}");
    let requests = h.model.requests();
    assert!(requests[2].messages.iter().any(|m| m.text() == MEMO_RETRY_PROMPT));
    let refusal = requests[3]
        .messages
        .iter()
        .rev()
        .find(|m| matches!(m, Message::Tool { .. }))
        .unwrap()
        .text();
    assert!(
        refusal.contains("stance") && refusal.contains("confidence") && refusal.contains("thesis"),
        "{refusal}"
    );
}

#[test]
fn memo_validation_coerces_lists_and_reports_every_problem() {
    let fields = MemoField::default_memo();
    let ok = validate_memo(&fields, &args!({"stance": "neutral", "confidence": 50.0, "thesis": "t", "key_evidence": ["a"], "risks": null})).unwrap();
    assert_eq!(ok["confidence"], json!(50));
    assert_eq!(ok["risks"], json!([]));
    let problems = validate_memo(&fields, &args!({"stance": "up", "extra": 1})).unwrap_err();
    for needle in ["`extra`", "`stance`", "`confidence`", "`thesis`", "`key_evidence`"] {
        assert!(problems.contains(needle), "{needle} in {problems}");
    }
}

#[test]
fn personas_load_from_toml_and_json() {
    let toml = r#"
name = "macro_trader"
description = "Trades macro."
system_prompt = "You trade macro."
allowed_tools = ["lookup"]

[[memo_fields]]
name = "call"
kind = "enum"
values = ["long", "short"]

[[memo_fields]]
name = "size"
kind = "integer"
min = 1
max = 10
"#;
    let persona = Persona::parse(toml, true).unwrap();
    assert_eq!(persona.tool_name(), "consult_macro_trader");
    assert_eq!(persona.memo_fields[1].kind, MemoFieldKind::Integer);
    assert_eq!(persona.memo_fields[1].max, Some(10));
    let json = r#"{"name": "quant", "description": "d", "system_prompt": "p"}"#;
    assert_eq!(Persona::parse(json, false).unwrap().memo_fields, MemoField::default_memo());
    assert!(Persona::parse(r#"{"name": "Bad Name"}"#, false).is_err());
    assert!(Persona::parse(r#"{"name": "x", "allowed_tools": ["consult_y"]}"#, false).is_err());
    assert!(Persona::parse("name = ", true).is_err());
}

#[tokio::test]
async fn a_persona_s_side_effect_waits_for_approval_on_the_parent() {
    let mut writer = persona();
    writer.allowed_tools.push("send_email".into());
    let h = harness_with(
        default_config().persona(writer),
        vec![
            reply::call("p1", "consult_value_investor", json!({"question": "Mail them"})).into(),
            reply::call("k1", "send_email", json!({"to": "a@x"})).into(),
            reply::call("k2", SUBMIT_MEMO, memo()).into(),
            reply::text("Waiting for approval.").into(),
        ],
        |c| c,
    );
    h.rt.create_session(CreateSession::agent("assistant").id("parent")).await.unwrap();
    h.rt.send_message("parent", "go", None).await.unwrap();
    let approvals = h.rt.approvals("parent").await.unwrap();
    assert_eq!(approvals.len(), 1);
    assert_eq!(approvals[0].tool, "send_email");
    assert!(h.calls.lock().unwrap().is_empty());
    // A person can decide it through the public API.
    h.rt.decide_approval(&approvals[0].id, rein_runtime::Decision::Approve, None).await.unwrap();
}

/// Every file in `test_data/personas/` loads, except `*.bad.*` files, which are refused.
#[test]
fn persona_files_in_test_data() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("test_data/personas");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let loaded = Persona::from_file(&path);
        if name.contains(".bad.") {
            let error = loaded.unwrap_err();
            assert_eq!(error.code(), "validation_error", "{name}: {error}");
        } else {
            let persona = loaded.unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(!persona.memo_fields.is_empty(), "{name}");
            assert!(persona.allowed_tools.iter().all(|t| !t.starts_with("consult_")));
        }
        checked += 1;
    }
    assert_eq!(checked, 5);
}
