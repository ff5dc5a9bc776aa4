//! `cargo xtask bench loop`: the agent loop's own cost per step, with an instant model and
//! instant tools on a 200-message session.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use rein_agent::{Agent, AgentConfig, NoEvents, ToolRegistry};
use rein_protocol::{CancellationToken, Message, ToolCall, ToolOutput, ToolSpec};
use rein_testkit::{ScriptedModel, Step, reply};

use super::Figures;

/// Messages in the session before each measured turn.
const SESSION_MESSAGES: usize = 200;
/// Measured turns (each is two steps: a tool round and the answer).
const TURNS: usize = 2_000;
/// Turns run first and not measured.
const WARMUP: usize = 100;
/// Turns per timed batch.
const BATCH: usize = 20;

/// A 200-message session: user, assistant call, tool result, assistant answer, repeated.
fn session() -> Vec<Message> {
    let mut history = Vec::with_capacity(SESSION_MESSAGES);
    let mut turn = 0;
    while history.len() < SESSION_MESSAGES {
        let id = format!("old_{turn}");
        let mut arguments = rein_protocol::JsonObject::new();
        arguments.insert("q".into(), format!("topic {turn}").into());
        history
            .push(Message::user(format!("Question {turn}: what do we know about topic {turn}?")));
        history.push(Message::assistant_calls(
            None,
            vec![ToolCall::new(id.clone(), "lookup", arguments)],
        ));
        history.push(Message::tool(
            id,
            format!("Topic {turn}: {}", "some facts. ".repeat(20)),
            false,
        ));
        history.push(Message::assistant(format!("Here is what I found about topic {turn}.")));
        turn += 1;
    }
    history.truncate(SESSION_MESSAGES);
    history
}

/// Polls a future to completion with a no-op waker: the model and the tools are instant, so
/// the turn never waits on anything outside itself (no runtime needed, none measured).
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    let mut context = std::task::Context::from_waker(std::task::Waker::noop());
    loop {
        if let std::task::Poll::Ready(output) = future.as_mut().poll(&mut context) {
            return output;
        }
    }
}

pub(crate) fn run() -> anyhow::Result<Figures> {
    let model = ScriptedModel::repeating([
        Step::from(reply::call("call_new", "lookup", serde_json::json!({"q": "now"}))),
        Step::from(reply::text("Done.")),
    ])
    .recording(false);
    let schema = serde_json::json!({"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]});
    let schema = schema.as_object().cloned().unwrap_or_default();
    let mut tools = ToolRegistry::new();
    tools.register_fn(
        ToolSpec::new("lookup", "Looks up.", schema).read_only(true),
        |_, _| async { Ok(ToolOutput::text("instant result")) },
    )?;
    let config =
        AgentConfig { system_prompt: "You are a benchmark.".into(), ..AgentConfig::default() };
    let mut agent = Agent::new(Arc::new(model), Arc::new(tools), config);
    let base = session();
    let cancel = CancellationToken::new();

    // Turns are timed in batches; on a shared, loaded machine the fastest batch is the one
    // least disturbed by other processes, so it is the best estimate of the loop's own cost.
    let mut wall = Duration::ZERO;
    let mut steps = 0u64;
    let mut per_step = Vec::with_capacity(TURNS);
    let mut best_batch = f64::INFINITY;
    let (mut batch_time, mut batch_steps, mut batch_turns) = (Duration::ZERO, 0u32, 0usize);
    for turn in 0..WARMUP + TURNS {
        agent.set_history(base.clone());
        let started = Instant::now();
        let outcome = block_on(agent.turn("And now?", &cancel, &NoEvents))?;
        let took = started.elapsed();
        anyhow::ensure!(outcome.text == "Done.", "unexpected answer {:?}", outcome.text);
        if turn < WARMUP {
            continue;
        }
        wall += took;
        steps += u64::from(outcome.steps);
        per_step.push(took.as_secs_f64() * 1e6 / f64::from(outcome.steps));
        batch_time += took;
        batch_steps += outcome.steps;
        batch_turns += 1;
        if batch_turns == BATCH {
            best_batch = best_batch.min(batch_time.as_secs_f64() * 1e6 / f64::from(batch_steps));
            (batch_time, batch_steps, batch_turns) = (Duration::ZERO, 0, 0);
        }
    }
    per_step.sort_by(f64::total_cmp);
    let median = per_step.get(per_step.len() / 2).copied().unwrap_or_default();
    #[allow(clippy::cast_precision_loss)] // Step counts are far below 2^52.
    let wall_mean = wall.as_secs_f64() * 1e6 / steps as f64;
    let mut figures: Figures = vec![
        ("step_overhead_us".into(), best_batch),
        ("step_median_us".into(), median),
        ("step_mean_us".into(), wall_mean),
    ];
    if let Some(prepare) = prepare_us(&base) {
        figures.push(("context_prepare_us".into(), prepare));
    }
    figures.extend([
        ("session_messages".into(), SESSION_MESSAGES as f64),
        ("steps".into(), steps as f64),
    ]);
    Ok(figures)
}

/// Wall time of one `ContextBudget::prepare` of the session (fastest of 10 batches of 100):
/// the share of a step that is the context budget's (normalize, count, choose a level).
fn prepare_us(base: &[Message]) -> Option<f64> {
    let mut history = base.to_vec();
    history.push(Message::user("And now?"));
    let system = [Message::system("You are a benchmark.")];
    let model = rein_protocol::ModelInfo::named("scripted");
    let mut budget = rein_context::ContextBudget::default();
    let input = rein_context::PrepareInput {
        system: &system,
        history: &history,
        pinned: &[],
        tools: &[],
        model: &model,
        min_level: rein_context::Level::default(),
    };
    let _ = budget.prepare(&input);
    let mut best = f64::INFINITY;
    for _ in 0..10 {
        let started = Instant::now();
        for _ in 0..100 {
            std::hint::black_box(budget.prepare(&input));
        }
        best = best.min(started.elapsed().as_secs_f64() * 1e6 / 100.0);
    }
    best.is_finite().then_some(best)
}
