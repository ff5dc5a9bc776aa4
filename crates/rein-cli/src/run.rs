//! `rein run "PROMPT"`: one turn without a terminal; the answer, or every event as JSON lines.

use std::{io::Write as _, process::ExitCode};

use anyhow::Context as _;
use futures::StreamExt as _;
use rein_protocol::{AgentEvent, TurnEnding};
use rein_runtime::CreateSession;

use crate::CommonArgs;

/// Arguments of `rein run`.
#[derive(Debug, clap::Args)]
pub(crate) struct RunArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// Print every event as a JSON line (the events of the server's stream).
    #[arg(long)]
    json: bool,
    /// The agent to run (the first configured one by default).
    #[arg(long)]
    agent: Option<String>,
    /// The user's message.
    prompt: String,
}

pub(crate) async fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let (_config, wired) = args.common.wire().await?;
    let runtime = wired.runtime;
    let agent = match &args.agent {
        Some(agent) => agent.clone(),
        None => runtime.agents().first().map(|a| a.name.clone()).context("no agent is configured")?,
    };
    let session = runtime
        .create_session(CreateSession::agent(agent).model(wired.default_model.clone()))
        .await
        .context("creating a session")?;
    let mut events = runtime.subscribe(&session.id, None).await.context("subscribing to the session")?;
    let json = args.json;
    let printer = tokio::spawn(async move {
        let mut stdout = std::io::stdout();
        while let Some(event) = events.next().await {
            let end = matches!(event.event, AgentEvent::TurnEnd { .. });
            if json {
                let line = serde_json::json!({ "id": event.id, "event": event.event });
                let _ = writeln!(stdout, "{line}");
            }
            if end {
                break;
            }
        }
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
    let report = match report {
        Ok(report) => report,
        Err(error) => {
            printer.abort();
            return Err(error).context("running the turn");
        }
    };
    // The stream ends at the turn's end event; do not wait forever if it was missed.
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), printer).await;
    if !json {
        println!("{}", report.final_message);
    }
    Ok(if report.ending == TurnEnding::Error { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}
