//! `rein recover` as a library: reasoning and tool calls recovered from a model's raw reply.
//!
//! Run: `cargo run -p rein-examples --example recover` (reads the reply from stdin when one is
//! piped in, else uses a built-in reply with a `<think>` block and an embedded call).

use std::io::{IsTerminal as _, Read as _};

use rein::recover::{RawReply, recover};

const SAMPLE: &str = "<think>The user wants the weather; I should call the tool.</think>\
Let me check.\n<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\",}}</tool_call>";

fn main() -> anyhow::Result<()> {
    let mut text = String::new();
    if !std::io::stdin().is_terminal() {
        std::io::stdin().read_to_string(&mut text)?;
    }
    if text.trim().is_empty() {
        text = SAMPLE.to_owned();
    }
    let reply = RawReply { content: &text, ..RawReply::default() };
    let recovered = recover(&reply, &["get_weather"]);
    println!("reasoning: {}", recovered.reasoning.as_deref().unwrap_or("(none)"));
    println!("visible:   {}", recovered.visible_text.trim());
    for call in &recovered.calls {
        println!("call:      {}({})", call.name, call.arguments_json());
    }
    for diagnostic in &recovered.diagnostics {
        println!("repaired:  {}", diagnostic.message);
    }
    Ok(())
}
