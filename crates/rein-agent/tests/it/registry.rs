//! The ToolRegistry (issue 4, item 4): local and remote tools, one dispatch by name, duplicate
//! names refused, memoized idempotent reads, unknown tools as error results.

use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering},
};

use rein_agent::{FnTool, MemoTool, RegistryError, ToolMemo, ToolRegistry, memoizable};
use rein_protocol::{CancellationToken, Tool, ToolCall, ToolContext, ToolOutput, ToolSpec};
use rein_testkit::{ScriptedSource, ScriptedTool};
use serde_json::json;

use crate::support::{lookup, obj};

fn context() -> ToolContext {
    ToolContext::new("c1", CancellationToken::new())
}

fn call(name: &str, arguments: serde_json::Value) -> ToolCall {
    ToolCall::new("c1", name, obj(arguments))
}

fn source() -> ScriptedSource {
    ScriptedSource::new(
        "geo",
        vec![
            ToolSpec::new(
                "get_schema",
                "Schema of a table.",
                obj(json!({"type": "object", "properties": {"table": {}, "db": {}}})),
            ),
            ToolSpec::without_arguments("query", "Runs a query."),
        ],
        |name, args| match name {
            "get_schema" if args.get("table") == Some(&json!("missing")) => {
                Ok(ToolOutput::text(r#"{"success": false, "error": "no table"}"#))
            }
            "get_schema" => Ok(ToolOutput::text(format!("schema of {}", args["table"]))),
            _ => Ok(ToolOutput::text("rows")),
        },
    )
}

#[tokio::test]
async fn registry_dispatches_local_and_remote_tools_by_name() {
    let mut registry = ToolRegistry::new();
    registry.register(Arc::new(lookup())).expect("local");
    assert_eq!(registry.register_source(Arc::new(source())).await.expect("remote"), 2);
    assert_eq!(registry.names(), ["lookup", "get_schema", "query"], "registration order");
    assert!(
        registry.is_local("lookup") && !registry.is_local("query") && !registry.is_local("nope")
    );
    assert_eq!(registry.source_of("query"), Some("geo"));
    let local = registry.dispatch(&call("lookup", json!({"q": "x"})), context()).await;
    assert_eq!(local.output, ToolOutput::text("found x"));
    let remote = registry.dispatch(&call("query", json!({})), context()).await;
    assert_eq!(remote.output, ToolOutput::text("rows"));
}

#[tokio::test]
async fn registry_duplicate_name_is_a_registration_error() {
    let mut registry = ToolRegistry::new();
    registry.register(Arc::new(ScriptedTool::constant("query", "local"))).expect("first");
    let again = registry.register(Arc::new(ScriptedTool::constant("query", "again")));
    assert!(matches!(again, Err(RegistryError::DuplicateName { ref name, .. }) if name == "query"));
    let remote = registry.register_source(Arc::new(source())).await;
    match remote {
        Err(error @ RegistryError::DuplicateName { .. }) => {
            assert_eq!(
                error.to_string(),
                "a tool named `query` is already registered (from local)"
            );
        }
        other => panic!("expected a duplicate-name error, got {other:?}"),
    }
    assert_eq!(registry.names(), ["query"], "a refused source registers nothing");
}

#[tokio::test]
async fn registry_unknown_tool_is_an_error_result_for_the_model() {
    let mut registry = ToolRegistry::new();
    registry.register(Arc::new(lookup())).expect("local");
    let dispatched = registry.dispatch(&call("nope", json!({})), context()).await;
    assert!(dispatched.output.is_error);
    assert_eq!(dispatched.output.text, "Error: Unknown tool: nope. Available tools: lookup");
}

#[tokio::test]
async fn registry_fn_tool_from_an_async_closure_with_schema_and_flags() {
    let spec = ToolSpec::new(
        "double",
        "Doubles n.",
        obj(json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]})),
    )
    .read_only(true);
    let mut registry = ToolRegistry::new();
    registry
        .register_fn(spec, |args, _ctx| async move {
            Ok(ToolOutput::text((args["n"].as_i64().unwrap_or_default() * 2).to_string()))
        })
        .expect("registers");
    assert!(registry.spec("double").is_some_and(|s| s.read_only && !s.side_effects));
    assert!(!registry.needs_approval("double"));
    assert_eq!(
        registry.dispatch(&call("double", json!({"n": 21})), context()).await.output.text,
        "42"
    );
    let bad = registry.dispatch(&call("double", json!({"n": "x"})), context()).await;
    assert!(bad.output.is_error && bad.output.text.contains("invalid arguments"));
    let direct = FnTool::new(ToolSpec::without_arguments("t", "T."), |_, _| async {
        Ok(ToolOutput::text("t"))
    });
    assert_eq!(rein_protocol::Tool::spec(&direct).name, "t");
}

#[tokio::test]
async fn registry_memoizes_configured_reads_by_name_and_canonical_arguments() {
    let source = source();
    let mut registry = ToolRegistry::new().with_memo_tools(["get_schema"]);
    registry.register_source(Arc::new(source.clone())).await.expect("remote");
    let first =
        registry.dispatch(&call("get_schema", json!({"table": "t", "db": "d"})), context()).await;
    let second =
        registry.dispatch(&call("get_schema", json!({"db": "d", "table": "t"})), context()).await;
    assert!(!first.cached && second.cached);
    assert_eq!(first.output, second.output);
    assert_eq!(source.calls().len(), 1, "the second read came from the memo");
    // Other tools are never memoized.
    registry.dispatch(&call("query", json!({})), context()).await;
    registry.dispatch(&call("query", json!({})), context()).await;
    assert_eq!(source.calls().len(), 3);
    registry.clear_memo();
    assert_eq!(registry.memo_len(), 0);
    let third =
        registry.dispatch(&call("get_schema", json!({"table": "t", "db": "d"})), context()).await;
    assert!(!third.cached);
}

#[tokio::test]
async fn registry_never_memoizes_errors_or_success_false_payloads() {
    let failures = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&failures);
    let mut registry = ToolRegistry::new().with_memo_tools(["get_schema", "flaky"]);
    registry.register_source(Arc::new(source())).await.expect("remote");
    registry
        .register_fn(ToolSpec::without_arguments("flaky", "Fails."), move |_, _| {
            counter.fetch_add(1, Ordering::Relaxed);
            async { Ok(ToolOutput::error("Error: down")) }
        })
        .expect("local");
    for _ in 0..2 {
        let payload =
            registry.dispatch(&call("get_schema", json!({"table": "missing"})), context()).await;
        assert!(!payload.cached);
        let error = registry.dispatch(&call("flaky", json!({})), context()).await;
        assert!(!error.cached);
    }
    assert_eq!(failures.load(Ordering::Relaxed), 2);
    assert_eq!(registry.memo_len(), 0);
}

#[tokio::test]
async fn memo_tool_answers_a_repeat_from_the_memo_and_never_stores_a_failure() {
    let runs = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&runs);
    let spec = ToolSpec::new(
        "get_schema",
        "Schema.",
        obj(json!({"type": "object", "properties": {"table": {}}})),
    );
    let tool = Arc::new(FnTool::new(spec, move |args, _| {
        counter.fetch_add(1, Ordering::SeqCst);
        async move {
            Ok(match args.get("table") {
                Some(table) if table == "missing" => ToolOutput::text(r#"{"success": false}"#),
                Some(table) => ToolOutput::text(format!("schema of {table}")),
                None => ToolOutput::error("Error: no table"),
            })
        }
    }));
    let memo = Arc::new(ToolMemo::new(["get_schema"]));
    let memoized = MemoTool::new(tool, Arc::clone(&memo));
    for _ in 0..2 {
        for args in [json!({"table": "t"}), json!({"table": "missing"}), json!({})] {
            let output = memoized.call(obj(args), context()).await.expect("a result");
            assert_eq!(memoizable(&output), output.text == "schema of \"t\"", "{output:?}");
        }
    }
    // `t` ran once; the `success: false` payload and the error ran both times.
    assert_eq!(runs.load(Ordering::SeqCst), 5);
    assert_eq!(memo.len(), 1);
    assert!(memo.memoizes("get_schema") && !memo.memoizes("query") && !memo.is_off());
    assert!(ToolMemo::new(Vec::<String>::new()).is_off());
}

#[tokio::test]
async fn registry_remote_and_side_effecting_tools_need_approval() {
    let mut registry = ToolRegistry::new();
    registry.register(Arc::new(lookup())).expect("local");
    registry
        .register(Arc::new(ScriptedTool::new(
            ToolSpec::without_arguments("write", "W.").side_effects(true),
            |_, _| Ok(ToolOutput::text("written")),
        )))
        .expect("local");
    registry.register_source(Arc::new(source())).await.expect("remote");
    assert!(!registry.needs_approval("lookup"));
    assert!(registry.needs_approval("write"));
    assert!(registry.needs_approval("query"));
    assert_eq!(registry.remove_source("geo"), 2);
    assert_eq!(registry.names(), ["lookup", "write"]);
}
