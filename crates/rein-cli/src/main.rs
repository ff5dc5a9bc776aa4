//! The `rein` binary: wires rein's crates together behind a command line.
//!
//! This crate owns argument parsing, configuration loading and terminal output. It holds no
//! harness logic of its own: every behaviour lives in a library crate it calls.

use clap::{Parser, Subcommand};

/// rein: an agent harness.
#[derive(Debug, Parser)]
#[command(name = "rein", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Recover reasoning and tool calls from a model reply (reads FILE or stdin).
    Recover(recover::RecoverArgs),
}

#[allow(dead_code)] // Wired into `run`, `chat`, `serve` and `config check` next.
mod config;
mod recover;

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Recover(args) => recover::run(&args),
    };
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("rein: {error:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
