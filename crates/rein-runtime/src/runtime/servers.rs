//! The handle's remote tool servers: the state the host reports for each (MCP servers).

use crate::capability::ToolServerStatus;

impl super::Runtime {
    /// The remote tool servers behind the live capabilities, as the host last reported them,
    /// in its config order (none when the host gave no live set).
    pub fn tool_servers(&self) -> Vec<ToolServerStatus> {
        self.core().caps().servers()
    }
}
