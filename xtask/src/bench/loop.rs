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

    let mut wall = Duration::ZERO;
    let mut cpu_ns = 0u64;
    let mut cpu_known = true;
    let mut steps = 0u64;
    let mut per_step = Vec::with_capacity(TURNS);
    for turn in 0..WARMUP + TURNS {
        agent.set_history(base.clone());
        let cpu_before = thread_cpu_ns();
        let started = Instant::now();
        let outcome = block_on(agent.turn("And now?", &cancel, &NoEvents))?;
        let took = started.elapsed();
        let cpu_after = thread_cpu_ns();
        anyhow::ensure!(outcome.text == "Done.", "unexpected answer {:?}", outcome.text);
        if turn >= WARMUP {
            wall += took;
            steps += u64::from(outcome.steps);
            per_step.push(took.as_secs_f64() * 1e6 / f64::from(outcome.steps));
            match (cpu_before, cpu_after) {
                (Some(before), Some(after)) => cpu_ns += after.saturating_sub(before),
                _ => cpu_known = false,
            }
        }
    }
    per_step.sort_by(f64::total_cmp);
    let median = per_step.get(per_step.len() / 2).copied().unwrap_or_default();
    #[allow(clippy::cast_precision_loss)] // Step counts and nanoseconds are far below 2^52.
    let (wall_mean, cpu_mean) =
        (wall.as_secs_f64() * 1e6 / steps as f64, cpu_ns as f64 / 1e3 / steps as f64);
    // The figure is the loop's own work per step: on-CPU time when the OS reports it (a
    // loaded machine inflates wall time with waits for a core), else the wall-clock median.
    let overhead = if cpu_known { cpu_mean } else { median };
    let mut figures: Figures = vec![("step_overhead_us".into(), overhead)];
    if let Some(prepare) = prepare_cpu_us(&base) {
        figures.push(("context_prepare_cpu_us".into(), prepare));
    }
    if cpu_known {
        figures.push(("step_cpu_mean_us".into(), cpu_mean));
    }
    figures.extend([
        ("step_wall_median_us".into(), median),
        ("step_wall_mean_us".into(), wall_mean),
        ("session_messages".into(), SESSION_MESSAGES as f64),
        ("steps".into(), steps as f64),
    ]);
    Ok(figures)
}

/// On-CPU time of one `ContextBudget::prepare` of the session: the share of a step that is
/// the context budget's (normalize, count, choose a level), not the loop's own.
fn prepare_cpu_us(base: &[Message]) -> Option<f64> {
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
    let rounds = 1_000u32;
    let _ = budget.prepare(&input);
    let before = thread_cpu_ns()?;
    for _ in 0..rounds {
        std::hint::black_box(budget.prepare(&input));
    }
    let after = thread_cpu_ns()?;
    #[allow(clippy::cast_precision_loss)] // Nanoseconds far below 2^52.
    Some(after.saturating_sub(before) as f64 / 1e3 / f64::from(rounds))
}

/// Nanoseconds this thread has spent on a CPU (Linux `/proc/thread-self/schedstat`).
fn thread_cpu_ns() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    stat.split_whitespace().next()?.parse().ok()
}
