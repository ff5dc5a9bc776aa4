//! The `rein` binary: wires rein's crates together behind a command line.
//!
//! This crate owns argument parsing, configuration loading and terminal output. It holds no
//! harness logic of its own: every behaviour lives in a library crate it calls.

mod args;
mod chat;
mod config;
mod elicit;
mod export;
mod recover;
mod run;
mod serve;
mod stores;
mod wire;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::args::CommonArgs;

/// rein: an agent harness, the loop between a language model and tools.
#[derive(Debug, Parser)]
#[command(name = "rein", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve the HTTP API and the web chat.
    Serve(serve::ServeArgs),
    /// Chat in the terminal.
    Chat(chat::ChatArgs),
    /// Run one turn without a terminal and print the answer.
    Run(run::RunArgs),
    /// Recover reasoning and tool calls from a model reply (reads FILE or stdin).
    Recover(recover::RecoverArgs),
    /// Inspect the configuration.
    #[command(subcommand)]
    Config(ConfigCommand),
}

#[derive(Debug, Subcommand)]
enum ConfigCommand {
    /// Check config files and report each problem with its file and key path.
    Check {
        #[command(flatten)]
        common: CommonArgs,
        /// Also start (or reach) every enabled MCP server for up to 5 s, list its tools, and
        /// warn about tool names servers share (each is then offered as `server__tool`).
        #[arg(long)]
        connect: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Recover(args) => recover::run(&args).map(|()| ExitCode::SUCCESS),
        Command::Config(ConfigCommand::Check { common, connect }) => config_check(&common, connect),
        Command::Serve(args) => with_runtime(serve::run(args)),
        Command::Chat(args) => with_runtime(chat::run(args)),
        Command::Run(args) => with_runtime(run::run(args)),
    };
    match result {
        Ok(code) => code,
        Err(error) => {
            eprintln!("rein: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn with_runtime(
    future: impl Future<Output = anyhow::Result<ExitCode>>,
) -> anyhow::Result<ExitCode> {
    init_logging();
    tokio::runtime::Builder::new_multi_thread().enable_all().build()?.block_on(future)
}

fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("REIN_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    // Colour only on a terminal: a log file or a collector gets plain `key=value` lines.
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(ansi)
        .try_init();
}

fn config_check(common: &CommonArgs, connect: bool) -> anyhow::Result<ExitCode> {
    let env = |name: &str| std::env::var(name).ok();
    let problems = match config::load(&common.configs, &env) {
        Ok(loaded) => {
            let mut problems = loaded.warnings;
            if let Ok(addr) = loaded.config.addr().parse() {
                problems.extend(config::unauthenticated_exposure(&loaded.config, addr));
            }
            if connect {
                let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build()?;
                let token_dir = wire::mcp_token_dir_for(&loaded.config, common.data_dir.clone());
                problems
                    .extend(runtime.block_on(config::mcp_tool_problems(&loaded.config, token_dir)));
                problems.extend(stores::database_problem(&loaded.config));
            }
            problems
        }
        Err(config::ConfigErrors(problems)) => problems,
    };
    for problem in &problems {
        println!("{problem}");
    }
    let errors = problems.iter().filter(|p| !p.warning).count();
    if errors == 0 {
        println!("ok: {} file(s), {} warning(s)", common.configs.len(), problems.len());
        Ok(ExitCode::SUCCESS)
    } else {
        println!("{errors} error(s)");
        Ok(ExitCode::FAILURE)
    }
}
