//! The transcript invariant: every tool call has exactly one result, right after its call.

use rein_protocol::Message;

/// Checks that every assistant tool call is answered by exactly one tool message, that the
/// answers follow their assistant message directly and in call order, and that no tool message
/// answers anything else. Returns what is wrong, with the message index.
pub fn check_well_formed(messages: &[Message]) -> Result<(), String> {
    let mut index = 0;
    while index < messages.len() {
        match &messages[index] {
            Message::Assistant { tool_calls, .. } => {
                for (offset, call) in tool_calls.iter().enumerate() {
                    let at = index + 1 + offset;
                    match messages.get(at) {
                        Some(Message::Tool { tool_call_id, .. }) if *tool_call_id == call.id => {}
                        Some(Message::Tool { tool_call_id, .. }) => {
                            return Err(format!(
                                "message {at} answers `{tool_call_id}` but call `{}` of message {index} is due",
                                call.id
                            ));
                        }
                        Some(other) => {
                            return Err(format!(
                                "call `{}` of message {index} has no result: message {at} is a {:?} message",
                                call.id,
                                other.role()
                            ));
                        }
                        None => {
                            return Err(format!(
                                "call `{}` of message {index} has no result (transcript ends)",
                                call.id
                            ));
                        }
                    }
                }
                index += 1 + tool_calls.len();
            }
            Message::Tool { tool_call_id, .. } => {
                return Err(format!(
                    "message {index} answers `{tool_call_id}`, which no call right before it made"
                ));
            }
            _ => index += 1,
        }
    }
    Ok(())
}
