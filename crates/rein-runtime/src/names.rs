//! Names the runtime makes and reads back: tool names ([`ToolName`]) and agent ids ([`AgentId`]),
//! each spelled and parsed in this one place.

use std::fmt;

/// What a tool's name says about the tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ToolName<'a> {
    /// `start_<capability>_task`: starts the capability as a background task.
    TaskStart(&'a str),
    /// `consult_<persona>`: asks a persona for a memo.
    Consult(&'a str),
    /// Any other name (a capability, `current_view_context`, `read_tool_result`, ...).
    Plain(&'a str),
}

impl<'a> ToolName<'a> {
    const TASK_PREFIX: &'static str = "start_";
    const TASK_SUFFIX: &'static str = "_task";
    const CONSULT_PREFIX: &'static str = "consult_";

    /// Reads a name: a task starter when it has both the prefix and the suffix, a consult when
    /// it has the consult prefix, plain otherwise.
    pub(crate) fn parse(name: &'a str) -> Self {
        if let Some(capability) = name
            .strip_prefix(Self::TASK_PREFIX)
            .and_then(|rest| rest.strip_suffix(Self::TASK_SUFFIX))
        {
            return ToolName::TaskStart(capability);
        }
        match name.strip_prefix(Self::CONSULT_PREFIX) {
            Some(persona) => ToolName::Consult(persona),
            None => ToolName::Plain(name),
        }
    }
}

impl fmt::Display for ToolName<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ToolName::TaskStart(capability) => {
                write!(f, "{}{capability}{}", Self::TASK_PREFIX, Self::TASK_SUFFIX)
            }
            ToolName::Consult(persona) => write!(f, "{}{persona}", Self::CONSULT_PREFIX),
            ToolName::Plain(name) => f.write_str(name),
        }
    }
}

/// The name of the tool that starts `capability` as a background task.
pub fn task_tool_name(capability: &str) -> String {
    ToolName::TaskStart(capability).to_string()
}

/// What a session's agent id says: a configured agent, or the persona a hidden child runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AgentId<'a> {
    /// `<name>`: an agent of the config.
    Configured(&'a str),
    /// `persona:<name>`: a persona consult's child session.
    Persona(&'a str),
}

impl<'a> AgentId<'a> {
    const PERSONA_PREFIX: &'static str = "persona:";

    /// Reads an agent id.
    pub(crate) fn parse(id: &'a str) -> Self {
        match id.strip_prefix(Self::PERSONA_PREFIX) {
            Some(persona) => AgentId::Persona(persona),
            None => AgentId::Configured(id),
        }
    }
}

impl fmt::Display for AgentId<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AgentId::Configured(name) => f.write_str(name),
            AgentId::Persona(persona) => write!(f, "{}{persona}", Self::PERSONA_PREFIX),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_names_parse_what_they_display() {
        for name in [
            ToolName::TaskStart("lookup"),
            ToolName::Consult("value_investor"),
            ToolName::Plain("lookup"),
        ] {
            assert_eq!(ToolName::parse(&name.to_string()), name);
        }
        assert_eq!(task_tool_name("lookup"), "start_lookup_task");
        // Both affixes, or it is not a task starter.
        assert_eq!(ToolName::parse("start_task"), ToolName::Plain("start_task"));
        assert_eq!(ToolName::parse("start__task"), ToolName::TaskStart(""));
        assert_eq!(ToolName::parse("consult_start_x_task"), ToolName::Consult("start_x_task"));
        assert_eq!(ToolName::parse("start_consult_x_task"), ToolName::TaskStart("consult_x"));
    }

    #[test]
    fn agent_ids_parse_what_they_display() {
        assert_eq!(AgentId::parse("assistant"), AgentId::Configured("assistant"));
        assert_eq!(AgentId::parse("persona:bull"), AgentId::Persona("bull"));
        assert_eq!(AgentId::Persona("bull").to_string(), "persona:bull");
    }
}
