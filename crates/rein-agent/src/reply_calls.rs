//! The per-reply call limits: a reply that writes far more calls than a step needs is degenerate.
//!
//! More than [`AgentConfig::max_calls_per_reply`](crate::AgentConfig::max_calls_per_reply)
//! calls in one reply, or one tool called with more than
//! [`AgentConfig::max_calls_of_one_tool_per_reply`](crate::AgentConfig::max_calls_of_one_tool_per_reply)
//! different arguments, is stopped the way a reply repeating one call is: a streamed reply is
//! cancelled there, and of its calls the distinct ones are kept, up to both limits, in order.

use std::collections::{HashMap, HashSet};

use rein_protocol::ToolCall;

use crate::validate::canonical_args;

/// The two limits; 0 turns one off.
#[derive(Debug, Clone, Copy)]
pub(crate) struct CallLimits {
    /// Calls in one reply.
    pub(crate) per_reply: u32,
    /// Calls of one tool with different arguments in one reply.
    pub(crate) per_tool: u32,
}

/// The calls of one reply seen so far, as they stream.
#[derive(Debug, Default)]
pub(crate) struct ReplyCalls {
    total: u32,
    distinct: HashSet<(String, String)>,
    per_tool: HashMap<String, u32>,
    over: bool,
}

impl ReplyCalls {
    /// Counts `call`; whether the calls so far are past a limit.
    pub(crate) fn add(&mut self, call: &ToolCall, limits: CallLimits) -> bool {
        self.total += 1;
        if limits.per_reply > 0 && self.total > limits.per_reply {
            self.over = true;
        }
        if self.distinct.insert((call.name.clone(), canonical_args(call.arguments.map()))) {
            let count = self.per_tool.entry(call.name.clone()).or_default();
            *count += 1;
            if limits.per_tool > 0 && *count > limits.per_tool {
                self.over = true;
            }
        }
        self.over
    }

    /// Whether the calls so far are past a limit.
    pub(crate) fn over(&self) -> bool {
        self.over
    }
}

/// Whether `calls` are past a limit.
pub(crate) fn too_many(calls: &[ToolCall], limits: CallLimits) -> bool {
    let mut seen = ReplyCalls::default();
    calls.iter().any(|call| seen.add(call, limits))
}

/// Keeps the first call of each (name, canonical arguments), and of those no more than the
/// limits allow, in order.
pub(crate) fn keep_distinct(calls: &mut Vec<ToolCall>, limits: Option<CallLimits>) {
    let mut distinct = HashSet::new();
    let mut per_tool: HashMap<String, u32> = HashMap::new();
    let mut kept = 0u32;
    calls.retain(|call| {
        if !distinct.insert((call.name.clone(), canonical_args(call.arguments.map()))) {
            return false;
        }
        let Some(limits) = limits else { return true };
        let count = per_tool.entry(call.name.clone()).or_default();
        let fits = (limits.per_reply == 0 || kept < limits.per_reply)
            && (limits.per_tool == 0 || *count < limits.per_tool);
        if fits {
            kept += 1;
            *count += 1;
        }
        fits
    });
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn call(name: &str, n: u32) -> ToolCall {
        let Some(arguments) = json!({"n": n}).as_object().cloned() else { panic!("an object") };
        ToolCall::new(format!("c{n}"), name, arguments)
    }

    const LIMITS: CallLimits = CallLimits { per_reply: 16, per_tool: 4 };

    #[test]
    fn five_different_calls_of_one_tool_are_too_many_four_are_not() {
        let four: Vec<_> = (0..4).map(|n| call("t", n)).collect();
        assert!(!too_many(&four, LIMITS));
        let five: Vec<_> = (0..5).map(|n| call("t", n)).collect();
        assert!(too_many(&five, LIMITS));
        // The same call five times is the repeat guard's business, not this one's.
        let same: Vec<_> = (0..5).map(|_| call("t", 1)).collect();
        assert!(!too_many(&same, LIMITS));
    }

    #[test]
    fn seventeen_calls_are_too_many_and_the_first_distinct_ones_are_kept() {
        let mut calls: Vec<_> = (0..17).map(|n| call(&format!("t{}", n % 5), n)).collect();
        assert!(too_many(&calls, CallLimits { per_reply: 16, per_tool: 0 }));
        calls.insert(1, call("t0", 0));
        keep_distinct(&mut calls, Some(LIMITS));
        assert_eq!(calls.len(), 16);
        assert_eq!(calls[1].name, "t1", "the repeat of the first call is dropped");
        let off = CallLimits { per_reply: 0, per_tool: 0 };
        let mut all: Vec<_> = (0..40).map(|n| call("t", n)).collect();
        assert!(!too_many(&all, off));
        keep_distinct(&mut all, Some(off));
        assert_eq!(all.len(), 40);
    }
}
