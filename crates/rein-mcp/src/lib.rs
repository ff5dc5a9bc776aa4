//! MCP tool sources implementing rein_protocol::ToolSource. Work in progress: see issue 4.

#![warn(missing_docs, unreachable_pub)]
