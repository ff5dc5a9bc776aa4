//! `rein run "PROMPT"`: one turn without a terminal; the answer, or every event as JSON lines.

use std::{io::Write as _, process::ExitCode};

use anyhow::Context as _;
use futures::StreamExt as _;
use rein_protocol::{AgentEvent, TurnEnding};
use rein_runtime::ElicitationReply;

use crate::args::{CommonArgs, new_session, pick_agent};

/// Arguments of `rein run`.
#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Print every event as a JSON line (the events of the server's stream).
    #[arg(long)]
    json: bool,
    /// The agent to run, by its `name` (the first configured one by default). Its session
    /// starts on the agent's `model` unless `--model` is given.
    #[arg(long, value_name = "NAME")]
    agent: Option<String>,
    /// Accept what an MCP server asks during the turn (elicitation) with its form's defaults;
    /// without it every such question is declined.
    #[arg(long)]
    yes: bool,
    /// The user's message.
    prompt: String,
}

/// The answer of a run to an MCP server's question: with `--yes`, the form's defaults (each
/// property's `default`); declined otherwise.
fn run_answer(yes: bool, requested_schema: &rein_protocol::JsonObject) -> ElicitationReply {
    if yes {
        ElicitationReply::Accept(rein_mcp::form_defaults(requested_schema))
    } else {
        ElicitationReply::Decline
    }
}

pub(crate) async fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let (_config, wired) = args.common.wire().await?;
    let runtime = wired.runtime;
    let agent = pick_agent(&runtime, args.agent.as_deref())?;
    let session = new_session(&runtime, &agent, args.common.model.as_deref()).await?;
    let mut events =
        runtime.subscribe(&session.id, None).await.context("subscribing to the session")?;
    let json = args.json;
    let yes = args.yes;
    let answering = runtime.clone();
    let session_id = session.id.clone();
    // Prints the events (with --json), answers MCP servers' questions, and returns the turn's
    // last error message, if any.
    let printer = tokio::spawn(async move {
        let mut stdout = std::io::stdout();
        let mut last_error = None;
        while let Some(event) = events.next().await {
            if let AgentEvent::Error { message, .. } = &event.event {
                last_error = Some(message.clone());
            }
            if let AgentEvent::ElicitationRequested {
                elicitation_id,
                server,
                message,
                requested_schema,
                ..
            } = &event.event
            {
                let mut reply = run_answer(yes, requested_schema);
                let answered =
                    answering.answer_elicitation(&session_id, elicitation_id, reply.clone()).await;
                if answered.is_err() {
                    // The defaults do not answer the form: declined after all.
                    reply = ElicitationReply::Decline;
                    let _ = answering
                        .answer_elicitation(&session_id, elicitation_id, reply.clone())
                        .await;
                }
                let done = match reply {
                    ElicitationReply::Accept(_) => "accepted with its defaults",
                    _ if yes => "declined: its form has no defaults for every required field",
                    _ => "declined (`--yes` accepts its defaults)",
                };
                eprintln!("rein: MCP server `{server}` asked \"{message}\": {done}");
            }
            let end = matches!(event.event, AgentEvent::TurnEnd { .. });
            if json {
                let line = serde_json::json!({ "id": event.id, "event": event.event });
                let _ = writeln!(stdout, "{line}");
                let _ = stdout.flush();
            }
            if end {
                break;
            }
        }
        last_error
    });
    let interrupt = {
        let runtime = runtime.clone();
        let id = session.id.clone();
        tokio::spawn(async move {
            if tokio::signal::ctrl_c().await.is_ok() {
                let _ = runtime.interrupt(&id).await;
            }
        })
    };
    let report = runtime.send_message(&session.id, &args.prompt, None).await;
    interrupt.abort();
    // The stream ends at the turn's end event (also when the turn failed); do not wait forever
    // if it was missed.
    let last_error = match tokio::time::timeout(std::time::Duration::from_secs(5), printer).await {
        Ok(Ok(last_error)) => last_error,
        _ => None,
    };
    let failure = match &report {
        Err(error) => Some(format!("{error:#}")),
        Ok(report) if report.ending == TurnEnding::Error => last_error
            .or_else(|| Some(report.final_message.clone()).filter(|m| !m.is_empty()))
            .or(Some(String::new())),
        Ok(_) => None,
    };
    if let Some(reason) = failure {
        // One line, whatever the provider's message looked like.
        let reason = reason.split_whitespace().collect::<Vec<_>>().join(" ");
        let reason = if reason.is_empty() { "no reason given".to_owned() } else { reason };
        eprintln!("rein: the turn failed: {reason}");
        return Ok(ExitCode::FAILURE);
    }
    let report = report.context("running the turn")?;
    if !json {
        println!("{}", report.final_message);
    }
    Ok(ExitCode::SUCCESS)
}
