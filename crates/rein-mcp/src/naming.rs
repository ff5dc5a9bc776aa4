//! The names tools are offered under when servers share one: `server__tool` for every server
//! whose tool name another server (or a reserved name, a built-in tool) also has.

use std::collections::{HashMap, HashSet};

/// Between a server's and a tool's name in a renamed tool (`geo__search`).
pub const RENAME_SEPARATOR: &str = "__";

/// A tool name more than one server offers (or one a built-in tool has): each server's tool is
/// offered as `server__tool` instead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SharedToolName {
    /// The name the servers give the tool.
    pub tool: String,
    /// The servers offering it, in config order.
    pub servers: Vec<String>,
    /// Whether a built-in tool (a reserved name) has it too.
    pub builtin: bool,
}

/// A server's name as part of a tool name: what OpenAI-style function names allow
/// (`A-Z a-z 0-9 _ -`), anything else as `_`.
pub(crate) fn name_part(server: &str) -> String {
    server
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' || c == '-' { c } else { '_' })
        .collect()
}

/// The name a server's tool is offered under, for each tool of each server (same shape as
/// `servers`): its own name when no other server and no reserved name has it, else
/// `server__tool`. A tool whose final name an earlier one already took (a server listing a
/// name twice, or a renamed name meeting a plain one) is `None`: left out.
pub(crate) fn offered_names(
    servers: &[(&str, Vec<&str>)],
    reserved: &HashSet<String>,
) -> Vec<Vec<Option<String>>> {
    let shared = shared_names(servers, reserved);
    let shared: HashSet<&str> = shared.iter().map(|shared| shared.tool.as_str()).collect();
    let mut taken: HashSet<String> = reserved.clone();
    servers
        .iter()
        .map(|(server, tools)| {
            tools
                .iter()
                .map(|tool| {
                    let name = if shared.contains(tool) {
                        format!("{}{RENAME_SEPARATOR}{tool}", name_part(server))
                    } else {
                        (*tool).to_owned()
                    };
                    taken.insert(name.clone()).then_some(name)
                })
                .collect()
        })
        .collect()
}

/// The tool names that more than one server offers, or that a reserved name has, in the order
/// they first appear.
pub(crate) fn shared_names(
    servers: &[(&str, Vec<&str>)],
    reserved: &HashSet<String>,
) -> Vec<SharedToolName> {
    let mut order: Vec<&str> = Vec::new();
    let mut offering: HashMap<&str, Vec<&str>> = HashMap::new();
    for (server, tools) in servers {
        for tool in tools {
            let entry = offering.entry(tool).or_default();
            if entry.is_empty() {
                order.push(tool);
            }
            if !entry.contains(server) {
                entry.push(server);
            }
        }
    }
    order
        .into_iter()
        .filter_map(|tool| {
            let servers = &offering[tool];
            let builtin = reserved.contains(tool);
            (servers.len() > 1 || builtin).then(|| SharedToolName {
                tool: tool.to_owned(),
                servers: servers.iter().map(|server| (*server).to_owned()).collect(),
                builtin,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(servers: &[(&str, Vec<&str>)], reserved: &[&str]) -> Vec<Vec<Option<String>>> {
        let reserved = reserved.iter().map(|name| (*name).to_owned()).collect();
        offered_names(servers, &reserved)
    }

    fn some(names: &[&str]) -> Vec<Option<String>> {
        names.iter().map(|name| Some((*name).to_owned())).collect()
    }

    #[test]
    fn distinct_names_are_kept() {
        let got = names(&[("a", vec!["echo", "add"]), ("b", vec!["time"])], &[]);
        assert_eq!(got, vec![some(&["echo", "add"]), some(&["time"])]);
    }

    #[test]
    fn both_colliding_tools_are_renamed_and_the_others_keep_their_names() {
        let got = names(&[("a", vec!["echo", "add"]), ("b", vec!["echo", "time"])], &[]);
        assert_eq!(got, vec![some(&["a__echo", "add"]), some(&["b__echo", "time"])]);
    }

    #[test]
    fn three_servers_sharing_a_name_are_all_renamed() {
        let got =
            names(&[("a", vec!["x"]), ("b", vec!["y"]), ("c", vec!["x"]), ("d", vec!["x"])], &[]);
        assert_eq!(got, vec![some(&["a__x"]), some(&["y"]), some(&["c__x"]), some(&["d__x"])]);
    }

    #[test]
    fn a_reserved_name_renames_the_server_tool() {
        let got = names(&[("clocks", vec!["current_time", "tz"])], &["current_time"]);
        assert_eq!(got, vec![some(&["clocks__current_time", "tz"])]);
    }

    #[test]
    fn server_names_are_made_fit_for_a_tool_name() {
        let got = names(&[("my server.v2", vec!["echo"]), ("b-1", vec!["echo"])], &[]);
        assert_eq!(got, vec![some(&["my_server_v2__echo"]), some(&["b-1__echo"])]);
    }

    #[test]
    fn a_name_taken_twice_leaves_the_later_tool_out() {
        // A server listing a name twice, and a renamed name meeting a plain one.
        let got = names(&[("a", vec!["echo", "echo"])], &[]);
        assert_eq!(got, vec![vec![Some("echo".to_owned()), None]]);
        let got = names(&[("a", vec!["b__x"]), ("b", vec!["x"]), ("c", vec!["x"])], &[]);
        assert_eq!(got, vec![some(&["b__x"]), vec![None], some(&["c__x"])]);
    }

    #[test]
    fn shared_names_say_which_servers() {
        let reserved = ["current_time".to_owned()].into_iter().collect();
        let servers = [("a", vec!["echo", "current_time"]), ("b", vec!["echo", "add"])];
        assert_eq!(
            shared_names(&servers, &reserved),
            vec![
                SharedToolName {
                    tool: "echo".into(),
                    servers: vec!["a".into(), "b".into()],
                    builtin: false
                },
                SharedToolName {
                    tool: "current_time".into(),
                    servers: vec!["a".into()],
                    builtin: true
                },
            ]
        );
    }
}
