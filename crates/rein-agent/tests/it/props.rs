//! Property: after any turn (answered, aborted, checkpointed, guarded, failed) the transcript is
//! well-formed: every call has exactly one result, right after it.

use std::sync::Arc;

use proptest::prelude::*;
use rein_agent::{Agent, AgentConfig, EventLog, StopMode};
use rein_protocol::{
    AgentEvent, CancellationToken, ModelError, ModelErrorKind, StopReason, ToolSpec,
};
use rein_testkit::{ScriptedModel, ScriptedTool, Step, check_well_formed, reply};
use serde_json::json;

use crate::support::{lookup, registry};

#[derive(Debug, Clone)]
enum Move {
    Answer,
    Blank,
    CallOk(u8),
    CallFail,
    CallUnknown,
    CallInvalid,
    CallStopper,
    Batch(Vec<u8>),
    CutText,
    CutCalls,
    Fail,
    StopDuringRequest,
    StopAsReplyArrives,
}

fn moves() -> impl Strategy<Value = Move> {
    prop_oneof![
        2 => Just(Move::Answer),
        1 => Just(Move::Blank),
        4 => (0u8..3).prop_map(Move::CallOk),
        2 => Just(Move::CallFail),
        1 => Just(Move::CallUnknown),
        2 => Just(Move::CallInvalid),
        1 => Just(Move::CallStopper),
        2 => prop::collection::vec(0u8..6, 1..4).prop_map(Move::Batch),
        1 => Just(Move::CutText),
        1 => Just(Move::CutCalls),
        1 => Just(Move::Fail),
        1 => Just(Move::StopDuringRequest),
        1 => Just(Move::StopAsReplyArrives),
    ]
}

fn step(one: &Move, id: &mut usize, stop: &CancellationToken) -> Step {
    *id += 10;
    let first = *id;
    let call = |name: &str, args: serde_json::Value| reply::calls_from(first, &[(name, args)]);
    match one {
        Move::Answer => reply::text("answer").into(),
        Move::Blank => reply::text(" ").into(),
        Move::CallOk(q) => call("lookup", json!({"q": q.to_string()})).into(),
        Move::CallFail => call("fail", json!({})).into(),
        Move::CallUnknown => call("nope", json!({})).into(),
        Move::CallInvalid => call("lookup", json!({"q": 5})).into(),
        Move::CallStopper => call("stopper", json!({})).into(),
        Move::Batch(picks) => {
            let calls: Vec<(&str, serde_json::Value)> = picks
                .iter()
                .map(|pick| match pick {
                    0 | 1 => ("lookup", json!({"q": pick.to_string()})),
                    2 => ("fail", json!({})),
                    3 => ("stopper", json!({})),
                    4 => ("nope", json!({})),
                    _ => ("lookup", json!({})),
                })
                .collect();
            reply::calls_from(first, &calls).into()
        }
        Move::CutText => reply::cut("cut ").into(),
        Move::CutCalls => {
            reply::with_stop(call("lookup", json!({"q": "1"})), StopReason::Length).into()
        }
        Move::Fail => ModelError::new(ModelErrorKind::BadRequest, "bad").into(),
        // A model that never answers: the stop drops the request, in either mode (the last
        // step after a stop between requests is bounded by `stop_last_step_timeout`).
        Move::StopDuringRequest => Step::CancelThen(stop.clone(), Box::new(Step::Hang)),
        // The stop lands just as a reply arrives: the reply is used, the next step stops.
        Move::StopAsReplyArrives => {
            Step::CancelThen(stop.clone(), Box::new(reply::text("late").into()))
        }
    }
}

#[derive(Debug, Clone)]
struct Setup {
    max_tool_calls: u32,
    max_steps: Option<u32>,
    cap: Option<u32>,
    parallel: usize,
    last_step: bool,
    auto_approve: bool,
}

fn setups() -> impl Strategy<Value = Setup> {
    (
        0u32..4,
        prop::option::of(1u32..5),
        prop::option::of(1u32..4),
        1usize..3,
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(max_tool_calls, max_steps, cap, parallel, last_step, auto_approve)| {
            Setup { max_tool_calls, max_steps, cap, parallel, last_step, auto_approve }
        })
}

fn run_case(setup: &Setup, script: &[Move], turns: usize) -> Result<(), TestCaseError> {
    // Paused time: a last step that hangs runs out its timeout at once.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .map_err(|e| TestCaseError::fail(e.to_string()))?;
    runtime.block_on(async {
        // The stopper tool and stop-during-request cancel this token; once it fired, the case ends.
        let current = CancellationToken::new();
        let mut id = 0;
        let steps: Vec<Step> = script.iter().map(|m| step(m, &mut id, &current)).collect();
        let model = ScriptedModel::new(steps);
        let stopper = ScriptedTool::constant("stopper", "stopping").cancelling(current.clone());
        let failing = ScriptedTool::failing("fail", "Error: always");
        let tools = registry(&[&lookup(), &stopper, &failing]);
        let config = AgentConfig {
            max_tool_calls: setup.max_tool_calls,
            max_tool_calls_manual: setup.max_tool_calls,
            max_steps: setup.max_steps,
            max_calls_per_turn: setup.cap,
            max_parallel_tool_calls: setup.parallel,
            stop_mode: if setup.last_step { StopMode::LastStep } else { StopMode::EndNow },
            auto_approve: setup.auto_approve,
            ..AgentConfig::default()
        };
        let mut agent = Agent::new(Arc::new(model), Arc::new(tools), config);
        for turn in 0..turns {
            let log = EventLog::new();
            let result = agent.turn("go", &current, &log).await;
            let events = log.take();
            if let Err(problem) = check_well_formed(agent.history()) {
                return Err(TestCaseError::fail(format!("turn {turn} ({result:?}): {problem}")));
            }
            let ends = events.iter().filter(|e| matches!(e, AgentEvent::TurnEnd { .. })).count();
            prop_assert_eq!(ends, 1, "exactly one turn_end");
            prop_assert!(
                matches!(events.last(), Some(AgentEvent::TurnEnd { .. })),
                "turn_end comes last"
            );
            prop_assert!(
                matches!(events.first(), Some(AgentEvent::TurnStarted { .. })),
                "turn_started comes first"
            );
            if current.is_cancelled() {
                break;
            }
        }
        Ok(())
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn transcript_is_well_formed_after_any_turn(
        setup in setups(),
        script in prop::collection::vec(moves(), 0..14),
    ) {
        run_case(&setup, &script, 3)?;
    }
}

#[test]
fn transcript_is_well_formed_after_a_dropped_turn_future() {
    // A host that drops the turn future mid-batch leaves a call without a result; the next turn
    // answers it before anything else.
    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
    runtime.block_on(async {
        let hang = ScriptedTool::new(ToolSpec::without_arguments("hang", "Hangs."), |_, _| {
            Ok(rein_protocol::ToolOutput::text("never"))
        })
        .hanging();
        let model = ScriptedModel::new([
            Step::from(reply::calls(&[("hang", json!({}))])),
            reply::text("after").into(),
        ]);
        let mut agent =
            Agent::new(Arc::new(model), Arc::new(registry(&[&hang])), AgentConfig::default());
        let cancel = CancellationToken::new();
        {
            let log = EventLog::new();
            let turn = agent.turn("first", &cancel, &log);
            let raced = futures_lite_race(turn).await;
            assert!(raced.is_none(), "the turn hangs in the tool");
        }
        assert!(
            check_well_formed(agent.history()).is_err(),
            "the dropped turn left a dangling call"
        );
        let log = EventLog::new();
        let outcome = agent.turn("second", &cancel, &log).await.expect("turn");
        assert_eq!(outcome.text, "after");
        check_well_formed(agent.history()).expect("repaired");
    });
}

/// Polls a future a few times, then gives up (drops it).
async fn futures_lite_race<F: std::future::Future>(future: F) -> Option<F::Output> {
    let mut future = std::pin::pin!(future);
    for _ in 0..50 {
        if let std::task::Poll::Ready(out) = futures_poll_once(future.as_mut()).await {
            return Some(out);
        }
        tokio::task::yield_now().await;
    }
    None
}

async fn futures_poll_once<F: std::future::Future>(
    future: std::pin::Pin<&mut F>,
) -> std::task::Poll<F::Output> {
    let mut future = Some(future);
    std::future::poll_fn(move |cx| {
        let poll = future.as_mut().map_or(std::task::Poll::Pending, |f| f.as_mut().poll(cx));
        std::task::Poll::Ready(poll)
    })
    .await
}
