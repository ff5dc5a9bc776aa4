//! Rule 10: hooks: `before_turn`, `pinned_context` (sent with that one request, never stored),
//! `after_tool`, `after_completion`; a failing hook is logged and skipped, never gates a turn;
//! `check_prompt` may refuse one.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use rein_agent::{AgentConfig, HookError, Hooks, TaskCompletion, TurnContext, TurnInput};
use rein_protocol::{CancellationToken, Message, ToolCall, ToolOutput};
use rein_testkit::{ScriptedModel, check_well_formed, reply};
use serde_json::json;

use crate::support::{agent, lookup, notices, registry, run};

#[derive(Default)]
struct Recorder {
    seen: Mutex<Vec<String>>,
    fail: bool,
}

impl Recorder {
    fn note(&self, what: String) -> Result<(), HookError> {
        self.seen.lock().expect("lock").push(what);
        if self.fail { Err("hook exploded".into()) } else { Ok(()) }
    }
}

#[async_trait]
impl Hooks for Recorder {
    fn name(&self) -> &str {
        "recorder"
    }

    async fn before_turn(&self, turn: &TurnContext<'_>) -> Result<(), HookError> {
        self.note(format!("before_turn {}", turn.user_text))
    }

    async fn pinned_context(&self, turn: &TurnContext<'_>) -> Result<Option<String>, HookError> {
        self.note(format!("pinned_context step {}", turn.step))?;
        Ok(Some(format!("PINNED view of step {}", turn.step)))
    }

    async fn after_tool(
        &self,
        _turn: &TurnContext<'_>,
        call: &ToolCall,
        output: &ToolOutput,
    ) -> Result<(), HookError> {
        self.note(format!("after_tool {} {}", call.name, output.text))
    }

    async fn after_completion(
        &self,
        _turn: &TurnContext<'_>,
        completion: &TaskCompletion,
    ) -> Result<(), HookError> {
        self.note(format!("after_completion {}", completion.task_id))
    }
}

#[tokio::test]
async fn hooks_run_at_their_points_in_the_turn() {
    let tool = lookup();
    let model =
        ScriptedModel::new([reply::calls(&[("lookup", json!({"q": "a"}))]), reply::text("done")]);
    let hook = Arc::new(Recorder::default());
    let mut agent =
        agent(&model, registry(&[&tool]), AgentConfig::default()).with_hook(hook.clone());
    let input = TurnInput::new("go").with_completion(TaskCompletion::new(
        "task-7",
        "completed",
        "report ready",
    ));
    let log = rein_agent::EventLog::new();
    agent.turn(input, &CancellationToken::new(), &log).await.expect("turn");
    assert_eq!(
        *hook.seen.lock().expect("lock"),
        [
            "before_turn go",
            "after_completion task-7",
            "pinned_context step 1",
            "after_tool lookup found a",
            "pinned_context step 2",
        ]
    );
    // The completion was delivered as a note before the user's message.
    assert_eq!(
        agent.history()[0],
        Message::user("[Background task task-7 completed] report ready")
    );
    assert_eq!(agent.history()[1], Message::user("go"));
}

#[tokio::test]
async fn hooks_pinned_context_is_sent_with_that_request_and_never_stored() {
    let model = ScriptedModel::new([reply::text("hi")]);
    let hook = Arc::new(Recorder::default());
    let config = AgentConfig { system_prompt: "SYSTEM".into(), ..AgentConfig::default() };
    let mut agent = agent(&model, registry(&[]), config).with_hook(hook);
    let log = rein_agent::EventLog::new();
    let input = TurnInput::new("hello").with_pinned_context("HOST view: /ticker/SPY");
    agent.turn(input, &CancellationToken::new(), &log).await.expect("turn");
    let request = &model.requests()[0];
    assert_eq!(request.messages[0], Message::system("SYSTEM"));
    let texts: Vec<String> = request.messages.iter().map(Message::text).collect();
    assert!(texts.contains(&"PINNED view of step 1".to_owned()), "{texts:?}");
    assert!(texts.contains(&"HOST view: /ticker/SPY".to_owned()), "{texts:?}");
    assert!(
        !agent
            .history()
            .iter()
            .any(|m| m.text().contains("PINNED") || m.text().contains("HOST view"))
    );
    assert!(!log.events().iter().any(|e| matches!(e, rein_protocol::AgentEvent::Message { message } if message.text().contains("PINNED"))));
}

#[tokio::test]
async fn hooks_a_failing_hook_is_logged_and_skipped() {
    let tool = lookup();
    let model = ScriptedModel::new([
        reply::calls(&[("lookup", json!({"q": "a"}))]),
        reply::text("done anyway"),
    ]);
    let hook = Arc::new(Recorder { fail: true, ..Recorder::default() });
    let mut agent =
        agent(&model, registry(&[&tool]), AgentConfig::default()).with_hook(hook.clone());
    let ran = run(&mut agent, "go").await;
    assert_eq!(ran.outcome().text, "done anyway");
    assert_eq!(tool.call_count(), 1);
    let failures = notices(&ran.events).iter().filter(|c| *c == "hook_failed").count();
    assert_eq!(failures, 4, "before_turn, pinned_context x2, after_tool");
    assert!(check_well_formed(agent.history()).is_ok());
}

#[tokio::test]
async fn hooks_default_methods_do_nothing() {
    struct Quiet;
    impl Hooks for Quiet {}
    let model = ScriptedModel::new([reply::text("ok")]);
    let mut agent = agent(&model, registry(&[]), AgentConfig::default()).with_hook(Arc::new(Quiet));
    let ran = run(&mut agent, "go").await;
    assert!(notices(&ran.events).is_empty());
    assert_eq!(model.requests()[0].messages.len(), 1);
}

#[tokio::test]
async fn hooks_check_prompt_refuses_a_prompt_before_any_request() {
    struct Refuser;
    #[async_trait]
    impl Hooks for Refuser {
        async fn check_prompt(&self, turn: &TurnContext<'_>) -> Result<Option<String>, HookError> {
            Ok(turn.user_text.contains("secret").then(|| "Not about secrets.".to_owned()))
        }
    }
    let model = ScriptedModel::new([reply::text("ok")]);
    let mut agent =
        agent(&model, registry(&[]), AgentConfig::default()).with_hook(Arc::new(Refuser));
    let ran = run(&mut agent, "tell me the secret").await;
    assert_eq!(ran.outcome().text, "Not about secrets.");
    assert_eq!(ran.outcome().ending, rein_protocol::TurnEnding::Interrupted);
    assert!(notices(&ran.events).contains(&"prompt_refused".to_owned()));
    assert!(model.requests().is_empty(), "no model request");
    assert!(agent.history().is_empty(), "the refused prompt is not stored");
    let ran = run(&mut agent, "hello").await;
    assert_eq!(ran.outcome().text, "ok");
}
