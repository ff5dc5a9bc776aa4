//! Every default in `docs/configuration.md` is the code's.
//!
//! The test reads every table of the doc whose header is `| key | default | meaning |`. A row's
//! key is the first code span of its key cell, prefixed by its table: `server.` under the
//! heading naming `[server]`, `agents[].` under the heading `### Agents ...`, nothing elsewhere
//! (so `hooks.EVENT[i].timeout` is written out in full). Its checked default is the default cell
//! up to the first ` (`: a remark in parentheses after it is prose.
//!
//! [`code_defaults`] has one line per documented key, computing from the code (an empty config
//! typed by rein's loader, then wired: the agents, hooks, store paths and server settings) the
//! default written the doc's way. The test fails when a row and its line differ, when a row has
//! no line, when a line has no row, and when a top-level key rein reads has no row.

use std::collections::BTreeMap;

use rein_mcp::{ClientOptions, McpServers};
use rein_model::{
    DEFAULT_CLIENT_HEADER_HOSTS, ModelRegistry, RegistryOptions, default_client_name,
};
use rein_runtime::{AgentDefinition, DEFAULT_HOOK_TIMEOUT};
use rein_server::ServerConfig;
use serde::Serialize;
use serde_json::{Value, json};

use super::{Overrides, agents, hooks, path_config};
use crate::config::{AgentSection, Config, DurabilityKey, HookEntry, KNOWN_KEYS};

/// The doc, read from the repository.
fn doc() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/configuration.md");
    std::fs::read_to_string(path).expect("docs/configuration.md is readable")
}

/// One row of a `key | default | meaning` table.
#[derive(Debug)]
struct Row {
    /// The first key of the row, with its table's prefix.
    key: String,
    /// Every key the key cell names (some rows name several).
    keys: Vec<String>,
    /// The checked part of the default cell.
    default: String,
    /// Its line in the doc (1-based).
    line: usize,
}

/// The code spans of `text` (between single backticks; a double-backtick span is kept whole).
fn code_spans(text: &str) -> Vec<String> {
    let mut spans = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find('`') {
        let ticks = rest[start..].chars().take_while(|c| *c == '`').count();
        let fence = "`".repeat(ticks);
        let after = &rest[start + ticks..];
        let Some(end) = after.find(&fence) else { break };
        spans.push(after[..end].trim().to_owned());
        rest = &after[end + ticks..];
    }
    spans
}

/// Every row of every `key | default | meaning` table in `doc`.
fn rows(doc: &str) -> Vec<Row> {
    let mut rows = Vec::new();
    let mut prefix = "";
    let mut in_table = false;
    for (index, line) in doc.lines().enumerate() {
        if line.starts_with('#') {
            prefix = if line.contains("`[server]`") {
                "server."
            } else if line.starts_with("### Agents") {
                "agents[]."
            } else {
                ""
            };
        }
        let trimmed = line.trim();
        if !trimmed.starts_with('|') {
            in_table = false;
            continue;
        }
        let cells: Vec<&str> = trimmed.trim_start_matches('|').splitn(3, '|').collect();
        if cells.len() < 3 {
            continue;
        }
        let (key_cell, default_cell) = (cells[0].trim(), cells[1].trim());
        if key_cell == "key" && default_cell == "default" {
            in_table = cells[2].trim().starts_with("meaning");
            continue;
        }
        if !in_table || key_cell.starts_with("---") {
            continue;
        }
        let keys: Vec<String> =
            code_spans(key_cell).into_iter().map(|key| format!("{prefix}{key}")).collect();
        let Some(key) = keys.first().cloned() else {
            panic!("docs/configuration.md:{}: a row without a `key`: {line}", index + 1);
        };
        let default = default_cell.split(" (").next().unwrap_or_default().trim().to_owned();
        rows.push(Row { key, keys, default, line: index + 1 });
    }
    rows
}

/// A value written as the doc writes one: JSON in backticks.
fn code(value: impl Serialize) -> String {
    format!("`{}`", serde_json::to_string(&value).expect("a JSON value"))
}

/// `off` for 0, else the number.
fn off_or(value: u32) -> String {
    if value == 0 { "off".to_owned() } else { code(value) }
}

/// `none` when `unset`, else what is set.
fn none_or(unset: bool, what: impl std::fmt::Debug) -> String {
    if unset { "none".to_owned() } else { format!("{what:?}") }
}

/// A config typed from `value` as the loader types it.
fn config(value: Value) -> Config {
    serde_json::from_value(value).expect("a valid test config")
}

/// The one `[[agents]]` entry named `a`, wired under the top-level keys `top`.
fn entry(top: Value, agent: Value) -> AgentDefinition {
    let mut top = top;
    let mut agent = agent;
    agent["name"] = json!("a");
    top["agents"] = json!([agent]);
    agents(&config(top)).remove(0)
}

/// `the top-level `KEY``, when the agent's value follows the top level's (`set` at the top and
/// `unset` on an agent without the key); else what the agent's value is.
fn follows(key: &str, set: u32, agent: impl Fn(&AgentDefinition) -> u32, unset: u32) -> String {
    let inherited = agent(&entry(json!({ key: set }), json!({})));
    let alone = agent(&entry(json!({}), json!({})));
    if inherited == set && alone == unset {
        format!("the top-level `{key}`")
    } else {
        format!("{inherited} with the top-level key at {set}, {alone} without")
    }
}

/// The code's default of every documented key, written as the doc writes it.
fn code_defaults() -> BTreeMap<&'static str, String> {
    let empty = config(json!({}));
    let agent = agents(&empty).remove(0);
    let policy = &agent.policy;
    let models = empty.models_or_default();
    let local = &models.llm_models[0];
    let two_models = config(json!({"llm_models": [
        {"value": "first", "endpoint": "http://127.0.0.1:1/v1"},
        {"value": "second", "endpoint": "http://127.0.0.1:2/v1"},
    ]}));
    let registry =
        ModelRegistry::from_config(&two_models.models_or_default(), &RegistryOptions::default())
            .expect("two models build");
    let server = |tokens: bool| {
        let mut server = ServerConfig::default();
        if tokens {
            server = server.with_token("a-token-of-24-characters", "alice");
        }
        server.allow_client_system_prompt = empty.allow_client_system_prompt;
        server.client_may_auto_approve = empty.client_may_auto_approve;
        server
    };
    let by_mode = |allowed: fn(&ServerConfig) -> bool| {
        format!(
            "{} without `server.tokens`, {} with them",
            code(allowed(&server(false))),
            code(allowed(&server(true)))
        )
    };
    let paths = rein_store::resolve_paths(&path_config(&empty, &Overrides::default()), |name| {
        (name == "XDG_DATA_HOME").then(|| "/xdg".into())
    })
    .expect("paths");
    let data_dir = paths.session_db.parent().map(|dir| dir.display().to_string());
    let hook = |value: Value| serde_json::from_value::<HookEntry>(value);
    let approvals = |auto_approve: bool| {
        entry(json!({ "auto_approve": auto_approve }), json!({}))
            .policy
            .require_approval_for_side_effects
    };
    let agent_alone = entry(json!({"system_prompt": "top"}), json!({}));

    let mut defaults = BTreeMap::new();
    // Models.
    defaults.insert(
        "llm_models",
        match (&models.llm_models[..], &local.api_key, &local.api_key_env) {
            ([_], None, None) => format!(
                "one keyless local model, `{}` at `{}`",
                local.value,
                local.endpoint.as_deref().unwrap_or_default()
            ),
            (entries, _, _) => format!("{} models", entries.len()),
        },
    );
    defaults.insert(
        "llm_model",
        match registry.default_name() {
            "first" => "the first entry".to_owned(),
            other => code(other),
        },
    );
    defaults.insert("client_header_hosts", code(DEFAULT_CLIENT_HEADER_HOSTS));
    defaults.insert("client_name", {
        let name = default_client_name();
        if name == format!("rein/{}", env!("CARGO_PKG_VERSION")) {
            "`rein/<version>`".to_owned()
        } else {
            code(name)
        }
    });
    // Documented per provider, not here.
    defaults.insert("temperature", "see providers.md".to_owned());
    // Retries and the reply cap, as the default model has them.
    let default_model = registry.default_model();
    defaults.insert("max_retry_wait_seconds", code(default_model.max_retry_wait().as_secs()));
    defaults.insert("max_reply_bytes", code(default_model.max_reply_bytes()));
    defaults.insert(
        "transcription_model",
        none_or(empty.transcription_model.is_none(), &empty.transcription_model),
    );
    // The loop.
    defaults.insert("auto_approve", code(!policy.require_approval_for_side_effects));
    defaults.insert("max_steps", off_or(policy.max_steps));
    defaults.insert("max_tool_calls", code(policy.max_tool_rounds));
    defaults.insert("max_tool_calls_manual", code(policy.max_tool_rounds_manual));
    defaults.insert("max_calls_per_turn", off_or(policy.max_calls_per_turn));
    defaults.insert("max_calls_per_reply", off_or(policy.max_calls_per_reply));
    defaults
        .insert("max_calls_of_one_tool_per_reply", off_or(policy.max_calls_of_one_tool_per_reply));
    defaults.insert("max_parallel_tool_calls", code(policy.max_parallel_tool_calls));
    defaults.insert("system_prompt", code(&agent.system_prompt));
    defaults
        .insert("allow_client_system_prompt", by_mode(ServerConfig::client_system_prompt_allowed));
    defaults.insert("client_may_auto_approve", by_mode(ServerConfig::client_auto_approve_allowed));
    // Tools.
    defaults.insert("tools", code(&empty.tools));
    defaults
        .insert("mcpServers", none_or(empty.all_mcp_servers().is_empty(), empty.all_mcp_servers()));
    defaults
        .insert("mcp_server_url", none_or(empty.mcp_server_url.is_none(), &empty.mcp_server_url));
    defaults.insert("mcp_auth_token", none_or(empty.mcp_auth_token.is_none(), "a token"));
    defaults.insert("mcp_url", none_or(empty.mcp_url.is_none(), &empty.mcp_url));
    let server_entry = McpServers::from_value(&json!({"s": {"command": "true"}}))
        .expect("an MCP server entry")
        .servers
        .remove(0);
    defaults.insert(
        "mcpServers.NAME.timeout_seconds",
        match server_entry.call_timeout {
            // `wire` starts the servers with the default client options.
            None => code(ClientOptions::default().call_timeout.as_secs()),
            Some(timeout) => code(timeout.as_secs()),
        },
    );
    defaults.insert("mcpServers.NAME.disabled", code(server_entry.disabled));
    let http_entry = McpServers::from_value(&json!({"s": {"url": "http://127.0.0.1:1/mcp"}}))
        .expect("an MCP server entry")
        .servers
        .remove(0);
    defaults.insert(
        "mcpServers.NAME.oauth",
        match &http_entry.transport {
            rein_mcp::ServerTransport::Http(http) => none_or(http.oauth.is_none(), &http.oauth),
            other => format!("not an HTTP server: {other:?}"),
        },
    );
    defaults.insert("tool_memo", {
        let on = config(json!({"tool_memo": true})).memo_tools();
        let off = config(json!({"tool_memo": false})).memo_tools();
        match empty.memo_tools() {
            tools if tools == on => code(true),
            tools if tools == off => code(false),
            tools => code(tools),
        }
    });
    defaults.insert("background_tools", {
        if policy.allow_background_tasks { "on".to_owned() } else { code(&empty.background_tools) }
    });
    // Agents.
    defaults.insert(
        "agents[].name",
        match serde_json::from_value::<AgentSection>(json!({})) {
            Err(_) => "required".to_owned(),
            Ok(section) => code(section.name),
        },
    );
    defaults.insert("agents[].description", code(&entry(json!({}), json!({})).description));
    defaults.insert(
        "agents[].system_prompt",
        match agent_alone.system_prompt.as_str() {
            "top" => "the top-level `system_prompt`".to_owned(),
            other => code(other),
        },
    );
    defaults.insert(
        "agents[].allowed_tools",
        match &entry(json!({}), json!({})).policy.allowed_tools {
            None => "all".to_owned(),
            Some(tools) => code(tools),
        },
    );
    defaults.insert(
        "agents[].require_approval_for_side_effects",
        match (approvals(true), approvals(false)) {
            (false, true) => "`!auto_approve`".to_owned(),
            (with_auto, _) => code(with_auto),
        },
    );
    defaults.insert("agents[].max_steps", follows("max_steps", 7, |a| a.policy.max_steps, 0));
    defaults.insert(
        "agents[].max_calls_per_turn",
        follows("max_calls_per_turn", 7, |a| a.policy.max_calls_per_turn, 0),
    );
    defaults.insert("agents[].background_tools", {
        // The top-level list is the default agent's only.
        let with_top = entry(json!({"background_tools": ["current_time"]}), json!({}));
        if with_top.policy.allow_background_tasks {
            "on".to_owned()
        } else {
            code(Vec::<String>::new())
        }
    });
    defaults.insert(
        "agents[].model",
        match &agent_alone.model {
            None => "the selected model".to_owned(),
            Some(model) => code(model),
        },
    );
    // Pinned context and hooks.
    defaults.insert("pinned_context", none_or(agent.pinned.text.is_none(), &agent.pinned.text));
    defaults.insert("pinned_context_files", code(&agent.pinned.files));
    defaults.insert("hooks.EVENT", none_or(hooks(&empty).expect("no hooks").is_empty(), "hooks"));
    defaults.insert(
        "hooks.EVENT[i].command",
        match hook(json!({})) {
            Err(_) => "required".to_owned(),
            Ok(entry) => code(entry.command),
        },
    );
    defaults.insert(
        "hooks.EVENT[i].matcher",
        match hook(json!({"command": "true"})) {
            Ok(HookEntry { matcher: None, .. }) => "none".to_owned(),
            other => format!("{other:?}"),
        },
    );
    defaults.insert(
        "hooks.EVENT[i].timeout",
        match hook(json!({"command": "true"})) {
            Ok(HookEntry { timeout: None, .. }) => code(DEFAULT_HOOK_TIMEOUT.as_secs()),
            other => format!("{other:?}"),
        },
    );
    defaults.insert(
        "hooks.EVENT[i].env_passthrough",
        match hook(json!({"command": "true"})) {
            Ok(entry) => code(entry.env_passthrough),
            other => format!("{other:?}"),
        },
    );
    // The server.
    defaults.insert("server.addr", code(empty.addr()));
    defaults.insert(
        "server.data_dir",
        match data_dir.as_deref() {
            Some("/xdg/rein") => "`$XDG_DATA_HOME/rein`".to_owned(),
            other => format!("{other:?}"),
        },
    );
    defaults.insert("server.database_url", none_or(empty.database_url().is_none(), "a database"));
    defaults.insert(
        "server.database_pool_size",
        match empty.server.database_pool_size {
            None => code(rein_postgres::PgConfig::new("").pool_size),
            Some(size) => code(size),
        },
    );
    defaults.insert("server.tokens", none_or(empty.server.tokens.is_empty(), "tokens"));
    defaults
        .insert("server.cors_origins", none_or(empty.server.cors_origins.is_empty(), "origins"));
    defaults
        .insert("server.allowed_hosts", none_or(empty.server.allowed_hosts.is_empty(), "hosts"));
    let served = ServerConfig::default();
    defaults.insert(
        "server.max_sessions_per_principal",
        match (empty.server.max_sessions_per_principal, served.max_sessions_per_principal) {
            (None, Some(limit)) => code(limit),
            (None, None) => "none".to_owned(),
            (Some(limit), _) => code(limit),
        },
    );
    defaults.insert(
        "server.header_read_timeout_seconds",
        match (empty.server.header_read_timeout_seconds, served.header_read_timeout) {
            (None, Some(timeout)) => code(timeout.as_secs()),
            (None, None) => "off".to_owned(),
            (Some(seconds), _) => code(seconds),
        },
    );
    defaults.insert(
        "server.max_connections_per_client",
        match (empty.server.max_connections_per_client, served.max_connections_per_client) {
            (None, Some(limit)) => code(limit),
            (None, None) => "none".to_owned(),
            (Some(limit), _) => code(limit),
        },
    );
    defaults.insert(
        "server.max_concurrent_transcriptions",
        match (empty.server.max_concurrent_transcriptions, served.max_concurrent_transcriptions) {
            (None, Some(limit)) => code(limit),
            (None, None) => "none".to_owned(),
            (Some(limit), _) => code(limit),
        },
    );
    defaults.insert(
        "server.client_tool_timeout_seconds",
        code(
            empty
                .server
                .client_tool_timeout_seconds
                .unwrap_or(rein_runtime::Limits::default().client_tool_timeout.as_secs()),
        ),
    );
    defaults.insert(
        "server.durability",
        match empty.server.durability {
            DurabilityKey::Turn => code("turn"),
            DurabilityKey::Event => code("event"),
        },
    );

    defaults
}

#[test]
fn every_documented_default_is_the_codes() {
    let doc = doc();
    let rows = rows(&doc);
    let code = code_defaults();
    let mut problems = Vec::new();
    for row in &rows {
        match code.get(row.key.as_str()) {
            None => problems.push(format!(
                "docs/configuration.md:{}: `{}` has no line in `code_defaults` \
                 (crates/rein-cli/src/wire/documented_defaults.rs); add one computing its \
                 default from the code",
                row.line, row.key
            )),
            Some(expected) if *expected != row.default => problems.push(format!(
                "docs/configuration.md:{}: `{}` documents the default {:?}, the code's is {:?}",
                row.line, row.key, row.default, expected
            )),
            Some(_) => {}
        }
    }
    for key in code.keys() {
        if !rows.iter().any(|row| row.key == *key) {
            problems.push(format!("`{key}` has a line in `code_defaults` but no row in the doc"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn every_top_level_key_rein_reads_has_a_row() {
    let rows = rows(&doc());
    // Tables and lists described in prose around their own tables.
    let sections = ["server", "agents", "personas"];
    let documented = |key: &str| {
        rows.iter()
            .flat_map(|row| &row.keys)
            .any(|name| name == key || name.split_once('.').is_some_and(|(head, _)| head == key))
    };
    let missing: Vec<&&str> =
        KNOWN_KEYS.iter().filter(|key| !sections.contains(key) && !documented(key)).collect();
    assert!(
        missing.is_empty(),
        "top-level keys without a row in docs/configuration.md: {missing:?}"
    );
}

#[test]
fn the_no_file_paragraph_names_the_default_model() {
    let local = format!(
        "`{}` at\n`{}`",
        crate::config::DEFAULT_LOCAL_MODEL,
        crate::config::DEFAULT_LOCAL_ENDPOINT
    );
    let doc = doc();
    assert!(
        doc.contains(&local) || doc.contains(&local.replace('\n', " ")),
        "docs/configuration.md says where the keyless default model is: {local}"
    );
}

#[test]
fn the_table_reader_reads_prefixes_remarks_and_several_keys() {
    let doc = "### The server (`[server]`)\n\n| key | default | meaning |\n|---|---|---|\n\
               | `addr` | `\"x\"` (a remark) | m \\| n |\n\n### Models\n\n\
               | key | default | meaning |\n|---|---|---|\n| `a`, `b` | off | m |\n\n\
               | variable | sets | example |\n|---|---|---|\n| `X` | y | z |\n";
    let rows = rows(doc);
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!((rows[0].key.as_str(), rows[0].default.as_str()), ("server.addr", "`\"x\"`"));
    assert_eq!(rows[1].keys, ["a", "b"]);
    assert_eq!(rows[1].default, "off");
    assert_eq!(code_spans("`` `15` `` and `x`"), ["`15`", "x"]);
}
