//! `rein chat`: an interactive terminal chat over the hosted runtime.
//!
//! Streams text as it is written, shows each tool call with a one-line summary of its result,
//! asks about approvals (yes / no / always for this session), puts an MCP server's questions
//! (elicitation) to the person field by field, stops a turn on Ctrl-C without
//! leaving the program, offers to continue or discard a turn paused at a checkpoint, and takes
//! slash commands (`/help`).

use std::{
    io::{IsTerminal as _, Write as _},
    path::PathBuf,
    process::ExitCode,
    time::Duration,
};

use anyhow::Context as _;
use futures::StreamExt as _;
use rein_protocol::{AgentEvent, TurnEnding};
use rein_runtime::{Decision, ElicitationReply, Runtime, SessionSettings, TurnReport};
use tokio::sync::mpsc;

use crate::{
    args::{CommonArgs, new_session, pick_agent},
    export,
};

/// Arguments of `rein chat`.
#[derive(Debug, clap::Args)]
pub(crate) struct ChatArgs {
    #[command(flatten)]
    common: CommonArgs,
    /// The agent to chat with, by its `name` (the first configured one by default). Its
    /// sessions start on the agent's `model` unless `--model` is given or `/model` picks one.
    #[arg(long, value_name = "NAME")]
    agent: Option<String>,
}

const HELP: &str = "\
/model [NAME]     show the models, or switch this session to NAME
/tools            list the tools the agent can call
/auto on|off      run side-effecting tools without asking (on) or ask first (off)
/reset            start a new session
/export [md|json] [FILE]
                  write the session (credentials scrubbed) to FILE or print it
/help             this list
/quit             leave (Ctrl-D too); Ctrl-C stops a running turn";

/// What the user typed, or Ctrl-C.
enum Input {
    Line(String),
    Interrupt,
    Eof,
}

/// The chat's state.
struct Chat {
    runtime: Runtime,
    agent: String,
    /// The session's model.
    model: String,
    /// The model the user picked (`--model`, `/model NAME`); new sessions (`/reset`) keep it.
    picked_model: Option<String>,
    session: String,
    input: mpsc::UnboundedReceiver<Input>,
    color: bool,
}

pub(crate) async fn run(args: ChatArgs) -> anyhow::Result<ExitCode> {
    let (_config, wired) = args.common.wire().await?;
    let runtime = wired.runtime;
    let agent = pick_agent(&runtime, args.agent.as_deref())?;
    let picked_model = args.common.model.clone();
    let view = new_session(&runtime, &agent, picked_model.as_deref()).await?;
    let dispatcher = runtime.start_dispatcher();
    let mut chat = Chat {
        runtime,
        agent,
        model: view.model.unwrap_or(wired.default_model),
        picked_model,
        session: view.id,
        input: spawn_input(),
        color: std::io::stdout().is_terminal(),
    };
    println!(
        "rein chat with `{}` on {} (session {}). /help lists the commands.",
        chat.agent, chat.model, chat.session
    );
    let result = chat.repl().await;
    dispatcher.shutdown().await;
    result.map(|()| ExitCode::SUCCESS)
}

/// Reads stdin lines on a thread and Ctrl-C on a task, into one channel.
fn spawn_input() -> mpsc::UnboundedReceiver<Input> {
    let (sender, receiver) = mpsc::unbounded_channel();
    let lines = sender.clone();
    std::thread::spawn(move || {
        let stdin = std::io::stdin();
        loop {
            let mut line = String::new();
            match stdin.read_line(&mut line) {
                Ok(0) | Err(_) => {
                    let _ = lines.send(Input::Eof);
                    break;
                }
                Ok(_) => {
                    if lines
                        .send(Input::Line(line.trim_end_matches(['\n', '\r']).to_owned()))
                        .is_err()
                    {
                        break;
                    }
                }
            }
        }
    });
    tokio::spawn(async move {
        while tokio::signal::ctrl_c().await.is_ok() {
            if sender.send(Input::Interrupt).is_err() {
                break;
            }
        }
    });
    receiver
}

impl Chat {
    fn prompt(&self) {
        print!("{}", if self.color { "\x1b[1m›\x1b[0m " } else { "> " });
        let _ = std::io::stdout().flush();
    }

    async fn next_line(&mut self) -> Option<String> {
        loop {
            match self.input.recv().await? {
                Input::Line(line) => return Some(line),
                Input::Eof => return None,
                Input::Interrupt => {
                    println!("\n(no turn is running; /quit or Ctrl-D leaves)");
                    self.prompt();
                }
            }
        }
    }

    async fn repl(&mut self) -> anyhow::Result<()> {
        loop {
            self.prompt();
            let Some(line) = self.next_line().await else {
                println!();
                return Ok(());
            };
            let line = line.trim().to_owned();
            if line.is_empty() {
                continue;
            }
            if let Some(command) = line.strip_prefix('/') {
                if !self.command(command).await? {
                    return Ok(());
                }
                continue;
            }
            self.turn(&line).await?;
        }
    }

    /// Runs a slash command; `false` means quit.
    async fn command(&mut self, command: &str) -> anyhow::Result<bool> {
        let mut words = command.split_whitespace();
        match words.next().unwrap_or_default() {
            "quit" | "exit" | "q" => return Ok(false),
            "help" | "h" => println!("{HELP}"),
            "model" => match words.next() {
                None => {
                    let listing = self.runtime.models();
                    for model in listing.models {
                        let mark = if model.name == self.model { "*" } else { " " };
                        println!(
                            "{mark} {}{}",
                            model.name,
                            model.label.map(|l| format!("  ({l})")).unwrap_or_default()
                        );
                    }
                }
                Some(name) => {
                    let settings = SessionSettings {
                        model: Some(name.to_owned()),
                        ..SessionSettings::default()
                    };
                    match self.runtime.update_session(&self.session, settings).await {
                        Ok(_) => {
                            self.model = name.to_owned();
                            self.picked_model = Some(name.to_owned());
                            println!("model: {name}");
                        }
                        Err(error) => println!("cannot switch: {error}"),
                    }
                }
            },
            "tools" => {
                let tools = self.runtime.agent_tools(&self.agent).unwrap_or_default();
                if tools.is_empty() {
                    println!("(no tools)");
                }
                for tool in tools {
                    let first_line = tool.description.lines().next().unwrap_or_default();
                    println!("{}  {}", tool.name, first_line);
                }
            }
            "auto" => {
                let on = match words.next() {
                    Some("on") => true,
                    Some("off") => false,
                    _ => {
                        println!("usage: /auto on|off");
                        return Ok(true);
                    }
                };
                let settings =
                    SessionSettings { auto_approve: Some(on), ..SessionSettings::default() };
                self.runtime.update_session(&self.session, settings).await?;
                println!("auto-approve {}", if on { "on" } else { "off" });
            }
            "reset" => {
                let view =
                    new_session(&self.runtime, &self.agent, self.picked_model.as_deref()).await?;
                self.session = view.id;
                if let Some(model) = view.model {
                    self.model = model;
                }
                println!("new session {} on {}", self.session, self.model);
            }
            "export" => {
                let format = words.next().unwrap_or("md");
                let file = words.next().map(PathBuf::from);
                let view = self.runtime.session(&self.session).await?;
                let title =
                    view.title.clone().unwrap_or_else(|| format!("rein session {}", view.id));
                let text = match format {
                    "json" => export::json(&view.messages),
                    _ => export::markdown(&title, &view.messages),
                };
                match file {
                    Some(path) => {
                        std::fs::write(&path, text)
                            .with_context(|| format!("writing {}", path.display()))?;
                        println!("exported to {}", path.display());
                    }
                    None => println!("{text}"),
                }
            }
            other => println!("unknown command /{other}; /help lists them"),
        }
        Ok(true)
    }

    /// Runs one turn (and the follow-ups the user asks for: continue, approved calls).
    async fn turn(&mut self, text: &str) -> anyhow::Result<()> {
        let mut next = Some(TurnKind::Message(text.to_owned()));
        while let Some(kind) = next.take() {
            let Some((report, approvals)) = self.stream_turn(kind).await? else { return Ok(()) };
            next = self.after_turn(&report, approvals).await?;
        }
        Ok(())
    }

    /// Streams one turn to the terminal; `None` when it failed before it ran.
    async fn stream_turn(
        &mut self,
        kind: TurnKind,
    ) -> anyhow::Result<Option<(TurnReport, Vec<Pending>)>> {
        let mut events = self.runtime.subscribe(&self.session, None).await?;
        // Skip what is already in the transcript: only this turn's events are shown.
        let replayed = self
            .runtime
            .replay(&self.session, None)
            .map(|events| events.last().map(|e| e.id))
            .ok()
            .flatten();
        let runtime = self.runtime.clone();
        let session = self.session.clone();
        let mut turn = tokio::spawn(async move {
            match kind {
                TurnKind::Message(text) => runtime.send_message(&session, &text, None).await,
                TurnKind::Continue => runtime.continue_turn(&session).await,
            }
        });
        let mut view = TurnView::new(self.color);
        let mut spinner = tokio::time::interval(Duration::from_millis(120));
        loop {
            let mut question = None;
            tokio::select! {
                event = events.next() => {
                    let Some(event) = event else { break };
                    if replayed.is_some_and(|last| event.id <= last) {
                        continue;
                    }
                    view.show(&event.event);
                    if let AgentEvent::ElicitationRequested {
                        elicitation_id, server, message, requested_schema, url,
                    } = event.event.clone()
                    {
                        question = Some(Question {
                            id: elicitation_id,
                            server,
                            message,
                            schema: requested_schema,
                            url,
                        });
                    }
                    if let AgentEvent::ApprovalRequested { approval_id, call } = &event.event {
                        view.approvals.push(Pending {
                            id: approval_id.clone(),
                            tool: call.name.clone(),
                            arguments: call.arguments_json().into_owned(),
                        });
                    }
                    if matches!(event.event, AgentEvent::TurnEnd { .. }) {
                        break;
                    }
                }
                input = self.input.recv() => match input {
                    Some(Input::Interrupt) => {
                        view.clear_spinner();
                        println!("\n(stopping…)");
                        let _ = self.runtime.interrupt(&self.session).await;
                    }
                    Some(Input::Line(_)) => println!("(a turn is running; Ctrl-C stops it)"),
                    Some(Input::Eof) | None => {}
                },
                _ = spinner.tick() => view.tick(),
                finished = &mut turn => {
                    view.clear_spinner();
                    return self.finish(finished, view);
                }
            }
            if let Some(question) = question {
                view.clear_spinner();
                self.answer_question(question).await;
            }
        }
        let finished = turn.await;
        view.clear_spinner();
        self.finish(finished, view)
    }

    fn finish(
        &self,
        finished: Result<rein_runtime::Result<TurnReport>, tokio::task::JoinError>,
        view: TurnView,
    ) -> anyhow::Result<Option<(TurnReport, Vec<Pending>)>> {
        match finished.context("the turn task")? {
            Ok(report) => {
                if !view.printed_text && !report.final_message.is_empty() {
                    println!("{}", report.final_message);
                } else {
                    println!();
                }
                Ok(Some((report, view.approvals)))
            }
            Err(error) => {
                println!("\nerror: {error}");
                Ok(None)
            }
        }
    }

    /// Asks about approvals and checkpoints; returns the follow-up turn, if any.
    async fn after_turn(
        &mut self,
        report: &TurnReport,
        approvals: Vec<Pending>,
    ) -> anyhow::Result<Option<TurnKind>> {
        match report.ending {
            TurnEnding::Length => println!("(the answer was cut at the output limit)"),
            TurnEnding::Interrupted => println!("(stopped)"),
            TurnEnding::Error => println!("(the turn failed)"),
            _ => {}
        }
        let mut approved = Vec::new();
        for Pending { id, tool: name, arguments } in approvals {
            let answer = self
                .ask(&format!(
                    "Allow {name}({arguments})? [y]es / [n]o / [a]lways for this session: "
                ))
                .await;
            let decision = match answer.as_deref().map(str::trim) {
                Some("y" | "yes") => Decision::Approve,
                Some("a" | "always") => Decision::ApproveForSession,
                _ => Decision::Deny,
            };
            let approve = decision != Decision::Deny;
            match self.runtime.decide_approval(&id, decision, None).await {
                Ok(_) if approve => approved.push(name),
                Ok(_) => println!("denied {name}"),
                Err(error) => println!("cannot decide on {name}: {error}"),
            }
        }
        if !approved.is_empty() {
            return Ok(Some(TurnKind::Message(format!(
                "I approved {}. Please make the same call again now.",
                approved.join(", ")
            ))));
        }
        if report.ending == TurnEnding::Checkpoint {
            let answer =
                self.ask("The turn paused at a checkpoint. [c]ontinue or [d]iscard? ").await;
            if matches!(answer.as_deref().map(str::trim), Some("c" | "continue" | "")) {
                return Ok(Some(TurnKind::Continue));
            }
            self.runtime.discard_checkpoint(&self.session).await?;
            println!("(discarded)");
        }
        Ok(None)
    }

    /// Puts an MCP server's question to the person, field by field, and sends the answer.
    async fn answer_question(&mut self, question: Question) {
        println!("\n? MCP server `{}` asks: {}", question.server, question.message);
        if let Some(url) = &question.url {
            println!("  open {url}");
        }
        let reply = self.fill_form(&question).await;
        if let Err(error) =
            self.runtime.answer_elicitation(&self.session, &question.id, reply).await
        {
            println!("(the answer was not taken: {error})");
        }
    }

    /// Asks each field of `question`'s form (an empty line takes the default, or skips an
    /// optional field), then whether to send; Ctrl-C or Ctrl-D cancels.
    async fn fill_form(&mut self, question: &Question) -> ElicitationReply {
        let required: Vec<&str> = question
            .schema
            .get("required")
            .and_then(serde_json::Value::as_array)
            .map(|names| names.iter().filter_map(serde_json::Value::as_str).collect())
            .unwrap_or_default();
        let mut content = rein_protocol::JsonObject::new();
        let no_properties = serde_json::Map::new();
        let properties = question
            .schema
            .get("properties")
            .and_then(serde_json::Value::as_object)
            .unwrap_or(&no_properties);
        for (name, property) in properties {
            let field = Field::of(name, property, required.contains(&name.as_str()));
            loop {
                print!("  {}: ", field.label());
                let _ = std::io::stdout().flush();
                let Some(line) = self.question_line().await else {
                    return ElicitationReply::Cancel;
                };
                match field.read(line.trim()) {
                    Ok(Some(value)) => {
                        content.insert(name.clone(), value);
                        break;
                    }
                    Ok(None) => break,
                    Err(problem) => println!("  {problem}"),
                }
            }
        }
        print!("Send this answer? [y]es / [n]o, decline / [c]ancel: ");
        let _ = std::io::stdout().flush();
        match self.question_line().await.map(|line| line.trim().to_ascii_lowercase()).as_deref() {
            Some("" | "y" | "yes") => ElicitationReply::Accept(content),
            Some("n" | "no") => ElicitationReply::Decline,
            _ => ElicitationReply::Cancel,
        }
    }

    /// The next line while a question is asked; `None` on Ctrl-C or end of input.
    async fn question_line(&mut self) -> Option<String> {
        match self.input.recv().await? {
            Input::Line(line) => Some(line),
            Input::Eof | Input::Interrupt => None,
        }
    }

    async fn ask(&mut self, question: &str) -> Option<String> {
        print!("{question}");
        let _ = std::io::stdout().flush();
        self.next_line().await.map(|line| line.to_ascii_lowercase())
    }
}

/// A question of an MCP server, asked during a turn.
struct Question {
    id: String,
    server: String,
    message: String,
    schema: rein_protocol::JsonObject,
    url: Option<String>,
}

/// One field of a question's form: how it is asked and how a typed line is read.
#[derive(Debug)]
struct Field {
    title: String,
    kind: String,
    choices: Vec<serde_json::Value>,
    default: Option<serde_json::Value>,
    required: bool,
}

impl Field {
    fn of(name: &str, property: &serde_json::Value, required: bool) -> Field {
        Field {
            title: property["title"].as_str().unwrap_or(name).to_owned(),
            kind: property["type"].as_str().unwrap_or("string").to_owned(),
            choices: property["enum"].as_array().cloned().unwrap_or_default(),
            default: property.get("default").cloned(),
            required,
        }
    }

    /// `Title (a/b) [default]*`: the choices or the type, the default, and a star when required.
    fn label(&self) -> String {
        let choices: Vec<String> = self.choices.iter().map(plain).collect();
        let hint = if choices.is_empty() { self.kind.clone() } else { choices.join("/") };
        let default = self.default.as_ref().map(|d| format!(" [{}]", plain(d))).unwrap_or_default();
        let star = if self.required { "*" } else { "" };
        format!("{} ({hint}){default}{star}", self.title)
    }

    /// The value of a typed line: `None` to leave an optional field out; an error to ask again.
    fn read(&self, line: &str) -> Result<Option<serde_json::Value>, String> {
        if line.is_empty() {
            return match (&self.default, self.required) {
                (Some(default), _) => Ok(Some(default.clone())),
                (None, false) => Ok(None),
                (None, true) => Err("this field is required".to_owned()),
            };
        }
        let value = match self.kind.as_str() {
            "boolean" => match line.to_ascii_lowercase().as_str() {
                "y" | "yes" | "true" | "1" => serde_json::Value::Bool(true),
                "n" | "no" | "false" | "0" => serde_json::Value::Bool(false),
                _ => return Err("answer yes or no".to_owned()),
            },
            "integer" => line
                .parse::<i64>()
                .map(serde_json::Value::from)
                .map_err(|_| "a whole number, please".to_owned())?,
            "number" => line
                .parse::<f64>()
                .ok()
                .and_then(serde_json::Number::from_f64)
                .map(serde_json::Value::Number)
                .ok_or_else(|| "a number, please".to_owned())?,
            _ => serde_json::Value::String(line.to_owned()),
        };
        if !self.choices.is_empty() && !self.choices.contains(&value) {
            let choices: Vec<String> = self.choices.iter().map(plain).collect();
            return Err(format!("one of: {}", choices.join(", ")));
        }
        Ok(Some(value))
    }
}

/// A JSON value as a person reads it (a string without its quotes).
fn plain(value: &serde_json::Value) -> String {
    value.as_str().map_or_else(|| value.to_string(), str::to_owned)
}

/// An approval requested during a turn.
struct Pending {
    id: String,
    tool: String,
    arguments: String,
}

/// What to run next.
enum TurnKind {
    Message(String),
    Continue,
}

/// The terminal view of one turn.
struct TurnView {
    color: bool,
    printed_text: bool,
    /// Reasoning is being printed (the spinner waits).
    in_reasoning: bool,
    spinner_shown: bool,
    frame: usize,
    approvals: Vec<Pending>,
}

impl TurnView {
    fn new(color: bool) -> Self {
        TurnView {
            color,
            printed_text: false,
            in_reasoning: false,
            spinner_shown: false,
            frame: 0,
            approvals: Vec::new(),
        }
    }

    fn tick(&mut self) {
        if !self.color || self.printed_text || self.in_reasoning {
            return;
        }
        const FRAMES: [&str; 4] = ["⠋", "⠙", "⠸", "⠴"];
        self.frame = (self.frame + 1) % FRAMES.len();
        eprint!("\r{} ", FRAMES[self.frame]);
        self.spinner_shown = true;
    }

    fn clear_spinner(&mut self) {
        if self.spinner_shown {
            eprint!("\r  \r");
            self.spinner_shown = false;
        }
    }

    fn dim(&self, text: &str) -> String {
        if self.color { format!("\x1b[2m{text}\x1b[0m") } else { text.to_owned() }
    }

    fn show(&mut self, event: &AgentEvent) {
        let mut stdout = std::io::stdout();
        match event {
            AgentEvent::TextDelta { text } => {
                self.clear_spinner();
                if std::mem::take(&mut self.in_reasoning) {
                    // The answer starts on its own line, below the reasoning.
                    let _ = writeln!(stdout);
                }
                self.printed_text = true;
                let _ = write!(stdout, "{text}");
            }
            AgentEvent::ReasoningDelta { text } => {
                self.clear_spinner();
                // The spinner would write into the reasoning's line.
                self.in_reasoning = true;
                let _ = write!(stdout, "{}", self.dim(text));
            }
            AgentEvent::ToolStarted { name, .. } => {
                self.clear_spinner();
                self.in_reasoning = false;
                let _ = writeln!(stdout, "{}", self.dim(&format!("\n⚙ {name} …")));
            }
            AgentEvent::ToolResult { name, output, .. } => {
                let first: String =
                    output.text.lines().next().unwrap_or_default().chars().take(100).collect();
                let mark = if output.is_error { "✗" } else { "✓" };
                let _ = writeln!(stdout, "{}", self.dim(&format!("{mark} {name}: {first}")));
                self.printed_text = false;
            }
            AgentEvent::ApprovalRequested { call, .. } => {
                let _ = writeln!(
                    stdout,
                    "{}",
                    self.dim(&format!("? {} needs your approval", call.name))
                );
            }
            AgentEvent::ModelRetry { attempt, delay_ms, reason } => {
                // A failed model request is sent again: the person sees why the turn waits.
                self.clear_spinner();
                let wait = if *delay_ms > 0 {
                    format!(" in {} s", delay_ms.div_ceil(1000))
                } else {
                    String::new()
                };
                let line = format!("retrying the model{wait} (attempt {attempt}): {reason}");
                let _ = writeln!(stdout, "{}", self.dim(&line));
            }
            AgentEvent::ElicitationAnswered { action, .. } => {
                let _ = writeln!(stdout, "{}", self.dim(&format!("answer: {}", action.as_str())));
            }
            AgentEvent::Checkpoint { summary } => {
                let _ = writeln!(stdout, "\n{}", self.dim(&format!("checkpoint: {summary}")));
            }
            AgentEvent::Notice { code, message } if code == "degenerate_reply" => {
                // The model was stopped for repeating itself: the user is told why.
                self.clear_spinner();
                let _ = writeln!(stdout, "\n{}", self.dim(&format!("note: {message}")));
            }
            AgentEvent::Error { message, .. } => {
                let _ = writeln!(stdout, "\n{}", self.dim(&format!("error: {message}")));
            }
            _ => {}
        }
        let _ = stdout.flush();
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::Field;

    #[test]
    fn a_form_field_reads_typed_lines_and_takes_its_default_on_an_empty_one() {
        let age = Field::of("age", &json!({"type": "integer", "title": "Age"}), true);
        assert_eq!(age.label(), "Age (integer)*");
        assert_eq!(age.read("36"), Ok(Some(json!(36))));
        assert!(age.read("3.5").is_err() && age.read("").is_err());

        let color = Field::of(
            "color",
            &json!({"type": "string", "enum": ["red", "blue"], "default": "blue"}),
            false,
        );
        assert_eq!(color.label(), "color (red/blue) [blue]");
        assert_eq!(color.read(""), Ok(Some(json!("blue"))));
        assert_eq!(color.read("red"), Ok(Some(json!("red"))));
        assert_eq!(color.read("green"), Err("one of: red, blue".to_owned()));

        let subscribe = Field::of("subscribe", &json!({"type": "boolean"}), false);
        assert_eq!(subscribe.read("yes"), Ok(Some(json!(true))));
        assert_eq!(subscribe.read(""), Ok(None), "optional, no default: left out");
        assert!(subscribe.read("maybe").is_err());

        let ratio = Field::of("ratio", &json!({"type": "number"}), false);
        assert_eq!(ratio.read("0.5"), Ok(Some(json!(0.5))));
    }
}
