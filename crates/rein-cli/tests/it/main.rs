//! rein-cli's integration tests: each module drives the built `rein` binary.

mod agents;
mod approvals;
mod background;
mod chat;
mod client_tool_replicas;
mod config_check;
mod connections;
mod crash;
mod elicitation;
mod faults;
mod hooks;
mod kill_restart;
mod mcp_oauth;
mod mcp_servers;
mod model_check;
mod recover;
mod replicas;
mod run;
mod security;
mod serve;
mod support;
mod tools;
mod turn_limits;

use std::io::Write as _;
use std::process::{Command, Output, Stdio};

/// Runs `rein ARGS` with `stdin` as its standard input.
pub(crate) fn rein(args: &[&str], stdin: &str) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rein"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn rein");
    child.stdin.take().expect("stdin").write_all(stdin.as_bytes()).expect("write stdin");
    child.wait_with_output().expect("rein runs")
}
