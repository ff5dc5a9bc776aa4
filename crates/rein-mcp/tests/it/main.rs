//! rein-mcp's integration tests: pure conversions from `test_data/`, and the client against real
//! MCP servers (server-everything, a Python SDK server, mcp-server-time, broken servers).

mod config;
mod conversions;
mod elicitation;
mod everything;
mod faults;
mod in_process;
mod keep_alive;
mod python;
mod redaction;
mod support;
mod tcp_peer;
mod time_server;
